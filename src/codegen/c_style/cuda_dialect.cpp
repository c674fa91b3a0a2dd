// CUDA C++ (as NVRTC compiles it) as a CDialect. The preamble gives CUDA the OpenCL-style type names
// the shared renderer writes (uchar, ushort, uint, ulong; long is 64 bits on the LP64 hosts CUDA
// supports; schar is signed char), so that only the words below differ between the two dialects. f16 values are their bits
// in a ushort, widened and rounded with the PTX cvt instructions, so no CUDA header (cuda_fp16.h) is
// needed and NVRTC compiles every kernel without an include path.
#include "codegen/c_style/c_dialect.h"

#include "support/error.h"

namespace kiln {

namespace {

std::string cuda_scalar_type(ScalarType scalar) {
  switch (scalar) {
    case ScalarType::Bool: return "bool";
    case ScalarType::Int8: return "schar";  // signed char: plain char's signedness is the platform's
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
    // bf16 has no CUDA type without cuda_bf16.h: c_alu.cpp keeps its bits in a ushort and never asks.
    case ScalarType::BFloat16: case ScalarType::Void: break;
  }
  throw_internal_error("CUDA C has no type for " + DType(scalar).name());
}

// Reinterpreting bits: CUDA's intrinsics for the float types, a conversion between integer types of
// one size (and between f16 bits and a 16-bit integer, both integers here).
std::string cuda_bitcast(ScalarType from, ScalarType to, const std::string& expression) {
  std::string type = cuda_scalar_type(to);
  if (to == ScalarType::Float32) return "__int_as_float((int)(" + expression + "))";
  if (to == ScalarType::Float64) return "__longlong_as_double((long long)(" + expression + "))";
  if (from == ScalarType::Float32) return "((" + type + ")__float_as_int(" + expression + "))";
  if (from == ScalarType::Float64) return "((" + type + ")__double_as_longlong(" + expression + "))";
  return "((" + type + ")(" + expression + "))";
}

std::string cuda_f16_to_f32(const std::string& expression) { return "kiln_f16_to_f32(" + expression + ")"; }
std::string cuda_f32_to_f16(const std::string& expression) { return "kiln_f32_to_f16(" + expression + ")"; }

}  // namespace

const CDialect& cuda_dialect() {
  static const CDialect dialect = [] {
    CDialect d;
    d.name = "CUDA C";
    d.kernel_prefix = "extern \"C\" __global__";  // unmangled, so the driver finds it by its name
    d.global_qualifier = "";                      // kernel pointers are global memory already
    d.local_qualifier = "__shared__";
    d.helper_prefix = "static __device__ __forceinline__";
    d.barrier = "__syncthreads();";
    d.global_id0 = "(blockIdx.x * (ulong)blockDim.x + threadIdx.x)";
    d.shuffle_xor = "__shfl_xor_sync(0xffffffffu, %v, %m)";
    d.warp_mma = true;
    // FP contraction is switched off by the compile option --fmad=false (nvrtc_compiler.cpp).
    d.preamble =
        "typedef signed char schar;\ntypedef unsigned char uchar;\ntypedef unsigned short ushort;\ntypedef unsigned int uint;\n"
        "typedef unsigned long ulong;\n";
    // cvt.rn rounds to nearest even; f16 → f32 is exact.
    d.enable_f16 =
        "static __device__ __forceinline__ float kiln_f16_to_f32(ushort h) {\n"
        "  float f;\n  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n  return f;\n}\n"
        "static __device__ __forceinline__ ushort kiln_f32_to_f16(float f) {\n"
        "  ushort h;\n  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n  return h;\n}\n";
    d.enable_f64 = "";
    d.f16_requirement = "compute capability 5.3";
    d.f64_requirement = "f64 arithmetic";
    d.scalar_type = cuda_scalar_type;
    d.bitcast = cuda_bitcast;
    d.f16_to_f32 = cuda_f16_to_f32;
    d.f32_to_f16 = cuda_f32_to_f16;
    return d;
  }();
  return dialect;
}

}  // namespace kiln
