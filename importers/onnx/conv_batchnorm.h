// Conv followed by BatchNormalization, built as one conv with the normalisation folded into its
// weights: W' = W·γ/√(var+ε) per output channel, b' = (b − mean)·γ/√(var+ε) + β.
//
// BatchNormalization in inference mode is a per-channel affine map, so it commutes into the conv's
// weights and bias; the conv kernel then does no per-element normalisation, and when the weights
// are initializers the plan writer's constant folding stores W' and b' (computed once, at compile
// time). The result differs from the unfused graph only by float reassociation.
//
// The Conv's own output stays in the graph scope (built lazily as usual), so a model that also
// reads it elsewhere still gets it; the pair is only fused when the BatchNormalization is the
// conv output's one consumer, so the conv is not computed twice.
#pragma once

#include <unordered_map>

#include <onnx/onnx_pb.h>

#include "op_registry.h"

namespace kiln::onnx_import {

// For each BatchNormalization node of `graph` (by index) that can absorb the Conv before it: that
// Conv's index. Only the default domain, inference mode (one output) and a Conv whose output has
// no other reader in `graph` and is not a graph output.
std::unordered_map<int, int> find_conv_batchnorm_pairs(const onnx::GraphProto& graph);

// The BatchNormalization's output computed as one conv, or an empty vector when the parameters do
// not allow it (non-float32 values, parameters that are not per-channel vectors of the conv's
// output channels): then the two nodes are built as usual.
std::vector<Tensor> build_conv_batchnorm(const OnnxNode& conv, const OnnxNode& batchnorm);

}  // namespace kiln::onnx_import
