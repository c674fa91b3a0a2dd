// `kiln compile`, `kiln inspect` and `kiln run`: make a plan from an ONNX model, describe one, and
// run one through libkiln's C API (the same calls an embedding application makes).
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

int compile_command(const std::vector<std::string>& arguments);
int inspect_command(const std::vector<std::string>& arguments);
int run_command(const std::vector<std::string>& arguments);

}  // namespace kiln::tools
