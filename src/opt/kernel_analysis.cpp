// What the heuristics read off a kernel AST; see kernel_analysis.h.
#include "opt/kernel_analysis.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

#include "codegen/llvm/strided_gather.h"
#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/expand.h"
#include "passes/symbolic.h"

namespace kiln::heuristics {

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

bool contiguous_in(const UOp* index, const UOp* upcast, int64_t width) {
  return width < 2 || lane_stride(index, upcast, width) == int64_t{1};
}

bool strided_in(const UOp* index, const UOp* upcast, int64_t width) {
  std::optional<int64_t> stride = lane_stride(index, upcast, width);
  return stride && *stride >= 2 && *stride <= max_gather_stride;
}

bool depends_on(const UOp* node, const UOp* range) {
  std::vector<const UOp*> nodes = toposort(node->self());
  return std::find(nodes.begin(), nodes.end(), range) != nodes.end();
}

int64_t extent_of(const UOp* range) { return static_cast<int64_t>(range->src(0)->const_int()); }

std::vector<const UOp*> tunable_ranges(const UOpPtr& kernel) {
  std::vector<const UOp*> ranges = kernel_ranges(kernel);
  std::erase_if(ranges, [](const UOp* range) { return !range->src(0)->is_const(); });
  return ranges;
}

int64_t alu_cost(const UOpPtr& kernel) {
  int64_t cost = 0;
  for (const UOp* node : toposort(kernel)) {
    if (!op_is_alu(node->op()) || node->dtype().is_index() || node->dtype() == dtypes::bool_) continue;
    bool transcendental = node->op() == Ops::EXP2 || node->op() == Ops::LOG2 || node->op() == Ops::SIN;
    cost += transcendental ? 20 : 1;
  }
  return cost;
}

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

bool computes_f16(const UOpPtr& kernel) {
  for (const UOp* node : toposort(kernel))
    if (node->dtype().scalar() == ScalarType::Float16 && !node->dtype().is_pointer() &&
        (op_is_alu(node->op()) || node->op() == Ops::CAST))
      return true;
  return false;
}

bool masked(const UOpPtr& kernel) {
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::INDEX && node->src_count() == 3) return true;
  return false;
}

bool f16_needs_own_vectors(const UOpPtr& kernel) {
  return compares_f16(kernel) || (computes_f16(kernel) && !masked(kernel));
}

int kernel_lanes(const UOpPtr& kernel, const TargetCaps& caps, const UOp* along) {
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

std::optional<int64_t> index_stride(const UOp* index, const UOp* range) { return constant_step(index->src(1), range); }

bool only_max_reductions(const UOpPtr& kernel) {
  bool any = false;
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::REDUCE) {
      if (node->arg_op() != Ops::MAX) return false;
      any = true;
    }
  return any;
}

int64_t reduction_steps(const std::vector<const UOp*>& ranges) {
  int64_t steps = 1;
  for (const UOp* range : ranges)
    if (axis_kind(range->arg_int()) == AxisKind::Reduce) steps *= extent_of(range);
  return steps;
}

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

std::optional<int64_t> store_stride(const UOpPtr& kernel, const UOp* range) {
  for (const UOpPtr& store : kernel->srcs())
    if (std::optional<int64_t> step = index_stride(store->src(0).get(), range)) return step;
  return std::nullopt;
}

int64_t upcast_width(const std::vector<Opt>& opts) {
  for (const Opt& opt : opts)
    if (opt.op == OptOp::Upcast) return opt.amount;
  return 0;
}

bool gathers_lanes(const UOpPtr& kernel, int64_t axis, int64_t width) {
  return lanes_load(kernel, axis, width, [&](const UOp* index, const UOp* lanes) { return !contiguous_in(index, lanes, width); });
}

bool gathers_at_symbolic_stride(const UOpPtr& kernel, int64_t axis, int64_t width) {
  return lanes_load(kernel, axis, width, [&](const UOp* index, const UOp* lanes) { return !lane_stride(index, lanes, width); });
}

int64_t upcast_axis(const std::vector<Opt>& opts) {
  for (const Opt& opt : opts)
    if (opt.op == OptOp::Upcast) return opt.axis;
  return -1;
}

int64_t tile_accumulators(const std::vector<Opt>& opts) {
  int64_t accumulators = 1;
  for (const Opt& opt : opts)
    if (opt.op == OptOp::Unroll && axis_kind(opt.axis) == AxisKind::Loop) accumulators *= opt.amount;
  return accumulators;
}

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

bool masked_by(const UOpPtr& kernel, const UOp* a, const UOp* b) {
  for (const Access& access : global_accesses(kernel))
    if (access.in_reduction && access.index->src_count() == 3 &&
        (depends_on(access.index->src(2).get(), a) || depends_on(access.index->src(2).get(), b)))
      return true;
  return false;
}

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

std::optional<int64_t> least_step(const UOpPtr& expression, const UOp* range) {
  if (std::optional<int64_t> step = constant_step(expression, range)) return step;
  UOpPtr step = simplify(substitute(expression, {{range, range->self() + 1}}) - expression);
  for (const UOp* node : toposort(step))
    if (node->op() == Ops::RANGE) return std::nullopt;
  if (step->vmin() > 0) return static_cast<int64_t>(step->vmin());
  if (step->vmax() < 0) return static_cast<int64_t>(step->vmax());
  return std::nullopt;
}

const UOp* symbolic_vector_loop(const UOpPtr& kernel) {
  bool reduces = false;
  for (const UOp* node : toposort(kernel)) reduces = reduces || node->op() == Ops::REDUCE;
  if (!reduces) return nullptr;
  for (const UOp* range : kernel_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Loop && !range->src(0)->is_const() && store_stride(kernel, range) == 1)
      return range;
  return nullptr;
}

bool reduces_over_taps(const UOpPtr& kernel) {
  int64_t axes = 0;
  for (const UOp* range : kernel_ranges(kernel)) axes += axis_kind(range->arg_int()) == AxisKind::Reduce ? 1 : 0;
  return axes > 1;
}

int64_t innermost_output_axis(const UOpPtr& kernel) {
  int64_t axis = 0;
  for (const UOp* range : kernel_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Loop) axis = std::max(axis, range->arg_int());
  return axis;
}

}  // namespace kiln::heuristics
