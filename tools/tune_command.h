// `kiln tune`: searches each kernel's Opts of an ONNX model by timing (src/opt/beam_search.h) and
// records the choices in a tuning database (src/opt/tuning_db.h) that `kiln compile --tuning` reads.
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

int tune_command(const std::vector<std::string>& arguments);

}  // namespace kiln::tools
