// Every output index its own GPU thread; see gpu_grid.h.
#include "opt/gpu_grid.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/opt.h"
#include "passes/symbolic.h"
#include "schedule/schedule.h"

namespace kiln {

namespace {

// The first store into a kernel buffer: the index whose strides order the grid.
const UOp* first_global_store(const UOpPtr& kernel) {
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::STORE && node->src(0)->op() == Ops::INDEX && node->src(0)->src(0)->op() == Ops::DEFINE_GLOBAL)
      return node;
  return nullptr;
}

}  // namespace

UOpPtr merge_output_axes_into_grid(const UOpPtr& kernel) {
  std::vector<const UOp*> axes;
  for (const UOp* range : kernel_ranges(kernel))
    if (range->arg_int() < kFirstReduceAxis) {
      if (!range->src(0)->is_const()) return kernel;  // symbolic shapes do not reach the GPU renderers yet
      axes.push_back(range);
    }
  if (axes.size() < 2) return kernel;
  // Largest stride outermost; an axis the store does not step by constantly counts as the largest,
  // and ties keep the scheduler's order.
  const UOp* store = first_global_store(kernel);
  auto stride = [&](const UOp* axis) {
    std::optional<int64_t> step = store == nullptr ? std::nullopt : constant_step(store->src(0)->src(1), axis);
    return step ? std::abs(*step) : std::numeric_limits<int64_t>::max();
  };
  std::sort(axes.begin(), axes.end(), [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });
  std::stable_sort(axes.begin(), axes.end(), [&](const UOp* a, const UOp* b) { return stride(a) > stride(b); });

  int64_t total = 1;
  for (const UOp* axis : axes) total *= axis->src(0)->const_int();
  UOpPtr grid = range(total, 0);
  std::unordered_map<const UOp*, UOpPtr> replaced;
  int64_t inner = total;
  for (size_t a = 0; a < axes.size(); ++a) {
    int64_t extent = axes[a]->src(0)->const_int();
    inner /= extent;
    UOpPtr index = inner == 1 ? grid : grid / inner;
    if (a != 0) index = index % extent;
    replaced.emplace(axes[a], index);
  }
  return substitute(kernel, replaced);
}

}  // namespace kiln
