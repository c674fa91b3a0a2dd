// Fuzz target: ONNX model bytes → OnnxModel::load_buffer → bind input shapes → build the lazy graph,
// the first half of `kiln compile` (importers/onnx/compile_onnx_file.cpp) without code generation or
// a run. A model is untrusted input: it may be refused with a kiln::UserError, never crash. Symbolic
// and unknown dimensions are bound to 2, and the model is loaded without a directory, so external
// data must be refused rather than read.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "onnx_model.h"
#include "support/error.h"
#include "tensor/tensor_internal.h"

using namespace kiln;
using namespace kiln::onnx_import;

namespace {

// Every input a caller must give gets a shape: unknown ranks become [2], dimensions without a size
// become 2 (a symbol through a SYMBOL=2 spec, so that inputs sharing it agree).
std::vector<ShapeSpec> shape_specs(const OnnxModel& model) {
  std::vector<ShapeSpec> specs;
  std::set<std::string> symbols;
  for (const OnnxValueInfo& input : model.inputs()) {
    if (input.has_initializer) continue;
    if (!input.dims) {
      specs.push_back({input.name, {2}});
      continue;
    }
    bool anonymous = false;
    for (const OnnxDim& dim : *input.dims) anonymous = anonymous || (!dim.size && dim.symbol.empty());
    if (anonymous) {
      Shape shape;
      for (const OnnxDim& dim : *input.dims) shape.push_back(dim.size ? *dim.size : 2);
      specs.push_back({input.name, shape});
      continue;
    }
    for (const OnnxDim& dim : *input.dims)
      if (!dim.size && symbols.insert(dim.symbol).second) specs.push_back({dim.symbol, {2}});
  }
  return specs;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Builders realize small shape tensors through the JIT; keep its objects out of the disk cache,
  // which would otherwise grow by a file per fuzz input.
  setenv("KILN_CACHE", "0", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    OnnxModel model = OnnxModel::load_buffer(data, size);
    std::vector<std::pair<std::string, Tensor>> inputs;
    for (const auto& [name, shape] : model.bind_input_shapes(shape_specs(model))) {
      ScalarType dtype = ScalarType::Float32;  // as compile_onnx_plan: an untyped input is Float32
      for (const OnnxValueInfo& info : model.inputs())
        if (info.name == name && info.dtype) dtype = *info.dtype;
      inputs.emplace_back(name, graph_input(name, shape, dtype));
    }
    model.build(inputs);
  } catch (const UserError&) {
    // A refused model: the expected outcome for most inputs.
  }
  return 0;
}
