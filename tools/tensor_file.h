// Reading the tensors of ONNX test data sets: each input_K.pb / output_K.pb file is one serialized
// onnx.TensorProto, or, for sequence and optional values, an onnx.SequenceProto / OptionalProto.
#pragma once

#include <optional>
#include <string>

#include "kiln/kiln.hpp"
#include "onnx_value.h"

namespace kiln::tools {

struct NamedTensor {
  std::string name;  // the TensorProto's name; may be empty
  Tensor tensor;
};

// Parses `path` as a TensorProto (kiln::Error when it is not one, or has an unsupported dtype).
NamedTensor read_tensor_file(const std::string& path);

struct NamedValue {
  std::string name;  // the proto's name; may be empty
  onnx_import::OnnxValue value;
};

// Parses `path` as the proto of a value of `kind`: a TensorProto, a SequenceProto of tensors, or
// an OptionalProto holding nothing, a tensor or a sequence of tensors. `element_type` is the dtype
// an empty sequence gets (the proto does not record it; the model's declared type does).
NamedValue read_value_file(const std::string& path, onnx_import::OnnxValue::Kind kind,
                           std::optional<ScalarType> element_type = std::nullopt);

}  // namespace kiln::tools
