// 8-bit integer dot products on x86 CPUs; see dot_products.h.
#include "opt/dot_products.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "codegen/target.h"
#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/opt.h"
#include "opt/row_remainders.h"
#include "passes/symbolic.h"

namespace kiln {

namespace {

bool is_8bit_integer(DType dtype) {
  DType scalar = dtype.base();
  return scalar == dtypes::u8 || scalar == dtypes::i8;
}

// ---- step 1: the unoptimised kernel ----------------------------------------------------------

// `factor` = CAST(i32, an 8-bit value): that value; nullptr otherwise.
const UOp* widened_8bit(const UOp* factor) {
  if (factor->op() != Ops::CAST || factor->dtype() != dtypes::i32) return nullptr;
  const UOp* value = factor->src(0).get();
  return is_8bit_integer(value->dtype()) ? value : nullptr;
}

// ---- step 2: the lowered kernel --------------------------------------------------------------

// One factor of a lane-wise product, as its 8-bit value: a scalar that every lane shares, or a
// vector of the product's lanes.
struct Factor {
  UOpPtr value;
  bool is_unsigned = false;
  bool broadcast = false;

  UOpPtr lane(int j) const {
    if (broadcast) return value;
    if (value->op() == Ops::VECTORIZE) return value->src(static_cast<size_t>(j));  // a gather's own lane
    return UOp::make(Ops::GEP, value->dtype().base(), {value}, std::vector<int64_t>{j});
  }
};

// `node` (i32 × lanes) as a widened 8-bit factor: CAST of an 8-bit vector, or a splat of the CAST
// of an 8-bit scalar (what vectorisation makes of a value that does not depend on the lanes).
std::optional<Factor> widened_factor(const UOpPtr& node, int lanes) {
  if (node->dtype() != dtypes::i32.vec(lanes)) return std::nullopt;
  if (node->op() == Ops::CAST && is_8bit_integer(node->src(0)->dtype()) && node->src(0)->dtype().count() == lanes)
    return Factor{node->src(0), node->src(0)->dtype().base() == dtypes::u8, false};
  if (node->op() == Ops::VECTORIZE) {
    const UOpPtr& first = node->src(0);
    for (const UOpPtr& source : node->srcs())
      if (source != first) return std::nullopt;
    if (first->op() == Ops::CAST && first->dtype() == dtypes::i32 && is_8bit_integer(first->src(0)->dtype()))
      return Factor{first->src(0), first->src(0)->dtype() == dtypes::u8, true};
  }
  return std::nullopt;
}

struct Product {
  Factor unsigned_factor, signed_factor;
};

// `term` = a lane-wise product of an unsigned and a signed 8-bit factor; nullopt otherwise.
std::optional<Product> product_of(const UOpPtr& term, int lanes) {
  if (term->op() != Ops::MUL) return std::nullopt;
  std::optional<Factor> x = widened_factor(term->src(0), lanes), y = widened_factor(term->src(1), lanes);
  if (!x || !y || x->is_unsigned == y->is_unsigned) return std::nullopt;
  return x->is_unsigned ? Product{*x, *y} : Product{*y, *x};
}

// The terms of a tree of i32 × lanes additions.
void collect_terms(const UOpPtr& node, std::vector<UOpPtr>& terms) {
  if (node->op() == Ops::ADD) {
    collect_terms(node->src(0), terms);
    collect_terms(node->src(1), terms);
    return;
  }
  terms.push_back(node);
}

// One vector LOAD of `bytes` when they are unmasked loads of consecutive elements of one buffer
// (b stored in dot-product panels: tensor_matmul.cpp); nullptr otherwise.
UOpPtr consecutive_load(const std::vector<UOpPtr>& bytes, DType byte) {
  const UOpPtr& first = bytes.front();
  if (first->op() != Ops::LOAD || first->src_count() != 1 || first->src(0)->src_count() != 2) return nullptr;
  const UOpPtr& index = first->src(0);
  for (size_t i = 1; i < bytes.size(); ++i) {
    const UOpPtr& load = bytes[i];
    if (load->op() != Ops::LOAD || load->src_count() != 1 || load->src(0)->src_count() != 2 ||
        load->src(0)->src(0) != index->src(0))
      return nullptr;
    UOpPtr step = simplify(load->src(0)->src(1) - index->src(1));
    if (!step->is_const() || step->const_int() != static_cast<int64_t>(i)) return nullptr;
  }
  return UOp::make(Ops::LOAD, byte.vec(static_cast<int>(bytes.size())), {index});
}

// The 4·lanes bytes of one operand: lane j's four steps side by side.
UOpPtr interleaved(const std::vector<const Factor*>& steps, int lanes, DType byte) {
  std::vector<UOpPtr> bytes;
  bytes.reserve(static_cast<size_t>(4 * lanes));
  for (int j = 0; j < lanes; ++j)
    for (const Factor* step : steps) bytes.push_back(step->lane(j));
  if (UOpPtr loaded = consecutive_load(bytes, byte)) return loaded;
  return UOp::make(Ops::VECTORIZE, byte.vec(4 * lanes), std::move(bytes));
}

// The element index lane 0 of `factor` loads; nullptr when it is no load.
UOpPtr first_element(const Factor& factor) {
  UOpPtr first = factor.lane(0);
  return first->op() == Ops::LOAD ? first->src(0)->src(1) : nullptr;
}

// A group of 4 products sorted by where their signed factors' lane 0 lies (the simplified additions
// may list the unrolled steps in any order), so that consecutive steps make consecutive bytes: a
// vector load (b in panels), a 32-bit broadcast (a's row). The sum is the same in any order.
void in_memory_order(std::vector<Product>::iterator begin, std::vector<Product>::iterator end) {
  UOpPtr origin = first_element(begin->signed_factor);
  if (!origin) return;
  std::vector<std::pair<int64_t, Product>> keyed;
  for (auto it = begin; it != end; ++it) {
    UOpPtr element = first_element(it->signed_factor);
    if (!element) return;
    UOpPtr offset = simplify(element - origin);
    if (!offset->is_const()) return;
    keyed.emplace_back(static_cast<int64_t>(offset->const_int()), *it);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (auto& [key, product] : keyed) *begin++ = std::move(product);
}

// The source of a vector REDUCE(ADD) as dot products, or nullptr when it is not groups of 4 products.
UOpPtr as_dot_products(const UOpPtr& source, int lanes) {
  std::vector<UOpPtr> terms;
  collect_terms(source, terms);
  if (terms.size() % 4 != 0) return nullptr;
  std::vector<Product> products;
  for (const UOpPtr& term : terms) {
    std::optional<Product> product = product_of(term, lanes);
    if (!product) return nullptr;
    products.push_back(*product);
  }
  UOpPtr sum = UOp::make(Ops::VECTORIZE, dtypes::i32.vec(lanes),
                         std::vector<UOpPtr>(static_cast<size_t>(lanes), const_int(dtypes::i32, 0)));
  for (size_t group = 0; group < products.size(); group += 4) {
    in_memory_order(products.begin() + static_cast<std::ptrdiff_t>(group),
                    products.begin() + static_cast<std::ptrdiff_t>(group + 4));
    std::vector<const Factor*> unsigned_steps, signed_steps;
    for (size_t t = group; t < group + 4; ++t) {
      unsigned_steps.push_back(&products[t].unsigned_factor);
      signed_steps.push_back(&products[t].signed_factor);
    }
    sum = UOp::make(Ops::WMMA, dtypes::i32.vec(lanes),
                    {interleaved(unsigned_steps, lanes, dtypes::u8), interleaved(signed_steps, lanes, dtypes::i8), sum},
                    std::string(kDotProduct));
  }
  return sum;
}

}  // namespace

namespace {

// The parts of a kernel whose one reduction is an i32 sum of products of an unsigned and a signed
// 8-bit load, stored as it is.
struct DotKernel {
  const UOp* reduce = nullptr;
  UOpPtr x_index, y_index, store_index;  // the two loads' element indices, the store's
};

std::optional<DotKernel> dot_kernel(const UOpPtr& kernel) {
  if (kernel->op() != Ops::SINK || kernel->src_count() != 1) return std::nullopt;
  DotKernel parts;
  for (const UOp* node : toposort(kernel)) {
    if (node->op() != Ops::REDUCE) continue;
    if (parts.reduce != nullptr) return std::nullopt;
    parts.reduce = node;
  }
  const UOp* reduce = parts.reduce;
  if (reduce == nullptr || reduce->arg_op() != Ops::ADD || reduce->dtype() != dtypes::i32) return std::nullopt;
  const UOp* product = reduce->src(0).get();
  if (product->op() != Ops::MUL) return std::nullopt;
  const UOp* x = widened_8bit(product->src(0).get());
  const UOp* y = widened_8bit(product->src(1).get());
  if (x == nullptr || y == nullptr || x->dtype() == y->dtype()) return std::nullopt;  // one u8, one s8
  if (x->op() != Ops::LOAD || y->op() != Ops::LOAD) return std::nullopt;
  const UOpPtr& store = kernel->src(0);
  if (store->op() != Ops::STORE || store->src(1).get() != reduce) return std::nullopt;
  parts.x_index = x->src(0)->src(1);
  parts.y_index = y->src(0)->src(1);
  parts.store_index = store->src(0)->src(1);
  return parts;
}

int64_t constant_extent(const UOp* range) {
  return range->src(0)->is_const() ? static_cast<int64_t>(range->src(0)->const_int()) : 0;
}

// `opts` with the thread axis the symbolic row blocks (the SPLIT at their front) times the
// kernel's constant axis 0 (its column tiles), row blocks outside: the threads then share the
// rows at every length, as a fixed plan's tile over known rows does, and still the columns when
// there is one block. With the column tiles alone as axis 0 each thread read every row of the
// 8-bit activations, and the int8 BERT at 128 tokens through its 1..4 × 1..128 plan ran 1.17x its
// fixed plan's time at two threads (1.06 with the row blocks outermost; 9 tokens unchanged). An
// 8-bit weight re-read from L2 per row block costs little; the same order for the f32 BERTs made
// them slower (1.06 -> 1.14 at 128 tokens, one thread): their weight is 4x the bytes.
std::vector<Opt> with_row_blocks_outermost(const UOpPtr& kernel, std::vector<Opt> opts) {
  if (opts.empty() || opts.front().op != OptOp::Split) return opts;
  const int64_t rows = opts.front().axis;
  const UOp* axis_0 = nullptr;
  for (const UOp* range : kernel_ranges(kernel))
    if (range->arg_int() == 0) axis_0 = range;
  if (rows == 0 || axis_0 == nullptr || !axis_0->src(0)->is_const()) return opts;
  std::vector<Opt> outermost = opts;
  outermost.push_back(Opt{OptOp::Swap, 0, rows});
  outermost.push_back(Opt{OptOp::Merge, 0, rows});
  try {
    (void)apply_opts(kernel, outermost);
  } catch (const InvalidOpt&) {
    return opts;
  }
  return outermost;
}

// Appends to `opts` the unroll of the rows: an output loop of `trial` (the kernel vectorised along
// `vector`) that the varying operand does not depend on (a matmul's rows), as many as the registers
// hold beside two accumulators a row and the row's broadcast. A symbolic row count (tokens of any
// number) is first split in blocks of 8 constant rows (of its largest value where that is
// smaller: a batch of up to 3), the split put first in `opts`. The int8 BERT through one plan for
// 1..4 × 1..128 tokens against fixed plans, one thread: 1.01 at 9 tokens and 1.19 at 128 with
// blocks of 8, 1.11 and 1.28 with blocks of 4 (each row's bytes are few; the tile's 8 rows share
// every load of b).
void with_row_tile(const UOpPtr& kernel, const UOpPtr& trial, const UOpPtr& varying, const UOpPtr& store_index,
                   const UOp* vector, const TargetCaps& caps, std::vector<Opt>& opts) {
  const UOp* rows = nullptr;
  for (const UOp* range : kernel_ranges(trial))
    if (axis_kind(range->arg_int()) == AxisKind::Loop && range->arg_int() != vector->arg_int() &&
        constant_step(varying, range) == 0 && constant_step(store_index, range).value_or(0) != 0)
      rows = range;
  if (rows == nullptr) return;
  int64_t row_axis = rows->arg_int(), row_extent = constant_extent(rows);
  if (row_extent == 0) {
    if (is_remainder_rows(rows)) return;  // a tail kernel's few rows: one at a time
    const int64_t block = std::min<int64_t>(8, static_cast<int64_t>(rows->src(0)->vmax()));
    if (block < 2) return;
    opts.insert(opts.begin(), Opt{OptOp::Split, row_axis, block});
    row_axis = -1;
    UOpPtr blocked = apply_opts(kernel, {opts.front()});  // holds the ranges the loop reads
    for (const UOp* range : kernel_ranges(blocked))
      if (axis_kind(range->arg_int()) == AxisKind::Loop) row_axis = std::max(row_axis, range->arg_int());
    row_extent = block;
  }
  const std::vector<int64_t> row_tiles =
      caps.vector_registers >= 32 ? std::vector<int64_t>{8, 6, 4, 3, 2} : std::vector<int64_t>{4, 3, 2};
  for (int64_t tile : row_tiles)
    if (row_extent % tile == 0) {
      opts.push_back(Opt{OptOp::Unroll, row_axis, tile});
      return;
    }
}

}  // namespace

std::optional<std::vector<Opt>> dot_product_tile(const UOpPtr& kernel, const TargetCaps& caps) {
  if (caps.dot_product_bytes == 0) return std::nullopt;
  std::optional<DotKernel> parts = dot_kernel(kernel);
  if (!parts) return std::nullopt;
  // The vector: an output loop of whole vectors along which the stores are contiguous; the steps:
  // a reduce loop of 4·q steps. Once vectorised and unrolled, the operand that the vector's lanes
  // share (a row's value, broadcast) must have its 4 steps consecutive (one 32-bit broadcast load),
  // and the other its lanes 4 bytes apart with their steps consecutive (b in dot-product panels:
  // one vector load per instruction operand). They are judged after the opts because the panels'
  // index divides the column by the lanes and the step by 4.
  for (const UOp* vector : kernel_ranges(kernel)) {
    // (Whole vectors of the widest lanes, or of their half: TargetCaps::dot_product_lanes.)
    const int64_t lanes = caps.dot_product_lanes(constant_extent(vector));
    if (axis_kind(vector->arg_int()) != AxisKind::Loop || lanes == 0 || constant_step(parts->store_index, vector) != 1)
      continue;
    for (size_t i = 1; i < parts->reduce->src_count(); ++i) {
      const UOp* steps = parts->reduce->src(i).get();
      if (constant_extent(steps) == 0 || constant_extent(steps) % 4 != 0) continue;
      UOpPtr trial = apply_opts(kernel, {Opt{OptOp::Upcast, vector->arg_int(), lanes}, Opt{OptOp::Unroll, steps->arg_int(), 4}});
      std::optional<DotKernel> tiled = dot_kernel(trial);
      const UOp *lane = nullptr, *step = nullptr;
      for (const UOp* range : kernel_ranges(trial)) {
        if (axis_kind(range->arg_int()) == AxisKind::Upcast) lane = range;
        if (axis_kind(range->arg_int()) == AxisKind::Unroll) step = range;
      }
      if (!tiled || lane == nullptr || step == nullptr) continue;
      auto shared = [&](const UOpPtr& index) {
        return constant_step(index, lane) == 0 && constant_step(index, step) == 1;
      };
      auto panel = [&](const UOpPtr& index) {
        return constant_step(index, lane) == 4 && constant_step(index, step) == 1;
      };
      const UOpPtr* varying = nullptr;  // the operand that differs between the lanes
      if (shared(tiled->x_index) && panel(tiled->y_index)) varying = &tiled->y_index;
      else if (shared(tiled->y_index) && panel(tiled->x_index)) varying = &tiled->x_index;
      else continue;
      std::vector<Opt> opts{Opt{OptOp::Upcast, vector->arg_int(), lanes}};
      if (constant_extent(vector) / lanes % 2 == 0) opts.push_back(Opt{OptOp::Unroll, vector->arg_int(), 2});
      with_row_tile(kernel, trial, *varying, tiled->store_index, vector, caps, opts);
      opts.push_back(Opt{OptOp::Unroll, steps->arg_int(), 4});
      return with_row_blocks_outermost(kernel, std::move(opts));
    }
  }
  return std::nullopt;
}

UOpPtr use_dot_products(const UOpPtr& lowered, int lanes) {
  if (lanes < 4) return lowered;
  std::unordered_map<const UOp*, UOpPtr> replacements;
  for (const UOp* node : toposort(lowered)) {
    // (The widest vectors, or half of 16 lanes: TargetCaps::dot_product_lanes.)
    if (node->op() != Ops::REDUCE || node->arg_op() != Ops::ADD || node->dtype().base() != dtypes::i32) continue;
    const int width = node->dtype().count();
    if (width != lanes && !(lanes >= 16 && width == lanes / 2)) continue;
    UOpPtr dots = as_dot_products(node->src(0), width);
    if (!dots) continue;
    std::vector<UOpPtr> sources = node->srcs();
    sources[0] = dots;
    replacements[node] = node->with_srcs(std::move(sources));
  }
  return replacements.empty() ? lowered : substitute(lowered, replacements);
}

}  // namespace kiln
