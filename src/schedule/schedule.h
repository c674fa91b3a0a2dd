// The schedule: what running a lazy tensor graph takes — buffers, and kernels in the order they
// must run. Built by rangeify (rangeify.cpp), given memory by the memory planner
// (memory_plan.cpp), and executed by the runner (src/runtime/cpu/run_schedule.*) or written into a
// plan.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/uop.h"
#include "opt/opt.h"
#include "tensor/dim.h"

namespace kiln {

// Axis ids of a kernel's RANGEs: output axes are 0, 1, 2 …, reduce axes start here, so loops nest
// by id (docs/kernel-ast.md).
constexpr int64_t kFirstReduceAxis = 1000;

struct ScheduledBuffer {
  enum class Kind { Input, Intermediate, Output };
  Kind kind = Kind::Intermediate;
  DType dtype;
  // Elements. A buffer whose size depends on size variables (docs/symbolic-shapes.md) has its
  // exact count in `elements` and here its count at every variable's maximum: the memory it is
  // given, so any run within the variables' ranges fits.
  int64_t count = 0;
  Dim elements = 0;
  int64_t input_id = -1;    // Input: the BUFFER id it reads
  int output_index = -1;    // Output: position in the requested outputs
  int64_t arena_offset = -1;  // Intermediate: byte offset in the arena (set by plan_memory)
  int64_t bytes() const { return count * dtype.scalar_bytes(); }
};

constexpr size_t kMaxKernelSources = 16;

struct ScheduledKernel {
  UOpPtr ast;                 // the kernel AST (docs/kernel-ast.md); SINK arg = function name
  std::vector<int> buffers;   // schedule buffer index bound to each DEFINE_GLOBAL slot
  // End of the range with axis id 0 (1 when there is none); symbolic when that range ends at a
  // size variable's expression, so a runner must evaluate it for the run's values.
  Dim parallel_extent = 1;
  double estimated_flops = 0;   // for KILN_DEBUG=2 and `kiln bench --profile`
  double estimated_bytes = 0;
  // The provenance tags (UOp::provenance().tag, e.g. an ONNX node's "node 'conv1' (Conv, opset
  // 13)") of the tensor-level values this kernel computes rather than loads: distinct, those of
  // reductions first, then producers before consumers, at most kMaxKernelSources. Empty for graphs
  // built without tags (the C++ Tensor API).
  std::vector<std::string> sources;
  // The Opt actions applied to `ast` (src/opt/heuristics.h); empty until optimize_schedule runs.
  std::vector<Opt> opts;
  // The size variables `ast` reads (kernel_variables), in the order of their values in the kernel's
  // extra argument (docs/kernel-ast.md, "Variables"); empty for a kernel of fixed sizes.
  std::vector<VariableSpec> variables;
  // GPU targets: the work-group size the kernel's code needs (a group of threads per output sharing
  // a reduction through local memory, opt/gpu_grid.h); 0 lets the device choose.
  int64_t group_size = 0;
  // A remainder kernel (opt/row_remainders.h): it writes the rows of the previous kernel's outputs
  // that the previous one's row blocks leave, so the two together compute them.
  bool finishes_previous = false;
  const std::string& name() const { return ast->arg_string(); }
};

struct Schedule {
  std::vector<ScheduledBuffer> buffers;
  std::vector<ScheduledKernel> kernels;
  // Per requested output: the schedule buffer holding it.
  std::vector<int> outputs;
  int64_t arena_bytes = 0;         // set by plan_memory
  int64_t intermediate_bytes = 0;  // sum of the intermediate buffers' sizes
};

// The distinct DEFINE_VARs of a kernel AST, sorted by name: the order in which the renderers read
// their values. A name defined with two different ranges is an InternalError.
std::vector<VariableSpec> kernel_variables(const UOpPtr& ast);

struct ScheduleOptions {
  // Intermediate buffers of f16 and bf16 values are f32 buffers holding those values exactly (the
  // kernel that stores one widens its rounded value), and a kernel that widens such a value to f32
  // loads it as it is, without a conversion (TargetCaps::narrow_floats_stored_wide). Inputs and
  // outputs keep their types.
  bool narrow_floats_stored_wide = false;
  // Run-bound size variables (docs/symbolic-shapes.md, stage 6) and the requested output holding
  // each one's value: the kernels they size run after that value's kernel (order_run_bound_kernels).
  std::vector<std::pair<std::string, size_t>> run_bound_outputs;
};

// Rangeify + kernel split: turns tensor-level outputs into kernels. Every output becomes a dense
// row-major buffer of its shape (an Output buffer; one per distinct node).
Schedule create_schedule(const std::vector<UOpPtr>& outputs, const ScheduleOptions& options = {});

// Lifetimes and arena offsets of the intermediate buffers (greedy best fit, 64-byte aligned).
void plan_memory(Schedule& schedule);

// One line per kernel and buffer, for KILN_DEBUG and tests.
std::string describe_schedule(const Schedule& schedule);

}  // namespace kiln
