// Reads a serialized onnx.TensorProto file into a Tensor with the importer's own decoder, so the
// runner checks the same code path that loads initializers.
#include "tensor_file.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "onnx/onnx_pb.h"
#include "op_registry.h"
#include "support/error.h"

namespace kiln::tools {

NamedTensor read_tensor_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw UserError(str_cat("cannot open '", path, "'"));
  std::ostringstream bytes;
  bytes << stream.rdbuf();
  const std::string data = bytes.str();
  if (data.size() > static_cast<size_t>(INT_MAX)) throw UserError(str_cat("'", path, "' is too large (2 GB or more)"));
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(data.data(), static_cast<int>(data.size())))
    throw UserError(str_cat("'", path, "' is not a serialized ONNX TensorProto (a sequence, map or optional value?)"));
  std::string directory = std::filesystem::path(path).parent_path().string();
  try {
    return {proto.name(), onnx_import::tensor_from_proto(proto, directory.empty() ? "." : directory), proto.data_type()};
  } catch (const Error& error) {
    throw UserError(str_cat("'", path, "': ", error.what()));
  }
}

}  // namespace kiln::tools
