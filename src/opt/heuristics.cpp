// The hand-coded optimisation heuristics; see heuristics.h.
#include "opt/heuristics.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_set>

#include "codegen/llvm/strided_gather.h"
#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/dot_products.h"
#include "opt/expand.h"
#include "passes/symbolic.h"
#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

struct Access {
  const UOp* index;     // the INDEX node
  bool in_reduction;    // read inside a REDUCE's value (once per reduction step)
  bool is_store;
};

// Every LOAD and STORE of global memory, with whether it happens inside a reduction.
std::vector<Access> global_accesses(const UOpPtr& kernel) {
  std::vector<Access> accesses;
  std::unordered_set<const UOp*> inside;  // nodes under some REDUCE's value
  std::vector<const UOp*> order = toposort(kernel);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const UOp* node = *it;
    bool under = inside.count(node) != 0;
    if (node->op() == Ops::REDUCE || under)
      for (size_t i = 0; i < (node->op() == Ops::REDUCE ? 1 : node->src_count()); ++i) inside.insert(node->src(i).get());
  }
  for (const UOp* node : order) {
    if (node->op() != Ops::LOAD && node->op() != Ops::STORE) continue;
    const UOp* index = node->src(0).get();
    if (index->op() != Ops::INDEX || index->src(0)->op() != Ops::DEFINE_GLOBAL) continue;
    accesses.push_back({index, inside.count(node) != 0, node->op() == Ops::STORE});
  }
  return accesses;
}

// The constant s such that lane l of the UPCAST range `upcast` (l < width) reads element index
// lane 0's plus l·s, if there is one.
std::optional<int64_t> lane_stride(const UOp* index, const UOp* upcast, int64_t width) {
  const UOpPtr& offset = index->src(1);
  UOpPtr first = simplify(substitute(offset, {{upcast, const_int(dtypes::index, 0)}}));
  std::optional<int64_t> stride;
  for (int64_t lane = 1; lane < width; ++lane) {
    UOpPtr step = simplify(substitute(offset, {{upcast, const_int(dtypes::index, lane)}}) - first);
    if (!step->is_const()) return std::nullopt;
    auto value = static_cast<int64_t>(step->const_int());
    if (!stride) stride = value;
    if (value != lane * *stride) return std::nullopt;
  }
  return stride;
}

// Whether lane l of `upcast` reads lane 0's element plus l: the test the expander applies, so a
// vector access chosen here is one vector access there.
bool contiguous_in(const UOp* index, const UOp* upcast, int64_t width) {
  return width < 2 || lane_stride(index, upcast, width) == int64_t{1};
}

// Whether the lanes read at a constant stride from 2 to max_gather_stride: a strided gather, which
// the CPU renderer loads as one wide vector and a shuffle rather than lane by lane.
bool strided_in(const UOp* index, const UOp* upcast, int64_t width) {
  std::optional<int64_t> stride = lane_stride(index, upcast, width);
  return stride && *stride >= 2 && *stride <= max_gather_stride;
}

bool depends_on(const UOp* node, const UOp* range) {
  std::vector<const UOp*> nodes = toposort(node->self());
  return std::find(nodes.begin(), nodes.end(), range) != nodes.end();
}

int64_t extent_of(const UOp* range) { return static_cast<int64_t>(range->src(0)->const_int()); }

// The loops the heuristics may change: those of constant extent. A loop that ends at a size
// variable's expression (docs/symbolic-shapes.md, decision 7) stays as it is, an outer loop to the
// others: it is neither split, padded, unrolled nor vectorised, so the heuristics never see it.
std::vector<const UOp*> tunable_ranges(const UOpPtr& kernel) {
  std::vector<const UOp*> ranges = kernel_ranges(kernel);
  std::erase_if(ranges, [](const UOp* range) { return !range->src(0)->is_const(); });
  return ranges;
}

// Whether some load inside a reduction of `kernel` whose index depends on `range` also depends on
// one of the kernel's tunable loops that `other` accepts.
template <class Accept>
bool reduction_load_also_varies(const UOpPtr& kernel, const UOp* range, Accept other) {
  std::vector<const UOp*> ranges = tunable_ranges(kernel);
  for (const Access& access : global_accesses(kernel)) {
    if (access.is_store || !access.in_reduction || !depends_on(access.index, range)) continue;
    for (const UOp* loop : ranges)
      if (other(loop) && depends_on(access.index, loop)) return true;
  }
  return false;
}

// ALU ops per element, a transcendental counting as the ~20 ops of its polynomial.
constexpr int64_t kExpensiveElementwise = 16;
int64_t alu_cost(const UOpPtr& kernel) {
  int64_t cost = 0;
  for (const UOp* node : toposort(kernel)) {
    if (!op_is_alu(node->op()) || node->dtype().is_index() || node->dtype() == dtypes::bool_) continue;
    bool transcendental = node->op() == Ops::EXP2 || node->op() == Ops::LOG2 || node->op() == Ops::SIN;
    cost += transcendental ? 20 : 1;
  }
  return cost;
}

// ALU ops per element of the values the kernel's reductions combine: what vector lanes would
// share. A division counts as the 4 ops its throughput costs, a transcendental as 20; selects
// count nothing (a concatenation's choice of source is one per channel, not per element).
int64_t reduced_value_cost(const UOpPtr& kernel) {
  int64_t cost = 0;
  for (const UOp* node : toposort(kernel)) {
    if (node->op() != Ops::REDUCE) continue;
    for (const UOp* inner : toposort(node->src(0))) {
      if (!op_is_alu(inner->op()) || inner->dtype().is_index() || inner->dtype() == dtypes::bool_ ||
          inner->op() == Ops::WHERE)
        continue;
      bool transcendental = inner->op() == Ops::EXP2 || inner->op() == Ops::LOG2 || inner->op() == Ops::SIN;
      cost += transcendental ? 20 : inner->op() == Ops::FDIV ? 4 : 1;
    }
  }
  return cost;
}

// Whether the kernel compares f16 values (a compare or MAX of f16 operands, or of f32 values cast
// from f16).
bool compares_f16(const UOpPtr& kernel) {
  auto from_f16 = [](const UOpPtr& value) {
    return value->dtype().scalar() == ScalarType::Float16 ||
           (value->op() == Ops::CAST && value->src(0)->dtype().scalar() == ScalarType::Float16);
  };
  for (const UOp* node : toposort(kernel)) {
    Ops op = node->op();
    if (op != Ops::CMPLT && op != Ops::CMPNE && op != Ops::CMPEQ && op != Ops::MAX) continue;
    if (from_f16(node->src(0)) || from_f16(node->src(1))) return true;
  }
  return false;
}

// Whether the kernel computes with f16 values (an ALU op or a CAST producing f16).
bool computes_f16(const UOpPtr& kernel) {
  for (const UOp* node : toposort(kernel))
    if (node->dtype().scalar() == ScalarType::Float16 && !node->dtype().is_pointer() &&
        (op_is_alu(node->op()) || node->op() == Ops::CAST))
      return true;
  return false;
}

// Whether some access of the kernel has a valid (a padded or masked load or store).
bool masked(const UOpPtr& kernel) {
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::INDEX && node->src_count() == 3) return true;
  return false;
}

// Whether a streaming f16 kernel should get kiln's own vectors rather than LLVM's loop vectoriser,
// which handles f16 badly on x86 without AVX512-FP16: InstCombine narrows the renderer's
// widen-compute-round sequences to half ops, the vectoriser picks 4 lanes for them, and the backend
// scalarises compares of halves lane by lane (ResNet-50 fp16's residual ReLU kernels ran 4-10x
// slower than their f32 versions, BERT-base fp16's LayerNorm apply 2.5x). kiln's vectors keep
// f32 ops and compares (llvm_alu.cpp, widen). Kernels that compare f16 values always; others that
// compute in f16 unless an access is masked: a padded copy's masked lanes cost more as explicit
// vectors than LLVM's narrow ones (ResNet-50's 128×58×58: 0.05 -> 0.27 ms).
bool f16_needs_own_vectors(const UOpPtr& kernel) {
  return compares_f16(kernel) || (computes_f16(kernel) && !masked(kernel));
}

// The lanes a vector can hold for the widest value the kernel computes; with `along`, of those
// that vary with that range (the rest stay scalars beside the vector). A softmax row's mask
// compares 64-bit positions of its query row, the same in every lane of a vector of keys (BERT's
// row maximum over a sequence of any length: 0.093 ms in vectors of 8, 0.066 in vectors of 16).
int kernel_lanes(const UOpPtr& kernel, const TargetCaps& caps, const UOp* along = nullptr) {
  int widest = 1;
  for (const UOp* node : toposort(kernel)) {
    DType dtype = node->dtype();
    if (dtype.is_pointer() || dtype == dtypes::void_ || dtype.is_index()) continue;
    if (!vectorizable_dtype(dtype)) return 1;
    if (along != nullptr && !depends_on(node, along)) continue;
    // f16 and bf16 ops run on f32 vectors (the renderer widens them), so a narrow lane costs an
    // f32 lane.
    widest = std::max(widest, dtype.is_narrow_float() ? 4 : dtype.scalar_bytes());
  }
  return caps.vector_bytes / widest;
}

}  // namespace

Dim parallel_extent_of(const UOpPtr& kernel) {
  for (const UOp* range : kernel_ranges(kernel))
    if (range->arg_int() == 0) return Dim(range->src(0));
  return 1;
}

namespace {

// The step of an index when `range` grows by one, if constant.
std::optional<int64_t> index_stride(const UOp* index, const UOp* range) { return constant_step(index->src(1), range); }
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

// Whether every reduction of the kernel is a MAX (and there is one). Such a reduction along the
// contiguous axis (softmax's row maximum) has no contiguous vector, and LLVM cannot vectorise its
// loop as it does a sum's (the NaN-propagating maximum is no reassociable min/max): one scalar
// loop step per element, about 8 ops. Its gathered lanes over an output axis run 6x faster even
// without a register tile (BERT's softmax maximum, 12x128 rows of 128, in `kiln tune`: 373 -> 60
// us), where every row has loads of its own.
bool only_max_reductions(const UOpPtr& kernel) {
  bool any = false;
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::REDUCE) {
      if (node->arg_op() != Ops::MAX) return false;
      any = true;
    }
  return any;
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

// Steps of all reduce loops among `ranges` together.
int64_t reduction_steps(const std::vector<const UOp*>& ranges) {
  int64_t steps = 1;
  for (const UOp* range : ranges)
    if (axis_kind(range->arg_int()) == AxisKind::Reduce) steps *= extent_of(range);
  return steps;
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

// The id of the output loop that the last opt of `opts` (a SPLIT) added to `kernel`.
int64_t new_output_axis(const UOpPtr& kernel, const std::vector<Opt>& opts) {
  UOpPtr without = apply_opts(kernel, {opts.begin(), opts.end() - 1});  // holds the ranges `before` points to
  std::vector<const UOp*> before = tunable_ranges(without);
  UOpPtr after = apply_opts(kernel, opts);
  for (const UOp* range : tunable_ranges(after)) {
    bool is_new = axis_kind(range->arg_int()) == AxisKind::Loop &&
                  std::none_of(before.begin(), before.end(), [&](const UOp* r) { return r->arg_int() == range->arg_int(); });
    if (is_new) return range->arg_int();
  }
  throw std::logic_error("new_output_axis: the SPLIT added no output loop");
}

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

// `rows_only`: the id of an output axis that may be the tile's rows but not its vector (-1: none).
std::vector<Opt> tile_opts(const UOpPtr& kernel, const TargetCaps& caps, int64_t rows_only = -1) {
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

// The stores' element offset step when `range` grows by one, if constant.
std::optional<int64_t> store_stride(const UOpPtr& kernel, const UOp* range) {
  for (const UOpPtr& store : kernel->srcs())
    if (std::optional<int64_t> step = index_stride(store->src(0).get(), range)) return step;
  return std::nullopt;
}

// The vector width a list of tile opts gives (0 without an UPCAST).
int64_t upcast_width(const std::vector<Opt>& opts) {
  for (const Opt& opt : opts)
    if (opt.op == OptOp::Upcast) return opt.amount;
  return 0;
}

// Whether some load inside a reduction of an UPCAST of `axis` by `width` reads its lanes from
// addresses of which `irregular(index, lanes)` holds.
template <typename Irregular>
bool lanes_load(const UOpPtr& kernel, int64_t axis, int64_t width, Irregular irregular) {
  UOpPtr upcasted = apply_opt(kernel, {OptOp::Upcast, axis, width});
  const UOp* lanes = nullptr;
  for (const UOp* range : tunable_ranges(upcasted))
    if (axis_kind(range->arg_int()) == AxisKind::Upcast) lanes = range;
  for (const Access& access : global_accesses(upcasted))
    if (!access.is_store && access.in_reduction && depends_on(access.index, lanes) && irregular(access.index, lanes))
      return true;
  return false;
}

// Whether the lanes of an UPCAST of `axis` by `width` gather: some load inside a reduction reads
// them from addresses that are not consecutive.
bool gathers_lanes(const UOpPtr& kernel, int64_t axis, int64_t width) {
  return lanes_load(kernel, axis, width, [&](const UOp* index, const UOp* lanes) { return !contiguous_in(index, lanes, width); });
}

// Whether the lanes of an UPCAST of `axis` by `width` gather some load inside a reduction from
// elements a symbolic distance apart (rows of a sequence of any length): each lane's address is
// computed and loaded on its own, a dozen scalar ops per element.
bool gathers_at_symbolic_stride(const UOpPtr& kernel, int64_t axis, int64_t width) {
  return lanes_load(kernel, axis, width, [&](const UOp* index, const UOp* lanes) { return !lane_stride(index, lanes, width); });
}

// The axis a list of tile opts vectorises (-1 without an UPCAST).
int64_t upcast_axis(const std::vector<Opt>& opts) {
  for (const Opt& opt : opts)
    if (opt.op == OptOp::Upcast) return opt.axis;
  return -1;
}

// The independent vector accumulators a list of tile opts gives: its unrolled output axes' copies.
int64_t tile_accumulators(const std::vector<Opt>& opts) {
  int64_t accumulators = 1;
  for (const Opt& opt : opts)
    if (opt.op == OptOp::Unroll && axis_kind(opt.axis) == AxisKind::Loop) accumulators *= opt.amount;
  return accumulators;
}

// The vector columns of a list of tile opts: the UNROLL of the vector axis, or a pair of vectors
// (a SPLIT of the vector axis by 2 whose new loop the next opt unrolls).
int64_t tile_columns(const std::vector<Opt>& opts) {
  int64_t vector_axis = upcast_axis(opts), columns = 1;
  for (size_t i = 0; i < opts.size(); ++i) {
    const Opt& opt = opts[i];
    if (opt.op == OptOp::Unroll && opt.axis == vector_axis) columns *= opt.amount;
    if (opt.op == OptOp::Split && opt.axis == vector_axis && opt.amount == 2 && i + 1 < opts.size() &&
        opts[i + 1].op == OptOp::Unroll && opts[i + 1].amount == 2)
      columns *= 2;
  }
  return columns;
}

// Whether a load inside a reduction is masked by a condition on `a` or `b` (padding): merged, its
// lanes would each need a division to test, so such kernels keep their axes apart.
bool masked_by(const UOpPtr& kernel, const UOp* a, const UOp* b) {
  for (const Access& access : global_accesses(kernel))
    if (access.in_reduction && access.index->src_count() == 3 &&
        (depends_on(access.index->src(2).get(), a) || depends_on(access.index->src(2).get(), b)))
      return true;
  return false;
}

// Whether a load inside a reduction takes a division or remainder of output axis `axis` to find its
// address.
bool divided_in_reduction(const UOpPtr& kernel, int64_t axis) {
  const UOp* range = nullptr;
  for (const UOp* r : tunable_ranges(kernel))
    if (r->arg_int() == axis) range = r;
  if (range == nullptr) return false;
  for (const Access& access : global_accesses(kernel)) {
    if (!access.in_reduction) continue;
    for (const UOp* node : toposort(access.index->src(1)))
      if ((node->op() == Ops::IDIV || node->op() == Ops::MOD) && depends_on(node, range)) return true;
  }
  return false;
}

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

namespace {

// Rows per block of a SPLIT row loop (step 0, and rows no tile divides). A multiple of the AVX2
// tile's 4 rows and of the vector lanes; a sequence of 37 tokens computes 3 rows more.
constexpr int64_t kRowBlock = 8;

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

}  // namespace

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

// The least step of `expression` along `range`: a constant, or a size's smallest value (an NCHW
// image's row stride is its width), nullopt where the step depends on a loop.
std::optional<int64_t> least_step(const UOpPtr& expression, const UOp* range) {
  if (std::optional<int64_t> step = constant_step(expression, range)) return step;
  UOpPtr step = simplify(substitute(expression, {{range, range->self() + 1}}) - expression);
  for (const UOp* node : toposort(step))
    if (node->op() == Ops::RANGE) return std::nullopt;
  if (step->vmin() > 0) return static_cast<int64_t>(step->vmin());
  if (step->vmax() < 0) return static_cast<int64_t>(step->vmax());
  return std::nullopt;
}

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

// The symbolic output loop of a kernel with a reduction along which its stores are contiguous (a
// conv's pixels over an image of any size, attention's keys over a sequence of any length).
const UOp* symbolic_vector_loop(const UOpPtr& kernel) {
  bool reduces = false;
  for (const UOp* node : toposort(kernel)) reduces = reduces || node->op() == Ops::REDUCE;
  if (!reduces) return nullptr;
  for (const UOp* range : kernel_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Loop && !range->src(0)->is_const() && store_stride(kernel, range) == 1)
      return range;
  return nullptr;
}

// Whether a kernel reduces over more than one axis: a conv's input channels and its kernel taps.
bool reduces_over_taps(const UOpPtr& kernel) {
  int64_t axes = 0;
  for (const UOp* range : kernel_ranges(kernel)) axes += axis_kind(range->arg_int()) == AxisKind::Reduce ? 1 : 0;
  return axes > 1;
}

// The innermost output loop's axis id (a SPLIT's new inner loop).
int64_t innermost_output_axis(const UOpPtr& kernel) {
  int64_t axis = 0;
  for (const UOp* range : kernel_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Loop) axis = std::max(axis, range->arg_int());
  return axis;
}

std::vector<Opt> tile_opts_of(const UOpPtr& kernel, const TargetCaps& caps);

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

// An elementwise kernel over an image of any size runs each row as a loop of unknown length, which
// LLVM vectorises with a scalar remainder: a 14-pixel row is all remainder (DeepLabV3's SE scaling
// kernels over 480 channels of 14×14 ran 5x slower than their fixed twins, whose 196 pixels LLVM
// sees whole). Where the stores run contiguously over the rows and the columns (the rows' step is
// the columns' extent), the two loops become one (MERGE): m / w and m % w, which every index then
// folds back to m (linear_terms.h). Not where a division stays (a padded copy tests the row and
// the column apart), which would cost one per element.
std::vector<Opt> rows_and_columns_merged(const UOpPtr& kernel);

std::vector<Opt> symbolic_rows_merged(const UOpPtr& kernel) {
  std::vector<const UOp*> order = toposort(kernel);
  if (std::ranges::any_of(order, [](const UOp* node) { return node->op() == Ops::REDUCE; })) return {};
  return rows_and_columns_merged(kernel);
}

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

std::vector<Opt> tile_opts_of(const UOpPtr& kernel, const TargetCaps& caps) {
  if (std::optional<std::vector<Opt>> merged = merged_pixel_block_opts(kernel, caps)) return *merged;
  if (std::optional<std::vector<Opt>> blocks = vector_block_opts(kernel, caps)) return *blocks;
  if (const UOp* rows = symbolic_row_loop(kernel)) {
    Opt split{OptOp::Split, rows->arg_int(), symbolic_row_block(kernel)};
    UOpPtr blocked = apply_opt(kernel, split);
    std::vector<Opt> tiles = constant_loop_opts(blocked, caps);
    std::vector<const UOp*> ranges = kernel_ranges(blocked);
    int64_t block_axis = 0;
    for (const UOp* range : ranges)
      if (axis_kind(range->arg_int()) == AxisKind::Loop) block_axis = std::max(block_axis, range->arg_int());
    bool tiles_rows = std::any_of(tiles.begin(), tiles.end(), [&](const Opt& opt) {
      return opt.op == OptOp::Unroll && opt.axis == block_axis;
    });
    if (tiles_rows) {
      tiles.insert(tiles.begin(), split);
      return tiles;
    }
  }
  if (std::optional<std::vector<Opt>> reduced = symbolic_reduce_vector_opts(kernel, caps)) return *reduced;
  std::vector<Opt> opts = constant_loop_opts(kernel, caps);
  if (opts.empty())
    if (std::optional<std::vector<Opt>> transposed = transposed_block_opts(kernel, caps)) return *transposed;
  return opts;
}

}  // namespace

namespace {

// with_row_blocks, unless KILN_ROW_BLOCKS=0, the target lays kernels out as a GPU grid, or there
// are no tile opts to add blocks to.
std::optional<std::vector<Opt>> row_blocks_if_enabled(const UOpPtr& kernel, const std::vector<Opt>& opts,
                                                      const TargetCaps& caps) {
  if (caps.output_grid || opts.empty() || env_integer("KILN_ROW_BLOCKS", 1) == 0) return std::nullopt;
  return with_row_blocks(kernel, opts, caps);
}

}  // namespace

std::vector<Opt> with_thread_row_blocks(const UOpPtr& kernel, std::vector<Opt> opts, const TargetCaps& caps) {
  if (std::optional<std::vector<Opt>> blocked = row_blocks_if_enabled(kernel, opts, caps)) return *blocked;
  return opts;
}

std::vector<Opt> hand_coded_opts(const UOpPtr& kernel, const TargetCaps& caps) {
  // These heuristics size tiles for a CPU's registers, caches and thread pool. A GPU target lays
  // its kernels out as a launch grid instead (opt/gpu_grid.h); a CPU loop SWAP there left ResNet-50's
  // channels-last copies on 14 threads, 23 % of its time on an H200.
  if (caps.output_grid) return {};
  std::optional<std::vector<Opt>> dot_products = dot_product_tile(kernel, caps);
  std::vector<Opt> opts = dot_products ? *dot_products : tile_opts_of(kernel, caps);
  if (opts.empty()) {
    opts = symbolic_rows_merged(kernel);
    return with_symbolic_axis_merged(kernel, apply_opts(kernel, opts), std::move(opts));
  }
  if (std::optional<std::vector<Opt>> blocked = row_blocks_if_enabled(kernel, opts, caps)) return *blocked;
  return with_parallel_axis(kernel, std::move(opts));
}

}  // namespace kiln
