// What the hand-coded heuristics (heuristics.h) read off a kernel AST: its global accesses and
// whether they happen inside a reduction, how an index steps along a loop, what the kernel computes
// per element, which of its loops are symbolic or innermost, and the shape of a list of tile opts.
// Questions only: nothing here chooses an Opt (tile_opts.cpp, symbolic_tiles.cpp and
// thread_blocks.cpp do, heuristics.cpp dispatches).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "codegen/target.h"
#include "ir/uop.h"
#include "opt/opt.h"

namespace kiln::heuristics {

struct Access {
  const UOp* index;     // the INDEX node
  bool in_reduction;    // read inside a REDUCE's value (once per reduction step)
  bool is_store;
};

// Every LOAD and STORE of global memory, with whether it happens inside a reduction.
std::vector<Access> global_accesses(const UOpPtr& kernel);

// The constant s such that lane l of the UPCAST range `upcast` (l < width) reads element index
// lane 0's plus l·s, if there is one.
std::optional<int64_t> lane_stride(const UOp* index, const UOp* upcast, int64_t width);

// Whether lane l of `upcast` reads lane 0's element plus l: the test the expander applies, so a
// vector access chosen here is one vector access there.
bool contiguous_in(const UOp* index, const UOp* upcast, int64_t width);

// Whether the lanes read at a constant stride from 2 to max_gather_stride: a strided gather, which
// the CPU renderer loads as one wide vector and a shuffle rather than lane by lane.
bool strided_in(const UOp* index, const UOp* upcast, int64_t width);

// Whether `node` reads `range` (anywhere below it).
bool depends_on(const UOp* node, const UOp* range);

// The extent of a loop of constant extent.
int64_t extent_of(const UOp* range);

// The loops the heuristics may change: those of constant extent. A loop that ends at a size
// variable's expression (docs/symbolic-shapes.md, decision 7) stays as it is, an outer loop to the
// others: it is neither split, padded, unrolled nor vectorised, so the heuristics never see it.
std::vector<const UOp*> tunable_ranges(const UOpPtr& kernel);

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
int64_t alu_cost(const UOpPtr& kernel);

// ALU ops per element of the values the kernel's reductions combine: what vector lanes would
// share. A division counts as the 4 ops its throughput costs, a transcendental as 20; selects
// count nothing (a concatenation's choice of source is one per channel, not per element).
int64_t reduced_value_cost(const UOpPtr& kernel);

// Whether the kernel compares f16 values (a compare or MAX of f16 operands, or of f32 values cast
// from f16).
bool compares_f16(const UOpPtr& kernel);

// Whether the kernel computes with f16 values (an ALU op or a CAST producing f16).
bool computes_f16(const UOpPtr& kernel);

// Whether some access of the kernel has a valid (a padded or masked load or store).
bool masked(const UOpPtr& kernel);

// Whether a streaming f16 kernel should get kiln's own vectors rather than LLVM's loop vectoriser,
// which handles f16 badly on x86 without AVX512-FP16: InstCombine narrows the renderer's
// widen-compute-round sequences to half ops, the vectoriser picks 4 lanes for them, and the backend
// scalarises compares of halves lane by lane (ResNet-50 fp16's residual ReLU kernels ran 4-10x
// slower than their f32 versions, BERT-base fp16's LayerNorm apply 2.5x). kiln's vectors keep
// f32 ops and compares (llvm_alu.cpp, widen). Kernels that compare f16 values always; others that
// compute in f16 unless an access is masked: a padded copy's masked lanes cost more as explicit
// vectors than LLVM's narrow ones (ResNet-50's 128×58×58: 0.05 -> 0.27 ms).
bool f16_needs_own_vectors(const UOpPtr& kernel);

// The lanes a vector can hold for the widest value the kernel computes; with `along`, of those
// that vary with that range (the rest stay scalars beside the vector). A softmax row's mask
// compares 64-bit positions of its query row, the same in every lane of a vector of keys (BERT's
// row maximum over a sequence of any length: 0.093 ms in vectors of 8, 0.066 in vectors of 16).
int kernel_lanes(const UOpPtr& kernel, const TargetCaps& caps, const UOp* along = nullptr);

// The step of an index when `range` grows by one, if constant.
std::optional<int64_t> index_stride(const UOp* index, const UOp* range);

// Whether every reduction of the kernel is a MAX (and there is one). Such a reduction along the
// contiguous axis (softmax's row maximum) has no contiguous vector, and LLVM cannot vectorise its
// loop as it does a sum's (the NaN-propagating maximum is no reassociable min/max): one scalar
// loop step per element, about 8 ops. Its gathered lanes over an output axis run 6x faster even
// without a register tile (BERT's softmax maximum, 12x128 rows of 128, in `kiln tune`: 373 -> 60
// us), where every row has loads of its own.
bool only_max_reductions(const UOpPtr& kernel);

// Steps of all reduce loops among `ranges` together.
int64_t reduction_steps(const std::vector<const UOp*>& ranges);

// The id of the output loop that the last opt of `opts` (a SPLIT) added to `kernel`.
int64_t new_output_axis(const UOpPtr& kernel, const std::vector<Opt>& opts);

// The stores' element offset step when `range` grows by one, if constant.
std::optional<int64_t> store_stride(const UOpPtr& kernel, const UOp* range);

// The vector width a list of tile opts gives (0 without an UPCAST).
int64_t upcast_width(const std::vector<Opt>& opts);

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
bool gathers_lanes(const UOpPtr& kernel, int64_t axis, int64_t width);

// Whether the lanes of an UPCAST of `axis` by `width` gather some load inside a reduction from
// elements a symbolic distance apart (rows of a sequence of any length): each lane's address is
// computed and loaded on its own, a dozen scalar ops per element.
bool gathers_at_symbolic_stride(const UOpPtr& kernel, int64_t axis, int64_t width);

// The axis a list of tile opts vectorises (-1 without an UPCAST).
int64_t upcast_axis(const std::vector<Opt>& opts);

// The independent vector accumulators a list of tile opts gives: its unrolled output axes' copies.
int64_t tile_accumulators(const std::vector<Opt>& opts);

// The vector columns of a list of tile opts: the UNROLL of the vector axis, or a pair of vectors
// (a SPLIT of the vector axis by 2 whose new loop the next opt unrolls).
int64_t tile_columns(const std::vector<Opt>& opts);

// Whether a load inside a reduction is masked by a condition on `a` or `b` (padding): merged, its
// lanes would each need a division to test, so such kernels keep their axes apart.
bool masked_by(const UOpPtr& kernel, const UOp* a, const UOp* b);

// Whether a load inside a reduction takes a division or remainder of output axis `axis` to find its
// address.
bool divided_in_reduction(const UOpPtr& kernel, int64_t axis);

// The least step of `expression` along `range`: a constant, or a size's smallest value (an NCHW
// image's row stride is its width), nullopt where the step depends on a loop.
std::optional<int64_t> least_step(const UOpPtr& expression, const UOp* range);

// The symbolic output loop of a kernel with a reduction along which its stores are contiguous (a
// conv's pixels over an image of any size, attention's keys over a sequence of any length).
const UOp* symbolic_vector_loop(const UOpPtr& kernel);

// Whether a kernel reduces over more than one axis: a conv's input channels and its kernel taps.
bool reduces_over_taps(const UOpPtr& kernel);

// The innermost output loop's axis id (a SPLIT's new inner loop).
int64_t innermost_output_axis(const UOpPtr& kernel);

}  // namespace kiln::heuristics
