// The one-hot reduce collapse (reduce_collapse.h).
#include "schedule/reduce_collapse.h"

#include <algorithm>
#include <optional>
#include <ranges>
#include <unordered_map>

#include "ir/build.h"
#include "ir/dtype.h"
#include "ir/substitute.h"

namespace kiln {
namespace {

bool depends_on(const UOpPtr& node, const UOp* range) {
  std::vector<const UOp*> nodes = toposort(node);
  return std::find(nodes.begin(), nodes.end(), range) != nodes.end();
}

bool is_zero(const UOp* node) {
  if (!node->is_const()) return false;
  const Arg& arg = node->arg();
  if (const auto* b = std::get_if<bool>(&arg)) return !*b;
  if (const auto* i = std::get_if<int64_t>(&arg)) return *i == 0;
  if (const auto* d = std::get_if<double>(&arg)) return *d == 0.0;
  return false;
}

// Zero is the identity of a sum, and of a max over unsigned integers or bools ("any").
bool zero_is_identity(Ops reduce_op, DType dtype) {
  if (reduce_op == Ops::ADD) return true;
  return reduce_op == Ops::MAX && (dtype.is_unsigned() || dtype.is_bool());
}

// `value` is exactly the loop variable `range` as an integer of a type that holds every value of
// the range (so `value == x` holds for exactly one iteration when x is in range).
bool is_range_value(const UOp* value, const UOp* range) {
  while (value->op() == Ops::CAST) {
    DType type = value->dtype();
    if (!type.is_int() || max_value(type) < range->vmax()) return false;
    value = value->src(0).get();
  }
  return value == range;
}

struct Selection {
  size_t range;           // position in the reduce's ranges
  UOpPtr index;           // the selected iteration, as `index`
  std::vector<UOpPtr> rest;  // the other conjuncts of the condition
};

// A conjunct `r == x` (either order, r possibly cast) with x independent of r.
std::optional<Selection> find_selection(const UOpPtr& condition, const std::vector<UOpPtr>& ranges) {
  std::vector<UOpPtr> conjuncts;
  collect_conjuncts(condition, conjuncts);
  for (size_t c = 0; c < conjuncts.size(); ++c) {
    const UOpPtr& conjunct = conjuncts[c];
    if (conjunct->op() != Ops::CMPEQ) continue;
    for (size_t r = 0; r < ranges.size(); ++r) {
      for (int side = 0; side < 2; ++side) {
        const UOpPtr& loop_side = conjunct->src(static_cast<size_t>(side));
        const UOpPtr& other = conjunct->src(static_cast<size_t>(1 - side));
        if (!is_range_value(loop_side.get(), ranges[r].get()) || depends_on(other, ranges[r].get())) continue;
        if (!other->dtype().is_int()) continue;
        Selection selection{r, other->dtype().is_index() ? other : cast(other, dtypes::index), {}};
        for (size_t k = 0; k < conjuncts.size(); ++k)
          if (k != c) selection.rest.push_back(conjuncts[k]);
        return selection;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

UOpPtr collapse_one_hot_reduce(Ops reduce_op, DType dtype, const UOpPtr& body, const std::vector<UOpPtr>& ranges) {
  if (!zero_is_identity(reduce_op, dtype)) return nullptr;
  // Casts above the select (a sum accumulating in a wider type) move onto the selected value.
  std::vector<DType> casts;
  UOpPtr select = body;
  while (select->op() == Ops::CAST) {
    casts.push_back(select->dtype());
    select = select->src(0);
  }
  if (select->op() != Ops::WHERE || !is_zero(select->src(2).get())) return nullptr;
  std::optional<Selection> selection = find_selection(select->src(0), ranges);
  if (!selection) return nullptr;

  const UOpPtr& range = ranges[selection->range];
  int64_t extent = static_cast<int64_t>(range->vmax()) + 1;
  const UOpPtr& index = selection->index;
  UOpPtr in_range = logical_not(lt(index, 0)) & lt(index, extent);
  // Clamped, the index stays where the loop variable was (every load keeps its old bounds) and
  // the simplifier knows its range; out of range, the select below discards the value.
  UOpPtr clamped = maximum(minimum(index, extent - 1), 0);
  std::unordered_map<const UOp*, UOpPtr> at_index{{range.get(), clamped}};
  UOpPtr value = substitute(select->src(1), at_index);
  for (DType type : casts | std::views::reverse) value = cast(value, type);
  UOpPtr condition = in_range;
  for (const UOpPtr& conjunct : selection->rest) condition = condition & substitute(conjunct, at_index);
  UOpPtr identity = dtype.is_bool() ? const_bool(false) : dtype.is_float() ? const_float(dtype, 0.0) : const_int(dtype, 0);
  UOpPtr collapsed = where(condition, value, identity);

  std::vector<UOpPtr> remaining;
  for (size_t r = 0; r < ranges.size(); ++r)
    if (r != selection->range) remaining.push_back(ranges[r]);
  if (remaining.empty()) return collapsed;
  if (UOpPtr again = collapse_one_hot_reduce(reduce_op, dtype, collapsed, remaining)) return again;
  std::vector<UOpPtr> sources{collapsed};
  sources.insert(sources.end(), remaining.begin(), remaining.end());
  return UOp::make(Ops::REDUCE, dtype, std::move(sources), reduce_op);
}

}  // namespace kiln
