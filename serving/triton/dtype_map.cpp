// The one table pairing kiln dtypes with Triton's (dtype_map.h).
#include "dtype_map.h"

#include <array>

namespace kiln::serving {
namespace {

struct DtypePair {
  kiln_dtype kiln;
  TRITONSERVER_DataType triton;
  const char* name;  // Triton's name; the config's is "TYPE_" + name
};

constexpr std::array<DtypePair, 13> pairs{{
    {KILN_DTYPE_BOOL, TRITONSERVER_TYPE_BOOL, "BOOL"},
    {KILN_DTYPE_INT8, TRITONSERVER_TYPE_INT8, "INT8"},
    {KILN_DTYPE_INT16, TRITONSERVER_TYPE_INT16, "INT16"},
    {KILN_DTYPE_INT32, TRITONSERVER_TYPE_INT32, "INT32"},
    {KILN_DTYPE_INT64, TRITONSERVER_TYPE_INT64, "INT64"},
    {KILN_DTYPE_UINT8, TRITONSERVER_TYPE_UINT8, "UINT8"},
    {KILN_DTYPE_UINT16, TRITONSERVER_TYPE_UINT16, "UINT16"},
    {KILN_DTYPE_UINT32, TRITONSERVER_TYPE_UINT32, "UINT32"},
    {KILN_DTYPE_UINT64, TRITONSERVER_TYPE_UINT64, "UINT64"},
    {KILN_DTYPE_FLOAT16, TRITONSERVER_TYPE_FP16, "FP16"},
    {KILN_DTYPE_BFLOAT16, TRITONSERVER_TYPE_BF16, "BF16"},
    {KILN_DTYPE_FLOAT32, TRITONSERVER_TYPE_FP32, "FP32"},
    {KILN_DTYPE_FLOAT64, TRITONSERVER_TYPE_FP64, "FP64"},
}};

}  // namespace

TRITONSERVER_DataType triton_dtype(kiln_dtype dtype) {
  for (const DtypePair& pair : pairs)
    if (pair.kiln == dtype) return pair.triton;
  return TRITONSERVER_TYPE_INVALID;
}

std::string config_dtype_name(kiln_dtype dtype) {
  for (const DtypePair& pair : pairs)
    if (pair.kiln == dtype) return std::string("TYPE_") + pair.name;
  return "TYPE_INVALID";
}

std::optional<kiln_dtype> kiln_dtype_from_config(const std::string& name) {
  for (const DtypePair& pair : pairs)
    if (name == std::string("TYPE_") + pair.name) return pair.kiln;
  return std::nullopt;
}

std::string triton_dtype_name(TRITONSERVER_DataType dtype) {
  if (dtype == TRITONSERVER_TYPE_BYTES) return "BYTES";
  for (const DtypePair& pair : pairs)
    if (pair.triton == dtype) return pair.name;
  return "INVALID";
}

}  // namespace kiln::serving
