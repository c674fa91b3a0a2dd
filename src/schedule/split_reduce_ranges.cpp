// Splitting a reduce loop read through `r / c` and `r % c` (split_reduce_ranges.h).
#include "schedule/split_reduce_ranges.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/opt.h"
#include "passes/linear_terms.h"
#include "schedule/schedule.h"

namespace kiln {

namespace {

// The one divisor that every IDIV and MOD of `target` by a constant uses, when it splits the
// constant extent of `target` evenly into parts of at least 2; 0 otherwise.
int64_t only_divisor(const std::vector<const UOp*>& nodes, const UOp* target) {
  if (!target->src(0)->is_const()) return 0;
  auto extent = static_cast<int64_t>(target->src(0)->const_int());
  std::set<int64_t> divisors;
  for (const UOp* node : nodes)
    if ((node->op() == Ops::IDIV || node->op() == Ops::MOD) && node->src(0).get() == target) {
      if (!node->src(1)->is_const()) return 0;
      divisors.insert(static_cast<int64_t>(node->src(1)->const_int()));
    }
  if (divisors.size() != 1) return 0;
  int64_t divisor = *divisors.begin();
  if (divisor <= 1 || divisor >= extent || extent % divisor != 0) return 0;
  return divisor;
}

// Whether some address reads `target` in permuted order: a sum holding both target / c and
// target % c in which the remainder's coefficient is the larger one (a channel shuffle's
// (c % g)·F + c / g). A blocked layout, (c / 16)·256 + c % 16 (a conv's filter panels), keeps
// the order within each block; the optimisation layer's vector of 16 removes its division.
bool read_permuted(const std::vector<const UOp*>& nodes, const UOp* target, int64_t divisor) {
  for (const UOp* node : nodes) {
    if (node->op() != Ops::INDEX || node->src_count() < 2) continue;
    int128 quotient = 0;
    int128 remainder = 0;
    for (const LinearTerm& term : canonical_sum(node->src(1)).terms) {
      const UOp* base = term.base.get();
      if ((base->op() != Ops::IDIV && base->op() != Ops::MOD) || base->src(0).get() != target ||
          !base->src(1)->is_const() || base->src(1)->const_int() != divisor)
        continue;
      (base->op() == Ops::IDIV ? quotient : remainder) = term.coefficient < 0 ? -term.coefficient : term.coefficient;
    }
    if (quotient != 0 && remainder > quotient) return true;
  }
  return false;
}

}  // namespace

UOpPtr split_reduce_ranges(const UOpPtr& kernel) {
  std::vector<const UOp*> nodes = toposort(kernel);
  const UOp* innermost = nullptr;
  int64_t last_axis = -1;
  for (const UOp* node : nodes) {
    if (node->op() != Ops::RANGE) continue;
    last_axis = std::max(last_axis, node->arg_int());
    if (node->arg_int() >= kFirstReduceAxis && node->src(0)->is_const() &&
        (innermost == nullptr || node->arg_int() > innermost->arg_int()))
      innermost = node;
  }
  if (innermost == nullptr) return kernel;
  int64_t divisor = only_divisor(nodes, innermost);
  if (divisor == 0) return kernel;
  auto extent = static_cast<int64_t>(innermost->src(0)->const_int());
  return split_range(kernel, innermost, range(extent / divisor, last_axis + 1), range(divisor, last_axis + 2));
}

UOpPtr split_output_ranges(const UOpPtr& kernel) {
  UOpPtr current = kernel;
  // Each split adds one range and removes its divisions; the bound only guards the loop.
  for (int splits = 0; splits < 64; ++splits) {
    std::vector<const UOp*> nodes = toposort(current);
    std::vector<const UOp*> outputs;
    for (const UOp* node : nodes)
      if (node->op() == Ops::RANGE && node->arg_int() < kFirstReduceAxis) outputs.push_back(node);
    std::sort(outputs.begin(), outputs.end(), [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });
    const UOp* target = nullptr;
    int64_t divisor = 0;
    for (const UOp* output : outputs) {
      divisor = only_divisor(nodes, output);
      if (divisor != 0 && read_permuted(nodes, output, divisor)) {
        target = output;
        break;
      }
    }
    if (target == nullptr) return current;
    int64_t axis = target->arg_int();
    std::unordered_map<const UOp*, UOpPtr> moved;
    for (const UOp* output : outputs)
      if (output->arg_int() > axis) moved.emplace(output, range(output->src(0), output->arg_int() + 1));
    UOpPtr shifted = moved.empty() ? current : substitute(current, moved);
    const UOp* shifted_target = nullptr;
    for (const UOp* node : toposort(shifted))
      if (node->op() == Ops::RANGE && node->arg_int() == axis) shifted_target = node;
    auto extent = static_cast<int64_t>(target->src(0)->const_int());
    current = split_range(shifted, shifted_target, range(extent / divisor, axis), range(divisor, axis + 1));
  }
  return current;
}

}  // namespace kiln
