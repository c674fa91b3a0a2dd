// ONNX TensorProto → kiln Tensor: data types, the raw_data and typed-field encodings, and external
// data files. Models are untrusted input, so every size and every external path is checked before
// a byte is read: a bad model gets a UserError, never a crash or a read outside its directory.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "narrow_types.h"
#include "onnx/onnx_pb.h"
#include "op_registry.h"
#include "support/error.h"
#include "support/limits.h"

namespace kiln::onnx_import {
namespace {

std::string describe_tensor(const onnx::TensorProto& proto) {
  return proto.name().empty() ? std::string("tensor") : str_cat("tensor '", proto.name(), "'");
}

// Element count with overflow and negative-dimension checks.
int64_t checked_element_count(const onnx::TensorProto& proto, Shape& shape) {
  if (proto.dims_size() > limits::kMaxTensorRank)
    throw UserError(str_cat(describe_tensor(proto), " has rank ", proto.dims_size(), ", more than kiln's limit of ",
                            limits::kMaxTensorRank, " (docs/limits.md)"));
  int64_t count = 1;
  for (int64_t dim : proto.dims()) {
    if (dim < 0) throw UserError(str_cat(describe_tensor(proto), " has a negative dimension (", dim, ")"));
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim)
      throw UserError(str_cat(describe_tensor(proto), " has more elements than fit in 64 bits"));
    count *= dim;
    shape.push_back(dim);
  }
  return count;
}

bool has_dotdot_component(const std::filesystem::path& path) {
  for (const auto& part : path)
    if (part == "..") return true;
  return false;
}

// Reads the bytes of an external-data tensor. The location must be a relative path that stays
// inside the model's directory even after symlinks are followed: a model must not be able to make
// kiln read /etc/passwd or a file next to the model's folder.
std::vector<char> read_external_data(const onnx::TensorProto& proto, const std::string& model_directory,
                                     uint64_t expected_bytes) {
  std::string location;
  bool has_length = false;
  uint64_t offset = 0, length = 0;
  auto parse_number = [&](const std::string& key, const std::string& text) {
    char* end = nullptr;
    errno = 0;
    unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-')
      throw UserError(str_cat(describe_tensor(proto), ": external data ", key, " '", text, "' is not a number"));
    return static_cast<uint64_t>(value);
  };
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") location = entry.value();
    else if (entry.key() == "offset") offset = parse_number("offset", entry.value());
    else if (entry.key() == "length") length = parse_number("length", entry.value()), has_length = true;
    // "checksum" (SHA-1) is optional and not verified: the length check already catches truncation.
  }
  const std::string what = describe_tensor(proto);
  if (location.empty()) throw UserError(str_cat(what, ": external data has no 'location'"));
  // Only external data can be large enough to pass the limit: the rest of a model is under 2 GB.
  if (expected_bytes > limits::kMaxTensorBytes)
    throw UserError(str_cat(what, ": its shape and type need ", expected_bytes, " bytes, more than kiln's limit of ",
                            limits::kMaxTensorBytes, " bytes per tensor (1 TiB; docs/limits.md)"));
  if (model_directory.empty())
    throw UserError(str_cat(what, ": external data file '", location,
                            "' cannot be resolved: the model was loaded from memory without a directory"));
  std::filesystem::path relative(location);
  if (relative.is_absolute() || relative.has_root_name() || relative.has_root_directory())
    throw UserError(str_cat(what, ": external data location '", location,
                            "' is an absolute path; only paths relative to the model's directory are allowed"));
  if (has_dotdot_component(relative))
    throw UserError(str_cat(what, ": external data location '", location,
                            "' contains '..'; it must stay inside the model's directory"));

  std::error_code error;
  std::filesystem::path directory = std::filesystem::canonical(model_directory, error);
  if (error) throw UserError(str_cat(what, ": cannot resolve the model directory '", model_directory, "': ", error.message()));
  std::filesystem::path file = std::filesystem::canonical(directory / relative, error);
  if (error)
    throw UserError(str_cat(what, ": external data file '", location, "' cannot be opened: ", error.message()));
  // canonical() followed every symlink: the result must still lie under the directory.
  auto [dir_end, file_it] = std::mismatch(directory.begin(), directory.end(), file.begin(), file.end());
  if (dir_end != directory.end() || file_it == file.end())
    throw UserError(str_cat(what, ": external data location '", location, "' resolves to '", file.string(),
                            "', outside the model's directory (a symlink may point out of it)"));
  if (!std::filesystem::is_regular_file(file, error))
    throw UserError(str_cat(what, ": external data location '", location, "' is not a regular file"));
  uint64_t file_size = std::filesystem::file_size(file, error);
  if (error) throw UserError(str_cat(what, ": cannot read the size of '", location, "': ", error.message()));

  if (offset > file_size)
    throw UserError(str_cat(what, ": external data offset ", offset, " is past the end of '", location, "' (",
                            file_size, " bytes)"));
  if (!has_length) length = file_size - offset;
  if (length > file_size - offset)
    throw UserError(str_cat(what, ": external data range [", offset, ", ", offset, " + ", length,
                            ") lies outside '", location, "' (", file_size, " bytes)"));
  if (length != expected_bytes)
    throw UserError(str_cat(what, ": external data holds ", length, " bytes but the tensor's shape and type need ",
                            expected_bytes, has_length ? "" : " (no length given: the rest of the file was used)"));

  std::vector<char> bytes(static_cast<size_t>(length));
  std::ifstream stream(file, std::ios::binary);
  stream.seekg(static_cast<std::streamoff>(offset));
  if (!stream.read(bytes.data(), static_cast<std::streamsize>(length)))
    throw UserError(str_cat(what, ": reading ", length, " bytes at offset ", offset, " of '", location, "' failed"));
  return bytes;
}

// Copies a typed repeated field into the element type's bytes. `convert` narrows one stored value
// (ONNX keeps int8/int16/uint16/bool/f16/bf16 in int32_data and uint32 in uint64_data).
template <class Element, class Field, class Convert>
std::vector<char> pack_field(const Field& field, Convert convert) {
  std::vector<char> bytes(static_cast<size_t>(field.size()) * sizeof(Element));
  for (int i = 0; i < field.size(); ++i) {
    Element value = convert(field.Get(i));
    std::memcpy(bytes.data() + static_cast<size_t>(i) * sizeof(Element), &value, sizeof(Element));
  }
  return bytes;
}

std::vector<char> typed_field_bytes(const onnx::TensorProto& proto, ScalarType type, int64_t& stored_count) {
  auto narrow = [](auto target) { return [](auto value) { return static_cast<decltype(target)>(value); }; };
  std::vector<char> bytes;
  switch (type) {
    case ScalarType::Float32: stored_count = proto.float_data_size(); return pack_field<float>(proto.float_data(), narrow(0.0f));
    case ScalarType::Float64: stored_count = proto.double_data_size(); return pack_field<double>(proto.double_data(), narrow(0.0));
    case ScalarType::Int64: stored_count = proto.int64_data_size(); return pack_field<int64_t>(proto.int64_data(), narrow(int64_t{}));
    case ScalarType::UInt64: stored_count = proto.uint64_data_size(); return pack_field<uint64_t>(proto.uint64_data(), narrow(uint64_t{}));
    case ScalarType::UInt32: stored_count = proto.uint64_data_size(); return pack_field<uint32_t>(proto.uint64_data(), narrow(uint32_t{}));
    case ScalarType::Int32: stored_count = proto.int32_data_size(); return pack_field<int32_t>(proto.int32_data(), narrow(int32_t{}));
    case ScalarType::Int16: stored_count = proto.int32_data_size(); return pack_field<int16_t>(proto.int32_data(), narrow(int16_t{}));
    case ScalarType::Int8: stored_count = proto.int32_data_size(); return pack_field<int8_t>(proto.int32_data(), narrow(int8_t{}));
    case ScalarType::UInt16: stored_count = proto.int32_data_size(); return pack_field<uint16_t>(proto.int32_data(), narrow(uint16_t{}));
    case ScalarType::UInt8: stored_count = proto.int32_data_size(); return pack_field<uint8_t>(proto.int32_data(), narrow(uint8_t{}));
    // f16 and bf16 are stored as their 16-bit patterns in int32_data.
    case ScalarType::Float16:
    case ScalarType::BFloat16: stored_count = proto.int32_data_size(); return pack_field<uint16_t>(proto.int32_data(), narrow(uint16_t{}));
    case ScalarType::Bool:
      stored_count = proto.int32_data_size();
      return pack_field<uint8_t>(proto.int32_data(), [](int32_t value) { return static_cast<uint8_t>(value != 0); });
    default: throw_internal_error(str_cat("typed_field_bytes: unexpected type ", scalar_type_name(type)));
  }
}

// The 4-bit and 2-bit types are packed, two or four elements to a byte, the first element in the
// low bits; the 8-bit ones take a byte each. Unpacked here into one carrier element per byte
// (sign-extended for INT4/INT2), see narrow_types.h.
Tensor narrow_tensor_from_proto(const onnx::TensorProto& proto, const std::string& model_directory) {
  const int32_t data_type = proto.data_type();
  Shape shape;
  const int64_t count = checked_element_count(proto, shape);
  const int bits = narrow_bits(data_type);
  const int per_byte = 8 / bits;
  const uint64_t packed_bytes = (static_cast<uint64_t>(count) + per_byte - 1) / per_byte;

  std::vector<uint8_t> packed;
  if (proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    std::vector<char> bytes = read_external_data(proto, model_directory, packed_bytes);
    packed.assign(bytes.begin(), bytes.end());
  } else if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    if (raw.size() != packed_bytes)
      throw UserError(str_cat(describe_tensor(proto), " has ", raw.size(), " bytes of raw_data but its shape and type (",
                              onnx_type_name(data_type), ", ", count, " elements) need ", packed_bytes));
    packed.assign(raw.begin(), raw.end());
  } else {
    // int32_data holds one (packed) byte per entry.
    if (static_cast<uint64_t>(proto.int32_data_size()) != packed_bytes)
      throw UserError(str_cat(describe_tensor(proto), " stores ", proto.int32_data_size(), " int32_data entries but its shape and type (",
                              onnx_type_name(data_type), ", ", count, " elements) need ", packed_bytes));
    for (int32_t value : proto.int32_data()) packed.push_back(static_cast<uint8_t>(value));
  }

  const bool sign_extend = narrow_integer_min(data_type) < 0;
  const int mask = (1 << bits) - 1;
  std::vector<uint8_t> elements(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    int value = (packed[static_cast<size_t>(k / per_byte)] >> ((k % per_byte) * bits)) & mask;
    if (sign_extend && value >= (1 << (bits - 1))) value -= 1 << bits;
    elements[static_cast<size_t>(k)] = static_cast<uint8_t>(value);
  }
  return Tensor::from_data(elements.data(), std::move(shape), narrow_carrier(data_type));
}

}  // namespace

ScalarType scalar_type_from_onnx(int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto_DataType_FLOAT: return ScalarType::Float32;
    case onnx::TensorProto_DataType_UINT8: return ScalarType::UInt8;
    case onnx::TensorProto_DataType_INT8: return ScalarType::Int8;
    case onnx::TensorProto_DataType_UINT16: return ScalarType::UInt16;
    case onnx::TensorProto_DataType_INT16: return ScalarType::Int16;
    case onnx::TensorProto_DataType_INT32: return ScalarType::Int32;
    case onnx::TensorProto_DataType_INT64: return ScalarType::Int64;
    case onnx::TensorProto_DataType_BOOL: return ScalarType::Bool;
    case onnx::TensorProto_DataType_FLOAT16: return ScalarType::Float16;
    case onnx::TensorProto_DataType_DOUBLE: return ScalarType::Float64;
    case onnx::TensorProto_DataType_UINT32: return ScalarType::UInt32;
    case onnx::TensorProto_DataType_UINT64: return ScalarType::UInt64;
    case onnx::TensorProto_DataType_BFLOAT16: return ScalarType::BFloat16;
    default: throw UserError(str_cat("unsupported ONNX data type ", onnx_type_name(data_type), ": kiln has no such dtype"));
  }
}

Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& model_directory) {
  if (proto.has_segment())
    throw UserError(str_cat(describe_tensor(proto), " is segmented; segmented TensorProtos are not supported"));
  if (is_narrow_type(proto.data_type())) return narrow_tensor_from_proto(proto, model_directory);
  ScalarType type;
  try {
    type = scalar_type_from_onnx(proto.data_type());
  } catch (const UserError& error) {
    throw UserError(str_cat(describe_tensor(proto), ": ", error.what()));
  }
  Shape shape;
  int64_t count = checked_element_count(proto, shape);
  const uint64_t element_size = static_cast<uint64_t>(scalar_type_size(type));
  if (static_cast<uint64_t>(count) > std::numeric_limits<uint64_t>::max() / element_size)
    throw UserError(str_cat(describe_tensor(proto), " is too large"));
  const uint64_t expected_bytes = static_cast<uint64_t>(count) * element_size;

  std::vector<char> bytes;
  if (proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    bytes = read_external_data(proto, model_directory, expected_bytes);
  } else if (proto.has_raw_data()) {
    // raw_data is little-endian, which is the byte order of every host kiln targets.
    const std::string& raw = proto.raw_data();
    if (raw.size() != expected_bytes)
      throw UserError(str_cat(describe_tensor(proto), " has ", raw.size(), " bytes of raw_data but its shape and type (",
                              scalar_type_name(type), ", ", count, " elements) need ", expected_bytes));
    bytes.assign(raw.begin(), raw.end());
    if (type == ScalarType::Bool)  // any non-zero byte is true; kiln's bools are exactly 0 or 1
      for (char& byte : bytes) byte = byte != 0 ? 1 : 0;
  } else {
    int64_t stored_count = 0;
    bytes = typed_field_bytes(proto, type, stored_count);
    if (stored_count != count)
      throw UserError(str_cat(describe_tensor(proto), " stores ", stored_count, " values but its shape needs ", count));
  }
  return Tensor::from_data(bytes.data(), std::move(shape), type);
}

}  // namespace kiln::onnx_import
