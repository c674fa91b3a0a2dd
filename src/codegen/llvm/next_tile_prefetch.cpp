#include "codegen/llvm/next_tile_prefetch.h"

#include "opt/opt.h"
#include "passes/symbolic.h"
#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

bool prefetch_enabled() {
  static const bool enabled = env_integer("KILN_PREFETCH", 1) != 0;
  return enabled;
}

}  // namespace

std::optional<int64_t> next_tile_prefetch_offset(const UOp& load, std::span<const UOp* const> open_loops,
                                                 int64_t l2_bytes) {
  if (!prefetch_enabled() || load.op() != Ops::LOAD || load.dtype().count() < 2 || open_loops.size() < 2)
    return std::nullopt;
  const UOp& index = *load.src(0);
  if (index.op() != Ops::INDEX || index.src(0)->op() != Ops::DEFINE_GLOBAL || index.src(1)->dtype().count() != 1)
    return std::nullopt;
  const UOp& outermost = *open_loops.front();
  if (axis_kind(outermost.arg_int()) != AxisKind::Loop) return std::nullopt;
  bool in_reduction = false, several_passes = false;
  int64_t passes = 1;
  for (const UOp* loop : open_loops.subspan(1)) {
    if (axis_kind(loop->arg_int()) == AxisKind::Reduce) {
      in_reduction = true;
    } else if (constant_step(index.src(1), loop) != 0) {
      return std::nullopt;  // the load moves with an inner output loop too: not one strip per tile
    } else {
      several_passes = true;
      // A symbolic loop (rows of a symbolic sequence) counts as one pass: its extent is unknown here.
      if (loop->src(0)->is_const()) passes *= static_cast<int64_t>(loop->src(0)->const_int());
    }
  }
  // Every pass issues the prefetches, and only the first needs them: over many passes they cost
  // more issue slots than the first pass's wait (a 1024³ matmul's 128 passes per column strip).
  if (passes > kMaxPrefetchPasses) return std::nullopt;
  // A matrix-vector product reads each strip once: it streams, and the hardware prefetchers keep up
  // with a stream (AlexNet's and VGG-19's classifiers ran 8-15 % slower with the prefetches).
  if (!in_reduction || !several_passes) return std::nullopt;
  std::optional<int64_t> stride = constant_step(index.src(1), &outermost);
  if (!stride || *stride <= 0) return std::nullopt;
  int64_t stride_bytes = *stride * load.dtype().scalar_bytes();
  // The next tile's strip must fit in the L2 beside this tile's and the rows it is multiplied with:
  // VGG-19's 3x3 convs over 512 channels (590 KB strips) ran 8-14 % slower with the prefetches.
  if (stride_bytes < kMinPrefetchStrideBytes || stride_bytes > l2_bytes / 4) return std::nullopt;
  return stride;
}

std::string next_tile_prefetch_setting(int64_t l2_bytes) {
  return prefetch_enabled() ? str_cat("prefetch l2=", l2_bytes) : "prefetch off";
}

}  // namespace kiln
