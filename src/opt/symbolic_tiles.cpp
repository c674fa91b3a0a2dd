// Tiles over symbolic loops (heuristics.h, step 0): a symbolic contiguous axis in padded blocks
// of one vector, paired or given blocks of symbolic rows; an image's rows and columns merged; a
// reduction along a symbolic axis in vector blocks; transposing copies over a symbolic axis.
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

// Whether a tiled 1x1 conv over an image of any size, whose filter tiles are outermost, should run
// its image rows outermost instead: each filter tile reads the whole input, which at the largest
// image leaves the L2 (DeepLabV3's 672 -> 112 at 32×32 pixels: 2.75 MB, re-read from the L3 by 14
// tiles), while its weights stay there (300 KB), to be re-read by each pair of rows. Not where the
// output is larger than the input (an expansion, 16 -> 64 channels): rows outermost, each pair of
// rows stores a short run into every one of the output's planes, and those scattered stores cost
// more than the input's re-reads, which stream (DeepLabV3's 16 -> 64 at 256×256, one thread: 2.5
// ms with its filter tiles outermost, 3.3 with its rows). The bytes are counted at the sizes'
// maxima: a loop that is small at some sizes costs little either way.
bool image_outgrows_l2(const UOpPtr& tiled, const TargetCaps& caps) {
  const UOp* lanes = nullptr;
  for (const UOp* range : kernel_ranges(tiled))
    if (axis_kind(range->arg_int()) == AxisKind::Upcast) lanes = range;
  if (lanes == nullptr) return false;
  double input_bytes = 0, weight_bytes = 0, output_bytes = 0;
  for (const Access& access : global_accesses(tiled)) {
    if (!access.is_store && !access.in_reduction) continue;
    double bytes = access.index->src(0)->dtype().base().scalar_bytes();
    for (const UOp* range : kernel_ranges(tiled))
      if (depends_on(access.index, range)) bytes *= range->src(0)->vmax();
    (access.is_store ? output_bytes : depends_on(access.index, lanes) ? input_bytes : weight_bytes) += bytes;
  }
  return input_bytes > static_cast<double>(caps.l2_bytes) / 2 && weight_bytes <= static_cast<double>(caps.l2_bytes) / 2 &&
         output_bytes <= input_bytes;
}

// A tile whose vector is the block of a symbolic row (a 1x1 conv over an image of any size: 16
// pixels by 8 filters) has one vector column, where a fixed plan's tiles have two or more: each
// reduction step loads one vector and 8 broadcasts for 8 FMAs, more loads than the two load ports
// issue per FMA pair. The image's next row is the second column: the rows loop (symbolic, at least
// 2 at every size) is SPLIT in pairs and the pair unrolled, so each weight broadcast feeds two
// FMAs. The pair's second row is padded where the rows are odd (SPLIT recomputes the last row and
// stores it once). Only for tiles with rows (depthwise convs, which have none, share nothing
// between two image rows: their 3x3 ones ran 0.035 -> 0.066 ms), and where the accumulators,
// rows' broadcasts and the two columns fit the registers (tile_fits in tile_opts).
// DeepLabV3's 1x1 convs at 224×224 (14×14 to 112×112 images), one thread: 25-40 % faster each
// (the 672-filter expansion at 14×14 0.66 -> 0.47 ms); the model 9.95 -> 8.87 ms at one thread,
// 6.23 -> 5.76 at two, 49.3 -> 45.5 at 512×512 (fixed plans: 7.3, 4.6, 38.4).
std::optional<std::vector<Opt>> with_row_pairs(const UOpPtr& kernel, const std::vector<Opt>& prefix,
                                               const std::vector<Opt>& tiles, int64_t columns, int64_t block,
                                               const TargetCaps& caps) {
  int64_t tile_rows = 1;
  for (const Opt& opt : tiles) {
    if (opt.op != OptOp::Unroll) continue;
    if (opt.axis == block) return std::nullopt;  // columns already
    if (axis_kind(opt.axis) == AxisKind::Loop) tile_rows *= opt.amount;
  }
  if (tile_rows < 2 || 3 * tile_rows + 2 > caps.vector_registers) return std::nullopt;
  // The image's rows: the innermost symbolic output loop outside the block's.
  // Where there is none (the image's rows and columns merged into one loop, a signal's samples),
  // the blocks themselves: the loop of whole vectors that the block's SPLIT left at `columns`.
  const UOp* image_rows = nullptr;
  UOpPtr blocked = apply_opts(kernel, prefix);  // holds the range `image_rows` points to
  for (const UOp* range : kernel_ranges(blocked)) {
    if (axis_kind(range->arg_int()) != AxisKind::Loop || range->src(0)->is_const() || range->src(0)->vmin() < 2 ||
        range->arg_int() > columns)
      continue;
    if (range->arg_int() == columns && image_rows != nullptr) continue;
    if (image_rows == nullptr || image_rows->arg_int() == columns || range->arg_int() > image_rows->arg_int())
      image_rows = range;
  }
  if (image_rows == nullptr) return std::nullopt;
  std::vector<Opt> paired = prefix;
  paired.push_back({OptOp::Split, image_rows->arg_int(), 2});
  try {
    int64_t pair = innermost_output_axis(apply_opts(kernel, paired));
    paired.insert(paired.end(), tiles.begin(), tiles.end());
    paired.push_back({OptOp::Unroll, pair, 2});
    UOpPtr tiled = apply_opts(kernel, paired);
    if (image_rows->arg_int() != 0 && image_outgrows_l2(tiled, caps)) {
      paired.push_back({OptOp::Swap, 0, image_rows->arg_int()});
      (void)apply_opts(kernel, paired);
    }
  } catch (const InvalidOpt&) {
    return std::nullopt;
  }
  return paired;
}

// A symbolic contiguous axis in blocks of one vector: PADTO(lanes) runs it to a whole number of
// vectors (the iterations past its end masked: masked vector loads and stores, where a SPLIT's
// clamp would gather the lanes), SPLIT(lanes) makes the block a constant loop, which the rest of
// the heuristics vectorise and tile like any other. Kept when the tile's vector is that block, or
// its rows are: a strided conv over a signal of any length reads its input with a step of 2 along
// the windows, so its vector is the filters (a panel of them) and the windows its rows, as in a
// fixed-size one.
// A conv with kernel taps (a reduction over more than one axis) takes a full vector of its filters
// with the block's pixels as rows even where the block itself would vectorise: the choice a fixed
// plan makes for an image whose rows do not fill whole vectors (constant_loop_opts: ResNet-50's
// 3x3 convs at 14×14 and 7×7 ran at 26-53 GFLOP/s over padded pixels, 84-104 over filters), and a
// symbolic row is padded to whole vectors at every size that is not a multiple of the lanes.
// DeepLabV3's dilated 3x3 ASPP convs (480 -> 32 channels), one thread, AVX-512 Xeon: at 224×224
// (14×14 there) 4.1, 3.4 and 2.2 ms -> 1.8, 1.4 and 1.0 (the fixed plan's 1.8, 1.1, 0.8); at
// 512×512 (32×32, whole vectors) 11.8, 8.4 and 5.7 -> 8.2, 7.0 and 4.5 (fixed: 8.3, 7.2, 4.5).
// 1x1 convs keep the pixels: with the filters they ran slower (DeepLabV3's 16 -> 64 at 112×112
// 0.44 -> 0.81 ms, 480-channel expansions at 14×14 0.79 -> 1.14). So do max pools, whose other
// vector would gather NCHW channels (max_pool_tile); depthwise convs have no such vector (their
// input varies with both channels and pixels, so no rows share a channel vector's loads).
// A tile whose vector is a symbolic block and that has no rows (attention's scores over keys of
// any count, K stored with its keys contiguous: each query row a dot product of its own) takes 8
// rows of a symbolic loop that the vector's contiguous loads do not move along and another load
// does (the queries): SPLIT in blocks of kRowBlock, the block the tile's rows, so that each load
// of K feeds 8 FMAs (the fixed plan's tile over known rows). The rows' step in the store is a size
// (the key count), so symbolic_row_loop, which takes constant steps, does not find them.
std::optional<std::vector<Opt>> with_symbolic_row_block(const UOpPtr& blocked, const std::vector<Opt>& prefix,
                                                        const std::vector<Opt>& tiles, const TargetCaps& caps) {
  for (const Opt& opt : tiles)
    if (opt.op == OptOp::Unroll && axis_kind(opt.axis) == AxisKind::Loop) return std::nullopt;  // rows already
  int64_t block = upcast_axis(tiles);
  UOpPtr upcasted;
  try {
    upcasted = apply_opts(blocked, tiles);
  } catch (const InvalidOpt&) {
    return std::nullopt;
  }
  const UOp* lanes = nullptr;
  for (const UOp* range : kernel_ranges(upcasted))
    if (axis_kind(range->arg_int()) == AxisKind::Upcast) lanes = range;
  if (lanes == nullptr) return std::nullopt;
  std::vector<Access> accesses = global_accesses(upcasted);
  const UOp* rows = nullptr;
  for (const UOp* range : kernel_ranges(upcasted)) {
    if (axis_kind(range->arg_int()) != AxisKind::Loop || range->src(0)->is_const() || range->arg_int() == block ||
        range->src(0)->vmax() < 2 * kRowBlock)
      continue;
    bool vector_still = true, other_moves = false;
    for (const Access& access : accesses) {
      if (access.is_store || !access.in_reduction) continue;
      bool moves = depends_on(access.index, range);
      if (depends_on(access.index, lanes)) vector_still = vector_still && !moves;
      else other_moves = other_moves || moves;
    }
    if (vector_still && other_moves && (rows == nullptr || range->arg_int() > rows->arg_int())) rows = range;
  }
  if (rows == nullptr) return std::nullopt;
  std::vector<Opt> opts = prefix;
  opts.push_back({OptOp::Split, rows->arg_int(), kRowBlock});
  try {
    UOpPtr split = apply_opts(blocked, {opts.back()});
    int64_t inner = innermost_output_axis(split);
    std::vector<Opt> retiled = tile_opts(split, caps);
    bool takes_rows = std::ranges::any_of(retiled, [&](const Opt& opt) { return opt.op == OptOp::Unroll && opt.axis == inner; });
    if (upcast_axis(retiled) != block || !takes_rows) return std::nullopt;
    opts.insert(opts.end(), retiled.begin(), retiled.end());
    (void)apply_opts(blocked, {opts.begin() + static_cast<std::ptrdiff_t>(prefix.size()), opts.end()});
  } catch (const InvalidOpt&) {
    return std::nullopt;
  }
  // Two blocks of keys per tile where the registers hold them: each query broadcast then feeds two
  // FMAs, and the tile has twice the accumulators to cover the FMAs' latency (the fixed plan's tile
  // is 2 vectors by 8 rows). The pair's second block is padded where the block count is odd.
  int64_t tile_rows = 1;
  for (const Opt& opt : opts)
    if (opt.op == OptOp::Unroll && axis_kind(opt.axis) == AxisKind::Loop) tile_rows *= opt.amount;
  if (3 * tile_rows + 2 > caps.vector_registers) return opts;
  std::vector<Opt> paired = opts;
  paired.push_back({OptOp::Split, prefix.back().axis, 2});
  try {
    UOpPtr split = apply_opts(blocked, {paired.begin() + static_cast<std::ptrdiff_t>(prefix.size()), paired.end()});
    paired.push_back({OptOp::Unroll, innermost_output_axis(split), 2});
    (void)apply_opts(blocked, {paired.begin() + static_cast<std::ptrdiff_t>(prefix.size()), paired.end()});
  } catch (const InvalidOpt&) {
    return opts;
  }
  return paired;
}

}  // namespace

std::optional<std::vector<Opt>> vector_block_opts(const UOpPtr& kernel, const TargetCaps& caps) {
  const UOp* columns = symbolic_vector_loop(kernel);
  int lanes = kernel_lanes(kernel, caps);
  if (columns == nullptr || lanes < 4 || !caps.supports_vector_ops) return std::nullopt;
  std::vector<Opt> prefix{{OptOp::Padto, columns->arg_int(), lanes}, {OptOp::Split, columns->arg_int(), lanes}};
  UOpPtr blocked;
  try {
    blocked = apply_opts(kernel, prefix);
  } catch (const InvalidOpt&) {
    return std::nullopt;
  }
  std::vector<Opt> tiles = tile_opts_of(blocked, caps);
  int64_t block = innermost_output_axis(blocked);
  auto block_rows = [&](const std::vector<Opt>& opts) {
    return std::ranges::any_of(opts, [&](const Opt& opt) { return opt.op == OptOp::Unroll && opt.axis == block; });
  };
  if (upcast_axis(tiles) == block && reduces_over_taps(kernel) && !only_max_reductions(kernel)) {
    std::vector<Opt> filters = tile_opts(blocked, caps, block);
    if (upcast_width(filters) == lanes && block_rows(filters)) tiles = filters;
  }
  if (upcast_axis(tiles) != block && !block_rows(tiles)) return std::nullopt;
  if (upcast_axis(tiles) == block && gathers_at_symbolic_stride(blocked, block, upcast_width(tiles)))
    return std::nullopt;
  if (upcast_axis(tiles) == block)
    if (std::optional<std::vector<Opt>> paired = with_row_pairs(kernel, prefix, tiles, columns->arg_int(), block, caps))
      return paired;
  if (upcast_axis(tiles) == block)
    if (std::optional<std::vector<Opt>> rows = with_symbolic_row_block(blocked, prefix, tiles, caps)) return rows;
  prefix.insert(prefix.end(), tiles.begin(), tiles.end());
  return prefix;
}

// A reduction over a symbolic axis along which every load that moves with it is contiguous (a
// global average pool over an image of any size, a softmax's sums over a sequence of any length;
// not a matmul, whose other operand steps by a row) ran one scalar sum per output, each step
// waiting on the last add, or gathered its output rows' values n apart into a vector: in blocks
// of one vector, as a symbolic output loop's (vector_block_opts), it keeps one partial sum per lane.
// DeepLabV3's SE pools at 224×224 (480 and 672 channels of 14×14), one thread: 0.205 -> 0.038 ms
// and 0.191 -> 0.036 (the fixed plan's, unrolled by LLVM over 14 known steps: 0.067 and 0.062).
// PADTO(lanes) on the reduce loop masks its loads and adds the identity past its end, SPLIT(lanes)
// (exact after the PADTO) gives a constant inner reduce loop, and UPCAST makes that the vector.
std::optional<std::vector<Opt>> symbolic_reduce_vector_opts(const UOpPtr& kernel, const TargetCaps& caps) {
  if (!caps.supports_vector_ops) return std::nullopt;
  std::vector<Access> accesses = global_accesses(kernel);
  for (const UOp* range : kernel_ranges(kernel)) {
    if (axis_kind(range->arg_int()) != AxisKind::Reduce || range->src(0)->is_const()) continue;
    int lanes = kernel_lanes(kernel, caps, range);
    if (lanes < 4 || range->src(0)->vmax() < lanes) continue;
    bool contiguous = false, other = false;
    for (const Access& access : accesses) {
      if (access.is_store || !depends_on(access.index, range)) continue;
      std::optional<int64_t> step = index_stride(access.index, range);
      // Loads of another width than the values summed (BERT's u8 attention mask beside its f32
      // scores) made the vector code slower than the scalar loop: its softmax sum 0.22 -> 0.42 ms.
      bool same_width = access.index->src(0)->dtype().base().scalar_bytes() == DType(dtypes::f32).scalar_bytes() ||
                        only_max_reductions(kernel);
      if (step && *step == 1 && same_width) contiguous = true;
      else other = true;
    }
    if (!contiguous || other) continue;
    std::vector<Opt> opts{{OptOp::Padto, range->arg_int(), lanes}, {OptOp::Split, range->arg_int(), lanes}};
    try {
      UOpPtr split = apply_opts(kernel, opts);
      int64_t inner = kFirstReduceAxis;
      for (const UOp* r : kernel_ranges(split))
        if (axis_kind(r->arg_int()) == AxisKind::Reduce) inner = std::max(inner, r->arg_int());
      opts.push_back({OptOp::Upcast, inner, lanes});
      (void)apply_opts(kernel, opts);
    } catch (const InvalidOpt&) {
      continue;
    }
    return opts;
  }
  return std::nullopt;
}

namespace {

// An elementwise kernel over an image of any size runs each row as a loop of unknown length, which
// LLVM vectorises with a scalar remainder: a 14-pixel row is all remainder (DeepLabV3's SE scaling
// kernels over 480 channels of 14×14 ran 5x slower than their fixed twins, whose 196 pixels LLVM
// sees whole). Where the stores run contiguously over the rows and the columns (the rows' step is
// the columns' extent), the two loops become one (MERGE): m / w and m % w, which every index then
// folds back to m (linear_terms.h). Not where a division stays (a padded copy tests the row and
// the column apart), which would cost one per element.
std::vector<Opt> rows_and_columns_merged(const UOpPtr& kernel);

}  // namespace

std::vector<Opt> symbolic_rows_merged(const UOpPtr& kernel) {
  std::vector<const UOp*> order = toposort(kernel);
  if (std::ranges::any_of(order, [](const UOp* node) { return node->op() == Ops::REDUCE; })) return {};
  return rows_and_columns_merged(kernel);
}

namespace {

// The MERGE of symbolic_rows_merged, for any kernel: the innermost output loop (symbolic,
// store-contiguous) and the loop around it as one loop, where the stores run contiguously over
// both and no index is left dividing by a size.
std::vector<Opt> rows_and_columns_merged(const UOpPtr& kernel) {
  // The innermost output loop (the columns) and the one around it (the rows).
  std::vector<const UOp*> loops;
  for (const UOp* range : kernel_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Loop) loops.push_back(range);
  if (loops.size() < 2) return {};
  const UOp* columns = loops.back();
  const UOp* rows = loops[loops.size() - 2];
  if (columns->src(0)->is_const() || store_stride(kernel, columns) != 1) return {};
  // The rows' step, measured between rows 0 and 1 and between 1 and 2 (a product of a row and a
  // symbolic width folds only where the row is a number). The MERGE is right either way; this
  // only picks where it helps.
  for (const UOpPtr& store : kernel->srcs()) {
    const UOpPtr& offset = store->src(0)->src(1);
    auto at_row = [&](int64_t row) { return substitute(offset, {{rows, const_like(rows->self(), row)}}); };
    for (int64_t row : {0, 1}) {
      UOpPtr beyond_a_row = simplify(at_row(row + 1) - at_row(row) - columns->src(0));
      if (!beyond_a_row->is_const() || beyond_a_row->const_int() != 0) return {};
    }
  }
  std::vector<Opt> merged{{OptOp::Merge, rows->arg_int(), columns->arg_int()}};
  UOpPtr result;
  try {
    result = apply_opts(kernel, merged);
  } catch (const InvalidOpt&) {
    return {};
  }
  bool divides = std::ranges::any_of(toposort(result), [](const UOp* node) {
    return (node->op() == Ops::IDIV || node->op() == Ops::MOD) && !node->src(1)->is_const();
  });
  return divides ? std::vector<Opt>{} : merged;
}

}  // namespace

// A reduction over an image of any size whose rows and columns merge into one contiguous loop (a
// 1x1 conv without stride: every load and store steps over the pixels as one run) takes its
// vector blocks over the merged pixels, as a fixed plan merges them (constant_loop_opts): only
// the image's last block is masked, where blocks of each row padded every row to whole vectors
// (56 pixels to 64), and the blocks pair up into the tile's two columns at any image width
// (with_row_pairs). DeepLabV3's 24 -> 72 conv at 56×56, one thread: 0.28 -> 0.18 ms (fixed plan
// 0.14); with image_outgrows_l2's expansion rule the model at 224×224 7.1 -> 6.4 ms (fixed 5.9).
std::optional<std::vector<Opt>> merged_pixel_block_opts(const UOpPtr& kernel, const TargetCaps& caps) {
  if (symbolic_vector_loop(kernel) == nullptr) return std::nullopt;
  std::vector<Opt> merge = rows_and_columns_merged(kernel);
  if (merge.empty()) return std::nullopt;
  std::optional<std::vector<Opt>> blocks = vector_block_opts(apply_opts(kernel, merge), caps);
  if (!blocks) return std::nullopt;
  merge.insert(merge.end(), blocks->begin(), blocks->end());
  return merge;
}

// A transposing copy that transpose_opts leaves alone (another load moves along the loop it would
// swap in: a dequantization's per-column scale beside the transposed values), or whose stores run
// along a symbolic loop: the stores' loop becomes the vector (in blocks of one vector where it is
// symbolic, PADTO and SPLIT as vector_block_opts makes them) and the loop along which the
// transposed load is contiguous is unrolled by kTransposeUnroll, so that the unrolled vectors'
// lanes gather from the same cache lines one after another. Left to LLVM, each element was a
// scalar load from a new line: int8 BERT's key dequantized into (heads, 64, tokens) for its
// attention scores, 128 tokens, one thread: 0.127 -> 0.034 ms (4 layers). The transposed load
// must step by a constant (a row of the source, not a size) and the kernel be cheap per element.
constexpr int64_t kTransposeUnroll = 8;
std::optional<std::vector<Opt>> transposed_block_opts(const UOpPtr& kernel, const TargetCaps& caps) {
  int lanes = kernel_lanes(kernel, caps);
  if (!caps.supports_vector_ops || lanes < 4 || alu_cost(kernel) >= kExpensiveElementwise) return std::nullopt;
  std::vector<const UOp*> loops;
  for (const UOp* range : kernel_ranges(kernel)) {
    if (axis_kind(range->arg_int()) != AxisKind::Loop) return std::nullopt;  // a reduction, or optimised already
    loops.push_back(range);
  }
  if (loops.size() < 2) return std::nullopt;
  const UOp* inner = *std::ranges::max_element(loops, {}, [](const UOp* range) { return range->arg_int(); });
  if (store_stride(kernel, inner) != 1) return std::nullopt;
  const Access* transposed = nullptr;
  std::vector<Access> accesses = global_accesses(kernel);
  for (const Access& access : accesses) {
    if (access.is_store) continue;
    std::optional<int64_t> step = index_stride(access.index, inner);
    if (step && (*step == 0 || *step == 1)) continue;
    if (!step || transposed != nullptr) return std::nullopt;  // a step of a size, or two transposed loads
    transposed = &access;
  }
  if (transposed == nullptr) return std::nullopt;
  const UOp* along = nullptr;
  for (const UOp* range : loops)
    if (range != inner && range->src(0)->is_const() && extent_of(range) % 2 == 0 &&
        index_stride(transposed->index, range) == int64_t{1})
      along = range;
  if (along == nullptr) return std::nullopt;
  int64_t unroll = kTransposeUnroll;
  while (extent_of(along) % unroll != 0) unroll /= 2;
  std::vector<Opt> opts;
  int64_t vector_axis = inner->arg_int();
  if (!inner->src(0)->is_const() || extent_of(inner) % lanes != 0) {
    opts.push_back({OptOp::Padto, inner->arg_int(), lanes});
    if (!inner->src(0)->is_const()) opts.push_back({OptOp::Split, inner->arg_int(), lanes});
  }
  try {
    if (opts.size() == 2) vector_axis = innermost_output_axis(apply_opts(kernel, opts));
    opts.push_back({OptOp::Upcast, vector_axis, lanes});
    opts.push_back({OptOp::Unroll, along->arg_int(), unroll});
    (void)apply_opts(kernel, opts);
  } catch (const InvalidOpt&) {
    return std::nullopt;
  }
  return opts;
}

}  // namespace kiln::heuristics
