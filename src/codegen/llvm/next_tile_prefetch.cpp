#include "codegen/llvm/next_tile_prefetch.h"

#include <unordered_map>

#include "opt/opt.h"
#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

// The coefficient of `range` in an index expression: 0 when the expression does not depend on it,
// nullopt when it does but not as c·range + (terms without range).
class RangeCoefficient {
 public:
  explicit RangeCoefficient(const UOp* range) : range_(range) {}

  std::optional<int64_t> of(const UOp& node) {
    if (&node == range_) return 1;
    if (auto known = memo_.find(&node); known != memo_.end()) return known->second;
    std::optional<int64_t> result = compute(node);
    memo_.emplace(&node, result);
    return result;
  }

 private:
  std::optional<int64_t> compute(const UOp& node) {
    if (node.op() == Ops::RANGE || node.op() == Ops::CONST || node.op() == Ops::DEFINE_VAR) return 0;
    if (node.op() == Ops::ADD || node.op() == Ops::SUB) {
      std::optional<int64_t> a = of(*node.src(0)), b = of(*node.src(1));
      if (!a || !b) return std::nullopt;
      return node.op() == Ops::ADD ? *a + *b : *a - *b;
    }
    if (node.op() == Ops::MUL) {
      std::optional<int64_t> a = of(*node.src(0)), b = of(*node.src(1));
      if (!a || !b) return std::nullopt;
      if (*a == 0 && *b == 0) return 0;
      if (*b == 0 && node.src(1)->is_const()) return *a * static_cast<int64_t>(node.src(1)->const_int());
      if (*a == 0 && node.src(0)->is_const()) return *b * static_cast<int64_t>(node.src(0)->const_int());
      return std::nullopt;
    }
    for (const UOpPtr& source : node.srcs()) {
      std::optional<int64_t> coefficient = of(*source);
      if (coefficient != 0) return std::nullopt;
    }
    return 0;
  }

  const UOp* range_;
  std::unordered_map<const UOp*, std::optional<int64_t>> memo_;
};

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
  for (const UOp* loop : open_loops.subspan(1)) {
    if (axis_kind(loop->arg_int()) == AxisKind::Reduce) {
      in_reduction = true;
    } else if (RangeCoefficient(loop).of(*index.src(1)) != 0) {
      return std::nullopt;  // the load moves with an inner output loop too: not one strip per tile
    } else {
      several_passes = true;
    }
  }
  // A matrix-vector product reads each strip once: it streams, and the hardware prefetchers keep up
  // with a stream (AlexNet's and VGG-19's classifiers ran 8-15 % slower with the prefetches).
  if (!in_reduction || !several_passes) return std::nullopt;
  std::optional<int64_t> stride = RangeCoefficient(&outermost).of(*index.src(1));
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
