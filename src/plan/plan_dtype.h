// The kiln.h element type (kiln_dtype) of a compiler ScalarType: the one mapping the plan writer and
// the tools share. Types a plan cannot hold (Void, Index) have none.
#pragma once

#include <optional>

#include "kiln/kiln.h"
#include "kiln/scalar_type.hpp"

namespace kiln::plan {

inline std::optional<kiln_dtype> plan_dtype_of(ScalarType type) {
  switch (type) {
    case ScalarType::Bool: return KILN_DTYPE_BOOL;
    case ScalarType::Int8: return KILN_DTYPE_INT8;
    case ScalarType::Int16: return KILN_DTYPE_INT16;
    case ScalarType::Int32: return KILN_DTYPE_INT32;
    case ScalarType::Int64: return KILN_DTYPE_INT64;
    case ScalarType::UInt8: return KILN_DTYPE_UINT8;
    case ScalarType::UInt16: return KILN_DTYPE_UINT16;
    case ScalarType::UInt32: return KILN_DTYPE_UINT32;
    case ScalarType::UInt64: return KILN_DTYPE_UINT64;
    case ScalarType::Float16: return KILN_DTYPE_FLOAT16;
    case ScalarType::BFloat16: return KILN_DTYPE_BFLOAT16;
    case ScalarType::Float32: return KILN_DTYPE_FLOAT32;
    case ScalarType::Float64: return KILN_DTYPE_FLOAT64;
    default: return std::nullopt;
  }
}

// The inverse: the ScalarType a kiln_dtype holds (none for values outside the enum).
inline std::optional<ScalarType> scalar_type_of_plan_dtype(kiln_dtype dtype) {
  for (ScalarType type : {ScalarType::Bool, ScalarType::Int8, ScalarType::Int16, ScalarType::Int32, ScalarType::Int64,
                          ScalarType::UInt8, ScalarType::UInt16, ScalarType::UInt32, ScalarType::UInt64,
                          ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64})
    if (plan_dtype_of(type) == dtype) return type;
  return std::nullopt;
}

}  // namespace kiln::plan
