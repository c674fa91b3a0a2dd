// OnnxModel: a parsed, validated ONNX model that can be turned into lazy Tensors and run.
//
// Loading checks what can be checked without inputs (protobuf parse, truncation, opset imports,
// initializers, topological order, dangling inputs); run() binds user inputs (dtypes, ranks, static
// and symbolic dimensions), builds every node through an OpRegistry and realizes the graph outputs
// with one schedule. Models are untrusted: every problem is a kiln::UserError with a message that
// names the node, op type, domain and opset where there is one.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"
#include "tensor/tensor_internal.h"
#include "op_registry.h"
#include "tensor/dim.h"

namespace onnx {
class ModelProto;
}

namespace kiln::onnx_import {

// One dimension of a graph input or output: a fixed size, a named symbolic size (dim_param), or
// unknown (neither given).
struct OnnxDim {
  std::optional<int64_t> size;
  std::string symbol;
};

struct OnnxValueInfo {
  std::string name;
  bool is_tensor = true;           // false for sequence / map / optional types
  // The declared kind: a tensor, a sequence of tensors, or an optional holding a tensor or a
  // sequence of tensors (`optional_element`). Untyped values count as tensors. Maps, and sequences
  // of anything but tensors, are `supported_kind = false`.
  OnnxValue::Kind kind = OnnxValue::Kind::Tensor;
  OnnxValue::Kind optional_element = OnnxValue::Kind::Tensor;
  bool supported_kind = true;
  bool typed = false;  // false: the model gives no type, any kind of value is accepted
  // For a tensor its dtype; for a sequence or optional the dtype of the tensors inside.
  std::optional<ScalarType> dtype; // nullopt when the model leaves it out; the carrier for narrow types
  int32_t elem_type = 0;           // the ONNX data type number (0 when left out); see narrow_types.h
  std::optional<std::vector<OnnxDim>> dims;  // tensors only; nullopt when the model gives no shape (any rank)
  bool has_initializer = false;    // inputs only: an initializer gives the default value
};

// A user-given shape (see parse_shape_spec): `name` is a graph input (then `dims` is its whole
// shape) or a symbolic dimension of the inputs (then `dims` holds its one size).
struct ShapeSpec {
  std::string name;
  Shape dims;
  // `SYMBOL=MIN..MAX`: the symbolic dimension stays symbolic, a size variable over this range
  // (docs/symbolic-shapes.md); `dims` is then empty.
  std::optional<std::pair<int64_t, int64_t>> range = std::nullopt;
  // `INPUT[AXIS]=N` or `INPUT[AXIS]=MIN..MAX`: one dimension of input `name` that the model leaves
  // unnamed (`?`, as Keras/tf2onnx and some torch exports write it), sized or kept symbolic (a size
  // variable named `INPUT[AXIS]`).
  std::optional<int64_t> axis = std::nullopt;
};

// How bind_input_dims reports a symbolic dimension that no spec gives a size or a range: always a
// UserError listing every such dimension, whose hint suggests a size and, where symbolic shapes
// are taken (kiln compile), a range. (No default range: a plan is laid out for its variables'
// maxima, and a default such as 1..4096 for a batch and a sequence would make arenas of their
// product; docs/symbolic-shapes.md, decision 3.)
enum class UnboundSymbols {
  Error,           // suggests 'NAME=N' or 'NAME=MIN..MAX'
  ErrorFixedOnly,  // suggests 'NAME=N' (bind_input_shapes: ranges are refused there)
};

// Parses `NAME=D1,D2,...` (a whole input shape; `NAME=` is a scalar), `SYMBOL=N` (one dim_param) or
// `SYMBOL=MIN..MAX` (a dim_param kept symbolic over that range).
// The text after the last '=' is comma-separated sizes (non-negative integers); the name is what
// precedes it. A UserError says what is malformed.
ShapeSpec parse_shape_spec(const std::string& text);

class OnnxModel {
 public:
  // Reads and validates the model; external data is resolved inside the file's directory.
  static OnnxModel load_file(const std::string& path);
  // Parses a model held in memory; external data (if any) is resolved inside `model_directory`
  // (empty: external data is an error).
  static OnnxModel load_buffer(const void* data, size_t size, std::string model_directory = {});

  OnnxModel(OnnxModel&&) noexcept;
  OnnxModel& operator=(OnnxModel&&) noexcept;
  ~OnnxModel();

  // The inputs a caller must (or may, for initializer-backed ones) give, in graph order.
  const std::vector<OnnxValueInfo>& inputs() const { return inputs_; }
  const std::vector<OnnxValueInfo>& outputs() const { return outputs_; }
  // The opset the model imports for `domain` ("" or "ai.onnx" = default domain), if any.
  std::optional<int64_t> opset(const std::string& domain) const;
  const std::map<std::string, int64_t>& opset_imports() const { return opsets_; }

  // The concrete shape of every input the caller must give (in graph order), from the model's
  // fixed dimensions and the user's specs: a spec naming an input gives its whole shape, a spec
  // naming a symbolic dimension gives that size to every input that uses it (input names win when
  // a name is both). Initializer-backed inputs are included only when a spec names them. A
  // UserError names the input and dimension left unbound, a spec naming no input or symbol, and a
  // spec that contradicts a fixed dimension, the rank or another spec.
  std::vector<std::pair<std::string, Shape>> bind_input_shapes(const std::vector<ShapeSpec>& specs) const;
  // The same, where symbolic dimensions may stay symbolic: one that a spec gives a range becomes a
  // size variable named after it (one variable per name, shared by every input that uses it).
  std::vector<std::pair<std::string, Dims>> bind_input_dims(const std::vector<ShapeSpec>& specs,
                                                            UnboundSymbols unbound_symbols) const;

  // Builds the graph for these inputs without realizing anything it need not (the outputs are lazy;
  // builders still realize the small shape-like tensors they read). Returns the outputs in graph order.
  std::vector<std::pair<std::string, Tensor>> build(const std::vector<std::pair<std::string, Tensor>>& inputs,
                                                    const OpRegistry& registry = default_registry()) const;

  // Builds the graph for these inputs and realizes every graph output (one schedule). Initializers
  // that the graph also lists as inputs may be overridden by the caller. Returns the outputs in
  // graph order.
  // Every input and output must be a tensor (see run_values for sequences and optionals).
  std::vector<std::pair<std::string, Tensor>> run(const std::vector<std::pair<std::string, Tensor>>& inputs,
                                                  const OpRegistry& registry = default_registry()) const;
  // The same for models whose inputs or outputs may be sequences or optionals; every tensor in the
  // outputs (sequence elements and optional contents included) is realized.
  std::vector<std::pair<std::string, OnnxValue>> run_values(
      const std::vector<std::pair<std::string, OnnxValue>>& inputs,
      const OpRegistry& registry = default_registry()) const;
  // build() for models whose inputs or outputs may be sequences or optionals.
  std::vector<std::pair<std::string, OnnxValue>> build_values(
      const std::vector<std::pair<std::string, OnnxValue>>& inputs,
      const OpRegistry& registry = default_registry()) const;

 private:
  OnnxModel();
  void validate_and_index();
  // run_values on the calling thread's stack (run_values calls it on a large one).
  std::vector<std::pair<std::string, OnnxValue>> run_values_here(
      const std::vector<std::pair<std::string, OnnxValue>>& inputs, const OpRegistry& registry) const;
  std::unordered_map<std::string, OnnxValue> bind_inputs(
      const std::vector<std::pair<std::string, OnnxValue>>& given) const;

  std::unique_ptr<onnx::ModelProto> proto_;
  std::string model_directory_;
  std::map<std::string, int64_t> opsets_;  // canonical domain ("" for ai.onnx) → version
  std::vector<OnnxValueInfo> inputs_;      // graph inputs that are not initializers, plus those that are
  std::vector<OnnxValueInfo> outputs_;
  std::unordered_map<std::string, Tensor> initializers_;  // decoded once at load time
  std::unordered_map<std::string, int32_t> narrow_initializers_;  // their ONNX type, for narrow types
  std::vector<int> node_order_;  // topological order of graph nodes (indices into graph.node)
  // Weight-only values run() folded once (a transposed weight, a Conv's BatchNorm-folded weights),
  // reused by every later run; see fold_constants in src/tensor/tensor_internal.h.
  std::shared_ptr<ConstantFoldCache> fold_cache_;
};

}  // namespace kiln::onnx_import
