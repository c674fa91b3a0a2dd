// Splitting a reduce loop read through `r / c` and `r % c` (split_reduce_ranges.h).
#include "schedule/split_reduce_ranges.h"

#include <set>

#include "ir/build.h"
#include "opt/opt.h"
#include "schedule/schedule.h"

namespace kiln {

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
  auto extent = static_cast<int64_t>(innermost->src(0)->const_int());
  std::set<int64_t> divisors;
  for (const UOp* node : nodes)
    if ((node->op() == Ops::IDIV || node->op() == Ops::MOD) && node->src(0).get() == innermost &&
        node->src(1)->is_const())
      divisors.insert(static_cast<int64_t>(node->src(1)->const_int()));
  if (divisors.size() != 1) return kernel;
  int64_t divisor = *divisors.begin();
  if (divisor <= 1 || divisor >= extent || extent % divisor != 0) return kernel;

  return split_range(kernel, innermost, range(extent / divisor, last_axis + 1), range(divisor, last_axis + 2));
}

}  // namespace kiln
