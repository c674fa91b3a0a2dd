// OpenCL C 1.2 as a CDialect: the words the C-style renderer needs, and nothing else.
#include "codegen/c_style/c_dialect.h"

#include "support/error.h"

namespace kiln {

namespace {

std::string opencl_scalar_type(ScalarType scalar) {
  switch (scalar) {
    case ScalarType::Bool: return "bool";
    case ScalarType::Int8: return "char";
    case ScalarType::UInt8: return "uchar";
    case ScalarType::Int16: return "short";
    case ScalarType::UInt16: return "ushort";
    case ScalarType::Int32: return "int";
    case ScalarType::UInt32: return "uint";
    case ScalarType::Int64: case ScalarType::Index: return "long";
    case ScalarType::UInt64: return "ulong";
    case ScalarType::Float16: return "ushort";  // the bits; arithmetic goes through f32 (c_alu.cpp)
    case ScalarType::Float32: return "float";
    case ScalarType::Float64: return "double";
    // bf16 has no OpenCL type: c_alu.cpp keeps its bits in a ushort and never asks for it.
    case ScalarType::BFloat16: case ScalarType::Void: break;
  }
  throw_internal_error("OpenCL C has no type for " + DType(scalar).name());
}

// as_T(x) reinterprets the bits of any same-sized value (OpenCL C 1.2, section 6.2.4.2).
std::string opencl_bitcast(ScalarType, ScalarType to, const std::string& expression) {
  return "as_" + opencl_scalar_type(to) + "(" + expression + ")";
}

std::string opencl_f16_to_f32(const std::string& expression) { return "kiln_f16_to_f32(" + expression + ")"; }
std::string opencl_f32_to_f16(const std::string& expression) { return "kiln_f32_to_f16(" + expression + ")"; }

}  // namespace

const CDialect& opencl_dialect() {
  static const CDialect dialect = [] {
    CDialect d;
    d.name = "OpenCL C";
    d.kernel_prefix = "__kernel";
    d.global_qualifier = "__global";
    d.local_qualifier = "__local";
    d.helper_prefix = "static inline";
    d.barrier = "barrier(CLK_LOCAL_MEM_FENCE);";
    d.global_id0 = "get_global_id(0)";
    d.preamble = "#pragma OPENCL FP_CONTRACT OFF\n";
    // f16 values are their bits in a ushort, converted by vload_half and vstore_half_rte (round to
    // nearest even), which every OpenCL 1.2 device has: a pointer to half needs no cl_khr_fp16, half
    // arithmetic would, and kiln computes f16 ops in f32 anyway. So f16 runs on devices without the
    // extension (PoCL on x86) and an f16 plan requires nothing of its device.
    d.enable_f16 =
        "static inline float kiln_f16_to_f32(ushort h) { return vload_half(0, (const half*)&h); }\n"
        "static inline ushort kiln_f32_to_f16(float f) {\n  ushort h;\n  vstore_half_rte(f, 0, (half*)&h);\n  return h;\n}\n";
    d.enable_f64 = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    d.f16_requirement = "";  // none: see enable_f16
    d.f64_requirement = "the cl_khr_fp64 extension";
    d.scalar_type = opencl_scalar_type;
    d.bitcast = opencl_bitcast;
    d.f16_to_f32 = opencl_f16_to_f32;
    d.f32_to_f16 = opencl_f32_to_f16;
    return d;
  }();
  return dialect;
}

}  // namespace kiln
