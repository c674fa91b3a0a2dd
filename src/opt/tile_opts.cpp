// Register tiles over a kernel's constant loops (heuristics.h, steps 1-3): the vector axis, the
// tile's rows and columns, the loop order, and the candidates a narrow or unaligned axis is tried
// as (merged, padded, in row blocks); transposing copies; symbolic row loops in constant blocks.
#include <algorithm>
#include <limits>
#include <optional>

#include "codegen/llvm/strided_gather.h"
#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/heuristics.h"
#include "opt/heuristics_internal.h"
#include "opt/kernel_analysis.h"
#include "passes/symbolic.h"

namespace kiln::heuristics {

namespace {

// An output axis r and a short reduce axis k (at most 7 steps) such that every load inside the
// reduction that depends on r reads it as r + k (equal strides): the rows of a sliding window.
std::optional<std::pair<const UOp*, const UOp*>> sliding_window(const UOpPtr& kernel, const std::vector<const UOp*>& outputs,
                                                                 const UOp* vector_axis) {
  std::vector<const UOp*> reduces;
  for (const UOp* range : tunable_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Reduce && extent_of(range) <= 7) reduces.push_back(range);
  std::vector<Access> accesses = global_accesses(kernel);
  for (const UOp* rows : outputs) {
    if (rows == vector_axis || extent_of(rows) < 4) continue;
    for (const UOp* window : reduces) {
      bool slides = false, other = false;
      for (const Access& access : accesses) {
        if (access.is_store || !access.in_reduction || !depends_on(access.index, rows)) continue;
        std::optional<int64_t> a = index_stride(access.index, rows), b = index_stride(access.index, window);
        if (a && b && *a == *b && *a != 0) slides = true;
        else other = true;
      }
      if (slides && !other) return std::make_pair(rows, window);
    }
  }
  return std::nullopt;
}

// A max pool's gathered windows: the vector, two vector columns (where the vectors pair up) and 8
// rows of another output axis (the channels; 4 with 16 registers). Every tap's index and padding
// masks are the same for all channels, so the rows share them, and up to 16 independent maxima
// hide each other's latency. ResNet-50's 3x3 stride-2 pool, 64 channels at 112 -> 56, one thread
// on an AVX-512 Xeon: 557 -> 237-280 µs (the tile that `kiln tune` found; onnxruntime 450).
std::vector<Opt> max_pool_tile(const std::vector<const UOp*>& outputs, const UOp* vector_axis, int64_t width,
                               const TargetCaps& caps) {
  std::vector<Opt> opts{{OptOp::Upcast, vector_axis->arg_int(), width}};
  int64_t rows = caps.vector_registers >= 32 ? 8 : 4;
  if ((extent_of(vector_axis) / width) % 2 == 0) opts.push_back({OptOp::Unroll, vector_axis->arg_int(), 2});
  for (const UOp* range : outputs) {
    if (range == vector_axis || extent_of(range) % rows != 0) continue;
    opts.push_back({OptOp::Unroll, range->arg_int(), rows});
    break;
  }
  return opts;
}

// Independent accumulators a register tile needs to keep the FMA units busy: an FMA's result is
// ready 4 cycles later and two issue per cycle, so 8 chains are in flight.
constexpr int64_t kLatencyAccumulators = 8;

// A tile of fewer than kLatencyAccumulators accumulators waits on its own FMAs. That happens when
// the row axis allows only a few rows: ShuffleNet's grouped 1x1 convs have 68 or 34 filters per
// group (4 rows, the largest count that divides them). Another output loop unrolled as well gives
// more chains, even one whose vector loads differ (a group axis: one input vector per group), as
// long as the accumulators, those vector loads and the row broadcasts fit the register file.
// ShuffleNet on the AVX-512 Xeon, per-kernel minima: its 1x1 group convs at 28×28 0.51 → 0.37 ms
// and at 14×14 0.71 → 0.60 and 0.60 → 0.52 at one thread (16 accumulators instead of 4, as
// `kiln tune` had found), the model 9 % faster at one thread and 7 % at two; of the other models
// only Ultraface's plan changed (no faster, no slower).
std::optional<Opt> more_accumulators(const std::vector<const UOp*>& outputs, const UOp* vector_axis, const UOp* row_axis,
                                     int64_t rows, int64_t columns, const TargetCaps& caps) {
  for (const UOp* other : outputs) {
    if (other == row_axis || other == vector_axis) continue;
    for (int64_t copies : {4, 2}) {
      int64_t registers = rows * columns * copies + columns * copies + rows;
      if (extent_of(other) % copies == 0 && registers <= caps.vector_registers)
        return Opt{OptOp::Unroll, other->arg_int(), copies};
    }
  }
  return std::nullopt;
}

// Whether every row tile reads the same strip of the vector operand: its vector loads vary with
// nothing but the vector axis and the reduction (a matmul's b, a 1x1 conv's input).
bool strip_shared_by_rows(const UOpPtr& upcasted, const UOp* upcast, const UOp* vector_axis) {
  return !reduction_load_also_varies(upcasted, upcast, [&](const UOp* loop) {
    return axis_kind(loop->arg_int()) == AxisKind::Loop && loop->arg_int() != vector_axis->arg_int();
  });
}

// Whether a register tile of 4 rows × 4 vector columns beats 8 rows × 2 columns. With the columns
// outermost (step 3), each strip of columns re-reads the whole row operand (rows × reduction
// steps). When that operand is larger than the L2, and the vector operand is too large for the row
// blocks that would keep rows in the L2 (with_row_blocks), every strip streams it from the L3: at
// 32 columns a step of 16 FMAs (8 rows × 2 columns) needs 32 bytes of it, ~11 GB/s at one core's
// peak, more than this Xeon's L3 sustains beside the FMAs. Strips of 64 columns halve that (1024³
// and 2048³ matmuls, one thread: 143-153 → 157-162 GFLOP/s; two threads 87-91 → 91-94 % of peak).
// Where the row operand fits in the L2 the narrow tile stays: BERT-base's 128-row products ran
// 12-25 % slower with the wide one, and ResNet-50's convs (row blocks) 5-13 %.
bool wide_strip_pays(const UOpPtr& upcasted, const UOp* upcast, const UOp* vector_axis, const UOp* row_axis,
                     int64_t width, const TargetCaps& caps) {
  if (row_axis == nullptr || extent_of(row_axis) % 4 != 0 || (extent_of(vector_axis) / width) % 4 != 0) return false;
  int64_t reduce_steps = reduction_steps(tunable_ranges(upcasted));
  if (reduce_steps <= 1) return false;
  int64_t element_bytes = caps.vector_bytes / width;
  int64_t row_operand = reduce_steps * extent_of(row_axis) * element_bytes;
  int64_t vector_operand = reduce_steps * extent_of(vector_axis) * element_bytes;
  // The same strip for every row tile is what puts the columns outermost.
  return strip_shared_by_rows(upcasted, upcast, vector_axis) && row_operand > caps.l2_bytes &&
         vector_operand > caps.l2_bytes / 2;
}

// The fewest vectors along a tile's vector axis that pair up with one vector computed twice (an
// extra 1/15 of the work at most).
constexpr int64_t kMinPairedVectors = 15;

// 1b. When no output axis can be the vector (each output's loads run along the reduction: a
// LayerNorm's or softmax's rows), a kernel computing in f16 takes its vector along a reduce axis
// whose loads inside the reduction are all contiguous in it: each lane reduces every W-th step and
// the lanes are combined at the end (opt/expand.h). Such f32 kernels are left to LLVM's loop
// vectoriser, which does the same; for f16 it narrows the ops to halves and picks 4-8 lanes
// (BERT-base fp16's LayerNorm rows ran 5x slower than the f32 ones).
std::vector<Opt> reduction_vector_opts(const UOpPtr& kernel, int lanes) {
  for (const UOp* range : tunable_ranges(kernel)) {
    if (axis_kind(range->arg_int()) != AxisKind::Reduce) continue;
    for (int64_t w = lanes; w >= 4; w /= 2) {
      if (extent_of(range) % w != 0) continue;
      UOpPtr candidate = apply_opt(kernel, {OptOp::Upcast, range->arg_int(), w});
      const UOp* lanes_range = nullptr;
      for (const UOp* r : tunable_ranges(candidate))
        if (axis_kind(r->arg_int()) == AxisKind::Upcast) lanes_range = r;
      bool fits = lanes_range != nullptr, vector_loads = false;
      for (const Access& access : global_accesses(candidate)) {
        if (!fits || access.is_store || !depends_on(access.index, lanes_range)) continue;
        fits = contiguous_in(access.index, lanes_range, w);
        vector_loads = true;
      }
      if (fits && vector_loads) return {{OptOp::Upcast, range->arg_int(), w}};
    }
  }
  return {};
}

// Reduction steps below which a scatter of symbolic stride is not taken (tile_opts, step 1).
constexpr int64_t kMinStepsPerSymbolicScatter = 64;

}  // namespace

// `rows_only`: the id of an output axis that may be the tile's rows but not its vector (-1: none).
std::vector<Opt> tile_opts(const UOpPtr& kernel, const TargetCaps& caps, int64_t rows_only) {
  std::vector<Opt> opts;
  if (!caps.supports_vector_ops) return opts;
  std::vector<const UOp*> ranges = tunable_ranges(kernel);
  std::vector<const UOp*> outputs;
  bool reduces = false;
  for (const UOp* range : ranges) {
    AxisKind kind = axis_kind(range->arg_int());
    if (kind == AxisKind::Loop) outputs.push_back(range);
    else if (kind != AxisKind::Reduce) return opts;  // already optimised
  }
  // A symbolic reduction counts too (attention's P·V over the sequence), though not tunable itself.
  for (const UOp* range : kernel_ranges(kernel)) reduces = reduces || axis_kind(range->arg_int()) == AxisKind::Reduce;
  int lanes = kernel_lanes(kernel, caps);
  // A maximum to one value (a whole tensor's min or max: DynamicQuantizeLinear's range) has no
  // output axis to be the vector; its lanes run along the reduction. LLVM's loop vectoriser leaves
  // such a loop scalar (the NaN-propagating maximum is no reassociable max, only_max_reductions),
  // one element per step at 0.4 GFLOP/s (a BERT FFN's 128×1024 GELU output, 0.32 ms per range). A
  // sum stays with LLVM, which vectorises it with four accumulators (step 1b's note).
  // The same for a few outputs each reducing a long loop: a whole tensor's maximum in parts
  // (Tensor's reduce: the parts are outputs the threads share).
  int64_t output_count = 1, steps_per_output = 1;
  for (const UOp* range : ranges)
    (axis_kind(range->arg_int()) == AxisKind::Loop ? output_count : steps_per_output) *= extent_of(range);
  bool few_long_maxima = output_count <= 64 && steps_per_output >= 16 * lanes;
  if ((outputs.empty() || few_long_maxima) && reduces && lanes >= 4 && only_max_reductions(kernel)) {
    std::vector<Opt> along = reduction_vector_opts(kernel, lanes);
    // Four vectors a step, maximised in a tree before the accumulator: one vector a step waited
    // on the last step's maximum (a compare and a select, NaN-propagating), 17 GB/s over the int8
    // BERT's 128×1024 GELU output.
    if (along.size() == 1) {
      UOpPtr vectorised = apply_opts(kernel, along);  // holds the ranges the loop reads
      for (const UOp* range : tunable_ranges(vectorised))
        if (range->arg_int() == along[0].axis && extent_of(range) % 4 == 0) along.push_back({OptOp::Unroll, along[0].axis, 4});
    }
    return along;
  }
  // Kernels without a reduction are left to LLVM's loop vectoriser, which interleaves and unrolls
  // a streaming loop better than one explicit vector per iteration (c = a + b: 33-39 GB/s against
  // 30-33 with an UPCAST, alternating runs on this machine) — unless they compute enough per
  // element to be compute-bound (LLVM left YOLOX's SiLU kernels, a sigmoid's exp2 polynomial,
  // scalar), or compute in f16 (f16_needs_own_vectors).
  if (lanes < 4 || outputs.empty() ||
      (!reduces && alu_cost(kernel) < kExpensiveElementwise && !f16_needs_own_vectors(kernel)))
    return opts;

  // 1. The vector axis: the first output axis and width (the widest first) for which the UPCAST
  // makes every store and every load inside a reduction that varies with it contiguous. Failing
  // that, scattered stores, and then gathered loads inside the reduction (a strided conv's input):
  // one gather is then shared by the register tile's rows, which step 2 requires.
  const UOp* vector_axis = nullptr;
  const UOp* upcast = nullptr;
  int64_t width = 0;
  UOpPtr upcasted;
  bool gathers = false, scatters = false;
  // Every gathered load is a strided one (strided_in).
  bool strided_only = false;
  // Passes, in order of preference: everything contiguous; stores scattered lane by lane (once per
  // output, after the whole reduction: BERT's key projection writes K transposed); loads inside
  // the reduction gathered.
  enum class Pass { Contiguous, ScatteredStores, GatheredLoads };
  // With kernel taps (a 3x3 conv), a full-width scattering vector comes before narrower contiguous
  // ones: a 56×56 conv's pixels take 8 lanes (or 16 padded to 64), its filters, in the weight's
  // panels, 16 (ResNet-50's 3x3 convs at 56×56: 76 → 92 GFLOP/s). Without taps (a 1x1 conv) the
  // pixels stay first: its filters would read a new input line every step (1x1 convs at 28×28 and
  // 56×56: 100-108 GFLOP/s as pixels, 58-66 as filters).
  int reduce_axes = 0;
  for (const UOp* range : ranges)
    if (axis_kind(range->arg_int()) == AxisKind::Reduce) ++reduce_axes;
  // The early full-width scatter also needs a load inside the reduction that the lanes read
  // contiguously (the weight's panel): a vector of filters whose weight is one broadcast value (the
  // weight-stripped test models) would give up the rows that load nothing of their own (step 2),
  // whose copies are computed once (VGG-19's light model: 0.64 → 1.04 of onnxruntime's time).
  struct Search {
    Pass pass;
    bool full_width_only;
    bool needs_vector_loads = false;
  };
  std::vector<Search> searches{{Pass::Contiguous, true}};
  if (reduce_axes > 1) searches.push_back({Pass::ScatteredStores, true, true});
  searches.push_back({Pass::Contiguous, false});
  // A scatter or gather per output vector pays off only with a reduction's work behind each store;
  // an elementwise kernel (DenseNet's concat + BatchNorm + ReLU at 14×14) pads its pixels instead.
  if (reduces) searches.insert(searches.end(), {{Pass::ScatteredStores, false}, {Pass::GatheredLoads, false}});
  for (Search search : searches) {
    Pass pass = search.pass;
    for (const UOp* range : outputs) {
      if (range->arg_int() == rows_only) continue;
      for (int64_t w = lanes; w >= 4 && vector_axis == nullptr; w /= 2) {
        if (extent_of(range) % w != 0 || (search.full_width_only && w != lanes)) continue;
        UOpPtr candidate = apply_opt(kernel, {OptOp::Upcast, range->arg_int(), w});
        const UOp* lanes_range = nullptr;
        for (const UOp* r : tunable_ranges(candidate))
          if (axis_kind(r->arg_int()) == AxisKind::Upcast) lanes_range = r;
        bool fits = lanes_range != nullptr, gathered = false, scattered = false, vector_loads = false;
        bool strided = true;
        for (const Access& access : global_accesses(candidate)) {
          if (!fits) break;
          if (!access.is_store && access.in_reduction && depends_on(access.index, lanes_range)) vector_loads = true;
          if (access.is_store) {
            bool contiguous = contiguous_in(access.index, lanes_range, w);
            // A scatter whose lanes lie a symbolic stride apart (NCHW planes of an image of any
            // size) computes and extracts a 64-bit address per lane, which a short reduction does
            // not pay for: DeepLabV3's stem conv (27 steps) ran 4.6x slower than its fixed twin.
            bool symbolic_scatter = !contiguous && !lane_stride(access.index, lanes_range, w);
            fits = contiguous || (pass == Pass::ScatteredStores &&
                                  !(symbolic_scatter && reduction_steps(ranges) < kMinStepsPerSymbolicScatter));
            scattered = scattered || !contiguous;
          } else if (access.in_reduction && depends_on(access.index, lanes_range) &&
                     !contiguous_in(access.index, lanes_range, w)) {
            gathered = true;
            strided = strided && strided_in(access.index, lanes_range, w);
            fits = pass == Pass::GatheredLoads;
          }
        }
        if (!fits || (search.needs_vector_loads && !vector_loads)) continue;
        vector_axis = range;
        upcast = lanes_range;
        width = w;
        upcasted = candidate;
        gathers = gathered;  // gathered loads or scattered stores: worth it only under a register tile
        scatters = scattered;
        strided_only = gathered && strided;
      }
      if (vector_axis != nullptr) break;
    }
    if (vector_axis != nullptr) break;
  }
  if (vector_axis == nullptr) return computes_f16(kernel) ? reduction_vector_opts(kernel, lanes) : opts;
  opts.push_back({OptOp::Upcast, vector_axis->arg_int(), width});

  // 2. The register tile: rows whose loads inside the reduction do not vary with the vector axis,
  // and whose vector loads do not vary with the rows.
  // Failing that, rows that load nothing of their own (a conv whose weight is one broadcast value,
  // as in the weight-stripped test models): the copies are then the same REDUCE, computed once and
  // stored R times.
  // Of several such axes, the one whose row loads are nearest each other: a 1x1 conv's rows along
  // the image row read one cache line per reduction step, down the image column one line per row,
  // and those lines no longer stay in L1 over a long reduction (MobileNetV2's 1x1 convs at 14×14 on
  // an AVX2 Zen 3, one thread: 18 -> 48-62 GFLOP/s).
  const UOp* row_axis = nullptr;
  const UOp* plain_rows = nullptr;
  int64_t row_stride = 0;
  for (const UOp* range : outputs) {
    if (range == vector_axis) continue;
    bool shares_vector_loads = true, has_row_loads = false;
    int64_t stride = 0;
    for (const Access& access : global_accesses(upcasted)) {
      if (access.is_store || !access.in_reduction) continue;
      bool on_vector = depends_on(access.index, upcast), on_rows = depends_on(access.index, range);
      if (on_vector && on_rows) shares_vector_loads = false;
      if (on_rows && !on_vector) {
        has_row_loads = true;
        std::optional<int64_t> step = index_stride(access.index, range);
        stride = std::max(stride, step ? std::abs(*step) : std::numeric_limits<int64_t>::max());
      }
    }
    // Of rows whose steps are unknown alike (a SPLIT's blocks and rows read through a clamp), the
    // inner loop: the block's rows are next to each other, the blocks kRowBlock rows apart.
    bool unknown_alike = stride == row_stride && stride == std::numeric_limits<int64_t>::max();
    if (shares_vector_loads && has_row_loads && (row_axis == nullptr || stride < row_stride || unknown_alike)) {
      row_axis = range;
      row_stride = stride;
    }
    if (shares_vector_loads && !has_row_loads && plain_rows == nullptr) plain_rows = range;
  }
  bool rows_load_nothing = row_axis == nullptr && plain_rows != nullptr;
  if (row_axis == nullptr) row_axis = plain_rows;
  // The tile's accumulators, one vector load per column and one broadcast per row must fit in the
  // register file: LLVM loads every row's broadcast of a reduction step before the FMAs that use
  // them, so the rows count once more (tile_fits).
  auto tile_fits = [&](int64_t rows, int64_t cols) { return rows * cols + rows + cols <= caps.vector_registers; };
  // A gather or scatter per output vector is not worth it: those need a tile of at least 4 rows.
  // A scattering tile (a strided conv's filters as the vector, its output pixels as rows) may use
  // 7 or 5 rows, which a 7×7 or 14×14 image divides into.
  // With 32 registers the most rows that fit come first: every reduction step loads the columns'
  // vectors and one broadcast per row for rows × columns FMAs, and a 4-row tile of 2 columns (the
  // choice for 28 or 56 rows when 6 came first) spends 6 loads on 8 FMAs. A 1x1 conv 512->128 at
  // 28×28, channels-last, one thread on an AVX-512 Xeon: 4 rows 144-151 GFLOP/s, 7 rows 161. All
  // 15 models at one thread 0.96x (geomean; DenseNet 0.93, VGG-19 0.92, BERT 0.93), at two 0.95x.
  // With 16 (AVX2) two columns allow at most 4 rows anyway, and one column's 6 rows stay first.
  bool many_registers = caps.vector_registers >= 32;
  std::vector<int64_t> row_choices = gathers    ? std::vector<int64_t>{8, 6, 4}
                                     : scatters ? (many_registers ? std::vector<int64_t>{8, 7, 6, 5, 4}
                                                                  : std::vector<int64_t>{6, 4, 8, 7, 5})
                                     : many_registers ? std::vector<int64_t>{8, 7, 6, 5, 4, 3, 2}
                                                      : std::vector<int64_t>{6, 4, 8, 7, 5, 3, 2};
  // Two vector columns where the register file holds a tile of them: each broadcast row value then
  // feeds two FMAs. Gathered columns cost a load per lane, so a gathering tile is one column. With
  // 16 registers (AVX2) two columns allow at most 4 rows (8 accumulators + 2 loads + 4 broadcasts);
  // the classic 6x16 tile spilled three accumulators every reduction step in LLVM's schedule (3x3
  // 64->192 @56 on an AVX2 Zen 3: 38 -> 63 GFLOP/s at 4 rows). Where no row count fits two
  // columns, the tile is one column.
  int64_t tile_rows = 0, columns = 1;
  auto pick_rows = [&](int64_t cols) -> int64_t {
    if (row_axis == nullptr) return 0;
    for (int64_t rows : row_choices)
      if (tile_fits(rows, cols) && extent_of(row_axis) % rows == 0) return rows;
    return 0;
  };
  // Two columns unless one column holds more accumulators: a channels-last conv at 14×14 has 14
  // pixel rows, which 2 rows of 2 columns divide, and 7 rows of 1 column.
  if (!gathers && (extent_of(vector_axis) / width) % 2 == 0 && tile_fits(2, 2)) {
    columns = 2;
    tile_rows = pick_rows(2);
    if (pick_rows(1) > 2 * tile_rows) columns = 1;
  }
  // An odd number of vectors, at least kMinPairedVectors of them, pairs up too: the vector loop is
  // SPLIT in pairs (its last pair reads the last vector twice, and stores it once), and the pair
  // is the tile's two columns. One column of 8 rows issues 9 loads (8 broadcasts and the vector)
  // for 8 FMAs, which two load ports per cycle do not keep ahead of two FMA pipes; two columns
  // issue 10 for 16. 1x1 convs at 28×28 (49 vectors of pixels) and 52×52 (169), one thread on
  // the AVX-512 Xeon: 128->512 + add 0.86 -> 0.71 ms, 128->256 1.41 -> 1.11. (The same pairs
  // from a PADTO of the pixels ran slower at 52×52: LLVM turned the padded vector's mask into a
  // branch inside the reduction.)
  // A matrix-vector product (a reduction whose one output loop is the vector) pairs its vectors
  // too: a pair of vectors reads a whole row of the weight's 32-column panel per step, where one
  // vector read half of it and the next column tile the other half. A classifier's 2048 -> 1000
  // (63 vectors), one thread: 0.43 -> 0.27 ms; two threads 0.22 -> 0.14.
  int64_t vectors = extent_of(vector_axis) / width;
  bool matrix_vector = row_axis == nullptr && reduces && outputs.size() == 1;
  bool pairs_by_split = false;
  if (!gathers && !scatters && !rows_load_nothing && columns == 1 && vectors % 2 == 1 &&
      vectors >= kMinPairedVectors && (matrix_vector || pick_rows(2) >= 4)) {
    columns = 2;
    tile_rows = pick_rows(2);
    pairs_by_split = true;
  }
  if (columns == 1) tile_rows = pick_rows(1);
  if (columns == 2 && !pairs_by_split && tile_rows > 4 && wide_strip_pays(upcasted, upcast, vector_axis, row_axis, width, caps) &&
      tile_fits(4, 4)) {
    columns = 4;
    tile_rows = 4;
  }
  // Strided gathers of a sum (a stride-2 depthwise conv's input) are cheap enough without tile
  // rows: two vector loads and a shuffle per vector. Such a kernel gets its vector and the sliding
  // window below; without them it ran scalar (MobileNetV2's stride-2 depthwise 3x3 at 112 -> 56:
  // 17 GFLOP/s).
  bool strided_sums = gathers && !scatters && strided_only && !only_max_reductions(kernel);
  if ((gathers || scatters) && tile_rows == 0 && !strided_sums) {
    if (gathers && !scatters && only_max_reductions(kernel)) return max_pool_tile(outputs, vector_axis, width, caps);
    // Gathered lanes pay without tile rows too where each element costs many ALU ops and the
    // reduction is short loops that LLVM leaves scalar: a QDQ model's global average pool
    // dequantizes, applies HardSwish and quantizes and dequantizes again per element before the
    // sum (~25 ops, two divisions). As a scalar loop over its 7×7 window MobileNetV3's 576-channel
    // pool ran at 10 GFLOP/s. A long contiguous reduction (a LayerNorm's row) stays with LLVM.
    // Softmax sums over short rows (exp per element) qualify too: Ultraface's 2-class scores and
    // the BERTs' 9-key attention measured no slower (whole models within 1 %, alternating runs).
    bool short_reduction = std::all_of(ranges.begin(), ranges.end(), [&](const UOp* range) {
      return axis_kind(range->arg_int()) != AxisKind::Reduce || extent_of(range) < lanes;
    });
    if (gathers && !scatters && short_reduction && reduced_value_cost(kernel) >= kExpensiveElementwise)
      return opts;  // the UPCAST alone
    return {};
  }
  int64_t pair_axis = -1;  // the SPLIT's new loop, the pair's second column
  if (pairs_by_split) {
    opts.push_back({OptOp::Split, vector_axis->arg_int(), 2});
    pair_axis = new_output_axis(kernel, opts);
    opts.push_back({OptOp::Unroll, pair_axis, 2});
  } else if (columns > 1) {
    opts.push_back({OptOp::Unroll, vector_axis->arg_int(), columns});
  }
  if (row_axis != nullptr) {
    if (tile_rows != 0) opts.push_back({OptOp::Unroll, row_axis->arg_int(), tile_rows});
    if (tile_rows != 0 && tile_rows * columns < kLatencyAccumulators && !gathers && !scatters)
      if (std::optional<Opt> more = more_accumulators(outputs, vector_axis, row_axis, tile_rows, columns, caps))
        opts.push_back(*more);
  } else if (!gathers || strided_sums) {
    // A sliding window (a depthwise conv: output row oh reads input rows oh + kh): the window's
    // reduce axis unrolled whole and R output rows unrolled make the copies read R + K - 1 distinct
    // input rows instead of R·K (hash-consing merges the shared loads). The depthwise 3x3 of
    // bench-tensor went from 46-49 % to 57-61 % of peak (with the contraction of the copies' sum
    // into FMAs in the renderer).
    if (std::optional<std::pair<const UOp*, const UOp*>> window = sliding_window(upcasted, outputs, vector_axis)) {
      auto [rows_axis, window_axis] = *window;
      for (int64_t rows : {4, 7, 2}) {
        if (!tile_fits(rows, columns) || extent_of(rows_axis) % rows != 0) continue;
        opts.push_back({OptOp::Unroll, window_axis->arg_int(), extent_of(window_axis)});
        opts.push_back({OptOp::Unroll, rows_axis->arg_int(), rows});
        break;
      }
    }
  }
  // A vector without tile rows (a matrix-vector product: the classifier after a global pool) has one
  // accumulator, so each step waits for the previous FMA. Unrolling the reduction by 8 (copies
  // summed in a tree, added to the accumulator once) and then by 2 more takes that chain off the
  // critical path (MobileNetV2's 1280->1000 classifier alone, one thread, Zen 3: 203 -> 135-146 µs,
  // the order `kiln tune` found; onnxruntime 161).
  bool tile_has_rows = std::any_of(opts.begin(), opts.end(), [&](const Opt& opt) {
    return opt.op == OptOp::Unroll && opt.axis != vector_axis->arg_int() && opt.axis != pair_axis;
  });
  if (row_axis == nullptr && !gathers && !scatters && !tile_has_rows) {
    for (const UOp* range : ranges) {
      if (axis_kind(range->arg_int()) != AxisKind::Reduce) continue;
      int64_t steps = extent_of(range);
      if (steps % 16 == 0) {
        opts.push_back({OptOp::Unroll, range->arg_int(), 8});
        opts.push_back({OptOp::Unroll, range->arg_int(), 2});
      } else if (steps % 8 == 0) {
        opts.push_back({OptOp::Unroll, range->arg_int(), 8});
      }
      break;
    }
  }
  // 3. Loop order: with the vector columns outermost, one strip of the vector operand (every
  // reduction step × the tile's columns) is read by all the row tiles in turn; when the strip fits in
  // half the L2 it stays there, and only the row operand streams. The other order streams the whole
  // vector operand once per row tile (a 1024³ matmul fell from ~95 % of peak to 58 %).
  int64_t reduce_steps = reduction_steps(ranges);
  int64_t strip_bytes = reduce_steps * width * columns * (caps.vector_bytes / lanes);
  int64_t column_tiles = extent_of(vector_axis) / (width * columns);
  // An axis unrolled whole is gone (its outer part has extent 1), so look at the tiled kernel.
  UOpPtr tiled_kernel = apply_opts(kernel, opts);  // keeps the nodes `tiled` points to alive
  std::vector<const UOp*> tiled = tunable_ranges(tiled_kernel);
  bool has_axis_0 = std::any_of(tiled.begin(), tiled.end(), [](const UOp* r) { return r->arg_int() == 0; });
  // The strip is the same for every row tile only when the vector loads vary with nothing but the
  // vector axis and the reduction (a matmul's b, a 1x1 conv's input). A 3x3 conv's input rows also
  // vary with the output row: there each tile reads a strip of its own, and with the columns
  // outermost a 224×224 image's rows left the caches between filter tiles (VGG-19's convs at 224
  // and 112 on an AVX2 Zen 3: 28-30 -> 65-68 GFLOP/s without the SWAP).
  bool strip_shared = strip_shared_by_rows(upcasted, upcast, vector_axis);
  // Without a reduction nothing is re-read, and the columns outermost only walk the rows in
  // vector-wide strips (an elementwise SiLU over a padded 16x208x208 buffer: 0.38 -> 0.66 ms).
  // But the columns outermost also re-read the whole row operand (every row × every reduction step)
  // once per strip. When that operand does not stay in L1 and the whole vector operand stays in
  // the L2 anyway, the rows outermost are better: each row tile's weights stay in L1, the vector
  // operand comes from L2, and the stores stream along each row. A 1x1 conv 64->256 at 56×56
  // (256×64 weights, 64 KB; input 800 KB), one thread on the AVX-512 Xeon: 1.20 -> 0.75 ms
  // (docs/optimisation.md). With the weights in L1 (YOLOX's 64 filters) the columns outermost
  // stay as fast; with rows that load nothing (a weight of one broadcast value) they let LLVM
  // hoist the reduction out of the row loop, which the other order cannot.
  // Only when every strip reads the same rows: attention's P·V reads one head's P per strip (its
  // row loads vary with the columns' outer loop), and there BERT's context product ran 17 % slower
  // with the rows outermost.
  bool rows_same_for_every_strip =
      row_axis == nullptr || !reduction_load_also_varies(upcasted, row_axis, [&](const UOp* loop) {
        return loop->arg_int() == vector_axis->arg_int();  // the columns' outer loop
      });
  int64_t element_bytes = caps.vector_bytes / lanes;
  bool vector_operand_in_l2 = reduce_steps * extent_of(vector_axis) * element_bytes <= caps.l2_bytes / 2;
  bool row_operand_in_l1 = row_axis == nullptr || reduce_steps * extent_of(row_axis) * element_bytes <= caps.l1_bytes / 2;
  bool rows_outermost_better =
      vector_operand_in_l2 && !row_operand_in_l1 && !rows_load_nothing && rows_same_for_every_strip;
  if (row_axis != nullptr && has_axis_0 && vector_axis->arg_int() != 0 && strip_shared && reduce_steps > 1 &&
      strip_bytes <= caps.l2_bytes / 2 && column_tiles >= 4 && !rows_outermost_better)
    opts.push_back({OptOp::Swap, 0, vector_axis->arg_int()});
  return opts;
}

namespace {

// A transposing copy (stores contiguous along the innermost loop, a load strided along it and
// contiguous along another output loop) runs that other loop innermost: the loads then walk their
// lines in order and the stores are spread instead, which the store buffer absorbs. Read in store
// order, each load of a (C, H·W) → (H·W, C) transpose touched a new line and a row's lines did not
// stay in L1 (the channels-last copy of 1024×14×14, one thread, Zen 3: 150 -> 70 µs, as `kiln
// tune` had found). A load that steps by 2-4 along the other loop (the channels-last copy of every
// other pixel that a stride-2 1x1 conv reads) still walks its lines in order: ResNet-50's
// 256×56×56 → 28×28×256, one thread, AVX-512: 0.29-0.32 -> 0.15-0.17 ms.
// A pooling window of up to kPoolWindow taps per axis reads like such a copy: VGG-19's 2x2 max
// pools store into the next conv's channels-last padded input, and with a vector of 16 channels
// each lane's loads were a whole 224×224 plane apart (16 pages per load, 3.3 GB/s): 224×224×64,
// AVX-512 Xeon, 4.9 -> 2.1 ms at one thread and 2.5 -> 1.2 at two in the model (VGG-19 2 % and
// 1 % faster). Another load must not move along the other loop (a bias per channel is read once
// per inner loop); one that does would be spread by the swap.
constexpr int64_t kPoolWindow = 4;
std::vector<Opt> transpose_opts(const UOpPtr& kernel) {
  std::vector<const UOp*> outputs;
  for (const UOp* range : tunable_ranges(kernel)) {
    AxisKind kind = axis_kind(range->arg_int());
    if (kind == AxisKind::Reduce && range->src(0)->is_const() && extent_of(range) <= kPoolWindow) continue;
    if (kind != AxisKind::Loop) return {};  // a longer reduction, or optimised already
    outputs.push_back(range);
  }
  if (outputs.size() < 2) return {};
  const UOp* inner = *std::max_element(outputs.begin(), outputs.end(),
                                       [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });
  if (store_stride(kernel, inner) != 1) return {};
  std::vector<Access> loads = global_accesses(kernel);
  loads.erase(std::remove_if(loads.begin(), loads.end(), [](const Access& a) { return a.is_store; }), loads.end());
  // The transposed load: strided along the inner loop.
  const Access* transposed = nullptr;
  for (const Access& load : loads) {
    std::optional<int64_t> along_inner = index_stride(load.index, inner);
    if (!along_inner || *along_inner == 0 || *along_inner == 1) continue;
    if (transposed != nullptr) return {};
    transposed = &load;
  }
  if (transposed == nullptr) return {};
  for (const UOp* other : outputs) {
    if (other == inner || extent_of(other) < 4) continue;
    std::optional<int64_t> along_other = index_stride(transposed->index, other);
    if (!along_other || *along_other < 1 || *along_other > max_gather_stride) continue;
    // With another load moving along `other` too, the swap would spread it.
    bool others_still = std::all_of(loads.begin(), loads.end(), [&](const Access& load) {
      return &load == transposed || index_stride(load.index, other) == 0;
    });
    if (others_still) return {{OptOp::Swap, other->arg_int(), inner->arg_int()}};
  }
  return {};
}

}  // namespace

// Rows per block of a symbolic row loop (step 0). A sum of integer products (a dynamically
// quantized model's matmuls, i32 accumulators) is compute-bound even over few rows, where the
// block's padding is computed: the int8 BERT over 9 tokens computed 16 rows in blocks of 8, its
// matmuls 1.5x its fixed twin's time. Blocks of 4 rows (and a tile of 4 vectors) instead; fp32
// matmuls keep 8 (the fp32 BERT over 128 tokens ran 20 % slower in blocks of 4).
int64_t symbolic_row_block(const UOpPtr& kernel) {
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::REDUCE && node->dtype().is_int()) return kRowBlock / 2;
  return kRowBlock;
}

// The opts of steps 1-3 (heuristics.h), over the kernel's constant loops.
std::vector<Opt> constant_loop_opts(const UOpPtr& kernel, const TargetCaps& caps) {
  if (alu_cost(kernel) < kExpensiveElementwise)
    if (std::vector<Opt> swap = transpose_opts(kernel); !swap.empty()) return swap;
  int lanes = kernel_lanes(kernel, caps);
  // Candidates: the kernel as it is, and with a narrow output axis (a 14×14 or 7×7 image) merged
  // into the axis outside it when the stores stay contiguous; each also with its contiguous axis
  // padded to a multiple of the vector lanes (at most a third more iterations). The widest vectors
  // win; on a tie, the fewest changes.
  struct Candidate {
    std::vector<Opt> prefix;
    UOpPtr ast;
  };
  std::vector<Candidate> candidates{{{}, kernel}};
  std::vector<const UOp*> outputs;
  for (const UOp* range : tunable_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Loop) outputs.push_back(range);
  for (const UOp* inner : outputs) {
    if (store_stride(kernel, inner) != 1) continue;
    for (const UOp* outer : outputs) {
      if (outer == inner || store_stride(kernel, outer) != extent_of(inner) || masked_by(kernel, outer, inner)) continue;
      Opt merge{OptOp::Merge, outer->arg_int(), inner->arg_int()};
      candidates.push_back({{merge}, apply_opt(kernel, merge)});
    }
  }
  // A full-width vector over a conv's filters (scattered stores, over the weight's panels) wins over
  // padding the image's pixels to the lanes: ResNet-50's convs at 14×14 and 7×7 run at 84-104
  // GFLOP/s with the filters as vector, 66-69 (1x1) and 26-53 (3x3) with padded pixels.
  // Among equally wide vectors, a tile of at least kLatencyAccumulators independent accumulators
  // wins over a smaller one: two FMA pipes of 4 cycles' latency need 8 sums in flight. With 32
  // registers the first candidate nearly always has them; with 16 (AVX2) a 56×56 image's 7 vectors
  // of pixels allow one column of 4 rows, where the merged image allows 2 columns of 4 (bench-tensor
  // on an AVX2 Zen 3, 2 threads, 1x1 convs at 56×56: 51 -> 111 and 53 -> 119 GFLOP/s).
  constexpr int64_t kLatencyAccumulators = 8;
  // A padded candidate's accumulators count by the share of its iterations that are real (8 over
  // 7×7 pixels padded to 8 are worth 7, which a 7-row tile has without padding). Of equal
  // accumulators, the tile of more vector columns wins: its rows' broadcasts feed more FMAs (a 1x1
  // conv at 112×112, whose image rows are 7 vectors, gets 8 × 1 unmerged and 8 × 2 over the merged
  // pixels: MobileNetV2's 32->16 at 112×112, one thread, 0.124 -> 0.104 ms; YOLOX 2 % faster).
  // Then the one with the fewest padded iterations. A merged axis that is a gathering vector and
  // that the loads must divide again (a stride-2 pooling window over merged pixels: a division per
  // lane) is not taken; as contiguous lanes or as the tile's rows the division is once per vector
  // or row.
  std::vector<Opt> best;
  int64_t best_width = 0, best_padding = 0, best_columns = 0;
  double best_accumulators = 0;
  auto consider = [&](const std::vector<Opt>& prefix, const UOpPtr& ast, int64_t extent, int64_t padded,
                      int64_t iterations) {
    std::vector<Opt> tiles = tile_opts(ast, caps);
    for (const Opt& opt : prefix)
      if (opt.op == OptOp::Merge && opt.axis == upcast_axis(tiles) && divided_in_reduction(ast, opt.axis) &&
          gathers_lanes(ast, opt.axis, upcast_width(tiles)))
        return;
    int64_t width = upcast_width(tiles), padding = (padded - extent) * iterations;
    double accumulators = static_cast<double>(std::min(tile_accumulators(tiles), kLatencyAccumulators)) *
                          static_cast<double>(extent) / static_cast<double>(padded);
    // Two columns are what the rows need (two FMAs per broadcast); more (the 4 × 4 tile of
    // wide_strip_pays) is not better in itself.
    int64_t columns = std::min<int64_t>(tile_columns(tiles), 2);
    constexpr double kSame = 1e-9;
    bool same_accumulators = width == best_width && accumulators > best_accumulators - kSame && width > 0;
    bool better = width > best_width || (width == best_width && accumulators > best_accumulators + kSame) ||
                  (same_accumulators && columns > best_columns) ||
                  (same_accumulators && columns == best_columns && padding < best_padding);
    if (!better) return;
    best = prefix;
    best.insert(best.end(), tiles.begin(), tiles.end());
    best_width = width;
    best_accumulators = accumulators;
    best_columns = columns;
    best_padding = padding;
  };
  for (const Candidate& candidate : candidates) consider(candidate.prefix, candidate.ast, 1, 1, 0);
  if ((best_width >= lanes && best_accumulators >= kLatencyAccumulators) || lanes < 4) return best;
  // Padded candidates: the contiguous axis rounded up to a multiple of the vector lanes (so that it
  // vectorises), or of 7 or 6 (so that a register tile's rows divide it: SqueezeNet's 13×13 = 169
  // pixels of a 1x1 conv allow no tile rows, 175 allow 7), by at most a third.
  std::vector<int64_t> multiples{lanes};
  if (lanes >= 16) multiples.push_back(lanes / 2);
  multiples.insert(multiples.end(), {7, 6});
  for (const Candidate& candidate : candidates) {
    for (const UOp* range : tunable_ranges(candidate.ast)) {
      if (axis_kind(range->arg_int()) != AxisKind::Loop || store_stride(candidate.ast, range) != 1) continue;
      int64_t extent = extent_of(range), iterations = 1;
      for (const UOp* other : tunable_ranges(candidate.ast))
        if (other != range) iterations *= extent_of(other);
      for (int64_t multiple : multiples) {
        int64_t padded = (extent + multiple - 1) / multiple * multiple;
        if (padded == extent || 3 * padded > 4 * extent) continue;
        std::vector<Opt> prefix = candidate.prefix;
        prefix.push_back({OptOp::Padto, range->arg_int(), multiple});
        consider(prefix, apply_opt(candidate.ast, prefix.back()), extent, padded, iterations);
      }
    }
  }
  // Rows in blocks: an output loop that is not the contiguous one and that no tile's row count
  // divides (a matmul over 37 tokens, a prime) is SPLIT into blocks of kRowBlock rows, the last one
  // padded, so that the block's rows can be the tile's (BERT-base at sequence 37, one thread: the
  // dense layers had a 2-accumulator tile and the whole model took 325 ms; with blocks, 152).
  for (const UOp* range : outputs) {
    int64_t extent = extent_of(range);
    std::optional<int64_t> step = store_stride(kernel, range);
    if (!step || *step <= 1 || extent % kRowBlock == 0 || extent < 2 * kRowBlock) continue;
    int64_t padded = (extent + kRowBlock - 1) / kRowBlock * kRowBlock, iterations = 1;
    if (3 * padded > 4 * extent) continue;
    for (const UOp* other : outputs)
      if (other != range) iterations *= extent_of(other);
    Opt split{OptOp::Split, range->arg_int(), kRowBlock};
    consider({split}, apply_opt(kernel, split), extent, padded, iterations);
  }
  return best;
}

// The symbolic output loop of a kernel with a reduction that step 0 splits: of those whose stores
// step by a constant of more than one element (rows, not the contiguous axis, which would gather
// lanes through the clamp), the one with the smallest step.
const UOp* symbolic_row_loop(const UOpPtr& kernel) {
  bool reduces = false;
  for (const UOp* node : toposort(kernel)) reduces = reduces || node->op() == Ops::REDUCE;
  if (!reduces) return nullptr;
  const UOp* rows = nullptr;
  int64_t rows_step = 0;
  for (const UOp* range : kernel_ranges(kernel)) {
    if (axis_kind(range->arg_int()) != AxisKind::Loop || range->src(0)->is_const()) continue;
    if (range->src(0)->vmax() < 2 * kRowBlock) continue;  // a batch of at most 4: one block would mostly repeat rows
    std::optional<int64_t> step = store_stride(kernel, range);
    if (!step || *step <= 1) continue;
    if (rows == nullptr || *step < rows_step) {
      rows = range;
      rows_step = *step;
    }
  }
  return rows;
}

}  // namespace kiln::heuristics
