// The command-line arguments that every command taking one ONNX model shares (`kiln tune`, `kiln
// gpu-kernels`): the model's path, and shapes as `--shape SPEC...` or `--shape=SPEC`.
#pragma once

#include <string>
#include <vector>

#include "onnx_model.h"

namespace kiln::tools {

struct ModelArguments {
  std::string model_path;
  std::vector<onnx_import::ShapeSpec> shapes;
  // Set by a bare --shape: the arguments after it with '=' are shape specs, until an option that
  // takes a value (end_shapes).
  bool in_shapes = false;

  enum class Taken { No, Yes, SecondModel };
  // Takes `argument` when it is the model, --shape, --shape=SPEC or a SPEC after --shape; a second
  // positional argument is SecondModel. Options (anything else starting with '-') are No.
  // parse_shape_spec's UserError passes through.
  Taken take(const std::string& argument);
  void end_shapes() { in_shapes = false; }
};

}  // namespace kiln::tools
