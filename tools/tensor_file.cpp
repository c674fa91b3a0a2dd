// Reads a serialized onnx.TensorProto file into a Tensor with the importer's own decoder, so the
// runner checks the same code path that loads initializers.
#include "tensor_file.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "onnx/onnx-data_pb.h"
#include "onnx/onnx_pb.h"
#include "op_registry.h"
#include "support/error.h"

namespace kiln::tools {

namespace {

using onnx_import::OnnxValue;

std::string read_file_bytes(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw UserError(str_cat("cannot open '", path, "'"));
  std::ostringstream bytes;
  bytes << stream.rdbuf();
  std::string data = bytes.str();
  if (data.size() > static_cast<size_t>(INT_MAX)) throw UserError(str_cat("'", path, "' is too large (2 GB or more)"));
  return data;
}

std::string directory_of(const std::string& path) {
  std::string directory = std::filesystem::path(path).parent_path().string();
  return directory.empty() ? std::string(".") : directory;
}

NamedTensor tensor_from_bytes(const std::string& data, const std::string& name, const std::string& directory) {
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(data.data(), static_cast<int>(data.size())))
    throw UserError(str_cat("'", name, "' is not a serialized ONNX TensorProto (a sequence, map or optional value?)"));
  try {
    return {proto.name(), onnx_import::tensor_from_proto(proto, directory), proto.data_type()};
  } catch (const Error& error) {
    throw UserError(str_cat("'", name, "': ", error.what()));
  }
}

OnnxValue sequence_from_proto(const onnx::SequenceProto& proto, const std::string& directory,
                              std::optional<ScalarType> element_type) {
  if (proto.elem_type() != onnx::SequenceProto_DataType_TENSOR &&
      proto.elem_type() != onnx::SequenceProto_DataType_UNDEFINED)
    throw UserError("only sequences of tensors are supported");
  std::vector<Tensor> elements;
  for (const auto& tensor : proto.tensor_values()) elements.push_back(onnx_import::tensor_from_proto(tensor, directory));
  return OnnxValue::sequence(std::move(elements), element_type);
}

OnnxValue optional_from_proto(const onnx::OptionalProto& proto, const std::string& directory,
                              std::optional<ScalarType> element_type) {
  if (proto.has_tensor_value())
    return OnnxValue::optional(OnnxValue(onnx_import::tensor_from_proto(proto.tensor_value(), directory)));
  if (proto.has_sequence_value())
    return OnnxValue::optional(sequence_from_proto(proto.sequence_value(), directory, element_type));
  if (proto.has_sparse_tensor_value() || proto.has_map_value() || proto.has_optional_value())
    throw UserError("only optionals of tensors or sequences of tensors are supported");
  return OnnxValue::optional(std::nullopt);
}

}  // namespace

NamedTensor read_tensor_file(const std::string& path) {
  return tensor_from_bytes(read_file_bytes(path), path, directory_of(path));
}

NamedValue parse_value_bytes(const std::string& data, const std::string& name, const std::string& directory,
                             OnnxValue::Kind kind, std::optional<ScalarType> element_type) {
  if (data.size() > static_cast<size_t>(INT_MAX)) throw UserError(str_cat("'", name, "' is too large (2 GB or more)"));
  if (kind == OnnxValue::Kind::Tensor) {
    NamedTensor tensor = tensor_from_bytes(data, name, directory);
    return {tensor.name, OnnxValue(tensor.tensor), tensor.elem_type};
  }
  try {
    if (kind == OnnxValue::Kind::Sequence) {
      onnx::SequenceProto proto;
      if (!proto.ParseFromArray(data.data(), static_cast<int>(data.size())))
        throw UserError("not a serialized ONNX SequenceProto");
      return {proto.name(), sequence_from_proto(proto, directory, element_type)};
    }
    onnx::OptionalProto proto;
    if (!proto.ParseFromArray(data.data(), static_cast<int>(data.size())))
      throw UserError("not a serialized ONNX OptionalProto");
    return {proto.name(), optional_from_proto(proto, directory, element_type)};
  } catch (const Error& error) {
    throw UserError(str_cat("'", name, "': ", error.what()));
  }
}

NamedValue read_value_file(const std::string& path, OnnxValue::Kind kind, std::optional<ScalarType> element_type) {
  return parse_value_bytes(read_file_bytes(path), path, directory_of(path), kind, element_type);
}

}  // namespace kiln::tools
