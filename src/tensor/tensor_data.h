// What a kiln::Tensor handle points at: a node of the lazy tensor-level graph, its shape and dtype,
// and what keeps the graph's data alive.
//
// The tensor-level graph (before rangeify) uses these ops:
//   BUFFER       arg [buffer id, element count]; dtype = element type; shape [count]. The data is
//                a HostBuffer held by the TensorData that created the node (see `buffer`).
//   CONST        a scalar (shape []); broadcast with RESHAPE + EXPAND.
//   SPECIAL      arg "arange", src CONST n: the index along a shape-[n] axis, dtype index (n may be
//                a marker naming a symbolic length, dim.h's encode_dim).
//   RESHAPE PERMUTE EXPAND PAD SHRINK FLIP   views, args as in ops.def; PAD fills with zero.
//   ALU ops, CAST, BITCAST                   elementwise; sources already broadcast to one shape.
//   REDUCE_AXIS  arg [reduce op (ADD, MUL, MAX), axes...]; reduced axes keep size 1.
//   CONTIGUOUS   forces the value into its own buffer.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/uop.h"
#include "kiln/kiln.hpp"
#include "runtime/host_buffer.h"
#include "tensor/dim.h"

namespace kiln::detail {

struct TensorData {
  UOpPtr node;
  // The sizes, when every one is known. A tensor with a symbolic dim has its shape in `dims`
  // instead (and `shape` empty): Tensor::shape() then throws, and the operations that support
  // symbolic shapes read dims_of() (tensor_internal.h).
  Shape shape;
  Dims dims;
  DType dtype;
  // The leaf data when `node` is (a view of) a BUFFER this handle created or realized.
  std::shared_ptr<HostBuffer> buffer;
  int64_t buffer_id = -1;
  // Set (with buffer_id, and no `buffer`) when the BUFFER is a named graph input of a plan being
  // compiled: its values exist only when the plan runs (see graph_input in tensor_internal.h).
  std::string graph_input_name;
  // The handles this one was built from: holding them keeps every buffer the graph reads alive.
  std::vector<std::shared_ptr<const TensorData>> inputs;
};

}  // namespace kiln::detail

namespace kiln {

// The shape of a tensor-level node whose sources have the given shapes (throws InternalError on a
// malformed node; user-facing checks happen earlier, in the Tensor methods). Symbolic sizes in a
// node's args are dim markers (dim.h).
Dims infer_shape(const UOp& node, const std::vector<const Dims*>& source_shapes);

// The shapes of every node reachable from `root`.
class ShapeMap {
 public:
  const Dims& of(const UOp* node);

 private:
  std::unordered_map<const UOp*, Dims> shapes_;
};

int64_t shape_numel(const Shape& shape);

}  // namespace kiln
