// ModelArguments; see model_arguments.h.
#include "model_arguments.h"

namespace kiln::tools {

ModelArguments::Taken ModelArguments::take(const std::string& argument) {
  if (argument == "--shape") {
    in_shapes = true;
    return Taken::Yes;
  }
  if (argument.rfind("--shape=", 0) == 0) {
    shapes.push_back(onnx_import::parse_shape_spec(argument.substr(8)));
    return Taken::Yes;
  }
  if (!argument.empty() && argument[0] == '-') return Taken::No;
  if (in_shapes && argument.find('=') != std::string::npos) {
    shapes.push_back(onnx_import::parse_shape_spec(argument));
    return Taken::Yes;
  }
  if (!model_path.empty()) return Taken::SecondModel;
  model_path = argument;
  return Taken::Yes;
}

}  // namespace kiln::tools
