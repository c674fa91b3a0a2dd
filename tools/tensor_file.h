// Reading the tensors of ONNX test data sets: each input_K.pb / output_K.pb file is one serialized
// onnx.TensorProto, or, for sequence and optional values, an onnx.SequenceProto / OptionalProto.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/kiln.hpp"
#include "onnx_value.h"

namespace kiln::tools {

struct NamedTensor {
  std::string name;  // the TensorProto's name; may be empty
  Tensor tensor;
  // The file's ONNX data type: for the narrow types (float8, int4…, see the importer's
  // narrow_types.h) `tensor` is their u8/i8 carrier, one element per byte.
  int32_t elem_type = 0;
};

// Parses `path` as a TensorProto (kiln::Error when it is not one, or has an unsupported dtype).
NamedTensor read_tensor_file(const std::string& path);

struct NamedValue {
  std::string name;  // the proto's name; may be empty
  onnx_import::OnnxValue value;
  int32_t elem_type = 0;  // for a tensor: the file's ONNX data type (see NamedTensor)
};

// Parses `path` as the proto of a value of `kind`: a TensorProto, a SequenceProto of tensors, or
// an OptionalProto holding nothing, a tensor or a sequence of tensors. `element_type` is the dtype
// an empty sequence gets (the proto does not record it; the model's declared type does).
NamedValue read_value_file(const std::string& path, onnx_import::OnnxValue::Kind kind,
                           std::optional<ScalarType> element_type = std::nullopt);

// read_value_file on bytes already in memory (the fuzz targets use it): `name` labels the errors
// and external data is resolved inside `directory` (empty: a tensor with external data is an error).
NamedValue parse_value_bytes(const std::string& data, const std::string& name, const std::string& directory,
                             onnx_import::OnnxValue::Kind kind, std::optional<ScalarType> element_type = std::nullopt);

}  // namespace kiln::tools
