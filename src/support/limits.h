// The hard limits kiln puts on untrusted input (ONNX models) and on plans, in one place, so that
// the importer, the plan reader and the docs (docs/limits.md: each value and why it was chosen)
// agree. Each limit is checked where the input is first read, with an error that names the limit
// and the node or tensor that passes it. Header-only and dependency-free: libkiln compiles it.
#pragma once

#include <cstdint>

namespace kiln::limits {

// The largest ONNX file kiln reads whole: protobuf cannot parse a message of 2 GiB or more, so
// bigger models must keep their weights as external data.
constexpr uint64_t kMaxModelBytes = 2147483647;  // INT_MAX

// How deep protobuf may nest messages while it parses a model (protobuf's own default, made
// explicit): each subgraph level costs three (GraphProto → NodeProto → AttributeProto).
constexpr int kMaxProtobufNesting = 100;

// Subgraphs (If branches, Loop and Scan bodies) nested inside one another.
constexpr int kMaxSubgraphNesting = 16;

// The longest chain of nodes in a graph, from a graph input to a graph output: the scheduler
// walks the lazy graph recursively, so a deeper graph must be refused, not crash on the stack.
constexpr int64_t kMaxGraphDepth = 4096;

// Dimensions of one tensor (a declared graph value, an initializer, a node's output, a plan value).
constexpr int64_t kMaxTensorRank = 32;

// Bytes of one tensor (1 TiB): far above any real model's tensors, and small enough that element
// counts, byte offsets and strides stay exact in the importer's shape arithmetic (doubles: 2^53)
// and far from 64-bit overflow after any multiplication by a dtype size or stride.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 40;

// Iterations of one ONNX Loop: loops are unrolled into the graph when the model is built, so
// beyond this the graph would be too large to build (and a loop with neither trip count nor
// condition would never end).
constexpr int64_t kMaxLoopIterations = 100000;

// Levels of one decision tree (ai.onnx.ml TreeEnsemble*): each level is a few graph operations,
// so a hostile chain of a million nodes would build a graph nobody can compile. scikit-learn's
// deepest real trees are about 100 levels.
constexpr int64_t kMaxTreeDepth = 2048;

// The largest maximum a symbolic plan's variable may have (docs/plan-format.md, "Symbolic plans"):
// far above any real dimension, and small enough that sizes built from a few variables stay far
// from int64 overflow.
constexpr int64_t kMaxPlanVariableValue = int64_t{1} << 31;

// The most variables one symbolic plan may have: each run reads them all off the inputs.
constexpr uint64_t kMaxPlanVariables = 1024;

}  // namespace kiln::limits
