// A matmul found in a kernel, as the tensor-core and AMX transforms see it (gpu_tensor_cores.h,
// amx_tiles.h): its one reduction, its dimensions (M, N, K: kernel ranges flattened, the last
// fastest).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/build.h"
#include "ir/uop.h"
#include "opt/opt.h"

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

// The kernel's one reduction when it is an f32 sum of products and every range has a constant
// extent and is an output loop or one of its reduce loops (an unoptimised kernel): the reduction,
// the output loops, and K (its reduce ranges by axis id); nullopt otherwise.
struct ProductReduction {
  const UOp* reduce = nullptr;
  std::vector<const UOp*> outputs;
  FlatDimension k;
};

inline std::optional<ProductReduction> single_product_reduction(const UOpPtr& kernel) {
  if (kernel->op() != Ops::SINK) return std::nullopt;
  std::vector<const UOp*> reduces;
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::REDUCE) reduces.push_back(node);
  if (reduces.size() != 1) return std::nullopt;
  ProductReduction found;
  found.reduce = reduces.front();
  if (found.reduce->arg_op() != Ops::ADD || found.reduce->dtype() != dtypes::f32 || found.reduce->src(0)->op() != Ops::MUL)
    return std::nullopt;
  const std::vector<const UOp*> ranges = kernel_ranges(kernel);
  for (const UOp* range : ranges) {
    if (!range->src(0)->is_const()) return std::nullopt;
    AxisKind kind = axis_kind(range->arg_int());
    if (kind == AxisKind::Loop) found.outputs.push_back(range);
    else if (kind != AxisKind::Reduce) return std::nullopt;  // UPCAST / UNROLL: not before optimisation
  }
  for (size_t i = 1; i < found.reduce->src_count(); ++i) found.k.ranges.push_back(found.reduce->src(i).get());
  std::ranges::sort(found.k.ranges, {}, [](const UOp* r) { return r->arg_int(); });
  if (found.k.ranges.size() + found.outputs.size() != ranges.size()) return std::nullopt;
  found.k.length = product_of(found.k.ranges);
  return found;
}

}  // namespace kiln
