// The expander; see expand.h.
#include "opt/expand.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/opt.h"
#include "passes/linear_terms.h"
#include "passes/symbolic.h"
#include "support/error.h"

namespace kiln {

namespace {

UOpPtr with_range_value(const UOpPtr& node, const UOp* range, int64_t value) {
  return substitute(node, {{range, const_int(dtypes::index, value)}});
}

UOpPtr combine(Ops op, const std::vector<UOpPtr>& values) {
  // A balanced tree keeps the dependency chains short.
  std::vector<UOpPtr> level = values;
  while (level.size() > 1) {
    std::vector<UOpPtr> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(alu(op, level[i], level[i + 1]));
    if (level.size() % 2 == 1) next.push_back(level.back());
    level = std::move(next);
  }
  return level.front();
}

// One UNROLL range, expanded.
UOpPtr expand_unroll(const UOpPtr& kernel, const UOp* unroll) {
  auto extent = static_cast<int64_t>(unroll->src(0)->const_int());
  // Reduce axes first: REDUCE(v, …, u) → REDUCE(v[u=0] op … op v[u=k-1], …).
  std::unordered_map<const UOp*, UOpPtr> replacements;
  for (const UOp* node : toposort(kernel)) {
    if (node->op() != Ops::REDUCE) continue;
    auto listed = std::find_if(node->srcs().begin() + 1, node->srcs().end(),
                               [&](const UOpPtr& r) { return r.get() == unroll; });
    if (listed == node->srcs().end()) continue;
    std::vector<UOpPtr> copies;
    for (int64_t value = 0; value < extent; ++value) copies.push_back(with_range_value(node->src(0), unroll, value));
    UOpPtr combined = combine(node->arg_op(), copies);
    std::vector<UOpPtr> sources{combined};
    for (size_t i = 1; i < node->src_count(); ++i)
      if (node->src(i).get() != unroll) sources.push_back(node->src(i));
    replacements[node] = sources.size() == 1 ? combined : node->with_srcs(std::move(sources));
  }
  UOpPtr reduced = replacements.empty() ? kernel : substitute(kernel, replacements);
  // Output axes: each STORE that still depends on u becomes k STOREs.
  std::vector<UOpPtr> stores;
  for (const UOpPtr& store : reduced->srcs()) {
    std::vector<const UOp*> nodes = toposort(store);
    bool depends = std::find(nodes.begin(), nodes.end(), unroll) != nodes.end();
    if (!depends) {
      stores.push_back(store);
      continue;
    }
    for (int64_t value = 0; value < extent; ++value) stores.push_back(with_range_value(store, unroll, value));
  }
  return reduced->with_srcs(std::move(stores));
}

}  // namespace

UOpPtr expand_unrolls(const UOpPtr& kernel) {
  UOpPtr result = kernel;
  for (const UOp* range : kernel_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Unroll) {
      // Ranges are interned: the node in `kernel` is the node in `result`.
      result = expand_unroll(result, range);
    }
  return result == kernel ? kernel : simplify(result);
}

bool vectorizable_dtype(DType dtype) {
  switch (dtype.scalar()) {
    case ScalarType::Index: case ScalarType::Void: return false;
    default: return !dtype.is_pointer();
  }
}

namespace {

bool vector_alu(Ops op) {
  if (!op_is_alu(op)) return false;
  switch (op) {
    case Ops::EXP2: case Ops::LOG2: case Ops::SIN: case Ops::POW: case Ops::THREEFRY:
    case Ops::IDIV: case Ops::MOD:
      return false;
    default: return true;
  }
}

class Vectorizer {
 public:
  Vectorizer(const UOpPtr& kernel, const UOp* upcast)
      : kernel_(kernel), upcast_(upcast), width_(static_cast<int>(upcast->src(0)->const_int())) {
    for (const UOp* node : toposort(kernel)) {
      // A REDUCE over the upcast (a reduce axis's lanes) is one scalar: its source is a vector whose
      // lanes it combines (lane_reduce).
      if (node->op() == Ops::REDUCE && std::any_of(node->srcs().begin() + 1, node->srcs().end(),
                                                   [&](const UOpPtr& r) { return r.get() == upcast; })) {
        lane_reduces_.push_back(node);
        continue;
      }
      bool depends = node == upcast;
      for (const UOpPtr& source : node->srcs()) depends = depends || depends_.count(source.get()) != 0;
      if (depends) depends_.insert(node);
    }
  }

  UOpPtr run() {
    if (!lane_reduces_.empty()) {
      // The upcast is a reduce axis: no store depends on it, and each REDUCE over it becomes a
      // vector REDUCE over its other ranges whose lanes are then combined.
      std::unordered_map<const UOp*, UOpPtr> combined;
      for (const UOp* reduce : lane_reduces_) combined[reduce] = lane_reduce(reduce->self());
      return substitute(kernel_, combined);
    }
    std::vector<UOpPtr> stores;
    for (const UOpPtr& store : kernel_->srcs()) {
      if (!depends(store.get())) {
        stores.push_back(store);
        continue;
      }
      for (UOpPtr& written : vector_store(store)) stores.push_back(std::move(written));
    }
    return kernel_->with_srcs(std::move(stores));
  }

 private:
  bool depends(const UOp* node) const { return depends_.count(node) != 0; }

  // REDUCE(v, r…, u) over the upcast u: the W lanes of REDUCE(vector v, r…) combined by the
  // REDUCE's op in a balanced tree (a horizontal reduction), or of vector v itself when u is its
  // only range. Each lane sums every W-th step, so float sums are reassociated, as reductions are
  // allowed to be.
  UOpPtr lane_reduce(const UOpPtr& reduce) {
    UOpPtr partial = vector(reduce->src(0));
    std::vector<UOpPtr> ranges;
    for (size_t i = 1; i < reduce->src_count(); ++i)
      if (reduce->src(i).get() != upcast_) ranges.push_back(reduce->src(i));
    if (!ranges.empty()) {
      ranges.insert(ranges.begin(), partial);
      partial = UOp::make(Ops::REDUCE, reduce->dtype().vec(width_), std::move(ranges), reduce->arg());
    }
    std::vector<UOpPtr> lanes_of_partial;
    for (int l = 0; l < width_; ++l)
      lanes_of_partial.push_back(UOp::make(Ops::GEP, reduce->dtype(), {partial}, std::vector<int64_t>{l}));
    return combine(reduce->arg_op(), lanes_of_partial);
  }

  // The scalar value of `node` in lane `lane_number`: index arithmetic re-evaluated with the lane's
  // value of the upcast (and simplified), a lane of a vector op, or the op applied to its sources' lanes.
  UOpPtr lane(const UOpPtr& node, int lane_number) {
    if (!depends(node.get())) return node;
    if (node->dtype().is_index()) return simplify(with_range_value(node, upcast_, lane_number));
    if (vectorizable_dtype(node->dtype()) && vectorized_directly(node.get())) {
      UOpPtr vec = vector(node);
      // A vector built lane by lane (a gather) hands out its lanes directly.
      if (vec->op() == Ops::VECTORIZE) return vec->src(static_cast<size_t>(lane_number));
      return UOp::make(Ops::GEP, node->dtype(), {vec}, std::vector<int64_t>{lane_number});
    }
    return lane_by_sources(node, lane_number);
  }

  // `node` applied to its sources' values in one lane.
  UOpPtr lane_by_sources(const UOpPtr& node, int lane_number) {
    auto key = std::make_pair(node.get(), lane_number);
    if (auto found = lanes_.find(key); found != lanes_.end()) return found->second;
    std::vector<UOpPtr> sources;
    for (const UOpPtr& source : node->srcs()) sources.push_back(lane(source, lane_number));
    UOpPtr result = node->with_srcs(std::move(sources));
    lanes_[key] = result;
    return result;
  }

  std::vector<UOpPtr> lanes(const UOpPtr& node) {
    std::vector<UOpPtr> result;
    for (int l = 0; l < width_; ++l) result.push_back(lane(node, l));
    return result;
  }

  UOpPtr broadcast(const UOpPtr& scalar) {
    return UOp::make(Ops::VECTORIZE, scalar->dtype().vec(width_), std::vector<UOpPtr>(static_cast<size_t>(width_), scalar));
  }

  // A W-wide vector value of `node` (a broadcast when it does not depend on the upcast).
  UOpPtr vector(const UOpPtr& node) {
    if (!depends(node.get())) return broadcast(node);
    if (auto found = vectors_.find(node.get()); found != vectors_.end()) return found->second;
    UOpPtr result;
    if (node->dtype() == dtypes::bool_ && !vectorized_directly(node.get())) {
      result = vector_condition(node);
    } else if (!vectorizable_dtype(node->dtype()) || !vectorized_directly(node.get())) {
      result = UOp::make(Ops::VECTORIZE, node->dtype().vec(width_), lanes(node));
    } else if (node->op() == Ops::LOAD) {
      result = vector_load(node);
    } else if (node->op() == Ops::REDUCE) {
      std::vector<UOpPtr> sources{vector(node->src(0))};
      for (size_t i = 1; i < node->src_count(); ++i) sources.push_back(node->src(i));
      result = UOp::make(Ops::REDUCE, node->dtype().vec(width_), std::move(sources), node->arg());
    } else {
      std::vector<UOpPtr> sources;
      for (const UOpPtr& source : node->srcs()) sources.push_back(vector(source));
      result = UOp::make(node->op(), node->dtype().vec(width_), std::move(sources), node->arg());
    }
    vectors_[node.get()] = result;
    return result;
  }

  // Whether a dependent node becomes one vector op (rather than one op per lane).
  bool vectorized_directly(const UOp* node) {
    if (auto found = direct_.find(node); found != direct_.end()) return found->second;
    bool direct = false;
    switch (node->op()) {
      case Ops::LOAD: direct = true; break;
      case Ops::REDUCE: direct = true; break;
      // An integer wider than 16 bits rounds to bf16 through a sticky-bit conversion that the
      // renderer writes for scalars only.
      case Ops::CAST: case Ops::BITCAST:
        direct = vectorizable_dtype(node->src(0)->dtype()) &&
                 !(node->op() == Ops::CAST && node->dtype().scalar() == ScalarType::BFloat16 &&
                   node->src(0)->dtype().is_int() && node->src(0)->dtype().scalar_bytes() > 2);
        break;
      default:
        direct = vector_alu(node->op()) && std::all_of(node->srcs().begin(), node->srcs().end(), [](const UOpPtr& s) {
                   return vectorizable_dtype(s->dtype());
                 });
    }
    direct_[node] = direct;
    return direct;
  }

  // The lanes of an index expression as one vector when they are lane 0's value plus lane·step (a
  // splat plus a constant vector); null otherwise.
  UOpPtr affine_index_vector(const UOpPtr& node) {
    if (auto found = affine_.find(node.get()); found != affine_.end()) return found->second;
    UOpPtr result;
    UOpPtr first = lane(node, 0);
    std::vector<UOpPtr> steps;
    bool affine = true;
    int64_t step = 0;
    for (int l = 1; l < width_ && affine; ++l) {
      UOpPtr offset = simplify(lane(node, l) - first);
      affine = offset->is_const() && (l > 1 ? static_cast<int64_t>(offset->const_int()) == step * l
                                            : (step = static_cast<int64_t>(offset->const_int()), true));
    }
    if (affine) {
      std::vector<UOpPtr> offsets;
      for (int l = 0; l < width_; ++l) offsets.push_back(const_int(dtypes::index, step * l));
      DType type = dtypes::index.vec(width_);
      result = UOp::make(Ops::ADD, type, {broadcast(first), UOp::make(Ops::VECTORIZE, type, std::move(offsets))});
    }
    affine_[node.get()] = result;
    return result;
  }

  // A bool vector for a condition that differs between lanes: comparisons of index expressions
  // that are affine in the lane become vector comparisons (a conv's padding test costs a few vector
  // ops rather than one compare per lane), combined with AND/OR; anything else is built lane by lane
  // from `per_lane` (or from the lanes of its parts).
  UOpPtr vector_condition(const UOpPtr& condition, const std::vector<UOpPtr>& per_lane = {}) {
    DType type = dtypes::bool_.vec(width_);
    if (!depends(condition.get())) return broadcast(condition);
    Ops op = condition->op();
    if ((op == Ops::AND || op == Ops::OR) && condition->dtype() == dtypes::bool_)
      return UOp::make(op, type, {vector_condition(condition->src(0)), vector_condition(condition->src(1))});
    if ((op == Ops::CMPLT || op == Ops::CMPNE || op == Ops::CMPEQ) && condition->src(0)->dtype().is_index()) {
      UOpPtr a = depends(condition->src(0).get()) ? affine_index_vector(condition->src(0)) : broadcast(condition->src(0));
      UOpPtr b = depends(condition->src(1).get()) ? affine_index_vector(condition->src(1)) : broadcast(condition->src(1));
      if (a && b) return UOp::make(op, type, {a, b});
    }
    if (op == Ops::NOT && condition->dtype() == dtypes::bool_)
      return UOp::make(op, type, {vector_condition(condition->src(0))});
    if (!per_lane.empty()) return UOp::make(Ops::VECTORIZE, type, per_lane);
    std::vector<UOpPtr> lanes_of_condition;
    for (int l = 0; l < width_; ++l) lanes_of_condition.push_back(simplify(with_range_value(condition, upcast_, l)));
    return UOp::make(Ops::VECTORIZE, type, std::move(lanes_of_condition));
  }

  struct Access {
    UOpPtr buffer, first_index, valid;  // valid: null, a scalar bool or a bool vector
    bool contiguous = false;
  };

  // Whether lanes of the index expression `offset` are consecutive, read off its terms where that
  // is certain: when `offset` is Σ c·base + k with the upcast as one base (coefficient c) and no
  // other base depending on it, lane l is lane 0 plus c·l (index values are unbounded integers), so
  // consecutive exactly when c is 1. Null for any other form (the upcast inside a division, a
  // product or a condition): then each lane is simplified and compared, at one simplify per lane
  // and access, which was a fifth of a large model's compile.
  std::optional<bool> contiguous_by_terms(const UOpPtr& offset) const {
    if (!offset->dtype().is_index()) return std::nullopt;
    int128 coefficient = 0;
    bool found = false;
    for (const LinearTerm& term : split_sum(offset).terms) {
      if (term.base.get() == upcast_) {
        coefficient += term.coefficient;
        found = true;
      } else if (depends(term.base.get())) {
        return std::nullopt;
      }
    }
    if (!found) return std::nullopt;
    return coefficient == 1;
  }

  // Whether the access through INDEX `index` is lanes idx0, idx0+1, … and with which valid.
  Access analyse(const UOp& index) {
    Access access;
    access.buffer = index.src(0);
    UOpPtr first = simplify(with_range_value(index.src(1), upcast_, 0));
    access.first_index = first;
    if (std::optional<bool> known = contiguous_by_terms(index.src(1))) {
      access.contiguous = *known;
    } else {
      access.contiguous = true;
      for (int l = 1; l < width_ && access.contiguous; ++l) {
        UOpPtr offset = simplify(with_range_value(index.src(1), upcast_, l) - first);
        access.contiguous = offset->is_const() && offset->const_int() == l;
      }
    }
    if (index.src_count() == 3) {
      const UOpPtr& valid = index.src(2);
      if (!depends(valid.get())) {
        access.valid = valid;
      } else {
        std::vector<UOpPtr> per_lane;
        for (int l = 0; l < width_; ++l) per_lane.push_back(simplify(with_range_value(valid, upcast_, l)));
        bool same = std::all_of(per_lane.begin(), per_lane.end(), [&](const UOpPtr& v) { return v == per_lane[0]; });
        access.valid = same ? per_lane[0] : vector_condition(valid, per_lane);
      }
    }
    return access;
  }

  UOpPtr vector_load(const UOpPtr& load) {
    const UOp& index = *load->src(0);
    Access access = analyse(index);
    if (!access.contiguous || !vectorizable_dtype(load->dtype())) {
      std::vector<UOpPtr> gathered;
      for (int l = 0; l < width_; ++l) gathered.push_back(lane_by_sources(load, l));
      return UOp::make(Ops::VECTORIZE, load->dtype().vec(width_), std::move(gathered));
    }
    std::vector<UOpPtr> index_sources{access.buffer, access.first_index};
    if (access.valid) index_sources.push_back(access.valid);
    UOpPtr vector_index = UOp::make(Ops::INDEX, index.dtype(), std::move(index_sources));
    std::vector<UOpPtr> sources{vector_index};
    if (load->src_count() == 2) sources.push_back(vector(load->src(1)));
    return UOp::make(Ops::LOAD, load->dtype().vec(width_), std::move(sources));
  }

  std::vector<UOpPtr> vector_store(const UOpPtr& store) {
    const UOp& index = *store->src(0);
    const UOpPtr& value = store->src(1);
    Access access = analyse(index);
    if (access.contiguous && vectorizable_dtype(value->dtype())) {
      std::vector<UOpPtr> index_sources{access.buffer, access.first_index};
      if (access.valid) index_sources.push_back(access.valid);
      UOpPtr vector_index = UOp::make(Ops::INDEX, index.dtype(), std::move(index_sources));
      return {UOp::make(Ops::STORE, dtypes::void_, {vector_index, vector(value)})};
    }
    // A scatter: one store per lane, each with its own index and valid.
    std::vector<UOpPtr> stores;
    for (int l = 0; l < width_; ++l) {
      std::vector<UOpPtr> index_sources;
      for (const UOpPtr& source : index.srcs()) index_sources.push_back(lane(source, l));
      UOpPtr lane_index = UOp::make(Ops::INDEX, index.dtype(), std::move(index_sources));
      stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {lane_index, lane(value, l)}));
    }
    return stores;
  }

  UOpPtr kernel_;
  const UOp* upcast_;
  int width_;
  std::vector<const UOp*> lane_reduces_;
  std::unordered_set<const UOp*> depends_;
  std::unordered_map<const UOp*, UOpPtr> vectors_;
  std::unordered_map<const UOp*, bool> direct_;
  std::map<std::pair<const UOp*, int>, UOpPtr> lanes_;
  std::unordered_map<const UOp*, UOpPtr> affine_;
};

}  // namespace

UOpPtr vectorize_upcast(const UOpPtr& kernel) {
  const UOp* upcast = nullptr;
  for (const UOp* range : kernel_ranges(kernel)) {
    if (axis_kind(range->arg_int()) != AxisKind::Upcast) continue;
    if (upcast != nullptr) throw_internal_error("vectorize_upcast: a kernel with two UPCAST ranges");
    upcast = range;
  }
  if (upcast == nullptr) return kernel;
  return Vectorizer(kernel, upcast).run();
}

}  // namespace kiln
