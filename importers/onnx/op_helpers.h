// Small helpers the ONNX op families share: dtype classes, axis normalisation, and reading an
// operand that moved from an attribute to an input at some opset (Squeeze, Reduce*, Split, Pad…).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "op_registry.h"

namespace kiln::onnx_import {

bool is_floating(ScalarType type);
bool is_integral(ScalarType type);  // signed or unsigned integers, not bool

// `axis` in [-rank, rank) → [0, rank), or node.fail naming the axis.
int64_t normalize_axis(const OnnxNode& node, int64_t axis, int64_t rank);
std::vector<int64_t> normalize_axes(const OnnxNode& node, const std::vector<int64_t>& axes, int64_t rank);

// An int list that is the attribute `attribute` before opset `input_since` and input `index` from
// then on (the attribute-to-input moves of ONNX). nullopt when the model gives neither.
std::optional<std::vector<int64_t>> ints_attr_or_input(const OnnxNode& node, const std::string& attribute,
                                                       size_t index, int64_t input_since);

// Product of shape[begin, end).
int64_t shape_product(const Shape& shape, size_t begin, size_t end);

// Numpy broadcast of two shapes, or node.fail.
Shape broadcast_shapes(const OnnxNode& node, const Shape& a, const Shape& b);

// Drops the optional trailing outputs the node does not declare (a builder may compute them all;
// returning more results than the node has outputs is an error).
std::vector<Tensor> declared_outputs(const OnnxNode& node, std::vector<Tensor> outputs);

// An i64 1-D tensor holding `values`.
Tensor int64_vector(const std::vector<int64_t>& values);

// The permutation that moves `axis` to the end (ops that work on the last axis), and the inverse of
// a permutation.
std::vector<int64_t> axis_to_last(int64_t rank, int64_t axis);
std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& order);

// Conv's attributes (strides, dilations, group, kernel_shape, pads / auto_pad) as kiln ConvOptions,
// for Conv and the integer convolutions (defined in ops_nn.cpp).
ConvOptions conv_options(const OnnxNode& node, const Tensor& x, const Shape& w_shape);

// Whether the shape's element count fits in int64 (hostile models give shapes that do not).
bool element_count_fits(const Shape& shape);

// What breaks kiln's tensor limits (support/limits.h: rank, bytes) in a tensor of this shape and
// dtype, as the end of a sentence ("has rank 40, more than kiln's limit of 32 (docs/limits.md)");
// empty when the tensor is within them. The element count must fit in 64 bits (element_count_fits).
std::string tensor_limit_problem(const Shape& shape, ScalarType dtype);

}  // namespace kiln::onnx_import
