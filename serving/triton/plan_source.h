// Where a model's plan comes from: `<version>/model.kiln` (or the config's default_model_filename)
// loaded as is, or `<version>/model.onnx` compiled at load through libkiln-compiler, which is
// opened with dlopen only then, so that serving plans never loads the compiler (and LLVM).
#pragma once

#include <string>
#include <vector>

#include "model_state.h"
#include "triton_api.h"

namespace kiln::serving {

struct PlanRequest {
  std::string version_directory;     // <repository>/<model>/<version>
  std::string default_model_filename;  // from the config; "" = model.kiln, else model.onnx
  std::vector<std::string> shapes;   // `kiln compile --shape` specs for an ONNX model
  std::string model_name;            // for messages
};

// Loads the plan into *out_plan; *out_description says what was loaded (for the log). A compiled
// ONNX model is cached beside it as `model.onnx.<key>.kiln`, the key a hash of the model's bytes,
// the shapes and the kiln version (or, where that folder is read-only, compiled afresh into a
// temporary file at every load).
TRITONSERVER_Error* load_plan(const PlanRequest& request, kiln_plan** out_plan, std::string* out_description);

}  // namespace kiln::serving
