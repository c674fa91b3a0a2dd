// The threads' split of a tiled kernel (heuristics.h, step 4): axis 0 with enough iterations for
// the threads (swapped in, or merged with a wide loop; a small symbolic batch merged with the
// channels), and conv rows in blocks so that chained kernels read what the same core wrote.
#include <algorithm>
#include <optional>

#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/heuristics.h"
#include "opt/heuristics_internal.h"
#include "opt/kernel_analysis.h"
#include "passes/symbolic.h"

namespace kiln::heuristics {

namespace {

// Threads split axis 0 of a kernel. A tile can take all of it: MobileNetV2's first conv, 32
// filters as two vectors of 16, left axis 0 one iteration, and the conv ran on one thread however
// many there were (1.04x faster on two). When the tiled kernel's axis 0 has a single iteration and
// an output loop of the original kernel has at least two after tiling, that loop becomes axis 0
// instead: a SWAP first, and the tile opts renamed to match. Loops nest by axis id, so the filter
// tile then runs inside each pixel row; its weights are a few KB. Doing the same below 4 iterations
// (a 96-filter conv's three tiles split 2 + 1 over two threads) made MobileNetV2 0.92x at two
// threads but 1.05x at one, so axis 0 stays from 2 iterations up (0.94x at two, 1.00x at one).
constexpr int64_t kParallelTiles = 2;
// From 2 to 7 iterations axis 0 is kept but merged with that widest loop (MERGE(axis 0, other)):
// the loops run in the same order, so one thread's caches see what they saw before, and threads
// get chunks of tiles × rows instead of whole tiles, which 2 threads split unevenly when there
// are 3 (MobileNetV2's 96-filter 1x1 convs at 14×14 ran 1.13x faster on two threads than on one).
// All 15 models at two threads: 0.98x (geomean; MobileNetV2 0.96, ZFNet 0.96, Inception-v2 0.97),
// at one 0.99x.
constexpr int64_t kFewParallelTiles = 8;

// A symbolic axis 0 that may be one iteration and stays small (a CNN's batch, 1..8) left every
// thread but one idle at batch 1 (DeepLabV3 over images of any size: 14.1 ms at one thread, 13.2 at
// two). It is merged with the widest constant output loop of the kernel (the channels), so that
// threads split batch × channels; the merged index costs a division by a constant per outer
// iteration. Larger symbolic axes (batch × sequence rows, hundreds) keep axis 0 as it is.
// Over an image of any size the rows are a symbolic loop too: where no constant loop is left (a
// tile took all 32 filters of DeepLabV3's dilated ASPP convs) or the widest has fewer than
// kFewParallelTiles iterations and the rows more at every size (24 filters in 3 tiles, which two
// threads split 2 + 1, against 7 pairs of a 14×14 image's rows at least), the rows become axis 0
// (SWAP) and the batch runs inside them. DeepLabV3 at 224×224, two threads, alternating runs:
// 7.90 -> 6.08 ms for the first rule (its ASPP convs had run on one thread), 6.20 -> 5.73 for the
// second (fixed plan: 4.4-4.5).
constexpr int64_t kSmallSymbolicAxis = 64;

}  // namespace

std::vector<Opt> with_symbolic_axis_merged(const UOpPtr& kernel, const UOpPtr& tiled, std::vector<Opt> opts) {
  Dim parallel = parallel_extent_of(tiled);
  if (parallel.is_known() || parallel.min() >= kParallelTiles || parallel.max() > kSmallSymbolicAxis) return opts;
  std::vector<const UOp*> original = kernel_ranges(kernel);
  // Only an axis 0 of the kernel itself: blocks of rows (a SPLIT's outer loop) keep theirs.
  auto axis_0_of = [](const std::vector<const UOp*>& ranges) -> const UOp* {
    for (const UOp* range : ranges)
      if (range->arg_int() == 0) return range;
    return nullptr;
  };
  const UOp* tiled_axis_0 = axis_0_of(kernel_ranges(tiled));
  const UOp* original_axis_0 = axis_0_of(original);
  if (tiled_axis_0 == nullptr || original_axis_0 == nullptr || tiled_axis_0->src(0) != original_axis_0->src(0)) return opts;
  const UOp* widest = nullptr;
  bool reduces = std::ranges::any_of(toposort(tiled), [](const UOp* node) { return node->op() == Ops::REDUCE; });
  for (const UOp* range : kernel_ranges(tiled)) {
    if (axis_kind(range->arg_int()) != AxisKind::Loop || range->arg_int() == 0 || !range->src(0)->is_const()) continue;
    bool in_original = std::ranges::any_of(original, [&](const UOp* r) { return r->arg_int() == range->arg_int(); });
    // Merged into axis 0, a loop runs outermost: an elementwise kernel's store-contiguous loop must
    // stay inside, where the vector is (MobileNetV3's channels-last copies, (batch, 7, 7, 576),
    // ran 2x slower with their 576 channels merged out).
    bool contiguous = !reduces && store_stride(tiled, range) == 1;
    if (in_original && !contiguous && range->src(0)->const_int() >= 2 && (widest == nullptr || range->src(0)->const_int() > widest->src(0)->const_int()))
      widest = range;
  }
  // The outermost of those loops where it has kFewParallelTiles iterations or more: merged into
  // axis 0 it keeps the loop order of the fixed plan, whose batch is its axis 0, and the tile's
  // innermost output loop stays the one whose next tile the prefetches read. MobileNetV3's 1x1
  // conv 24 -> 72 over 56×56 (9 blocks of 8 filters outside 98 tiles of pixels), batch 1..8 at
  // batch 8, one thread: 2.04 ms with the pixel tiles merged out (the widest), 0.76 with the
  // filter blocks (the fixed plan: 0.76); the model 1.12 -> 1.01 of its fixed plan's time at one
  // thread, 1.14 -> 1.04 at two.
  const UOp* outermost = nullptr;
  for (const UOp* range : kernel_ranges(tiled)) {
    if (axis_kind(range->arg_int()) != AxisKind::Loop || range->arg_int() == 0 || !range->src(0)->is_const()) continue;
    bool in_original = std::ranges::any_of(original, [&](const UOp* r) { return r->arg_int() == range->arg_int(); });
    bool contiguous = !reduces && store_stride(tiled, range) == 1;
    if (in_original && !contiguous && (outermost == nullptr || range->arg_int() < outermost->arg_int())) outermost = range;
  }
  if (outermost != nullptr && outermost->src(0)->const_int() >= kFewParallelTiles) widest = outermost;
  // The outermost symbolic loop that has work for the threads at every size (an image's rows).
  const UOp* rows = nullptr;
  for (const UOp* range : kernel_ranges(tiled)) {
    if (axis_kind(range->arg_int()) != AxisKind::Loop || range->arg_int() == 0 || range->src(0)->is_const()) continue;
    if (range->src(0)->vmin() >= kParallelTiles && (rows == nullptr || range->arg_int() < rows->arg_int())) rows = range;
  }
  int64_t widest_extent = widest == nullptr ? 0 : static_cast<int64_t>(widest->src(0)->const_int());
  bool rows_first = rows != nullptr && (widest == nullptr || (widest_extent < kFewParallelTiles &&
                                                               rows->src(0)->vmin() > widest_extent));
  if (widest == nullptr && !rows_first) return opts;
  std::vector<Opt> merged = opts;
  if (rows_first) merged.push_back({OptOp::Swap, 0, rows->arg_int()});
  else merged.push_back({OptOp::Merge, 0, widest->arg_int()});
  try {
    (void)apply_opts(kernel, merged);
    return merged;
  } catch (const InvalidOpt&) {
    return opts;
  }
}

// Axis 0 of the tiled kernel with enough iterations for the threads: swapped in (1 iteration) or
// merged with the widest other output loop (2 to 7), as above.
std::vector<Opt> with_parallel_axis(const UOpPtr& kernel, std::vector<Opt> opts) {
  std::vector<const UOp*> original = kernel_ranges(kernel);
  UOpPtr tiled;
  try {
    tiled = apply_opts(kernel, opts);
  } catch (const InvalidOpt&) {
    return opts;
  }
  // A symbolic axis 0: rows of batch × sequence were put there on purpose (order_output_axes.h);
  // a small one (a batch) is merged with the channels.
  Dim parallel = parallel_extent_of(tiled);
  if (!parallel.is_known()) return with_symbolic_axis_merged(kernel, tiled, std::move(opts));
  int64_t axis_0 = parallel.value();
  const UOp* widest = nullptr;
  for (const UOp* range : kernel_ranges(tiled)) {
    if (axis_kind(range->arg_int()) != AxisKind::Loop || range->arg_int() == 0 || !range->src(0)->is_const()) continue;
    auto extent = static_cast<int64_t>(range->src(0)->const_int());
    bool in_original = std::any_of(original.begin(), original.end(), [&](const UOp* r) { return r->arg_int() == range->arg_int(); });
    if (in_original && (widest == nullptr || extent > widest->src(0)->const_int())) widest = range;
  }
  if (axis_0 >= kParallelTiles && axis_0 < kFewParallelTiles && widest != nullptr) {
    std::vector<Opt> merged = opts;
    merged.push_back({OptOp::Merge, 0, widest->arg_int()});
    try {
      (void)apply_opts(kernel, merged);
      return merged;
    } catch (const InvalidOpt&) {
      return opts;
    }
  }
  if (axis_0 >= kParallelTiles || widest == nullptr || widest->src(0)->const_int() < 2 * axis_0) return opts;
  int64_t other = widest->arg_int();
  auto renamed = [&](int64_t axis) { return axis == 0 ? other : axis == other ? 0 : axis; };
  std::vector<Opt> swapped{{OptOp::Swap, 0, other}};
  for (Opt opt : opts) {
    opt.axis = renamed(opt.axis);
    if (opt.op == OptOp::Swap || opt.op == OptOp::Merge) opt.amount = renamed(opt.amount);
    swapped.push_back(opt);
  }
  try {
    (void)apply_opts(kernel, swapped);
  } catch (const InvalidOpt&) {
    return opts;
  }
  return swapped;
}

namespace {

// Row blocks: a conv whose threads would split its filters splits its pixel rows instead
// (docs/optimisation.md, heuristics step 6).
//
// The thread pool gives thread i the i-th part of every kernel's axis 0 (thread_pool.cpp). A conv
// tiled with its filter tiles as axis 0 (MobileNetV2's 1x1 convs) splits its output by channels,
// and each thread reads every row of its input, half of them written by the other core; the
// depthwise conv after it splits by rows and again reads half its input from the other core. With
// the rows split into B blocks and the block loop made axis 0 (merged with the old axis 0, blocks
// outermost), thread i computes the same rows in every such kernel. Inside a block the loops keep
// their order, so one thread's caches see what they saw before, except that the weights are read
// B times: only kernels whose weights fit in a quarter of the L2 get blocks (ResNet-50's 1 MB 1x1s
// and ZFNet's 7 MB 3x3s ran 3-4 % slower with them).
//
// "Rows" are found from the accesses: inside the reduction the activation load depends on more
// output loops than any other load (or, on as many, is larger), and its own loops (those no weight
// load depends on) are the pixel axes; rows are the one with the largest stride in the output. B is
// the largest power of two up to kRowBlocks that divides the rows (2 for 14, 4 for 28, 8 for 56 and
// 112), so 2 or 4 threads split every blocked kernel of a chain at the same rows; an odd extent
// gets 2. KILN_ROW_BLOCKS=0 turns this off, for comparisons.
constexpr int64_t kRowBlocks = 8;
constexpr int64_t kSymbolicRowBlocks = 2;

}  // namespace

std::optional<std::vector<Opt>> with_row_blocks(const UOpPtr& kernel, const std::vector<Opt>& opts,
                                                const TargetCaps& caps) {
  UOpPtr tiled;
  try {
    tiled = apply_opts(kernel, opts);
  } catch (const InvalidOpt&) {
    return std::nullopt;
  }
  // The output loops of two iterations or more, and the symbolic ones that have at least one row
  // for every block at every size (a signal's windows over a recording of any length: see below;
  // not a batch that may be 1).
  std::vector<const UOp*> ranges = kernel_ranges(tiled), loops;
  for (const UOp* range : ranges) {
    const UOpPtr& end = range->src(0);
    if (axis_kind(range->arg_int()) == AxisKind::Loop && (end->is_const() ? extent_of(range) >= 2 : end->vmin() >= kSymbolicRowBlocks))
      loops.push_back(range);
  }
  struct Read {
    const UOp* index;
    std::vector<const UOp*> loops;  // the output loops it depends on
    int64_t bytes = 0;              // its footprint (at most)
  };
  const UOp* store = nullptr;
  std::vector<Read> reads;  // the loads inside the reduction
  for (const Access& access : global_accesses(tiled)) {
    if (access.is_store) {
      if (store != nullptr) return std::nullopt;
      store = access.index;
    } else if (access.in_reduction) {
      Read read{access.index, {}, 0};
      for (const UOp* loop : loops)
        if (depends_on(access.index, loop)) read.loops.push_back(loop);
      reads.push_back(std::move(read));
    }
  }
  if (store == nullptr || reads.size() < 2) return std::nullopt;
  for (Read& read : reads) {
    read.bytes = read.index->src(0)->dtype().base().scalar_bytes();
    for (const UOp* range : ranges)
      if (range->src(0)->is_const() && depends_on(read.index, range)) read.bytes *= extent_of(range);
  }
  // The activation: the load on the most output loops, of two on equally many (a 1x1 conv whose
  // pixels are merged into one loop is a matrix product) the larger. When that is the weight, its
  // own loop is the filters, axis 0 already, and nothing changes.
  std::stable_sort(reads.begin(), reads.end(), [](const Read& a, const Read& b) {
    if (a.loops.size() != b.loops.size()) return a.loops.size() > b.loops.size();
    return a.bytes > b.bytes;
  });
  if (reads[0].loops.size() == reads[1].loops.size() && reads[0].bytes == reads[1].bytes) return std::nullopt;
  int64_t weight_bytes = 0;
  for (size_t i = 1; i < reads.size(); ++i) weight_bytes += reads[i].bytes;
  if (weight_bytes > caps.l2_bytes / 4) return std::nullopt;
  const UOp* rows = nullptr;
  int64_t rows_stride = 0;
  bool unknown_step = false;
  for (const UOp* loop : reads[0].loops) {
    bool weight_loop = std::any_of(reads.begin() + 1, reads.end(), [&](const Read& read) {
      return std::find(read.loops.begin(), read.loops.end(), loop) != read.loops.end();
    });
    if (weight_loop) continue;
    std::optional<int64_t> stride = least_step(store->src(1), loop);
    unknown_step = unknown_step || !stride;
    if (!stride || *stride == 0) continue;
    if (rows == nullptr || std::abs(*stride) > rows_stride) rows = loop, rows_stride = std::abs(*stride);
  }
  // Only an axis 0 that the activation load does not depend on (filters) makes each thread read the
  // whole input. Rows already outermost (a depthwise conv over channels-last pixels) need nothing;
  // a depthwise conv over NCHW channels reads only its own channels, and with row blocks
  // MobileNetV2's took 1.2-1.6x longer at two threads. The old axis 0 is merged into the blocks,
  // which takes a constant extent.
  auto axis_0 = std::find_if(loops.begin(), loops.end(), [](const UOp* loop) { return loop->arg_int() == 0; });
  if (rows == nullptr || axis_0 == loops.end() || *axis_0 == rows || !(*axis_0)->src(0)->is_const()) return std::nullopt;
  if (std::find(reads[0].loops.begin(), reads[0].loops.end(), *axis_0) != reads[0].loops.end()) return std::nullopt;
  int64_t axis = rows->arg_int();
  std::vector<Opt> blocked = opts;
  if (rows->src(0)->is_const()) {
    int64_t extent = extent_of(rows), blocks = 1;
    while (blocks < kRowBlocks && extent % (2 * blocks) == 0) blocks *= 2;
    // An odd extent of 8 or more (YOLOX's 26×26 pixels, merged and unrolled by 4: 169) gets two
    // blocks, the second one iteration short (SPLIT pads it: one row computed twice, stored once).
    if (blocks < 2 && extent >= 8) blocks = 2;
    if (blocks < 2) return std::nullopt;
    blocked.push_back({OptOp::Split, axis, (extent + blocks - 1) / blocks});
  } else {
    // Rows of symbolic extent E (wav2vec2's strided convs over a recording of any length, their
    // windows in blocks of a vector) are cut into a constant number of blocks of ⌈E / B⌉ rows
    // (BLOCKS), the last one padded by up to B - 1 rows that are computed and not stored. Only where
    // every pixel loop's step is known: the image rows of DeepLabV3's 1x1 convs, split in pairs
    // (with_row_pairs) and so read through a clamp, are not, and blocks of its columns instead made
    // them slower.
    if (unknown_step) return std::nullopt;
    blocked.push_back({OptOp::Blocks, axis, kSymbolicRowBlocks});
  }
  // SPLIT (BLOCKS) makes the rows' id the block loop and a new innermost loop the rows inside a
  // block; the first SWAP puts the rows back where they were, the second makes the blocks axis 0,
  // and MERGE folds the old axis 0 (now innermost) into it, blocks outermost.
  try {
    UOpPtr split = apply_opts(kernel, blocked);
    int64_t inner = 0;
    for (const UOp* range : kernel_ranges(split))
      if (axis_kind(range->arg_int()) == AxisKind::Loop) inner = std::max(inner, range->arg_int());
    blocked.push_back({OptOp::Swap, axis, inner});
    blocked.push_back({OptOp::Swap, 0, inner});
    blocked.push_back({OptOp::Merge, 0, inner});
    (void)apply_opts(kernel, blocked);
  } catch (const InvalidOpt&) {
    return std::nullopt;
  }
  return blocked;
}

}  // namespace kiln::heuristics
