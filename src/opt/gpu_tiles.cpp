// Register tiles for GPU kernels; see gpu_tiles.h.
#include "opt/gpu_tiles.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/opt.h"
#include "schedule/schedule.h"

namespace kiln {

namespace {

bool is_output_axis(const UOp* range) { return range->arg_int() < kFirstReduceAxis; }
bool is_reduce_axis(const UOp* range) { return range->arg_int() >= kFirstReduceAxis && range->arg_int() < kFirstUpcastAxis; }

// For each load of a kernel buffer made once per reduction step (its index depends on a reduce
// range): the output ranges its index depends on.
std::vector<std::set<const UOp*>> step_loads(const UOpPtr& kernel) {
  std::unordered_map<const UOp*, std::set<const UOp*>> ranges = open_ranges(kernel);
  std::vector<std::set<const UOp*>> loads;
  for (const UOp* node : toposort(kernel)) {
    if (node->op() != Ops::LOAD) continue;
    const UOp* index = node->src(0).get();
    if (index->op() != Ops::INDEX || index->src(0)->op() != Ops::DEFINE_GLOBAL) continue;
    const std::set<const UOp*>& used = ranges[index];
    if (std::ranges::none_of(used, is_reduce_axis)) continue;
    std::set<const UOp*> outputs;
    std::ranges::copy_if(used, std::inserter(outputs, outputs.end()), is_output_axis);
    loads.push_back(std::move(outputs));
  }
  return loads;
}

}  // namespace

UOpPtr gpu_register_tiles(const UOpPtr& kernel, int largest_tile, int64_t minimum_threads) {
  if (largest_tile < 2) return kernel;
  // The tiled axes are constant ones; a symbolic kernel (a batch or sequence of run-time size)
  // counts its threads with every variable at its maximum, the sizes its plan is laid out for.
  std::vector<const UOp*> axes;
  int64_t total = 1;
  int64_t next_unroll = kFirstUnrollAxis;
  for (const UOp* range : kernel_ranges(kernel)) {
    if (range->arg_int() >= kFirstUnrollAxis) next_unroll = std::max(next_unroll, static_cast<int64_t>(range->arg_int()) + 1);
    if (!is_output_axis(range)) continue;
    total = std::min<int64_t>(total * static_cast<int64_t>(range->src(0)->vmax()), int64_t{1} << 40);
    if (range->src(0)->is_const()) axes.push_back(range);
  }
  std::vector<std::set<const UOp*>> loads = step_loads(kernel);
  // An axis is worth copying when some step's load does not depend on it: the copies share it.
  std::vector<const UOp*> shared;
  for (const UOp* axis : axes)
    if (std::ranges::any_of(loads, [&](const std::set<const UOp*>& load) { return !load.contains(axis); }))
      shared.push_back(axis);
  if (shared.empty()) return kernel;
  // The two longest such axes (ties: the scheduler's order), so the tile's copies divide them.
  std::ranges::stable_sort(shared, [](const UOp* a, const UOp* b) { return a->src(0)->const_int() > b->src(0)->const_int(); });
  if (shared.size() > 2) shared.resize(2);

  // The largest tile, most square first, that divides the axes and leaves enough threads.
  std::vector<std::pair<int64_t, int64_t>> choices;
  for (int64_t a = largest_tile; a >= 1; a /= 2)
    for (int64_t b = largest_tile; b >= 1; b /= 2)
      if (a * b > 1 && (shared.size() == 2 || b == 1)) choices.emplace_back(a, b);
  std::ranges::stable_sort(choices, [](const auto& x, const auto& y) {
    if (x.first * x.second != y.first * y.second) return x.first * x.second > y.first * y.second;
    return std::max(x.first, x.second) < std::max(y.first, y.second);
  });
  for (auto [a, b] : choices) {
    int64_t factors[2] = {a, b};
    bool fits = total / (a * b) >= minimum_threads;
    for (size_t s = 0; s < shared.size(); ++s) fits = fits && shared[s]->src(0)->const_int() % factors[s] == 0;
    if (!fits) continue;
    std::unordered_map<const UOp*, UOpPtr> tiled;
    for (size_t s = 0; s < shared.size(); ++s) {
      if (factors[s] == 1) continue;
      auto extent = static_cast<int64_t>(shared[s]->src(0)->const_int());
      UOpPtr outer = range(extent / factors[s], shared[s]->arg_int());
      UOpPtr copy = range(factors[s], next_unroll++);
      tiled.emplace(shared[s], copy * (extent / factors[s]) + outer);
    }
    return substitute(kernel, tiled);
  }
  return kernel;
}

}  // namespace kiln
