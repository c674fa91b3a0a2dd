// `kiln compile`, `kiln inspect` and `kiln run`: make a plan from an ONNX model, describe one, and
// run one through libkiln's C API (the same calls an embedding application makes).
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

int compile_command(const std::vector<std::string>& arguments);
int inspect_command(const std::vector<std::string>& arguments);
int run_command(const std::vector<std::string>& arguments);

// Compiles the ONNX model at `model_path` into a plan file (what `kiln compile` does), printing
// progress to stderr. `shape_specs` are --shape values (INPUT=D1,D2 or SYMBOL=N). Throws kiln::Error.
void compile_model(const std::string& model_path, const std::string& plan_path,
                   const std::vector<std::string>& shape_specs);

}  // namespace kiln::tools
