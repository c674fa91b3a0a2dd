// CUDA C → PTX and cubin with NVRTC, the CUDA toolkit's runtime compiler, loaded with dlopen at run
// time: nothing links against the CUDA toolkit, so kiln builds and runs without it, and only a
// request for CUDA code fails, with a UserError naming what is missing. Asking NVRTC for a cubin of
// a real architecture (sm_90) runs the PTX assembler (ptxas) inside NVRTC, so a kernel that compiles
// here is one the driver can load on that architecture.
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct CudaBinary {
  std::string ptx;    // the PTX text (virtual architecture compute_NN)
  std::string cubin;  // machine code for sm_NN, assembled by NVRTC's ptxas
  std::string log;    // the compiler's warnings, if any
};

struct NvrtcInfo {
  int major = 0, minor = 0;          // nvrtcVersion
  std::vector<int> architectures;    // nvrtcGetSupportedArchs: 75, 80, 86, 89, 90, …
  std::string library;               // the file name that was loaded
};

// NVRTC's version and architectures, or null with *why_not set (the libraries tried and dlerror's
// text) when it cannot be loaded. Loaded once per process from $KILN_NVRTC_LIBRARY if set, else
// libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12.
const NvrtcInfo* nvrtc_info(std::string* why_not);

// Compiles `source` (a whole program; `name` labels it in the log) for compute capability
// `architecture` (90 = sm_90) with kiln's float rules: no FMA contraction (--fmad=false), IEEE
// division and square root, denormals kept. Throws UserError: NVRTC missing ("unsupported: CUDA
// code needs NVRTC: …"), an architecture NVRTC does not know, or a compile error (with NVRTC's log
// and the name).
CudaBinary compile_cuda(const std::string& source, const std::string& name, int architecture);

}  // namespace kiln
