// Opt actions as range splits; see opt.h.
#include "opt/opt.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

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

const std::vector<OptKind>& opt_kinds() {
  static const std::vector<OptKind> kinds{
      {OptOp::Upcast, "UPCAST", OptAxes::OutputOrReduce}, {OptOp::Unroll, "UNROLL", OptAxes::OutputOrReduce},
      {OptOp::Swap, "SWAP", OptAxes::TwoOutputLoops},     {OptOp::Merge, "MERGE", OptAxes::TwoOutputLoops},
      {OptOp::Padto, "PADTO", OptAxes::OutputOrReduce},   {OptOp::Split, "SPLIT", OptAxes::OutputOrReduce},
      {OptOp::Blocks, "BLOCKS", OptAxes::OutputOnly},
  };
  return kinds;
}

const OptKind& opt_kind(OptOp op) {
  const std::vector<OptKind>& kinds = opt_kinds();
  auto found = std::find_if(kinds.begin(), kinds.end(), [&](const OptKind& kind) { return kind.op == op; });
  KILN_ASSERT(found != kinds.end(), "an OptOp missing from opt_kinds()");
  return *found;
}

const OptKind* opt_kind_named(std::string_view name) {
  for (const OptKind& kind : opt_kinds())
    if (kind.name == name) return &kind;
  return nullptr;
}

std::string Opt::text() const { return str_cat(opt_kind(op).name, "(axis ", axis, ", ", amount, ")"); }

std::vector<const UOp*> kernel_ranges(const UOpPtr& kernel) {
  std::vector<const UOp*> ranges;
  for (const UOp* node : toposort(kernel))
    if (node->op() == Ops::RANGE) ranges.push_back(node);
  std::sort(ranges.begin(), ranges.end(), [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });
  return ranges;
}

std::unordered_map<const UOp*, std::set<const UOp*>> open_ranges(const UOpPtr& kernel) {
  std::unordered_map<const UOp*, std::set<const UOp*>> open;
  for (const UOp* node : toposort(kernel)) {
    std::set<const UOp*> ranges;
    for (const UOpPtr& source : node->srcs()) ranges.insert(open[source.get()].begin(), open[source.get()].end());
    if (node->op() == Ops::RANGE) ranges.insert(node);
    if (node->op() == Ops::REDUCE)
      for (size_t i = 1; i < node->src_count(); ++i) ranges.erase(node->src(i).get());
    open[node] = std::move(ranges);
  }
  return open;
}

UOpPtr split_range(const UOpPtr& kernel, const UOp* target, const UOpPtr& outer, const UOpPtr& inner) {
  UOpPtr joined = outer * inner->src(0) + inner;
  // An outer part of extent 1 is the constant 0 after simplify, not a range to reduce over.
  bool keep_outer = !(outer->src(0)->is_const() && outer->src(0)->const_int() == 1);
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
        if (keep_outer) sources.push_back(outer);
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

namespace {

// Axis ids already used in `band` (the kind's first id), so a new range gets the next free one.
int64_t next_axis_in_band(const std::vector<const UOp*>& ranges, int64_t band) {
  int64_t next = band;
  for (const UOp* range : ranges)
    if (range->arg_int() >= band && range->arg_int() < band + 1000) next = std::max(next, range->arg_int() + 1);
  return next;
}

// `kernel` with every use of `target` reading `replacement` instead, and every load and store that
// depends on it masked by `inside` (loads give 0 where it fails), so points past the loop's end
// touch no memory.
UOpPtr masked_substitute(const UOpPtr& kernel, const UOp* target, const UOpPtr& replacement, const UOpPtr& inside) {
  std::unordered_map<const UOp*, UOpPtr> rebuilt;
  std::vector<const UOp*> order = toposort(kernel);
  std::unordered_set<const UOp*> depends;
  for (const UOp* node : order) {
    bool on_range = node == target;
    for (const UOpPtr& source : node->srcs()) on_range = on_range || depends.count(source.get()) != 0;
    if (on_range) depends.insert(node);
  }
  for (const UOp* node : order) {
    if (node == target) {
      rebuilt[node] = replacement;
      continue;
    }
    std::vector<UOpPtr> sources;
    for (const UOpPtr& source : node->srcs()) sources.push_back(rebuilt.at(source.get()));
    UOpPtr result = node->with_srcs(sources);
    bool masked_access = (node->op() == Ops::LOAD || node->op() == Ops::STORE) && depends.count(node->src(0).get()) &&
                         node->src(0)->op() == Ops::INDEX && node->src(0)->src(0)->op() == Ops::DEFINE_GLOBAL;
    if (masked_access) {
      const UOpPtr& index = sources[0];
      std::vector<UOpPtr> index_sources{index->src(0), index->src(1),
                                        index->src_count() == 3 ? (index->src(2) & inside) : inside};
      UOpPtr guarded = index->with_srcs(std::move(index_sources));
      if (node->op() == Ops::STORE) {
        result = UOp::make(Ops::STORE, dtypes::void_, {guarded, sources[1]});
      } else {
        DType dtype = node->dtype();
        UOpPtr alternative = sources.size() == 2 ? sources[1]
                             : dtype.is_bool()  ? const_bool(false)
                             : dtype.is_float() ? const_float(dtype, 0.0)
                                                : const_int(dtype, 0);
        result = UOp::make(Ops::LOAD, dtype, {guarded, alternative});
      }
    }
    rebuilt[node] = result;
  }
  return simplify(rebuilt.at(kernel.get()));
}

// `kernel` with `target` running to `padded`; the iterations past its extent touch no memory.
UOpPtr pad_range(const UOpPtr& kernel, const UOp* target, const UOpPtr& padded) {
  UOpPtr longer = range(padded, target->arg_int());
  return masked_substitute(kernel, target, longer, lt(longer, target->src(0)));
}

// `kernel` with reduce loop `target` running to `padded` (PADTO on a reduce axis, opt.h): every
// load that depends on it gets the valid `r < E` (loads give 0 there, so no memory is touched),
// and every REDUCE over it reduces `where(r < E, value, identity)`, so the extra iterations add
// nothing (a 0 load can still become a nonzero value: HardSwish(0 + bias)).
UOpPtr pad_reduce_range(const UOpPtr& kernel, const UOp* target, const UOpPtr& padded) {
  UOpPtr masked = pad_range(kernel, target, padded);  // the loads masked, the range longer
  const int64_t axis = target->arg_int();
  std::vector<const UOp*> ranges = kernel_ranges(masked);
  auto longer = std::find_if(ranges.begin(), ranges.end(), [&](const UOp* r) { return r->arg_int() == axis; });
  KILN_ASSERT(longer != ranges.end(), "PADTO lost the reduce range");
  UOpPtr inside = lt((*longer)->self(), target->src(0));
  std::unordered_map<const UOp*, UOpPtr> reductions;
  for (const UOp* node : toposort(masked)) {
    if (node->op() != Ops::REDUCE) continue;
    bool over_target = false;
    for (size_t i = 1; i < node->src_count(); ++i) over_target = over_target || node->src(i).get() == *longer;
    if (!over_target) continue;
    std::vector<UOpPtr> sources = node->srcs();
    sources[0] = where(inside, sources[0], reduction_identity(node->arg_op(), node->dtype()));
    reductions[node] = node->with_srcs(std::move(sources));
  }
  return simplify(substitute(masked, reductions));
}

// `kernel` with output loop `target` split into outer·amount + inner (SPLIT in opt.h): `inner` a new
// output loop with id `inner_axis`; a remainder the simplifier cannot rule out pads the outer part.
UOpPtr split_output_loop(const UOpPtr& kernel, const UOp* target, int64_t amount, int64_t inner_axis) {
  const UOpPtr& end = target->src(0);
  UOpPtr inner = range(amount, inner_axis);
  UOpPtr remainder = simplify(end % amount);
  if (remainder->is_const() && remainder->const_int() == 0)
    return split_range(kernel, target, range(simplify(end / amount), target->arg_int()), inner);
  UOpPtr outer = range(simplify((end + (amount - 1)) / amount), target->arg_int());
  UOpPtr joined = outer * amount + inner;
  UOpPtr clamped = substitute(kernel, {{target, minimum(joined, end - 1)}});
  UOpPtr inside = lt(joined, end);
  std::vector<UOpPtr> outputs;
  for (const UOpPtr& store : clamped->srcs()) {
    if (store->op() != Ops::STORE || store->src(0)->op() != Ops::INDEX)
      throw InvalidOpt(str_cat("SPLIT(axis ", target->arg_int(), ", ", amount, "): the kernel's outputs are not indexed stores"));
    const UOpPtr& index = store->src(0);
    UOpPtr gate = index->src_count() == 3 ? (index->src(2) & inside) : inside;
    std::vector<UOpPtr> sources = store->srcs();
    sources[0] = index->with_srcs({index->src(0), index->src(1), gate});
    outputs.push_back(store->with_srcs(std::move(sources)));
  }
  return simplify(clamped->with_srcs(std::move(outputs)));
}

// `kernel` with output loop `target` split into `opt.amount` blocks (BLOCKS in opt.h): the outer
// loop, of that constant extent, keeps the id; the inner, ⌈E / amount⌉ long, gets `inner_axis`.
UOpPtr block_output_loop(const UOpPtr& kernel, const UOp* target, const Opt& opt, int64_t inner_axis) {
  const UOpPtr& end = target->src(0);
  UOpPtr outer = range(opt.amount, target->arg_int());
  UOpPtr remainder = simplify(end % opt.amount);
  if (remainder->is_const() && remainder->const_int() == 0)
    return split_range(kernel, target, outer, range(simplify(end / opt.amount), inner_axis));
  // The last block's extra rows are masked as PADTO masks them (loads and stores), not clamped as a
  // SPLIT's are: the rows' index stays affine, so its step along the block is a constant (the
  // next tile's prefetch needs that), and unmask_padded_loads drops the loads' masks where it can.
  UOpPtr inner = range(simplify((end + (opt.amount - 1)) / opt.amount), inner_axis);
  UOpPtr joined = outer * inner->src(0) + inner;
  return masked_substitute(kernel, target, joined, lt(joined, end));
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
  if (opt_kind(opt.op).axes == OptAxes::TwoOutputLoops) {
    auto other = std::find_if(ranges.begin(), ranges.end(), [&](const UOp* r) { return r->arg_int() == opt.amount; });
    if (other == ranges.end()) throw invalid("the kernel has no RANGE with the other axis id");
    if (kind != AxisKind::Loop || axis_kind(opt.amount) != AxisKind::Loop || opt.amount == opt.axis)
      throw invalid("only two different output loops can swap or merge");
    if (opt.op == OptOp::Swap)
      return simplify(substitute(kernel, {{target, range(target->src(0), opt.amount)},
                                          {*other, range((*other)->src(0), opt.axis)}}));
    // Either extent may be symbolic: a batch of any size merged with the channels, so that threads
    // split batch × channels (thread_blocks.cpp, with_parallel_axis); an image's rows and columns, of
    // any size, as one contiguous loop (the simplifier folds (m / w)·w + m % w back to m).
    const UOpPtr& inner_extent = (*other)->src(0);
    UOpPtr merged = target->src(0)->is_const() && inner_extent->is_const()
                        ? range(static_cast<int64_t>(target->src(0)->const_int() * inner_extent->const_int()), opt.axis)
                        : range(simplify(target->src(0) * inner_extent), opt.axis);
    return simplify(substitute(kernel, {{target, merged / inner_extent}, {*other, merged % inner_extent}}));
  }
  if (kind != AxisKind::Loop && kind != AxisKind::Reduce) throw invalid("only loop and reduce axes can be split");
  if (opt.op == OptOp::Split && kind == AxisKind::Reduce) {
    // A reduce loop splits only where `amount` provably divides it (after a PADTO): an extra
    // iteration of a clamped split would add the last term twice.
    if (opt.amount < 2) throw invalid("the inner extent must be at least 2");
    UOpPtr remainder = simplify(target->src(0) % opt.amount);
    if (!remainder->is_const() || remainder->const_int() != 0)
      throw invalid("a reduce loop splits only by an amount that divides it (PADTO it first)");
    int64_t inner_axis = next_axis_in_band(ranges, kFirstReduceAxis);
    if (inner_axis >= kFirstUpcastAxis) throw invalid("the kernel has no free reduce axis id");
    return split_range(kernel, target, range(simplify(target->src(0) / opt.amount), opt.axis), range(opt.amount, inner_axis));
  }
  if (opt.op == OptOp::Split) {
    if (kind != AxisKind::Loop) throw invalid("only output and reduce loops can be split");
    if (opt.amount < 2) throw invalid("the inner extent must be at least 2");
    // Past the loop's largest extent a split only adds padded iterations (a tuning database's
    // SPLIT by 2^40 would run that many).
    if (opt.amount > target->src(0)->vmax())
      throw invalid(str_cat("the inner extent is larger than the loop's largest extent ", static_cast<int64_t>(target->src(0)->vmax())));
    int64_t inner_axis = next_axis_in_band(ranges, 0);
    if (inner_axis >= kFirstReduceAxis) throw invalid("the kernel has no free output axis id");
    return split_output_loop(kernel, target, opt.amount, inner_axis);
  }
  if (opt.op == OptOp::Blocks) {
    if (kind != AxisKind::Loop) throw invalid("only output loops are cut into blocks");
    if (opt.amount < 2) throw invalid("the number of blocks must be at least 2");
    // More blocks than the loop ever has iterations would only add padded ones.
    if (opt.amount > target->src(0)->vmax())
      throw invalid(str_cat("more blocks than the loop's largest extent ", static_cast<int64_t>(target->src(0)->vmax())));
    int64_t inner_axis = next_axis_in_band(ranges, 0);
    if (inner_axis >= kFirstReduceAxis) throw invalid("the kernel has no free output axis id");
    return block_output_loop(kernel, target, opt, inner_axis);
  }
  if (opt.op == OptOp::Padto) {
    if (kind != AxisKind::Loop && kind != AxisKind::Reduce) throw invalid("only output and reduce loops can be padded");
    if (opt.amount < 2) throw invalid("the multiple must be at least 2");
    // Past a reduce loop's largest extent the padding only adds steps (a tuning database's PADTO by
    // 2^40 would run that many).
    if (kind == AxisKind::Reduce && opt.amount > target->src(0)->vmax())
      throw invalid(str_cat("the multiple is larger than the reduce loop's largest extent ",
                            static_cast<int64_t>(target->src(0)->vmax())));
    // A symbolic extent E runs to ⌈E / amount⌉·amount, an expression a SPLIT by `amount` divides
    // (a symbolic contiguous axis in vector blocks: heuristics.h, step 0).
    const UOpPtr& end = target->src(0);
    UOpPtr padded = simplify((end + (opt.amount - 1)) / opt.amount * opt.amount);
    if (padded == end) throw invalid("the extent is a multiple already");
    return kind == AxisKind::Reduce ? pad_reduce_range(kernel, target, padded) : pad_range(kernel, target, padded);
  }
  if (!target->src(0)->is_const()) throw invalid("the range's extent is not a constant");
  auto extent = static_cast<int64_t>(target->src(0)->const_int());
  if (opt.amount < 2 || extent % opt.amount != 0) throw invalid(str_cat("the amount does not divide the extent ", extent));
  if (opt.op == OptOp::Upcast && next_axis_in_band(ranges, kFirstUpcastAxis) != kFirstUpcastAxis)
    throw invalid("the kernel has an UPCAST already");
  int64_t band = opt.op == OptOp::Upcast ? kFirstUpcastAxis : kFirstUnrollAxis;
  return split_range(kernel, target, range(extent / opt.amount, opt.axis), range(opt.amount, next_axis_in_band(ranges, band)));
}

UOpPtr apply_opts(UOpPtr kernel, const std::vector<Opt>& opts) {
  for (const Opt& opt : opts) kernel = apply_opt(kernel, opt);
  return kernel;
}

}  // namespace kiln
