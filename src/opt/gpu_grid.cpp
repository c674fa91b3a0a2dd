// Every output index its own GPU thread; see gpu_grid.h.
#include "opt/gpu_grid.h"

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>

#include "ir/build.h"
#include "ir/evaluate.h"
#include "ir/substitute.h"
#include "opt/opt.h"
#include "passes/symbolic.h"
#include "schedule/schedule.h"

namespace kiln {

namespace {

constexpr int64_t kWarp = 32;

// A load from or store to a kernel buffer, and how often one thread makes it: the product of the
// reduce loops its index runs over.
struct Access {
  const UOp* index;  // the INDEX node
  double per_thread;
  bool store;
};

std::vector<Access> buffer_accesses(const UOpPtr& kernel) {
  std::vector<Access> accesses;
  for (const UOp* node : toposort(kernel)) {
    if (node->op() != Ops::LOAD && node->op() != Ops::STORE) continue;
    const UOp* index = node->src(0).get();
    if (index->op() != Ops::INDEX || index->src(0)->op() != Ops::DEFINE_GLOBAL) continue;
    double per_thread = 1;
    for (const UOp* inner : toposort(index->src(1)))
      if (inner->op() == Ops::RANGE && inner->arg_int() >= kFirstReduceAxis && inner->src(0)->is_const())
        per_thread *= static_cast<double>(inner->src(0)->const_int());
    accesses.push_back({index, per_thread, node->op() == Ops::STORE});
  }
  return accesses;
}

// 32-byte memory sectors that one warp's access touches when `axis` varies fastest across its
// threads (the other axes at 0): one for a value all threads share, one per 8 contiguous f32s, up
// to one per thread; one per thread where the address depends on memory.
double sectors_per_warp(const UOp* index, const UOp* axis) {
  int64_t lanes = std::min<int64_t>(kWarp, axis->src(0)->const_int());
  int64_t element_bytes = index->src(0)->dtype().pointee().scalar_bytes();
  std::unordered_map<const UOp*, int128> at;
  for (const UOp* node : toposort(index->src(1)))
    if (node->op() == Ops::RANGE) at[node] = 0;
  std::set<int128> sectors;
  for (int64_t lane = 0; lane < lanes; ++lane) {
    at[axis] = lane;
    std::optional<ScalarValue> element = evaluate(index->src(1), {}, &at);
    if (!element) return kWarp;
    int128 byte = element->integer * element_bytes;
    sectors.insert(byte >= 0 ? byte / 32 : (byte - 31) / 32);
  }
  return static_cast<double>(sectors.size());
}

// Below this many outputs a GPU's multiprocessors mostly idle (an H200 holds 270K threads), so a
// long reduction gets a warp per output; from this many reduction steps a warp has work for each
// lane (BERT's LayerNorm rows: 128 outputs of 768 steps took 120 us a launch on 128 threads).
constexpr int64_t kFewOutputs = 16384;
constexpr int64_t kLongReduction = 64;

// A REDUCE that one warp can share: f32 ADD or MAX over one constant range of whole warps.
bool shares_across_warp(const UOp* node, int64_t warp) {
  if (node->op() != Ops::REDUCE || node->src_count() != 2 || node->dtype() != dtypes::f32) return false;
  if (node->arg_op() != Ops::ADD && node->arg_op() != Ops::MAX) return false;
  const UOpPtr& end = node->src(1)->src(0);
  return end->is_const() && end->const_int() >= kLongReduction && end->const_int() % warp == 0;
}

// `kernel` with each REDUCE that shares_across_warp split across the lanes of a warp: lane l sums
// steps l, l + W, l + 2W, … and a butterfly of SHUFFLE_XORs combines the lanes, so every lane holds
// the whole result (and stores the same value: the grid guard keeps whole warps in or out).
UOpPtr split_reductions_across_warp(const UOpPtr& kernel, const UOpPtr& lane, int64_t warp) {
  std::unordered_map<const UOp*, UOpPtr> replaced;
  for (const UOp* node : toposort(kernel)) {
    if (!shares_across_warp(node, warp)) continue;
    const UOp* steps = node->src(1).get();
    UOpPtr lane_steps = range(steps->src(0)->const_int() / warp, steps->arg_int());
    UOpPtr body = substitute(node->src(0), {{steps, lane_steps * warp + lane}});
    UOpPtr partial = UOp::make(Ops::REDUCE, node->dtype(), {body, lane_steps}, node->arg_op());
    for (int64_t offset = warp / 2; offset >= 1; offset /= 2)
      partial = alu(node->arg_op(), partial, UOp::make(Ops::SHUFFLE_XOR, partial->dtype(), {partial}, offset));
    replaced.emplace(node, partial);
  }
  return replaced.empty() ? kernel : substitute(kernel, replaced);
}

}  // namespace

UOpPtr merge_output_axes_into_grid(const UOpPtr& kernel, int warp_size) {
  std::vector<const UOp*> axes;
  for (const UOp* range : kernel_ranges(kernel))
    if (range->arg_int() < kFirstReduceAxis) {
      if (!range->src(0)->is_const()) return kernel;  // symbolic shapes do not reach the GPU renderers yet
      axes.push_back(range);
    }
  int64_t total = 1;
  for (const UOp* axis : axes) total *= axis->src(0)->const_int();
  bool per_warp = warp_size > 1 && total <= kFewOutputs &&
                  std::ranges::any_of(toposort(kernel), [&](const UOp* node) { return shares_across_warp(node, warp_size); });
  if (axes.size() < 2 && !per_warp) return kernel;
  std::vector<Access> accesses = buffer_accesses(kernel);
  // The outer axes by the first store's strides, largest outermost (an axis it does not step by
  // constantly counts as the largest; ties keep the scheduler's order), so the grid walks the
  // output in memory order.
  const Access* store = nullptr;
  for (const Access& access : accesses)
    if (store == nullptr && access.store) store = &access;
  auto store_stride = [&](const UOp* axis) {
    std::optional<int64_t> step = store == nullptr ? std::nullopt : constant_step(store->index->src(1), axis);
    return step ? std::abs(*step) : std::numeric_limits<int64_t>::max();
  };
  std::stable_sort(axes.begin(), axes.end(), [&](const UOp* a, const UOp* b) { return store_stride(a) > store_stride(b); });
  // The fastest axis is the one whose warps touch the fewest memory sectors over a thread's whole
  // run: a reduction's loads repeat per step, its store once. BERT's key projection stores
  // (head, d, s) with s contiguous, but with s fastest every reduction step read 32 rows of the
  // input 3 KB apart: 458 GFLOP/s on an H200, where d fastest reads its weight row contiguously.
  auto traffic = [&](const UOp* axis) {
    double sectors = 0;
    for (const Access& access : accesses) sectors += access.per_thread * sectors_per_warp(access.index, axis);
    return sectors;
  };
  if (axes.size() >= 2) {
    size_t fastest = axes.size() - 1;
    for (size_t a = 0; a + 1 < axes.size(); ++a)
      if (traffic(axes[a]) < traffic(axes[fastest])) fastest = a;
    std::rotate(axes.begin() + static_cast<std::ptrdiff_t>(fastest),
                axes.begin() + static_cast<std::ptrdiff_t>(fastest) + 1, axes.end());
  }

  // With a warp per output, thread t serves output t / W as lane t % W.
  UOpPtr grid = range(per_warp ? total * warp_size : total, 0);
  UOpPtr output = per_warp ? grid / warp_size : grid;
  std::unordered_map<const UOp*, UOpPtr> replaced;
  int64_t inner = total;
  for (size_t a = 0; a < axes.size(); ++a) {
    int64_t extent = axes[a]->src(0)->const_int();
    inner /= extent;
    UOpPtr index = inner == 1 ? output : output / inner;
    if (a != 0) index = index % extent;
    replaced.emplace(axes[a], index);
  }
  UOpPtr merged = substitute(kernel, replaced);
  return per_warp ? split_reductions_across_warp(merged, grid % warp_size, warp_size) : merged;
}

}  // namespace kiln
