// Every output index its own GPU thread; see gpu_grid.h.
#include "opt/gpu_grid.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>

#include "ir/build.h"
#include "ir/evaluate.h"
#include "ir/substitute.h"
#include "opt/opt.h"
#include "passes/symbolic.h"
#include "schedule/schedule.h"
#include "support/error.h"

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
// A symbolic kernel's addresses are evaluated with its variables at `variables` (their maxima).
double sectors_per_warp(const UOp* index, const UOp* axis, const std::unordered_map<std::string, int128>& variables) {
  int64_t lanes = std::min<int64_t>(kWarp, axis->src(0)->vmax());
  int64_t element_bytes = index->src(0)->dtype().pointee().scalar_bytes();
  std::unordered_map<const UOp*, int128> at;
  for (const UOp* node : toposort(index->src(1)))
    if (node->op() == Ops::RANGE) at[node] = 0;
  std::set<int128> sectors;
  for (int64_t lane = 0; lane < lanes; ++lane) {
    at[axis] = lane;
    std::optional<ScalarValue> element = evaluate(index->src(1), variables, &at);
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

// `partial` combined with op over the `warp` lanes of a warp by a butterfly of SHUFFLE_XORs: every
// lane then holds the result.
UOpPtr warp_butterfly(UOpPtr partial, Ops op, int64_t warp) {
  for (int64_t offset = warp / 2; offset >= 1; offset /= 2)
    partial = alu(op, partial, UOp::make(Ops::SHUFFLE_XOR, partial->dtype(), {partial}, offset));
  return partial;
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
    replaced.emplace(node, warp_butterfly(partial, node->arg_op(), warp));
  }
  return replaced.empty() ? kernel : substitute(kernel, replaced);
}

// The steps of a REDUCE over constant ranges (a conv's channels × kernel rows × columns, a pool's
// rows × columns), or 0 when a range is symbolic.
int64_t reduce_steps(const UOp* node) {
  int64_t steps = 1;
  for (size_t i = 1; i < node->src_count(); ++i) {
    const UOpPtr& end = node->src(i)->src(0);
    if (!end->is_const()) return 0;
    steps *= static_cast<int64_t>(end->const_int());
  }
  return steps;
}

// A REDUCE that a work-group can share through local memory: f32 ADD or MAX over constant ranges
// of at least kLongReduction steps in all, not inside another reduction's loop (its lanes would sit
// at different steps of that loop when they meet at the barrier).
bool shares_across_group(const UOp* node, const std::unordered_map<const UOp*, bool>& in_reduce_loop) {
  if (node->op() != Ops::REDUCE || node->src_count() < 2 || node->dtype() != dtypes::f32) return false;
  if (node->arg_op() != Ops::ADD && node->arg_op() != Ops::MAX) return false;
  return reduce_steps(node) >= kLongReduction && !in_reduce_loop.at(node);
}

// For each node: whether its value depends on a reduce RANGE that no REDUCE inside it closes, that
// is, whether it is computed inside some reduction's loop.
std::unordered_map<const UOp*, bool> inside_reduce_loops(const UOpPtr& kernel) {
  std::unordered_map<const UOp*, bool> inside;
  for (const auto& [node, ranges] : open_ranges(kernel))
    inside[node] = std::ranges::any_of(ranges, [](const UOp* range) { return range->arg_int() >= kFirstReduceAxis; });
  return inside;
}

// Below this many outputs a warp per output leaves most of a large GPU idle, and from this many
// steps a whole group of threads per output has work for each of them (a full sum, a softmax over
// thousands of classes).
constexpr int64_t kFewOutputsForGroups = 1024;
constexpr int64_t kVeryLongReduction = 4096;

// The work-group size for `kernel` (`total` outputs, up to kFewOutputs), or 0 for none:
// - Without warp shuffles (OpenCL C 1.2) a group is how few outputs share a long reduction at all.
//   Every lane reads all G partials after the barrier, so G is about the square root of the steps
//   (a lane's steps / G against G reads): a power of two from 8 to `largest`.
// - With shuffles, a warp per output stays where it applies (whole warps of steps), except for
//   very long reductions of very few outputs, which take `largest` threads; a reduction that is
//   not whole warps takes a group of whole warps with at least 8 steps per lane. Each warp's
//   butterfly leaves one partial in local memory, so the reads after the barrier are few.
int64_t group_size_for(const UOpPtr& kernel, int64_t total, int warp_size, int64_t largest) {
  if (total > kFewOutputs) return 0;
  std::unordered_map<const UOp*, bool> inside = inside_reduce_loops(kernel);
  int64_t steps = 0;
  bool whole_warps = false;
  for (const UOp* node : toposort(kernel)) {
    if (!shares_across_group(node, inside)) continue;
    steps = std::max(steps, reduce_steps(node));
    whole_warps = whole_warps || (warp_size > 1 && shares_across_warp(node, warp_size));
  }
  if (steps < kLongReduction) return 0;
  if (warp_size > 1) {
    if (total <= kFewOutputsForGroups && steps >= kVeryLongReduction) return largest;
    if (whole_warps) return 0;
    int64_t group = warp_size;
    while (group * 2 <= largest && group * 2 * 8 <= steps) group *= 2;
    return group;
  }
  int64_t group = 8;
  while (group * 2 <= largest && group * 2 * group * 2 <= steps) group *= 2;
  return group;
}

// The next unused reduce axis id of `kernel`.
int64_t next_reduce_axis(const UOpPtr& kernel) {
  int64_t next = kFirstReduceAxis;
  for (const UOp* range : kernel_ranges(kernel))
    if (range->arg_int() >= kFirstReduceAxis && range->arg_int() < kFirstUpcastAxis) next = std::max(next, range->arg_int() + 1);
  return next;
}

// `kernel` with each REDUCE that shares_across_group split across `group` lanes of a work-group:
// lane l reduces steps l, l + G, l + 2G, … (masked past the end), the lanes' partials meet in local
// memory (with warps, each warp's butterfly first, so one value per warp), a barrier, and every
// lane reduces its output's partials itself, so all hold the result and store the same value.
// Each such REDUCE has its own local buffer, so no barrier is needed before one is written.
// A work-group serves `outputs_per_group` outputs (split reductions; then `warp` is 1): thread
// `in_group` of the group writes slot in_group, and output o's partial of lane j is slot o + O·j.
UOpPtr split_reductions_across_group(const UOpPtr& kernel, const UOpPtr& lane, int64_t group, int warp,
                                     int64_t outputs_per_group = 1, const UOpPtr& in_group = nullptr) {
  std::unordered_map<const UOp*, bool> inside = inside_reduce_loops(kernel);
  std::unordered_map<const UOp*, UOpPtr> replaced;
  int64_t axis = next_reduce_axis(kernel);
  int64_t local_slot = 0;
  for (const UOp* node : toposort(kernel)) {
    if (!shares_across_group(node, inside)) continue;
    // Several ranges are walked as one of their product's length, the last (highest axis id, in
    // memory order innermost) fastest: range i is (step / inner_i) % extent_i.
    std::vector<const UOp*> ranges;
    for (size_t i = 1; i < node->src_count(); ++i) ranges.push_back(node->src(i).get());
    std::ranges::sort(ranges, {}, [](const UOp* r) { return r->arg_int(); });
    const UOp* steps = ranges.front();
    int64_t length = reduce_steps(node);
    auto walk = [&](const UOpPtr& flat, std::unordered_map<const UOp*, UOpPtr>& map) {
      int64_t inner = length;
      for (size_t i = 0; i < ranges.size(); ++i) {
        auto extent = static_cast<int64_t>(ranges[i]->src(0)->const_int());
        inner /= extent;
        UOpPtr at = inner == 1 ? flat : flat / inner;
        map.emplace(ranges[i], i == 0 ? at : at % extent);
      }
    };
    // A range of one step would simplify to a constant, which a REDUCE cannot run over: a lane
    // with one step (a shorter reduction of the same kernel) computes it without a loop.
    int64_t per_lane = (length + group - 1) / group;
    UOpPtr lane_steps = per_lane > 1 ? range(per_lane, steps->arg_int()) : nullptr;
    UOpPtr step = lane_steps ? lane_steps * group + lane : lane;
    std::unordered_map<const UOp*, UOpPtr> inner = replaced;  // reductions inside this one, already split
    UOpPtr partial;
    if (length % group == 0) {
      walk(step, inner);
      partial = substitute(node->src(0), inner);
    } else {
      // Past the end a lane reads the last step (in bounds) and contributes the identity.
      walk(minimum(step, length - 1), inner);
      UOpPtr identity = node->arg_op() == Ops::ADD ? const_float(dtypes::f32, 0)
                                                   : const_float(dtypes::f32, -std::numeric_limits<double>::infinity());
      partial = where(lt(step, length), substitute(node->src(0), inner), identity);
    }
    if (lane_steps) partial = UOp::make(Ops::REDUCE, node->dtype(), {partial, lane_steps}, node->arg_op());
    int64_t slots = group * outputs_per_group;
    UOpPtr slot = outputs_per_group > 1 ? in_group : lane;
    std::optional<UOpPtr> writer;
    if (warp > 1) {
      partial = warp_butterfly(partial, node->arg_op(), warp);
      slots = group / warp;
      slot = lane / warp;
      writer = eq(lane % warp, 0);
    }
    if (slots == 1) {  // a group of one warp: its butterfly gave every lane the result
      replaced.emplace(node, partial);
      continue;
    }
    UOpPtr local = UOp::make(Ops::DEFINE_LOCAL, dtypes::f32.ptr(AddrSpace::Local, slots), {}, local_slot++);
    std::vector<UOpPtr> where_to{local, slot};
    if (writer) where_to.push_back(*writer);
    UOpPtr written = UOp::make(Ops::STORE, dtypes::void_, {UOp::make(Ops::INDEX, local->dtype(), where_to), partial});
    UOpPtr barrier = UOp::make(Ops::BARRIER, dtypes::void_, {written});
    UOpPtr partials = range(outputs_per_group > 1 ? group : slots, axis++);
    UOpPtr at = outputs_per_group > 1 ? in_group % outputs_per_group + partials * outputs_per_group : partials;
    UOpPtr read = UOp::make(Ops::INDEX, local->dtype(), {UOp::make(Ops::AFTER, local->dtype(), {local, barrier}), at});
    replaced.emplace(node, UOp::make(Ops::REDUCE, node->dtype(), {UOp::make(Ops::LOAD, dtypes::f32, {read}), partials},
                                     node->arg_op()));
  }
  return replaced.empty() ? kernel : substitute(kernel, replaced);
}

// Split reductions (gpu_grid.h): from this many outputs the group rule stops, up to this many a
// large GPU still idles (an H200 holds 270K threads; ResNet-50's 1x1 2048->512 at 7x7 has 25K
// outputs of 2048 steps and ran at 200 GFLOP/s), for reductions at least this long, each slice
// keeping at least kSplitSliceSteps steps; slices are added until the grid has kSplitThreads.
constexpr int64_t kSplitMaxOutputs = 65536;
constexpr int64_t kSplitSteps = 512;
constexpr int64_t kSplitSliceSteps = 128;
constexpr int64_t kSplitThreads = 131072;
constexpr int64_t kSplitMaxSlices = 8;

struct SplitShape {
  int64_t slices = 0;             // threads per output (P); 0: no split
  int64_t outputs_per_group = 0;  // G / P
};

// How `kernel` (`total` outputs) splits its reductions across a work-group of `group_size`
// threads, if it does: slices and outputs per group both powers of two, the outputs a multiple of
// whole groups (so no group straddles the end), at least `min_outputs` outputs per group (a
// warp's lanes read neighbouring outputs), and no UNROLL copies (their reductions would share
// one local array).
SplitShape split_shape_for(const UOpPtr& kernel, int64_t total, int64_t group_size, int64_t min_outputs) {
  if (total <= kFewOutputs || total > kSplitMaxOutputs || group_size < 2) return {};
  for (const UOp* range : kernel_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Unroll) return {};
  std::unordered_map<const UOp*, bool> inside = inside_reduce_loops(kernel);
  int64_t steps = 0;
  for (const UOp* node : toposort(kernel))
    if (shares_across_group(node, inside)) steps = std::max(steps, reduce_steps(node));
  if (steps < kSplitSteps) return {};
  int64_t slices = 1;
  while (slices < kSplitMaxSlices && total * slices < kSplitThreads && steps / (slices * 2) >= kSplitSliceSteps &&
         group_size / (slices * 2) >= min_outputs)
    slices *= 2;
  if (slices < 2 || group_size % slices != 0) return {};
  int64_t outputs_per_group = group_size / slices;
  if (total % outputs_per_group != 0) return {};
  return {slices, outputs_per_group};
}

}  // namespace

GridKernel merge_output_axes_into_grid(const UOpPtr& kernel, int warp_size, int group_size, int64_t innermost_axis,
                                       bool split_reductions) {
  std::vector<const UOp*> axes;
  // A symbolic extent (a size variable's run-time value) merges into a grid of the extents'
  // product as any other. The rules for few outputs count them with every variable at its
  // maximum (fewer at run time only makes sharing a reduction pay more); split reductions need
  // whole groups of outputs, so a symbolic kernel takes none.
  bool symbolic = false;
  int64_t total = 1;
  for (const UOp* range : kernel_ranges(kernel))
    if (range->arg_int() < kFirstReduceAxis) {
      symbolic = symbolic || !range->src(0)->is_const();
      total = std::min<int64_t>(total * static_cast<int64_t>(range->src(0)->vmax()), int64_t{1} << 40);
      axes.push_back(range);
    }
  KILN_ASSERT(!symbolic || innermost_axis < 0, "a kernel with a fixed innermost axis has a symbolic extent");
  bool fixed = innermost_axis >= 0;
  int64_t group = group_size > 1 && !fixed ? group_size_for(kernel, total, warp_size, group_size) : 0;
  bool per_group = group > 1;
  bool per_warp = !fixed && !per_group && warp_size > 1 && total <= kFewOutputs &&
                  std::ranges::any_of(toposort(kernel), [&](const UOp* node) { return shares_across_warp(node, warp_size); });
  SplitShape split = split_reductions && !fixed && !symbolic && !per_group && !per_warp
                         ? split_shape_for(kernel, total, group_size, warp_size > 1 ? warp_size : 8)
                         : SplitShape{};
  bool per_slice = split.slices > 1;
  int64_t sharing = per_group ? group : per_warp ? warp_size : per_slice ? split.slices : 1;
  if (axes.size() < 2 && sharing == 1 && !fixed) return {kernel};
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
  std::unordered_map<std::string, int128> at_maxima;
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::DEFINE_VAR) at_maxima[node->arg_variable().name] = node->arg_variable().max;
  auto traffic = [&](const UOp* axis) {
    double sectors = 0;
    for (const Access& access : accesses) sectors += access.per_thread * sectors_per_warp(access.index, axis, at_maxima);
    return sectors;
  };
  KILN_ASSERT(!fixed || std::ranges::any_of(axes, [&](const UOp* axis) { return axis->arg_int() == innermost_axis; }),
              "the innermost axis ", innermost_axis, " is not an output axis of the kernel");
  if (axes.size() >= 2) {
    size_t fastest = axes.size() - 1;
    for (size_t a = 0; a + 1 < axes.size(); ++a)
      if (fixed ? axes[a]->arg_int() == innermost_axis : traffic(axes[a]) < traffic(axes[fastest])) fastest = a;
    std::rotate(axes.begin() + static_cast<std::ptrdiff_t>(fastest),
                axes.begin() + static_cast<std::ptrdiff_t>(fastest) + 1, axes.end());
  }

  // With a warp (a group) of W threads per output, thread t serves output t / W as lane t % W.
  // (A symbolic kernel's count of threads is an expression: `total` is at the maxima.)
  UOpPtr threads = const_int(dtypes::index, sharing);
  for (const UOp* axis : axes) threads = threads * axis->src(0);
  UOpPtr grid = range(simplify(threads), 0);
  // A split group of G threads serves G / P consecutive outputs: thread w of it takes output
  // w % (G / P), so neighbouring threads (a warp) take neighbouring outputs, and slice w / (G / P).
  UOpPtr output = per_slice ? grid / group_size * split.outputs_per_group + grid % split.outputs_per_group
                  : sharing > 1 ? grid / sharing
                                : grid;
  // Axis a is (output / inner_a) % extent_a, inner_a the product of the extents after it.
  std::unordered_map<const UOp*, UOpPtr> replaced;
  UOpPtr inner = const_int(dtypes::index, 1);
  for (size_t a = axes.size(); a-- > 0;) {
    UOpPtr index = inner->is_const() && inner->const_int() == 1 ? output : output / inner;
    if (a != 0) index = index % axes[a]->src(0);
    replaced.emplace(axes[a], index);
    inner = simplify(inner * axes[a]->src(0));
  }
  UOpPtr merged = substitute(kernel, replaced);
  // A group of one warp needs no local memory (its butterfly gives every lane the result), so any
  // block size of whole warps runs it.
  if (per_group)
    return {split_reductions_across_group(merged, grid % group, group, warp_size), group == warp_size ? 0 : group};
  if (per_warp) return {split_reductions_across_warp(merged, grid % warp_size, warp_size)};
  if (per_slice) {
    UOpPtr in_group = grid % group_size;
    return {split_reductions_across_group(merged, in_group / split.outputs_per_group, split.slices, 1,
                                          split.outputs_per_group, in_group),
            group_size};
  }
  return {merged};
}

}  // namespace kiln
