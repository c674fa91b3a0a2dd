// kiln's element types against Triton's: the enum a request carries and the "TYPE_FP32" names of
// the model configuration. Every kiln dtype has a Triton twin; Triton's BYTES (strings) has none.
#pragma once

#include <optional>
#include <string>

#include "kiln/kiln.h"
#include "triton_api.h"

namespace kiln::serving {

TRITONSERVER_DataType triton_dtype(kiln_dtype dtype);
std::string config_dtype_name(kiln_dtype dtype);                      // "TYPE_FP32"
std::optional<kiln_dtype> kiln_dtype_from_config(const std::string& name);  // nullopt: no kiln twin
std::string triton_dtype_name(TRITONSERVER_DataType dtype);            // "FP32", for messages

}  // namespace kiln::serving
