// bf16 matmuls on AMX tiles; see amx_tiles.h.
#include "opt/amx_tiles.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/amx_layout.h"
#include "opt/matmul_reduction.h"
#include "passes/symbolic.h"

namespace kiln {

namespace {

// `factor` = CAST(f32, bf16 loaded from a buffer, or BITCAST(bf16, u16 / i16 loaded)): the unmasked
// INDEX it loads from; nullptr otherwise.
UOpPtr bf16_load_index(const UOpPtr& factor) {
  if (factor->op() != Ops::CAST || factor->dtype() != dtypes::f32) return nullptr;
  UOpPtr value = factor->src(0);
  if (value->dtype() != dtypes::bf16) return nullptr;
  if (value->op() == Ops::BITCAST) {
    value = value->src(0);
    if (value->dtype() != dtypes::u16 && value->dtype() != dtypes::i16) return nullptr;
  }
  if (value->op() != Ops::LOAD || value->src_count() != 1) return nullptr;
  const UOpPtr& index = value->src(0);
  if (index->op() != Ops::INDEX || index->src_count() != 2 || index->src(0)->op() != Ops::DEFINE_GLOBAL) return nullptr;
  return index;
}

// The element index of `index` with M's, N's and K's ranges at flat positions (nullptr: absent).
UOpPtr index_at(const UOpPtr& index, const FlatDimension& first, const UOpPtr& first_at, const FlatDimension& k,
                const UOpPtr& k_at) {
  std::unordered_map<const UOp*, UOpPtr> map;
  first.unflatten(first_at, map);
  k.unflatten(k_at, map);
  return simplify(substitute(index->src(1), map));
}

std::optional<int64_t> constant_of(const UOpPtr& node) {
  if (!node->is_const()) return std::nullopt;
  return static_cast<int64_t>(node->const_int());
}

UOpPtr index_const(int64_t value) { return const_int(dtypes::index, value); }

// Fresh ranges standing for a flat position in the proofs below (axis ids no kernel range has).
constexpr int64_t kProofAxis = 900;

// The element index of `index` with M's ranges at flat position `m_at` and each of K's ranges at
// the value `k_at` gives it (the range itself where absent).
UOpPtr index_at_steps(const UOpPtr& index, const FlatDimension& m, const UOpPtr& m_at,
                      const std::unordered_map<const UOp*, UOpPtr>& k_at) {
  std::unordered_map<const UOp*, UOpPtr> map = k_at;
  m.unflatten(m_at, map);
  return simplify(substitute(index->src(1), map));
}

// How `a` walks its rows and the reduction: a[m][k] at base + m·stride + Σ r_i(k)·coefficient_i,
// r_i the part of flat step k that is K's range i (outermost first), the innermost range's
// coefficient 1 and its extent a multiple of kAmxDepth, so that each tile row's 32 steps are
// contiguous. A matmul's K is one range (a row-major matrix); a convolution's is (taps…, channels),
// a tap moving the rows' start by its coefficient (the window's offset in the image).
struct RowLayout {
  int64_t stride = 0;
  std::vector<AmxStep> steps;
};

// `a`'s RowLayout, proved by simplification for every m and every step; nullopt where it has none.
std::optional<RowLayout> row_layout(const UOpPtr& a, const FlatDimension& m, const FlatDimension& k) {
  UOpPtr zero = index_const(0), one = index_const(1);
  std::unordered_map<const UOp*, UOpPtr> origin;
  for (const UOp* r : k.ranges) origin.emplace(r, zero);
  std::optional<int64_t> base = constant_of(index_at_steps(a, m, zero, origin));
  std::optional<int64_t> next_row = constant_of(index_at_steps(a, m, one, origin));
  if (!base || !next_row || *next_row <= *base) return std::nullopt;
  RowLayout layout{*next_row - *base, {}};
  UOpPtr row = range(m.length, kProofAxis);
  UOpPtr expected = row * layout.stride + *base;
  for (const UOp* r : k.ranges) {
    std::unordered_map<const UOp*, UOpPtr> unit = origin;
    unit[r] = one;
    std::optional<int64_t> moved = constant_of(index_at_steps(a, m, zero, unit));
    if (!moved) return std::nullopt;
    layout.steps.push_back(AmxStep{extent_of(r), *moved - *base});
    expected = expected + r->self() * (*moved - *base);
  }
  // Parts that walk a in one run (a channel axis split in two by the weight's pair panels) are one.
  std::vector<AmxStep> merged;
  for (const AmxStep& part : layout.steps) {
    if (!merged.empty() && merged.back().coefficient == part.coefficient * part.extent)
      merged.back() = AmxStep{merged.back().extent * part.extent, part.coefficient};
    else
      merged.push_back(part);
  }
  layout.steps = std::move(merged);
  const AmxStep& innermost = layout.steps.back();
  if (innermost.coefficient != 1 || innermost.extent % kAmxDepth != 0) return std::nullopt;
  UOpPtr difference = simplify(index_at_steps(a, m, row, {}) - expected);
  if (!difference->is_const() || difference->const_int() != 0) return std::nullopt;
  return layout;
}

// The stride of `b`'s pair rows when it is in pair panels over (K, N), 32 columns a panel:
// b[k][32·p + c] at first(p) + (k / 2)·stride + 2·c + k % 2 for every panel p, column c < 32 and
// step k (proved as above; a panel past N's end included: the last block reads it whole), with the
// last panel's last element inside the buffer (at the last batch, `last_batch_offset` further);
// nullopt otherwise.
std::optional<int64_t> pair_panel_stride(const UOpPtr& b, const FlatDimension& n, const FlatDimension& k,
                                         int64_t last_batch_offset) {
  UOpPtr zero = index_const(0), two = index_const(2);
  std::optional<int64_t> base = constant_of(index_at(b, n, zero, k, zero));
  std::optional<int64_t> next_pair = constant_of(index_at(b, n, zero, k, two));
  if (!base || !next_pair || *next_pair - *base < 2 * kAmxBlockColumns) return std::nullopt;
  const int64_t stride = *next_pair - *base;
  const int64_t panels = (n.length + kAmxBlockColumns - 1) / kAmxBlockColumns;
  UOpPtr panel = range(panels, kProofAxis), column = range(kAmxBlockColumns, kProofAxis + 1);
  UOpPtr step = range(k.length, kProofAxis + 2);
  UOpPtr first = panel * kAmxBlockColumns;
  UOpPtr expected = index_at(b, n, first, k, zero) + step / 2 * stride + column * 2 + step % 2;
  UOpPtr difference = simplify(index_at(b, n, first + column, k, step) - expected);
  if (!difference->is_const() || difference->const_int() != 0) return std::nullopt;
  std::optional<int64_t> last_panel = constant_of(index_at(b, n, index_const((panels - 1) * kAmxBlockColumns), k, zero));
  const int64_t size = b->src(0)->dtype().pointer_size();
  if (!last_panel || size < 0 ||
      *last_panel + last_batch_offset + (k.length / 2 - 1) * stride + 2 * kAmxBlockColumns > size)
    return std::nullopt;
  return stride;
}

struct AmxMatch {
  const UOp* reduce = nullptr;
  UOpPtr a, b;  // the INDEX nodes of the two factors' loads
  RowLayout a_layout;
  int64_t b_stride = 0;
  FlatDimension m, n, k;
  FlatDimension batch;  // output axes both factors read (attention's heads); length 1 where none
};

// `index` with the batch's ranges at flat position `at`.
UOpPtr at_batch(const UOpPtr& index, const FlatDimension& batch, const UOpPtr& at) {
  if (batch.ranges.empty()) return index;
  std::unordered_map<const UOp*, UOpPtr> map;
  batch.unflatten(at, map);
  return substitute(index, map);
}

// Whether the batch only moves `index`'s start: index(batch, own, k) = index(batch, 0, 0) +
// index(0, own, k) - index(0, 0, 0) for every value of the ranges (proved by simplification), so
// that the layout proved at the first batch holds at each. The offset of the last batch from the
// first goes to `last_offset`.
bool batch_moves_start(const UOpPtr& index, const FlatDimension& batch, const FlatDimension& own,
                       const FlatDimension& k, int64_t& last_offset) {
  last_offset = 0;
  if (batch.ranges.empty()) return true;
  UOpPtr zero = index_const(0);
  UOpPtr whole = index->src(1);
  UOpPtr start = index_at(index, own, zero, k, zero);
  UOpPtr first = at_batch(index, batch, zero)->src(1);
  UOpPtr first_start = simplify(at_batch(start, batch, zero));
  UOpPtr difference = simplify(whole - start - first + first_start);
  std::optional<int64_t> last = constant_of(simplify(at_batch(start, batch, index_const(batch.length - 1))));
  std::optional<int64_t> origin = constant_of(first_start);
  if (!difference->is_const() || difference->const_int() != 0 || !last || !origin) return false;
  last_offset = *last - *origin;
  return true;
}

std::optional<AmxMatch> match_matmul(const UOpPtr& kernel) {
  std::optional<ProductReduction> product = single_product_reduction(kernel);
  if (!product) return std::nullopt;
  const UOp* reduce = product->reduce;
  UOpPtr x = bf16_load_index(reduce->src(0)->src(0)), y = bf16_load_index(reduce->src(0)->src(1));
  if (!x || !y) return std::nullopt;

  AmxMatch match;
  match.reduce = reduce;
  match.k = product->k;
  const std::vector<const UOp*>& outputs = product->outputs;
  if (match.k.length % kAmxDepth != 0) return std::nullopt;

  // Each output axis belongs to one factor, or to both: a batch of products (attention's heads),
  // one block of which is one product's.
  std::unordered_map<const UOp*, std::set<const UOp*>> open = open_ranges(kernel);
  const std::set<const UOp*>& x_ranges = open[x.get()];
  const std::set<const UOp*>& y_ranges = open[y.get()];
  std::vector<const UOp*> x_only, y_only, both;
  for (const UOp* output : outputs) {
    bool in_x = x_ranges.contains(output), in_y = y_ranges.contains(output);
    if (!in_x && !in_y) return std::nullopt;
    (in_x && in_y ? both : in_x ? x_only : y_only).push_back(output);
  }
  match.batch = {both, product_of(both), 1};
  if (x_only.empty() || y_only.empty()) return std::nullopt;
  for (const UOpPtr& store : kernel->srcs())
    if (store->op() != Ops::STORE) return std::nullopt;

  // Which factor is the row-major a and which the pair-panel b.
  for (bool x_is_a : {true, false}) {
    match.a = x_is_a ? x : y;
    match.b = x_is_a ? y : x;
    match.m = {x_is_a ? x_only : y_only, product_of(x_is_a ? x_only : y_only), 1};
    match.n = {x_is_a ? y_only : x_only, product_of(x_is_a ? y_only : x_only), 1};
    // (N may fill half a block: a conv of 16 or 24 filters between wider ones, tensor_conv_bf16.cpp.)
    if (match.m.length < kAmxBlockRows || 2 * match.n.length < kAmxBlockColumns) continue;
    // (the layouts proved at the first batch, which only moves each factor's start)
    UOpPtr zero = index_const(0);
    int64_t a_last = 0, b_last = 0;
    if (!batch_moves_start(match.a, match.batch, match.m, match.k, a_last) ||
        !batch_moves_start(match.b, match.batch, match.n, match.k, b_last))
      continue;
    std::optional<RowLayout> a_layout = row_layout(at_batch(match.a, match.batch, zero), match.m, match.k);
    std::optional<int64_t> b_stride =
        a_layout ? pair_panel_stride(at_batch(match.b, match.batch, zero), match.n, match.k, b_last) : std::nullopt;
    if (!b_stride) continue;
    match.a_layout = *a_layout;
    match.b_stride = *b_stride;
    return match;
  }
  return std::nullopt;
}

}  // namespace

std::optional<AmxKernel> amx_tile_kernel(const UOpPtr& kernel) {
  std::optional<AmxMatch> found = match_matmul(kernel);
  if (!found) return std::nullopt;
  const AmxMatch& match = *found;

  const int64_t row_blocks = (match.m.length + kAmxBlockRows - 1) / kAmxBlockRows;
  const int64_t column_blocks = (match.n.length + kAmxBlockColumns - 1) / kAmxBlockColumns;
  // A batch of products runs its blocks one product after another.
  const int64_t product_blocks = row_blocks * column_blocks;
  UOpPtr all_blocks = range(match.batch.length * product_blocks, 0);
  UOpPtr block = match.batch.ranges.empty() ? all_blocks : all_blocks % product_blocks;
  std::unordered_map<const UOp*, UOpPtr> batch_at;
  match.batch.unflatten(all_blocks / product_blocks, batch_at);
  UOpPtr row = range(kAmxBlockRows, 1), column = range(kAmxBlockColumns, 2);
  // Consecutive blocks share the larger operand's panel: each panel of it is read once (from
  // memory, a weight usually is), the smaller operand again for each (from cache). Rows first
  // streamed BERT-base's 4.7 MB FFN weights once per 32 rows: 330 GFLOP/s.
  const bool rows_inner = match.m.length <= match.n.length;
  UOpPtr row_block = rows_inner ? block % row_blocks : block / column_blocks;
  UOpPtr column_block = rows_inner ? block / row_blocks : block % column_blocks;
  // The last block of M ends at M's end (amx_tiles.h); N's last runs past it into the panel's
  // padding, its stores masked off there and its other loads at the last column.
  UOpPtr first_row = minimum(row_block * kAmxBlockRows, match.m.length - kAmxBlockRows);
  UOpPtr first_column = column_block * kAmxBlockColumns;

  UOpPtr zero = index_const(0);
  auto origin = [&](const UOpPtr& index, const FlatDimension& own, const UOpPtr& at) {
    UOpPtr start = index->with_srcs({index->src(0), index_at(index, own, at, match.k, zero)});
    return batch_at.empty() ? start : simplify(substitute(start, batch_at));
  };
  std::vector<UOpPtr> parameters{index_const(match.a_layout.stride), index_const(match.b_stride),
                                  index_const(match.k.length)};
  for (const AmxStep& step : match.a_layout.steps) {
    parameters.push_back(index_const(step.extent));
    parameters.push_back(index_const(step.coefficient));
  }
  const int parameter_count = static_cast<int>(parameters.size());
  UOpPtr product = UOp::make(Ops::WMMA, dtypes::f32.vec(static_cast<int>(kAmxBlockElements)),
                             {origin(match.a, match.m, first_row), origin(match.b, match.n, first_column),
                              UOp::make(Ops::VECTORIZE, dtypes::index.vec(parameter_count),
                                        std::move(parameters))},
                             std::string(kAmxBlock));
  UOpPtr local = UOp::make(Ops::DEFINE_LOCAL, dtypes::f32.ptr(AddrSpace::Local, kAmxBlockElements), {}, int64_t{0});
  UOpPtr written = UOp::make(Ops::STORE, dtypes::void_, {UOp::make(Ops::INDEX, local->dtype(), {local, zero}), product});
  UOpPtr barrier = UOp::make(Ops::BARRIER, dtypes::void_, {written});
  UOpPtr element = UOp::make(Ops::INDEX, local->dtype(),
                             {UOp::make(Ops::AFTER, local->dtype(), {local, barrier}), row * kAmxBlockColumns + column});
  UOpPtr sum = UOp::make(Ops::LOAD, dtypes::f32, {element});

  std::unordered_map<const UOp*, UOpPtr> map = batch_at;
  map.emplace(match.reduce, sum);
  match.m.unflatten(first_row + row, map);
  FlatDimension columns = match.n;
  columns.tile = kAmxBlockColumns;  // clamps the loads of the padded columns
  columns.unflatten(first_column + column, map);
  std::vector<UOpPtr> stores;
  for (const UOpPtr& store : kernel->srcs()) {
    UOpPtr written = substitute(store, map);
    if (columns.ragged()) {
      const UOpPtr& index = written->src(0);
      UOpPtr valid = lt(first_column + column, match.n.length);
      std::vector<UOpPtr> sources{index->src(0), index->src(1)};
      sources.push_back(index->src_count() == 3 ? alu(Ops::AND, index->src(2), valid) : valid);
      written = written->with_srcs({index->with_srcs(std::move(sources)), written->src(1)});
    }
    stores.push_back(written);
  }
  UOpPtr ast = simplify(kernel->with_srcs(std::move(stores)));
  // The block's columns as vectors of 16, its rows 4 at a time (BERT-base bf16 47.7 against 48.9 ms
  // with rows one at a time).
  return AmxKernel{ast, {Opt{OptOp::Upcast, 2, 16}, Opt{OptOp::Unroll, 1, 4}}};
}

}  // namespace kiln
