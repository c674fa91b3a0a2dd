// One dimension of a matmul found in a kernel (M, N or K): the kernel ranges flattened into it, the
// last fastest, as the tensor-core and AMX transforms walk them (gpu_tensor_cores.h, amx_tiles.h).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ir/build.h"
#include "ir/uop.h"

namespace kiln {

inline int64_t extent_of(const UOp* range) { return static_cast<int64_t>(range->src(0)->const_int()); }

inline int64_t product_of(const std::vector<const UOp*>& ranges) {
  int64_t product = 1;
  for (const UOp* range : ranges) product *= extent_of(range);
  return product;
}

struct FlatDimension {
  std::vector<const UOp*> ranges;  // constant extents, outermost first
  int64_t length = 1;
  int64_t tile = 1;

  int64_t tiles() const { return (length + tile - 1) / tile; }
  bool ragged() const { return length % tile != 0; }

  // Maps each range to its part of flat position `at` (clamped to the last position when the tile
  // pads the dimension, so that loads stay in bounds).
  void unflatten(UOpPtr at, std::unordered_map<const UOp*, UOpPtr>& map) const {
    if (ragged()) at = minimum(at, length - 1);
    int64_t inner = length;
    for (size_t i = 0; i < ranges.size(); ++i) {
      int64_t extent = extent_of(ranges[i]);
      inner /= extent;
      UOpPtr part = inner == 1 ? at : at / inner;
      map.emplace(ranges[i], i == 0 ? part : part % extent);
    }
  }

  // The tile index as a range of axis `axis` (a constant 0 when there is one tile).
  UOpPtr outer_range(int64_t axis) const { return tiles() == 1 ? const_int(dtypes::index, 0) : range(tiles(), axis); }
};

}  // namespace kiln
