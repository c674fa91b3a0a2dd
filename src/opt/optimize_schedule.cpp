// optimize_schedule: per kernel, the tuning database's Opts or the heuristics'; see optimize_schedule.h.
#include "opt/optimize_schedule.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <unordered_map>

#include "opt/amx_tiles.h"
#include "opt/gpu_grid.h"
#include "opt/gpu_tensor_cores.h"
#include "opt/gpu_tiles.h"
#include "opt/heuristics.h"
#include "opt/mma_layout.h"
#include "opt/padded_loads.h"
#include "opt/row_remainders.h"
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

void print_opts_choice(const std::string& name, const ScheduledKernel& kernel, const TargetCaps& caps, bool tuned,
                       const char* what) {
  // Both names: the opts change the kernel's name, and the later lines (compile, profile) use the new one.
  std::string text;
  for (const Opt& opt : kernel.opts) text += (text.empty() ? "" : ", ") + opt.text();
  debug_print(str_cat("opts ", name, " -> ", kernel.name(), what, " (", caps.name, tuned ? ", tuning database" : "",
                      "): ", text.empty() ? "none" : text));
}

struct OptimizedKernel {
  bool tuned = false;                  // the opts came from the tuning database
  bool amx = false;                    // the kernel runs on AMX tiles
  std::optional<ScheduledKernel> tail; // the remainder kernel to run right after it (row_remainders.h)
};

// The kernel's remainder kernel where its heuristic opts block a symbolic row loop that the block
// does not divide (row_remainders.h): `kernel` becomes the main kernel over the full blocks.
std::optional<ScheduledKernel> peel_row_remainder(ScheduledKernel& kernel, const std::vector<Opt>& opts,
                                                  const TargetCaps& caps) {
  std::optional<RowRemainderSplit> peeled = split_row_remainder(kernel.ast, opts);
  if (!peeled) return std::nullopt;
  std::optional<std::vector<Opt>> tail_opts = with_rows_off_thread_axis(peeled->tail, hand_coded_opts(peeled->tail, caps));
  if (!tail_opts) return std::nullopt;
  ScheduledKernel tail = kernel;
  tail.finishes_previous = true;
  tail.estimated_flops *= peeled->tail_share;
  tail.estimated_bytes *= peeled->tail_share;
  replace_kernel_ast(tail, peeled->tail);
  apply_kernel_opts(tail, *tail_opts);
  replace_kernel_ast(kernel, peeled->main);
  apply_kernel_opts(kernel, peeled->main_opts);
  return tail;
}

// Optimises one kernel in place (and peels its remainder kernel off where it has one).
OptimizedKernel optimize_kernel(ScheduledKernel& kernel, const TargetCaps& caps, const OptimizeOptions& options,
                                bool enabled) {
  SimplifyMemo memo;  // the heuristics' candidates simplify the same expressions again and again
  std::vector<Opt> opts;
  // A bf16 matmul on AMX tiles (amx_tiles.h): the transform fixes the kernel's whole layout, which
  // neither the heuristics nor a tuning database's entries for the plain kernel describe.
  if (enabled && caps.amx_bf16 && !caps.output_grid) {
    if (std::optional<AmxKernel> tiles = amx_tile_kernel(kernel.ast)) {
      std::string name = kernel.name();
      replace_kernel_ast(kernel, tiles->ast);
      apply_kernel_opts(kernel, tiles->opts);
      if (debug_level() >= 3) print_opts_choice(name, kernel, caps, false, ", on AMX tiles");
      OptimizedKernel result;
      result.amx = true;
      return result;
    }
  }
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
  OptimizedKernel result;
  result.tuned = tuned != nullptr;
  // A tuning database's entry is the clamped kernel's, timed as one: it stays one.
  if (tuned == nullptr && !caps.output_grid) result.tail = peel_row_remainder(kernel, opts, caps);
  if (!result.tail) {
    try {
      apply_kernel_opts(kernel, opts);
    } catch (const InvalidOpt& error) {
      if (tuned == nullptr) throw;  // the heuristics' own choice: a bug, reported as it is
      throw TuningDbError(str_cat(options.tuning->source(), ":", tuned->line, ": the entry for kernel ", name,
                                  " does not apply to it: ", error.what()));
    }
  }
  if (debug_level() >= 3) {
    print_opts_choice(name, kernel, caps, result.tuned, result.tail ? ", its full row blocks" : "");
    if (result.tail) print_opts_choice(name, *result.tail, caps, false, ", the rows left");
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
  return result;
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
  std::vector<OptimizedKernel> optimized(schedule.kernels.size());
  run_tasks_in_parallel(distinct.size(), compile_thread_count(), [&](size_t d) {
    optimized[distinct[d]] = optimize_kernel(schedule.kernels[distinct[d]], caps, options, enabled);
  });
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    if (first_of[k] == k) continue;
    ScheduledKernel& kernel = schedule.kernels[k];
    const ScheduledKernel& chosen = schedule.kernels[first_of[k]];
    kernel.ast = chosen.ast;
    kernel.opts = chosen.opts;
    kernel.parallel_extent = chosen.parallel_extent;
    kernel.variables = chosen.variables;
    kernel.group_size = chosen.group_size;
  }
  // A remainder kernel goes right after its main one: it reads and writes the same buffers, so the
  // memory plan's lifetimes (by kernel position, made before the opts) still hold.
  std::vector<ScheduledKernel> kernels;
  kernels.reserve(schedule.kernels.size());
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const OptimizedKernel& result = optimized[first_of[k]];
    report.from_tuning += result.tuned ? 1 : 0;
    report.amx_kernels += result.amx ? 1 : 0;
    kernels.push_back(std::move(schedule.kernels[k]));
    if (result.tail) {
      ScheduledKernel tail = *result.tail;
      tail.buffers = kernels.back().buffers;
      tail.sources = kernels.back().sources;
      kernels.push_back(std::move(tail));
      ++report.remainder_kernels;
    }
  }
  schedule.kernels = std::move(kernels);
  return report;
}

}  // namespace kiln
