// unmask_padded_loads: see padded_loads.h.
#include "opt/padded_loads.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/opt.h"
#include "passes/symbolic.h"

namespace kiln {
namespace {

std::vector<UOpPtr> conjuncts_of(const UOp* index) {
  std::vector<UOpPtr> conjuncts;
  if (index->src_count() == 3) collect_conjuncts(index->src(2), conjuncts);
  return conjuncts;
}

bool contains(const std::vector<UOpPtr>& nodes, const UOpPtr& node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

// Whether `condition` qualifies by (b) and (c) of padded_loads.h: index arithmetic over output loops
// and unrolled rows, with a size variable in it.
bool is_padding_condition(const UOpPtr& condition) {
  if (condition->op() != Ops::CMPLT) return false;
  bool symbolic = false;
  for (const UOp* node : toposort(condition)) {
    if (node->op() == Ops::LOAD) return false;
    if (node->op() == Ops::DEFINE_VAR) symbolic = true;
    if (node->op() == Ops::RANGE) {
      AxisKind kind = axis_kind(node->arg_int());
      if (kind != AxisKind::Loop && kind != AxisKind::Unroll) return false;
    }
  }
  return symbolic;
}

UOpPtr conjunction(const std::vector<UOpPtr>& conditions) {
  UOpPtr all = conditions.front();
  for (size_t i = 1; i < conditions.size(); ++i) all = all & conditions[i];
  return all;
}

// The RANGEs `node` depends on, each once (shared pointers: substitute() needs them as values).
void collect_ranges(const UOpPtr& node, std::unordered_set<const UOp*>& seen, std::vector<UOpPtr>& ranges) {
  if (!seen.insert(node.get()).second) return;
  if (node->op() == Ops::RANGE) {
    ranges.push_back(node);
    return;
  }
  for (const UOpPtr& source : node->srcs()) collect_ranges(source, seen, ranges);
}

// `load` without the conditions `dropped` in its mask, reading, where they fail, what the point
// with their rows at 0 reads; null when that point does not provably pass them (d).
UOpPtr unmasked_load(const UOp* load, const std::vector<UOpPtr>& dropped, const std::vector<UOpPtr>& kept) {
  UOpPtr all = conjunction(dropped);
  std::unordered_set<const UOp*> seen;
  std::vector<UOpPtr> rows;
  collect_ranges(all, seen, rows);
  std::unordered_map<const UOp*, UOpPtr> at_zero, selected;
  for (const UOpPtr& row : rows) {
    at_zero[row.get()] = const_like(row, 0);
    selected[row.get()] = where(all, row, const_like(row, 0));
  }
  UOpPtr at_origin = simplify(substitute(all, at_zero));
  if (!at_origin->is_const() || at_origin->const_int() == 0) return nullptr;
  // The kept conditions are read at the chosen point too: the load there is the one the kernel
  // makes at that point, under the mask it has there.
  const UOpPtr& index = load->src(0);
  std::vector<UOpPtr> sources{index->src(0), substitute(index->src(1), selected)};
  if (!kept.empty()) sources.push_back(substitute(conjunction(kept), selected));
  UOpPtr moved = index->with_srcs(std::move(sources));
  if (kept.empty()) return UOp::make(Ops::LOAD, load->dtype(), {moved});
  return UOp::make(Ops::LOAD, load->dtype(), {moved, load->src(1)});
}

}  // namespace

UOpPtr unmask_padded_loads(const UOpPtr& kernel) {
  std::vector<const UOp*> order = toposort(kernel);
  // Conditions every store is masked by.
  std::vector<UOpPtr> shared;
  bool first_store = true;
  for (const UOp* node : order) {
    if (node->op() != Ops::STORE) continue;
    const UOp* index = node->src(0).get();
    if (index->op() != Ops::INDEX || index->src(0)->op() != Ops::DEFINE_GLOBAL) return kernel;
    std::vector<UOpPtr> conjuncts = conjuncts_of(index);
    if (first_store) {
      for (const UOpPtr& condition : conjuncts)
        if (is_padding_condition(condition)) shared.push_back(condition);
      first_store = false;
    } else {
      std::erase_if(shared, [&](const UOpPtr& condition) { return !contains(conjuncts, condition); });
    }
  }
  if (shared.empty()) return kernel;
  std::unordered_map<const UOp*, UOpPtr> replaced;
  for (const UOp* node : order) {
    if (node->op() != Ops::LOAD || node->src(0)->op() != Ops::INDEX) continue;
    std::vector<UOpPtr> dropped, kept;
    for (const UOpPtr& condition : conjuncts_of(node->src(0).get()))
      (contains(shared, condition) ? dropped : kept).push_back(condition);
    if (dropped.empty()) continue;
    if (UOpPtr load = unmasked_load(node, dropped, kept)) replaced[node] = load;
  }
  if (replaced.empty()) return kernel;
  return simplify(substitute(kernel, replaced));
}

}  // namespace kiln
