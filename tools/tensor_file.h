// Reading the tensors of ONNX test data sets: each input_K.pb / output_K.pb file is one serialized
// onnx.TensorProto.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/kiln.hpp"

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

}  // namespace kiln::tools
