// `kiln check-onnx`: loads an ONNX model, binds its input shapes and builds its graph, reporting the
// first problem the way a user sees it (one UserError message on stderr).
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

// Runs the command with its arguments (after "check-onnx"); returns the process exit status.
int check_onnx_command(const std::vector<std::string>& arguments);

}  // namespace kiln::tools
