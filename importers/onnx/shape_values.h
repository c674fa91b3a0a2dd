// Shape values (docs/symbolic-shapes.md, decision 9): the small int64 tensors that exporters compute
// from a tensor's shape (Shape → Gather → Unsqueeze → Concat → Reshape) keep their elements as Dims,
// so that a shape subgraph over a symbolic input folds into size expressions, not into values.
//
// A shape value is still an ordinary lazy tensor (its symbolic elements are computed from the plan's
// variables when it runs, so a model may also use it as data); next to it the importer remembers
// the Dims each element holds, keyed by the tensor's graph node (hash-consed: equal nodes hold equal
// values). The ops that shape subgraphs use propagate those Dims (propagate_shape_values); the ops
// that take a shape (Reshape, Expand, ConstantOfShape) read them with OnnxNode::input_dims.
#pragma once

#include <optional>
#include <vector>

#include "kiln/kiln.hpp"
#include "onnx_value.h"
#include "op_registry.h"
#include "tensor/dim.h"

namespace kiln::onnx_import {

// An int64 tensor holding `values`: 1-D, or 0-D when `scalar` (then `values` has one element).
Tensor shape_value_tensor(const Dims& values, bool scalar);

// The elements of `t` as Dims, when `t` is a shape value with a symbolic element; nullopt otherwise
// (a tensor of constant values is read with input_ints, which realizes it).
std::optional<Dims> shape_value_of(const Tensor& t);

// Called after a node's builder: when the node is one of the ops shape subgraphs use (Identity,
// Cast, Unsqueeze, Squeeze, Reshape, Gather, Slice, Concat, Add, Sub, Mul, Div, Max, Min, ReduceMax,
// ReduceMin, Equal, Where) and
// reads a shape value, every other input being a small constant, records output 0's elements as
// Dims (an Equal only where its answer is the same for every value of the variables).
void propagate_shape_values(const OnnxNode& node, const std::vector<OnnxValue>& results);

}  // namespace kiln::onnx_import
