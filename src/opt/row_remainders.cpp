// Remainder kernels for symbolic row blocks; see row_remainders.h.
#include "opt/row_remainders.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "ir/build.h"
#include "ir/substitute.h"
#include "passes/symbolic.h"
#include "support/debug.h"

namespace kiln {

namespace {

// A block of fewer rows is not worth a second launch: its padding is at most 2 rows.
constexpr int64_t kSmallestPeeledBlock = 4;

const UOp* range_with_axis(const UOpPtr& kernel, int64_t axis) {
  for (const UOp* range : kernel_ranges(kernel))
    if (range->arg_int() == axis) return range;
  return nullptr;
}

std::set<int64_t> loop_axes(const UOpPtr& kernel) {
  std::set<int64_t> axes;
  for (const UOp* range : kernel_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Loop) axes.insert(range->arg_int());
  return axes;
}

// The extent of `kernel`'s thread axis (axis 0) with every variable at its maximum, as the plan
// records it (docs/plan-format.md); 1 where the kernel has no axis 0, nullopt where the opts fail.
std::optional<int64_t> thread_extent_at_maxima(const UOpPtr& kernel, const std::vector<Opt>& opts) {
  UOpPtr optimised;
  try {
    optimised = apply_opts(kernel, opts);
  } catch (const InvalidOpt&) {
    return std::nullopt;
  }
  const UOp* thread_axis = range_with_axis(optimised, 0);
  if (thread_axis == nullptr) return 1;
  std::unordered_map<const UOp*, UOpPtr> maxima;
  for (const UOp* node : toposort(thread_axis->src(0)))
    if (node->op() == Ops::DEFINE_VAR) maxima[node] = const_int(dtypes::index, node->arg_variable().max);
  UOpPtr extent = simplify(substitute(thread_axis->src(0), maxima));
  return extent->is_const() ? static_cast<int64_t>(extent->const_int()) : 1;
}

}  // namespace

std::optional<std::vector<Opt>> with_rows_off_thread_axis(const UOpPtr& tail, std::vector<Opt> opts) {
  // The heuristics' last opts choose the thread axis (SWAP, MERGE: thread_blocks.cpp); a merge of
  // the rows with the columns has no iterations at the maxima either, so those go first.
  while (true) {
    std::optional<int64_t> extent = thread_extent_at_maxima(tail, opts);
    if (!extent) return std::nullopt;
    if (*extent >= 1) return opts;
    if (opts.empty() || (opts.back().op != OptOp::Merge && opts.back().op != OptOp::Swap)) break;
    opts.pop_back();
  }
  UOpPtr optimised = apply_opts(tail, opts);
  const UOp* widest = nullptr;
  for (const UOp* range : kernel_ranges(optimised))
    if (axis_kind(range->arg_int()) == AxisKind::Loop && range->arg_int() != 0 && range->src(0)->is_const() &&
        (widest == nullptr || range->src(0)->const_int() > widest->src(0)->const_int()))
      widest = range;
  if (widest == nullptr || widest->src(0)->const_int() < 2) return std::nullopt;
  opts.push_back({OptOp::Swap, 0, widest->arg_int()});
  std::optional<int64_t> extent = thread_extent_at_maxima(tail, opts);
  if (!extent || *extent < 1) return std::nullopt;
  return opts;
}

bool is_remainder_rows(const UOp* range) {
  const UOpPtr& end = range->src(0);
  return end->op() == Ops::MOD && end->src(1)->is_const();
}

std::optional<RowRemainderSplit> split_row_remainder(const UOpPtr& kernel, const std::vector<Opt>& opts) {
  if (env_integer("KILN_ROW_REMAINDERS", 1) == 0) return std::nullopt;
  UOpPtr ast = kernel;
  for (size_t i = 0; i < opts.size(); ++i) {
    const Opt& opt = opts[i];
    if (opt.op == OptOp::Split && axis_kind(opt.axis) == AxisKind::Loop && opt.amount >= kSmallestPeeledBlock) {
      const UOp* rows = range_with_axis(ast, opt.axis);
      const UOp* original = range_with_axis(kernel, opt.axis);
      // The loop must be the kernel's own, untouched by the opts before (a MERGE would have
      // changed its extent), so that peeling the kernel peels the loop the SPLIT takes.
      if (rows != nullptr && original != nullptr && rows->src(0) == original->src(0) && !rows->src(0)->is_const()) {
        const UOpPtr& end = rows->src(0);
        UOpPtr remainder = simplify(end % opt.amount);
        bool divides = remainder->is_const() && remainder->const_int() == 0;
        UOpPtr split = apply_opt(ast, opt);
        std::set<int64_t> before = loop_axes(ast), after = loop_axes(split);
        int64_t inner = -1;
        for (int64_t axis : after)
          if (!before.contains(axis)) inner = axis;
        bool unrolled = std::any_of(opts.begin() + static_cast<std::ptrdiff_t>(i) + 1, opts.end(), [&](const Opt& later) {
          return later.op == OptOp::Unroll && later.axis == inner;
        });
        UOpPtr full_rows = simplify(end / opt.amount * opt.amount);
        UOpPtr full_remainder = simplify(full_rows % opt.amount);
        bool exact_after = full_remainder->is_const() && full_remainder->const_int() == 0;
        if (divides || !unrolled || !exact_after) {
          ast = split;
          continue;
        }
        RowRemainderSplit peeled;
        peeled.main = simplify(substitute(kernel, {{original, range(full_rows, opt.axis)}}));
        peeled.main_opts = opts;
        peeled.tail_share = static_cast<double>(opt.amount - 1) / std::max(1.0, static_cast<double>(end->vmax()));
        peeled.tail = simplify(substitute(kernel, {{original, full_rows + range(remainder, opt.axis)}}));
        try {
          (void)apply_opts(peeled.main, peeled.main_opts);
        } catch (const InvalidOpt&) {
          return std::nullopt;  // the opts fit only the clamped form: keep it
        }
        return peeled;
      }
    }
    ast = apply_opt(ast, opt);
  }
  return std::nullopt;
}

}  // namespace kiln
