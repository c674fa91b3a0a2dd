// The plan writer (compiler side): a lazy Tensor graph whose inputs are graph_input placeholders →
// the bytes of one plan file (docs/plan-format.md).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu_codegen.h"
#include "kiln/kiln.hpp"
#include "opt/tuning_db.h"
#include "schedule/schedule.h"

namespace kiln {

struct PlanWriteOptions {
  // Called with one line per stage (scheduling, each kernel compiled, linking); may be empty.
  std::function<void(const std::string&)> progress;
  // Compute every weight-only value that run-time values read (a transposed weight, BatchNorm's
  // scale) once, now, and store it as a weight (fold_constants in src/tensor/tensor_internal.h).
  bool fold_constants = true;
  // Kernels found in this database get its Opts instead of the heuristics' (src/opt/optimize_schedule.h);
  // it is only read, so the same graph and database give the same plan. Null: heuristics only.
  const TuningDb* tuning = nullptr;
  // Empty: kernels for the host CPU (LLVM, linked into the code section). "opencl": a device plan
  // (format version 3) whose kernels are OpenCL C, built by the device's driver when the plan is
  // loaded; "cuda": one whose kernels are PTX for cuda_architecture, compiled now by NVRTC and
  // loaded by the CUDA driver (docs/backends.md). Device plans: symbolic sizes too (format version
  // 5), no tuning database.
  std::string device;
  // CPU plans: the CPU the kernels are for (CpuTarget::cross: `kiln compile --target aarch64`); null:
  // the host CPU. The caller keeps it alive until write_plan returns.
  const CpuTarget* cpu_target = nullptr;
  int cuda_architecture = 75;  // sm_75 (Turing): the oldest NVRTC 13 compiles for; newer GPUs JIT its PTX
  // Inputs the graph was built for one value of (`kiln compile --value`): input name and the bytes
  // every run must give (PlanContents::pinned_inputs; format version 6, CPU plans only).
  std::vector<std::pair<std::string, std::string>> pinned_inputs;
  // Run-time checks the graph's builder made (run_bound.h, check_at_run_time): each is bound and
  // checked by the plan, though no kernel reads it.
  std::vector<std::string> run_time_checks;
};

// The schedule that write_plan compiles for `outputs`, before the Opt stage (constants folded when
// `options` says so; progress as write_plan prints it), and the values it was made from, which own
// the weights' data. `kiln tune` searches the Opts of exactly these kernels. The last
// `run_bound_values` outputs are the values of run-bound variables, named after them: the kernels
// those variables size are ordered after them (order_run_bound_kernels).
struct PlanSchedule {
  std::vector<Tensor> values;
  Schedule schedule;
};
PlanSchedule schedule_plan(const std::vector<std::pair<std::string, Tensor>>& outputs,
                           const PlanWriteOptions& options = {}, size_t run_bound_values = 0);

// Schedules `outputs` (no realize), compiles and links their kernels for the host CPU, and lays
// out the plan: every schedule buffer is a graph input (one of `inputs`, made with graph_input),
// a graph output, a weight (a buffer with data: its bytes are stored in the plan) or an
// intermediate (an offset in the arena). Equal graphs give byte-identical plans. Throws UserError
// when an output is not defined or an input is not a graph_input placeholder.
std::string write_plan(const std::vector<std::pair<std::string, Tensor>>& inputs,
                       const std::vector<std::pair<std::string, Tensor>>& outputs,
                       const PlanWriteOptions& options = {});

}  // namespace kiln
