// The differences between the C-like GPU kernel languages, as data: the C-style renderer
// (c_renderer.h) writes one program text for all of them and asks this table for every word that
// differs: OpenCL C (opencl_dialect.cpp) and CUDA C (cuda_dialect.cpp) are two tables of this shape,
// not two renderers.
#pragma once

#include <functional>
#include <string>

#include "ir/dtype.h"

namespace kiln {

struct CDialect {
  std::string name;               // "OpenCL C": named in errors
  std::string kernel_prefix;      // what precedes `void NAME(…)`: "__kernel"
  std::string global_qualifier;   // address space of kernel buffer parameters: "__global"
  std::string local_qualifier;    // workgroup-shared memory (a group's reduction partials): "__local"
  std::string helper_prefix;      // what precedes helper functions: "static inline"
  std::string barrier;            // a workgroup barrier statement (local memory written, then read)
  // Expression of the global index of dimension 0 of the launch grid (a size_t-like value).
  std::string global_id0;
  // A warp shuffle: `%v` of the thread whose lane is this one's XOR `%m` (every lane of the warp
  // takes part); empty where the language has none (OpenCL C 1.2).
  std::string shuffle_xor;
  // A WMMA (opt/mma_layout.h) is the warp's tensor-core instruction (CUDA); false: the renderer
  // emulates it through local memory (OpenCL: only the backend-parity test makes such kernels).
  bool warp_mma = false;
  // Lines at the top of every program (FP contraction off: kiln's float semantics round every op).
  std::string preamble;
  // Lines that enable f16 and f64 arithmetic where the language needs an extension for them.
  std::string enable_f16;
  std::string enable_f64;
  // What a device must offer for f16 and f64 values, named in "unsupported: …" errors; empty when
  // the language needs nothing of the device for them.
  std::string f16_requirement;
  std::string f64_requirement;

  // The register type of a scalar dtype (bool → "bool", index → the 64-bit signed type; the
  // renderer narrows index to the 32-bit one in kernels whose index values all fit, c_renderer.h).
  std::function<std::string(ScalarType scalar)> scalar_type;
  // `expression` (of scalar type `from`) reinterpreted as the same-sized scalar type `to`.
  std::string (*bitcast)(ScalarType from, ScalarType to, const std::string& expression) = nullptr;
  // f16 ↔ f32 conversions (round to nearest even towards f16); f16 arithmetic goes through f32.
  std::string (*f16_to_f32)(const std::string& expression) = nullptr;
  std::string (*f32_to_f16)(const std::string& expression) = nullptr;
};

// The OpenCL C 1.2 dialect (opencl_dialect.cpp).
const CDialect& opencl_dialect();
// CUDA C++ as NVRTC compiles it (cuda_dialect.cpp).
const CDialect& cuda_dialect();

}  // namespace kiln
