// Placeholder: this op family is being written.
#include "op_registry.h"

namespace kiln::onnx_import {

void register_attention_ops(OpRegistry&) {}

}  // namespace kiln::onnx_import
