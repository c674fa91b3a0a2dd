// Tensor cores for f16 matmuls and convolutions; see gpu_tensor_cores.h.
#include "opt/gpu_tensor_cores.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/matmul_reduction.h"
#include "opt/mma_layout.h"
#include "opt/opt.h"
#include "schedule/schedule.h"

namespace kiln {

namespace {

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// `factor` = CAST(f16 or bf16 value → f32): the narrow value (bf16 only where `bf16` allows it);
// nullptr otherwise.
UOpPtr narrow_source(const UOpPtr& factor, bool bf16) {
  if (factor->op() != Ops::CAST || factor->dtype() != dtypes::f32) return nullptr;
  DType operand = factor->src(0)->dtype();
  if (operand != dtypes::f16 && !(bf16 && operand == dtypes::bf16)) return nullptr;
  return factor->src(0);
}

// The share of a padded M × N tiling that is real outputs.
double coverage(int64_t m, int64_t n) {
  return static_cast<double>(m * n) / static_cast<double>(round_up(m, mma::kRows) * round_up(n, mma::kColumns));
}

struct Match {
  const UOp* reduce = nullptr;
  UOpPtr a, b;  // the narrow factors, both f16 or both bf16: a varies with M, b with N
  FlatDimension m, n, k;
};

// The kernel's one reduction, if it is an f32 sum of f16 (or bf16) products whose factors own
// disjoint output axes, with its dimensions; nullopt otherwise.
std::optional<Match> match_matmul(const UOpPtr& kernel, bool bf16) {
  std::optional<ProductReduction> product = single_product_reduction(kernel);
  if (!product) return std::nullopt;
  const UOp* reduce = product->reduce;
  UOpPtr x = narrow_source(reduce->src(0)->src(0), bf16), y = narrow_source(reduce->src(0)->src(1), bf16);
  if (!x || !y || x->dtype() != y->dtype()) return std::nullopt;  // no instruction mixes f16 and bf16

  Match match;
  match.reduce = reduce;
  match.k.ranges = product->k.ranges;
  const std::vector<const UOp*>& outputs = product->outputs;

  std::unordered_map<const UOp*, std::set<const UOp*>> open = open_ranges(kernel);
  const std::set<const UOp*>& x_ranges = open[x.get()];
  const std::set<const UOp*>& y_ranges = open[y.get()];
  std::vector<const UOp*> x_only, y_only;
  for (const UOp* output : outputs) {
    if (x_ranges.contains(output) && !y_ranges.contains(output)) x_only.push_back(output);
    if (y_ranges.contains(output) && !x_ranges.contains(output)) y_only.push_back(output);
  }
  if (x_only.empty() || y_only.empty()) return std::nullopt;
  // Every store writes each (row, column) of the operation: it depends on both factors' axes.
  std::set<const UOp*> own(x_only.begin(), x_only.end());
  own.insert(y_only.begin(), y_only.end());
  for (const UOpPtr& store : kernel->srcs()) {
    if (store->op() != Ops::STORE) return std::nullopt;
    const std::set<const UOp*>& stored = open[store.get()];
    if (!std::ranges::includes(stored, own)) return std::nullopt;
  }

  // x's axes as the rows (M, tiles of 16) or as the columns (N, tiles of 8): the tiling that pads less.
  int64_t x_length = product_of(x_only), y_length = product_of(y_only);
  bool x_rows = coverage(x_length, y_length) >= coverage(y_length, x_length);
  match.a = x_rows ? x : y;
  match.b = x_rows ? y : x;
  match.m = {x_rows ? x_only : y_only, x_rows ? x_length : y_length, mma::kRows};
  match.n = {x_rows ? y_only : x_only, x_rows ? y_length : x_length, mma::kColumns};
  match.k.length = product_of(match.k.ranges);
  match.k.tile = mma::kDepth;
  if (match.k.length < mma::kDepth || coverage(match.m.length, match.n.length) < 0.5) return std::nullopt;
  return match;
}

UOpPtr vectorize(DType scalar, const std::vector<UOpPtr>& lanes) {
  return UOp::make(Ops::VECTORIZE, scalar.vec(static_cast<int>(lanes.size())), lanes);
}

}  // namespace

TensorCoreKernel gpu_tensor_cores(const UOpPtr& kernel, bool bf16_operands) {
  std::optional<Match> found = match_matmul(kernel, bf16_operands);
  if (!found) return {kernel};
  const Match& match = *found;
  const DType operand = match.a->dtype();

  int64_t next_output = 0;
  for (const UOp* range : kernel_ranges(kernel))
    if (axis_kind(range->arg_int()) == AxisKind::Loop) next_output = std::max(next_output, range->arg_int() + 1);
  if (next_output >= kFirstReduceAxis) return {kernel};
  UOpPtr m_tile = match.m.outer_range(match.m.ranges.front()->arg_int());
  UOpPtr n_tile = match.n.outer_range(match.n.ranges.front()->arg_int());
  UOpPtr k_step = match.k.outer_range(match.k.ranges.front()->arg_int());
  UOpPtr lane = range(mma::kLanes, next_output);

  // The factor `factor` at row (or column) `at` of its own dimension `own` and at reduction step
  // `step`: its expression with those ranges substituted, 0 on the steps that pad K.
  auto element = [&](const UOpPtr& factor, const FlatDimension& own, const UOpPtr& at, const UOpPtr& step) {
    std::unordered_map<const UOp*, UOpPtr> map;
    own.unflatten(at, map);
    match.k.unflatten(step, map);
    UOpPtr value = substitute(factor, map);
    return match.k.ragged() ? where(lt(step, match.k.length), value, const_float(operand, 0)) : value;
  };
  std::vector<UOpPtr> a, b, zero(mma::kCElements, const_float(dtypes::f32, 0));
  for (int i = 0; i < mma::kAElements; ++i)
    a.push_back(element(match.a, match.m, m_tile * mma::kRows + mma::a_row(lane, i),
                        k_step * mma::kDepth + mma::a_column(lane, i)));
  for (int i = 0; i < mma::kBElements; ++i)
    b.push_back(element(match.b, match.n, n_tile * mma::kColumns + mma::b_column(lane, i),
                        k_step * mma::kDepth + mma::b_row(lane, i)));
  UOpPtr product = UOp::make(Ops::WMMA, dtypes::f32.vec(mma::kCElements),
                             {vectorize(operand, a), vectorize(operand, b), vectorize(dtypes::f32, zero)},
                             std::string(operand == dtypes::bf16 ? mma::kNameBF16 : mma::kNameF16));
  UOpPtr sums = match.k.tiles() == 1 ? product : UOp::make(Ops::REDUCE, product->dtype(), {product, k_step}, Ops::ADD);

  // Each store once per accumulator, at its element's row and column; padded ones masked off.
  std::vector<UOpPtr> stores;
  for (const UOpPtr& store : kernel->srcs()) {
    for (int i = 0; i < mma::kCElements; ++i) {
      UOpPtr row = m_tile * mma::kRows + mma::c_row(lane, i);
      UOpPtr column = n_tile * mma::kColumns + mma::c_column(lane, i);
      std::unordered_map<const UOp*, UOpPtr> map{{match.reduce, UOp::make(Ops::GEP, dtypes::f32, {sums}, std::vector<int64_t>{i})}};
      match.m.unflatten(row, map);
      match.n.unflatten(column, map);
      UOpPtr written = substitute(store, map);
      std::optional<UOpPtr> valid;
      if (match.m.ragged()) valid = lt(row, match.m.length);
      if (match.n.ragged()) valid = valid ? alu(Ops::AND, *valid, lt(column, match.n.length)) : lt(column, match.n.length);
      if (valid) {
        const UOpPtr& index = written->src(0);
        std::vector<UOpPtr> sources{index->src(0), index->src(1)};
        sources.push_back(index->src_count() == 3 ? alu(Ops::AND, index->src(2), *valid) : *valid);
        written = written->with_srcs({index->with_srcs(std::move(sources)), written->src(1)});
      }
      stores.push_back(written);
    }
  }
  return {kernel->with_srcs(std::move(stores)), lane->arg_int()};
}

}  // namespace kiln
