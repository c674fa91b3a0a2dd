// optimize_schedule: per kernel, the tuning database's Opts or the heuristics'; see optimize_schedule.h.
#include "opt/optimize_schedule.h"

#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "opt/gpu_grid.h"
#include "opt/gpu_tensor_cores.h"
#include "opt/gpu_tiles.h"
#include "opt/heuristics.h"
#include "opt/mma_layout.h"
#include "opt/padded_loads.h"
#include "passes/symbolic.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/parallel_tasks.h"

namespace kiln {

namespace {

// `kernel` with `changed` as its AST. The symbol names the code: the changed kernel gets the hash
// of its own AST in place of the scheduler's, so it never shares a symbol with the original one in
// a process or a plan.
void replace_kernel_ast(ScheduledKernel& kernel, const UOpPtr& changed) {
  std::string name = kernel.name();
  size_t suffix = name.rfind('_');
  char hash[20];
  std::snprintf(hash, sizeof(hash), "_%08llx", static_cast<unsigned long long>(changed->hash() & 0xffffffffu));
  name = (suffix == std::string::npos ? name : name.substr(0, suffix)) + hash;
  kernel.ast = UOp::make(Ops::SINK, dtypes::void_, changed->srcs(), name);
  kernel.parallel_extent = parallel_extent_of(kernel.ast);
  kernel.variables = kernel_variables(kernel.ast);
}

}  // namespace

void apply_kernel_opts(ScheduledKernel& kernel, const std::vector<Opt>& opts) {
  if (opts.empty()) {
    kernel.opts.clear();
    return;
  }
  replace_kernel_ast(kernel, unmask_padded_loads(apply_opts(kernel.ast, opts)));
  kernel.opts = opts;
}

namespace {

// Optimises one kernel in place; returns whether its opts came from the tuning database.
bool optimize_kernel(ScheduledKernel& kernel, const TargetCaps& caps, const OptimizeOptions& options, bool enabled) {
  SimplifyMemo memo;  // the heuristics' candidates simplify the same expressions again and again
  std::vector<Opt> opts;
  const TuningEntry* tuned = nullptr;
  if (enabled && options.tuning != nullptr) tuned = options.tuning->find(tuning_key(kernel.ast, options.target_id));
  if (tuned != nullptr) {
    // Which rows each thread computes is a choice across kernels (row blocks, heuristics.h), which
    // `kiln tune` timing one kernel at a time cannot see: it is made on the entry's opts too.
    opts = with_thread_row_blocks(kernel.ast, tuned->opts, caps);
  } else if (enabled) {
    opts = hand_coded_opts(kernel.ast, caps);
  }
  std::string name = kernel.name();
  try {
    apply_kernel_opts(kernel, opts);
  } catch (const InvalidOpt& error) {
    if (tuned == nullptr) throw;  // the heuristics' own choice: a bug, reported as it is
    throw TuningDbError(str_cat(options.tuning->source(), ":", tuned->line, ": the entry for kernel ", name,
                                " does not apply to it: ", error.what()));
  }
  if (debug_level() >= 3) {
    // Both names: the opts change the kernel's name, and the later lines (compile, profile) use the new one.
    std::string text;
    for (const Opt& opt : opts) text += (text.empty() ? "" : ", ") + opt.text();
    debug_print(str_cat("opts ", name, " -> ", kernel.name(), " (", caps.name, tuned ? ", tuning database" : "", "): ",
                        text.empty() ? "none" : text));
  }
  if (caps.output_grid && opts.empty()) {
    TensorCoreKernel cores =
        caps.tensor_cores ? gpu_tensor_cores(kernel.ast, caps.bf16_tensor_cores) : TensorCoreKernel{kernel.ast};
    bool on_cores = cores.lane_axis >= 0;
    // A tensor-core kernel's row and column tiles are register-tiled like any output axes: a
    // warp then computes several tiles, reusing each operand's fragments (docs/backends.md).
    UOpPtr tiled = gpu_register_tiles(cores.ast, caps.register_tile, caps.register_tile_threads);
    GridKernel merged =
        merge_output_axes_into_grid(tiled, caps.warp_size, caps.group_size, cores.lane_axis, caps.split_reductions);
    if (merged.ast != kernel.ast) replace_kernel_ast(kernel, merged.ast);
    kernel.group_size = merged.group_size;
    // Without warps (OpenCL's emulation) a work-group is the warp whose lanes share a tile.
    if (on_cores && caps.warp_size == 0) kernel.group_size = mma::kLanes;
  }
  return tuned != nullptr;
}

}  // namespace

OptimizeReport optimize_schedule(Schedule& schedule, const TargetCaps& caps, const OptimizeOptions& options) {
  const char* setting = std::getenv("KILN_OPT");
  bool enabled = setting == nullptr || std::string(setting) != "0";
  OptimizeReport report;
  report.kernels = schedule.kernels.size();
  if (options.tuning != nullptr) KILN_ASSERT(!options.target_id.empty(), "a tuning database needs a target id");
  // A model's repeated blocks give kernels with one AST (hash-consed: one node), which get the
  // same opts: each distinct AST is optimised once, on several threads, and its repeats copy it.
  std::unordered_map<const UOp*, size_t> first_with_ast;
  std::vector<size_t> distinct;
  std::vector<size_t> first_of(schedule.kernels.size());
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    auto [first, added] = first_with_ast.emplace(schedule.kernels[k].ast.get(), k);
    if (added) distinct.push_back(k);
    first_of[k] = first->second;
  }
  std::vector<char> tuned(schedule.kernels.size(), 0);
  run_tasks_in_parallel(distinct.size(), compile_thread_count(), [&](size_t d) {
    tuned[distinct[d]] = optimize_kernel(schedule.kernels[distinct[d]], caps, options, enabled) ? 1 : 0;
  });
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    ScheduledKernel& kernel = schedule.kernels[k];
    size_t first = first_of[k];
    if (first != k) {
      const ScheduledKernel& optimized = schedule.kernels[first];
      kernel.ast = optimized.ast;
      kernel.opts = optimized.opts;
      kernel.parallel_extent = optimized.parallel_extent;
      kernel.variables = optimized.variables;
      kernel.group_size = optimized.group_size;
      tuned[k] = tuned[first];
    }
    report.from_tuning += tuned[k];
  }
  return report;
}

}  // namespace kiln
