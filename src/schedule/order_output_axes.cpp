// Choosing the outermost output axis of a reduction kernel (order_output_axes.h).
#include "schedule/order_output_axes.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "ir/build.h"
#include "ir/substitute.h"
#include "schedule/schedule.h"

namespace kiln {
namespace {

// Reordering only pays when what axis 0 re-reads leaves the near caches; below this it stays put.
constexpr double kRereadWorthMoving = 1 << 20;
// A constant output axis at least this long goes before a symbolic axis 0 (see below).
constexpr int64_t kWideEnoughToSplit = 64;
// A symbolic axis 0 that stays this small is a batch (thread_blocks.cpp, kSmallSymbolicAxis).
constexpr int64_t kSmallBatch = 64;

}  // namespace

OrderedKernel order_output_axes(const UOpPtr& kernel) {
  std::vector<const UOp*> nodes = toposort(kernel);
  std::vector<const UOp*> axes;  // output ranges by axis id
  bool reduces = false;
  for (const UOp* node : nodes) {
    if (node->op() == Ops::REDUCE) reduces = true;
    if (node->op() == Ops::RANGE && node->arg_int() < kFirstReduceAxis) axes.push_back(node);
  }
  std::sort(axes.begin(), axes.end(), [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });
  OrderedKernel result{kernel, axes.empty() ? Dim(1) : Dim(axes[0]->src(0))};
  // Axis 0 is split across threads. A symbolic one may be 1 at run time (a batch of one), which
  // would run the whole kernel on one thread: in a reduction kernel the widest constant output axis
  // goes first instead, when it has work for several threads (BERT's hidden columns under a
  // symbolic batch and sequence: its weight is then re-read per column tile, as above).
  // Except a small batch over constant axes (a CNN exported with a dynamic batch): filters first
  // made every filter tile read all the batch's images (ShuffleNetV2 at batch 8: 1.4 MB per tile,
  // out of L2), where the fixed plan reads one image for all of them. It stays axis 0, and the
  // heuristics merge it with the filter tiles for the threads (thread_blocks.cpp,
  // with_symbolic_axis_merged). ShuffleNetV2 at batch 8: 25.5 -> 24.2 ms at one thread, 15.5 ->
  // 13.0 at two (fixed: 22.1, 12.1); MobileNetV3 at two threads 6.93 -> 6.36 (fixed 6.18).
  // (Over a symbolic image, DeepLabV3 at batch 1 ran 4 % slower that way; it keeps the order.)
  bool small_batch = axes.size() >= 2 && axes[0]->src(0)->vmax() <= kSmallBatch &&
                     std::all_of(axes.begin() + 1, axes.end(), [](const UOp* axis) { return axis->src(0)->is_const(); });
  if (reduces && axes.size() >= 2 && !axes[0]->src(0)->is_const() && !small_batch) {
    const UOp* widest = nullptr;
    for (const UOp* axis : axes)
      if (axis->src(0)->is_const() && (widest == nullptr || axis->src(0)->const_int() > widest->src(0)->const_int()))
        widest = axis;
    if (widest != nullptr && widest->src(0)->const_int() >= kWideEnoughToSplit) {
      // A constant axis outside the widest one (attention's heads, outside the head dimension of
      // P·V) goes first instead: each thread then computes its own heads, whose rows the kernel
      // before it (the softmax, split by heads) wrote on the same core, where a split of the head
      // dimension (2 tiles) made both threads read every head. int8 BERT at 128 tokens, two
      // threads: P·V 0.206 -> 0.108 ms (the fixed plan's 0.107).
      for (const UOp* axis : axes)
        if (axis->src(0)->is_const() && axis->src(0)->const_int() >= 2 && axis->arg_int() < widest->arg_int()) {
          widest = axis;
          break;
        }
      std::unordered_map<const UOp*, UOpPtr> renumbered;
      int64_t position = 1;
      renumbered.emplace(widest, range(widest->src(0), 0));
      for (const UOp* axis : axes)
        if (axis != widest) renumbered.emplace(axis, range(axis->src(0), position++));
      return OrderedKernel{substitute(kernel, renumbered), Dim(widest->src(0))};
    }
  }
  // Otherwise axes 0 and 1 become one axis 0 of E0·E1 iterations (a = m / E1, b = m % E1), so that
  // the threads split batch × sequence (or batch × heads) rows. The division and remainder are of
  // the outermost loop's index, once per row, not in the inner loops. Moving a constant axis out
  // here instead made an elementwise kernel's contiguous axis outermost: `Add + Relu` over
  // [batch, sequence, 3072] ran 15x slower than its fixed twin, strided and not vectorised. A
  // reduction kernel keeps a constant axis 1, which the heuristics may need for a vector or a tile.
  // So does a small batch over constant axes (as above): the heuristics then tile the constant
  // ones like a fixed plan's (the channels unrolled over the merged pixels; ShuffleNetV2's
  // shuffled concatenations ran up to 10x slower as rows of batch × channels with the 14-pixel
  // image rows padded to vectors: the model at batch 1, one thread, 3.15 -> 2.91 ms, fixed 2.83)
  // and merge the batch with a constant loop that is not the store-contiguous one.
  // Nor does a constant last axis merge into the rows (an elementwise kernel over [sequence, 1024],
  // a batch of one): it is the kernel's only constant loop, the one the heuristics make the vector,
  // and one symbolic loop of sequence × 1024 was left to LLVM, which ran the int8 BERT's GELU and
  // requantization at 128 tokens scalar, 11x slower than its fixed twin.
  bool last_is_constant = axes.size() == 2 && axes[1]->src(0)->is_const();
  if (axes.size() >= 2 && !axes[0]->src(0)->is_const() && (!reduces || !axes[1]->src(0)->is_const()) && !small_batch &&
      !last_is_constant) {
    const UOpPtr& outer_end = axes[0]->src(0);
    const UOpPtr& inner_end = axes[1]->src(0);
    UOpPtr rows_end = outer_end * inner_end;
    UOpPtr rows = range(rows_end, 0);
    std::unordered_map<const UOp*, UOpPtr> renumbered{{axes[0], rows / inner_end}, {axes[1], rows % inner_end}};
    for (size_t a = 2; a < axes.size(); ++a)
      renumbered.emplace(axes[a], range(axes[a]->src(0), static_cast<int64_t>(a) - 1));
    return OrderedKernel{substitute(kernel, renumbered), Dim(rows_end)};
  }
  if (!reduces || axes.size() < 2 || axes.size() > 64) return result;

  // Which output axes each node depends on, as a bit mask over `axes`.
  std::unordered_map<const UOp*, uint64_t> depends;
  for (const UOp* node : nodes) {
    uint64_t mask = 0;
    for (size_t a = 0; a < axes.size(); ++a)
      if (node == axes[a]) mask |= uint64_t{1} << a;
    for (const UOpPtr& src : node->srcs()) mask |= depends[src.get()];
    depends[node] = mask;
  }
  // Per loaded buffer (by DEFINE_GLOBAL): its bytes, and the axes any of its loads depend on.
  std::map<int64_t, std::pair<double, uint64_t>> buffers;
  for (const UOp* node : nodes) {
    if (node->op() != Ops::LOAD || node->src(0)->op() != Ops::INDEX) continue;
    const UOp* global = node->src(0)->src(0).get();
    if (global->op() != Ops::DEFINE_GLOBAL) continue;
    auto& [bytes, mask] = buffers[global->arg_int()];
    bytes = static_cast<double>(global->dtype().pointer_size()) * global->dtype().scalar_bytes();
    mask |= depends[node->src(0).get()];
  }
  auto reread = [&](size_t axis) {
    double total = 0;
    for (const auto& [slot, info] : buffers)
      if ((info.second & (uint64_t{1} << axis)) == 0) total += info.first;
    return total;
  };
  size_t best = 0;
  for (size_t a = 1; a < axes.size(); ++a)
    if (reread(a) < reread(best)) best = a;
  if (best == 0 || reread(0) < kRereadWorthMoving || 2 * reread(best) > reread(0)) return result;

  // Renumber: the chosen axis becomes 0, the others keep their order after it.
  std::vector<const UOp*> order{axes[best]};
  for (size_t a = 0; a < axes.size(); ++a)
    if (a != best) order.push_back(axes[a]);
  std::unordered_map<const UOp*, UOpPtr> renumbered;
  for (size_t position = 0; position < order.size(); ++position)
    renumbered.emplace(order[position], range(order[position]->src(0), static_cast<int64_t>(position)));
  result.ast = substitute(kernel, renumbered);
  result.parallel_extent = Dim(axes[best]->src(0));
  return result;
}

}  // namespace kiln
