// `kiln test-onnx`: the ONNX conformance runner (ONNX backend-test folder layout).
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

// Runs the command with its arguments (after "test-onnx"); returns the process exit status.
int test_onnx_command(const std::vector<std::string>& arguments);

}  // namespace kiln::tools
