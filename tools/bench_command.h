// `kiln bench PLAN|MODEL.onnx`: load (compiling a model first), warm up, then min/median/p90
// latency of kiln_plan_run on seeded random inputs, printed as "KEY VALUE" lines.
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

int bench_command(const std::vector<std::string>& arguments);

}  // namespace kiln::tools
