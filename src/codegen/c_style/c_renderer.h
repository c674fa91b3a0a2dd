// The C-style GPU renderer: a linearised kernel (codegen/linearize.h) becomes the source of one
// kernel function in a C dialect (c_dialect.h; OpenCL C today):
//
//   <kernel prefix> void NAME(<global> T0* data0, <global> const T1* data1, …, long var0, …)
//
// with one parameter per DEFINE_GLOBAL slot, 0 … buffer_count-1 (a slot no op uses gets a byte
// pointer nobody reads), then one 64-bit integer per size variable (DEFINE_VAR), by name. The launch grid has one work-item per index of RANGE axis 0, the parallel
// axis of docs/kernel-ast.md: work-item i does what the CPU function does when called with
// [begin, end) = [i, i+1), and work-items past the axis's end do nothing. A kernel without axis 0
// is launched with one work-item. Every other RANGE is a `for` loop in the work-item.
//
// Vectors (the optimisation layer's UPCAST lanes) are rendered as scalar lanes: one C variable per
// lane, a vector load or store as one access per lane. The compiler of the device language is left
// to vectorise (PoCL packs work-items into SIMD lanes; GPUs have no SIMD within a thread anyway).
#pragma once

#include <string>
#include <vector>

#include "codegen/c_style/c_dialect.h"
#include "codegen/linearize.h"

namespace kiln {

// What the device that will run the kernel can compute.
struct CDeviceFeatures {
  std::string device_name;  // named in "unsupported: …" errors
  bool f16 = false;
  bool f64 = false;
  int cuda_architecture = 0;  // CUDA: the compute capability the PTX is for (75 = sm_75); picks the mma shape
};

struct RenderedKernel {
  std::string name;        // the kernel function's name: the program's name made a C identifier
  std::string source;      // a whole program: preamble, helper functions, the kernel
  int buffer_count = 0;    // parameters, one per DEFINE_GLOBAL slot up to the largest used
  bool uses_f16 = false;   // the program holds f16 or f64 values (what a device must offer to build it)
  bool uses_f64 = false;
  // The size variables (DEFINE_VARs) the kernel takes after its buffers, as 64-bit integer
  // parameters, in this order (sorted by name).
  std::vector<std::string> variables;
};

// Whether every index value of `program` (bounds from ir/bounds.h) fits a 32-bit signed integer,
// with room for the launch grid's rounding: then index math is rendered in 32 bits.
bool index_fits_32_bits(const LinearProgram& program);

// Renders `program`; index values in 32 bits where index_fits_32_bits, else in 64. A dtype the language or the device cannot hold (bf16 always; f16 and f64 when
// the device lacks them) is a UserError "unsupported: DTYPE …" naming the op, the kernel, the
// device and what it lacks. A malformed program (unbalanced RANGE/END, a source used before it is
// defined) is an InternalError.
RenderedKernel render_c(const LinearProgram& program, const CDialect& dialect, const CDeviceFeatures& features);

}  // namespace kiln
