// `kiln check-onnx`: load + validate + build one ONNX model on zero-filled inputs, without running
// it. The quick way to ask "will kiln take this model, and with which shapes?", and the command the
// broken-model tests (tests/onnx/test_broken_models.py) drive.
#include "check_onnx.h"

#include <iostream>
#include <tuple>

#include "onnx_model.h"
#include "support/error.h"

namespace kiln::tools {
namespace {

using onnx_import::OnnxModel;
using onnx_import::ShapeSpec;

void print_help(std::ostream& out) {
  out << "usage: kiln check-onnx MODEL [--shape SPEC...]\n"
         "\n"
         "Loads MODEL, binds its input shapes and builds its graph on zero-filled inputs (nothing is\n"
         "computed beyond what building needs), then prints the inputs and outputs with their dtypes\n"
         "and shapes. On a problem, prints one error message on stderr and exits with status 1.\n"
         "\n"
         "options:\n"
         "  --shape SPEC...  shapes for inputs with symbolic (dim_param) or unknown dimensions:\n"
         "                   INPUT=D1,D2,... gives an input's whole shape (INPUT= is a scalar),\n"
         "                   SYMBOL=N gives one symbolic dimension everywhere it appears,\n"
         "                   INPUT[AXIS]=N one dimension the model leaves unnamed ('?')\n"
         "                   (e.g. --shape image=1,3,224,224 or --shape batch=1 seq=128)\n"
         "  -h, --help       show this help\n";
}

std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += str_cat(i ? ", " : "", shape[i]);
  return text + ")";
}

std::string domain_label(const std::string& domain) { return domain.empty() ? std::string("ai.onnx") : domain; }

// Zero-filled inputs of the bound shapes, then the (lazy) graph outputs.
std::pair<std::vector<std::pair<std::string, Tensor>>, std::vector<std::pair<std::string, Tensor>>> build_on_zeros(
    const OnnxModel& model, const std::vector<ShapeSpec>& specs) {
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const auto& [name, shape] : model.bind_input_shapes(specs)) {
    ScalarType dtype = ScalarType::Float32;  // an input the model leaves untyped
    for (const auto& info : model.inputs())
      if (info.name == name && info.dtype) dtype = *info.dtype;
    inputs.emplace_back(name, Tensor::zeros(shape, dtype));
  }
  auto outputs = model.build(inputs);
  return {std::move(inputs), std::move(outputs)};
}

int check(const std::string& path, const std::vector<ShapeSpec>& specs) {
  OnnxModel model = OnnxModel::load_file(path);  // its errors already start with the path
  std::vector<std::pair<std::string, Tensor>> inputs, outputs;
  try {
    std::tie(inputs, outputs) = build_on_zeros(model, specs);
  } catch (const UserError& error) {
    throw UserError(str_cat(path, ": ", error.what()));
  }

  std::cout << "model: " << path << "\nopsets:";
  for (const auto& [domain, version] : model.opset_imports()) std::cout << " " << domain_label(domain) << " " << version;
  std::cout << "\ninputs:\n";
  for (const auto& [name, tensor] : inputs)
    std::cout << "  " << name << ": " << scalar_type_name(tensor.dtype()) << " " << shape_text(tensor.shape()) << "\n";
  std::cout << "outputs:\n";
  for (const auto& [name, tensor] : outputs)
    std::cout << "  " << name << ": " << scalar_type_name(tensor.dtype()) << " " << shape_text(tensor.shape()) << "\n";
  return 0;
}

}  // namespace

int check_onnx_command(const std::vector<std::string>& arguments) {
  std::string model_path;
  std::vector<ShapeSpec> specs;
  bool in_shapes = false;  // after --shape, arguments holding '=' are shape specs
  try {
    for (const auto& argument : arguments) {
      if (argument == "-h" || argument == "--help") {
        print_help(std::cout);
        return 0;
      }
      if (argument == "--shape") {
        in_shapes = true;
      } else if (argument.rfind("--shape=", 0) == 0) {
        specs.push_back(onnx_import::parse_shape_spec(argument.substr(8)));
      } else if (!argument.empty() && argument[0] == '-') {
        std::cerr << "kiln check-onnx: unknown option '" << argument << "' (try 'kiln check-onnx --help')\n";
        return 2;
      } else if (in_shapes && argument.find('=') != std::string::npos) {
        specs.push_back(onnx_import::parse_shape_spec(argument));
      } else if (model_path.empty()) {
        model_path = argument;
        in_shapes = false;
      } else {
        std::cerr << "kiln check-onnx: one model at a time ('" << argument
                  << "' is a second model, or a shape without '=')\n";
        return 2;
      }
    }
    if (model_path.empty()) {
      std::cerr << "kiln check-onnx: no model given (try 'kiln check-onnx --help')\n";
      return 2;
    }
    return check(model_path, specs);
  } catch (const Error& error) {
    std::cerr << "kiln check-onnx: " << error.what() << "\n";
    return 1;
  } catch (const std::exception& error) {
    // Anything but a kiln::Error is a kiln bug, not a bad model: say so distinctly.
    std::cerr << "kiln check-onnx: internal error: " << error.what() << "\n";
    return 3;
  }
}

}  // namespace kiln::tools
