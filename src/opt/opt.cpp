// Opt actions as range splits; see opt.h.
#include "opt/opt.h"

#include <algorithm>
#include <unordered_map>

#include "ir/build.h"
#include "ir/substitute.h"
#include "passes/symbolic.h"
#include "schedule/schedule.h"
#include "support/error.h"

namespace kiln {

AxisKind axis_kind(int64_t axis) {
  if (axis >= kFirstUnrollAxis) return AxisKind::Unroll;
  if (axis >= kFirstUpcastAxis) return AxisKind::Upcast;
  if (axis >= kFirstReduceAxis) return AxisKind::Reduce;
  return AxisKind::Loop;
}

const char* axis_kind_name(AxisKind kind) {
  switch (kind) {
    case AxisKind::Loop: return "loop";
    case AxisKind::Reduce: return "reduce";
    case AxisKind::Upcast: return "upcast";
    case AxisKind::Unroll: return "unroll";
  }
  return "?";
}

std::string Opt::text() const {
  const char* name = op == OptOp::Upcast ? "UPCAST" : op == OptOp::Unroll ? "UNROLL" : "SWAP";
  return str_cat(name, "(axis ", axis, ", ", amount, ")");
}

std::vector<const UOp*> kernel_ranges(const UOpPtr& kernel) {
  std::vector<const UOp*> ranges;
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::RANGE) ranges.push_back(node);
  std::sort(ranges.begin(), ranges.end(), [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });
  return ranges;
}

namespace {

// Axis ids already used in `band` (the kind's first id), so a new range gets the next free one.
int64_t next_axis_in_band(const std::vector<const UOp*>& ranges, int64_t band) {
  int64_t next = band;
  for (const UOp* range : ranges)
    if (range->arg_int() >= band && range->arg_int() < band + 1000) next = std::max(next, range->arg_int() + 1);
  return next;
}

}  // namespace

UOpPtr apply_opt(const UOpPtr& kernel, const Opt& opt) {
  auto invalid = [&](const std::string& why) {
    return InvalidOpt(str_cat(opt.text(), " on kernel '", kernel->op() == Ops::SINK && std::holds_alternative<std::string>(kernel->arg())
                                                            ? kernel->arg_string() : std::string("?"), "': ", why));
  };
  std::vector<const UOp*> ranges = kernel_ranges(kernel);
  auto found = std::find_if(ranges.begin(), ranges.end(), [&](const UOp* r) { return r->arg_int() == opt.axis; });
  if (found == ranges.end()) throw invalid("the kernel has no RANGE with this axis id");
  const UOp* target = *found;
  AxisKind kind = axis_kind(opt.axis);
  if (opt.op == OptOp::Swap) {
    auto other = std::find_if(ranges.begin(), ranges.end(), [&](const UOp* r) { return r->arg_int() == opt.amount; });
    if (other == ranges.end()) throw invalid("the kernel has no RANGE with the other axis id");
    if (kind != AxisKind::Loop || axis_kind(opt.amount) != AxisKind::Loop || opt.amount == opt.axis)
      throw invalid("only two different output loops can swap");
    return simplify(substitute(kernel, {{target, range(target->src(0), opt.amount)},
                                        {*other, range((*other)->src(0), opt.axis)}}));
  }
  if (kind != AxisKind::Loop && kind != AxisKind::Reduce) throw invalid("only loop and reduce axes can be split");
  if (!target->src(0)->is_const()) throw invalid("the range's extent is not a constant");
  auto extent = static_cast<int64_t>(target->src(0)->const_int());
  if (opt.amount < 2 || extent % opt.amount != 0) throw invalid(str_cat("the amount does not divide the extent ", extent));
  if (opt.op == OptOp::Upcast) {
    if (kind == AxisKind::Reduce) throw invalid("an UPCAST of a reduce axis would need a horizontal reduction");
    if (next_axis_in_band(ranges, kFirstUpcastAxis) != kFirstUpcastAxis) throw invalid("the kernel has an UPCAST already");
  }
  int64_t band = opt.op == OptOp::Upcast ? kFirstUpcastAxis : kFirstUnrollAxis;
  UOpPtr outer = range(extent / opt.amount, opt.axis);
  UOpPtr inner = range(opt.amount, next_axis_in_band(ranges, band));
  UOpPtr joined = outer * opt.amount + inner;
  // Uses of the range read outer·amount + inner; a REDUCE over it reduces over both parts.
  std::unordered_map<const UOp*, UOpPtr> rebuilt;
  for (const UOp* node : toposort(kernel)) {
    if (node == target) {
      rebuilt[node] = joined;
      continue;
    }
    std::vector<UOpPtr> sources;
    bool changed = false;
    for (size_t i = 0; i < node->src_count(); ++i) {
      const UOp* source = node->src(i).get();
      if (node->op() == Ops::REDUCE && i > 0 && source == target) {
        sources.push_back(outer);
        sources.push_back(inner);
        changed = true;
        continue;
      }
      const UOpPtr& mapped = rebuilt.at(source);
      changed = changed || mapped.get() != source;
      sources.push_back(mapped);
    }
    rebuilt[node] = changed ? node->with_srcs(std::move(sources)) : node->self();
  }
  return simplify(rebuilt.at(kernel.get()));
}

UOpPtr apply_opts(UOpPtr kernel, const std::vector<Opt>& opts) {
  for (const Opt& opt : opts) kernel = apply_opt(kernel, opt);
  return kernel;
}

}  // namespace kiln
