// Fuzz target: the ONNX TensorProto / SequenceProto / OptionalProto reader of `kiln run` and `kiln
// test-onnx` (tools/tensor_file.cpp, which decodes with the importer's tensor_from_proto). The first
// byte picks the kind of value; the rest is the proto. No directory is given, so external data must
// be refused, never read.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "support/error.h"
#include "tensor_file.h"

using kiln::onnx_import::OnnxValue;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr OnnxValue::Kind kinds[] = {OnnxValue::Kind::Tensor, OnnxValue::Kind::Sequence,
                                              OnnxValue::Kind::Optional};
  OnnxValue::Kind kind = kinds[data[0] % 3];
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    kiln::tools::NamedValue value = kiln::tools::parse_value_bytes(bytes, "fuzz.pb", "", kind, kiln::ScalarType::Float32);
    (void)value;
  } catch (const kiln::UserError&) {
    // A rejected proto: the expected outcome for most inputs.
  }
  return 0;
}
