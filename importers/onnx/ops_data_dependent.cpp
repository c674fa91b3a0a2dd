// ONNX ops whose output shape depends on input values: NonZero, Unique, Compress, and
// TfIdfVectorizer (whose shape is static, but whose n-gram matching is a host-side search).
//
// Decision: these are decided at build time. kiln's shapes are static, and every Tensor is lazy but
// computable, so the builder realizes the inputs that decide the shape (NonZero's X, Unique's X,
// Compress's condition, TfIdfVectorizer's X) — the same way Reshape reads its shape with
// input_ints() and Range reads its bounds — and emits index constants. The data itself still
// flows lazily where it can (Unique's Y and Compress's output are take()s from the input), so only
// the deciding values are computed early. The cost: the graph holds values of one set of inputs;
// OnnxModel::run() rebuilds the graph for each call, so that is always correct there. A value that
// cannot be computed at build time fails with an error naming the node and the input.
// In a plan (the deciding input reads a graph input placeholder) NonZero's and Compress's counts,
// and Unique's group count without an axis, are sizes the run decides instead (run_bound.h;
// docs/symbolic-shapes.md, stage 6); Unique with an axis and TfIdfVectorizer still refuse.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "op_helpers.h"
#include "op_registry.h"
#include "support/error.h"
#include "tensor/run_bound.h"
#include "tensor/tensor_internal.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

// Input `index` (called `role` in the spec) decides the output shape, but it could not be computed.
[[noreturn]] void fail_uncomputable(const OnnxNode& node, size_t index, const char* role, const Error& error) {
  node.fail(str_cat("input ", index, " ('", role, "') decides the output shape, so it must be computable when the "
                    "graph is built, but computing it failed: ", error.what()));
}

// The values of `value` (input `index`, called `role`), realized now as T.
template <class T>
std::vector<T> realize_values(const OnnxNode& node, const Tensor& value, size_t index, const char* role) {
  try {
    return value.to_vector<T>();
  } catch (const Error& error) {
    fail_uncomputable(node, index, role, error);
  }
}

// 1 where input `index` is non-zero (NaN counts as non-zero, as in C and numpy), realized.
std::vector<uint8_t> realize_nonzero_mask(const OnnxNode& node, size_t index, const char* role) {
  const Tensor& x = node.input(index);
  Tensor mask = x.dtype() == ScalarType::Bool ? x : x.ne(Tensor::zeros({}, x.dtype()));
  return realize_values<uint8_t>(node, mask.cast(ScalarType::UInt8), index, role);
}

// ---------------------------------------------------------------------------------------------
// NonZero: (rank, count) i64 coordinates of the non-zero elements in row-major order. A scalar
// gives (0, count), as the spec says (unlike numpy).

// Selections known only when a plan runs (NonZero, Compress): the count of selected entries is a
// run-bound size in 0..n, and selected position j is the entry that is selected and whose running
// count of selected entries is j + 1 — one reduction over the n entries per position (O(n · count)
// work; a scatter by the running count would be O(n), which kiln's graphs cannot express yet).
struct RunTimeSelection {
  Tensor positions;  // [count] int64, ascending
  Dim count;
};

RunTimeSelection select_at_run_time(const OnnxNode& node, const Tensor& selected) {
  int64_t n = selected.dim(0);
  Tensor flags = selected.cast(ScalarType::Int64);
  Tensor count = flags.sum();
  Dim found = run_bound_size(count, str_cat(node.op_type(), "(", node.output_name(0), ")"), 0, n, node.describe());
  Tensor running = reshape_to(flags.cumsum(0), {1, n});
  Tensor column = arange_dim(found, ScalarType::Int64);
  Tensor wanted = reshape_to(column + Tensor::scalar(1, ScalarType::Int64), {found, 1});
  Tensor hit = running.eq(wanted).logical_and(reshape_to(selected, {1, n})).cast(ScalarType::Int64);  // [count, n]
  Tensor positions = (hit * reshape_to(Tensor::arange(n, ScalarType::Int64), {1, n})).sum({1});
  // Reading the count orders the count's kernel before the ones it sizes: the runtime reads the
  // count between them (every position is below it, so the value is unchanged).
  return {column.lt(count).where(positions, Tensor::zeros({}, ScalarType::Int64)), found};
}

// Whether a value that decides an output's shape is known only when a plan runs (it reads a graph
// input placeholder): then the op takes the run-bound path instead of realizing it now.
bool decided_at_run_time(const OnnxNode& node, const Tensor& value) {
  if (!reads_graph_input(value)) return false;
  if (!all_known(dims_of(value)))
    node.fail(str_cat("unsupported: the values that decide the output's shape have a symbolic shape ",
                      dims_string(dims_of(value)), " and are known only when the plan runs"));
  return true;
}

// NonZero in a plan: the coordinates of the selected flat positions, from a table of every
// element's coordinates.
Outputs non_zero_in_plan(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (x.ndim() == 0) node.fail("unsupported: NonZero of a scalar whose value is known only when the plan runs");
  Shape shape = x.shape();
  int64_t n = x.numel(), rank = x.ndim();
  Tensor nonzero = (x.dtype() == ScalarType::Bool ? x : x.ne(Tensor::zeros({}, x.dtype()))).reshape({n});
  RunTimeSelection selection = select_at_run_time(node, nonzero);
  std::vector<int64_t> coordinates(static_cast<size_t>(rank * n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i;
    for (int64_t axis = rank - 1; axis >= 0; --axis) {
      coordinates[static_cast<size_t>(axis * n + i)] = rest % shape[static_cast<size_t>(axis)];
      rest /= shape[static_cast<size_t>(axis)];
    }
  }
  return {Tensor::from_vector(coordinates, {rank, n}).take(selection.positions, 1)};
}

Outputs non_zero(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (decided_at_run_time(node, x)) return non_zero_in_plan(node);
  std::vector<uint8_t> mask = realize_nonzero_mask(node, 0, "X");
  int64_t rank = x.ndim();
  std::vector<int64_t> flat_positions;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) flat_positions.push_back(static_cast<int64_t>(i));
  int64_t count = static_cast<int64_t>(flat_positions.size());
  std::vector<int64_t> coordinates(static_cast<size_t>(rank * count));
  for (int64_t j = 0; j < count; ++j) {
    int64_t rest = flat_positions[static_cast<size_t>(j)];
    for (int64_t axis = rank - 1; axis >= 0; --axis) {
      coordinates[static_cast<size_t>(axis * count + j)] = rest % x.dim(axis);
      rest /= x.dim(axis);
    }
  }
  return {Tensor::from_vector(coordinates, {rank, count})};
}

// ---------------------------------------------------------------------------------------------
// Unique

// Three-way comparison of two elements: a total order in which NaN equals NaN and sorts last
// (numpy's unique puts NaNs at the end too), and −0 equals +0.
template <class T>
int compare_elements(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    bool a_nan = std::isnan(a), b_nan = std::isnan(b);
    if (a_nan || b_nan) return a_nan == b_nan ? 0 : (a_nan ? 1 : -1);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}

// One distinct value (or slice): where it first occurs and how often.
struct UniqueGroup {
  int64_t first = 0;
  int64_t count = 0;
};

struct UniqueResult {
  std::vector<UniqueGroup> groups;   // in output order
  std::vector<int64_t> inverse;      // per input row: its group
};

// Groups the `rows` rows of `width` elements each (row r = values[r·width, (r+1)·width)) by
// equality; groups come sorted lexicographically, or by first occurrence.
template <class T>
UniqueResult group_rows(const std::vector<T>& values, int64_t rows, int64_t width, bool sorted) {
  auto compare_rows = [&](int64_t a, int64_t b) {
    for (int64_t i = 0; i < width; ++i) {
      int c = compare_elements(values[static_cast<size_t>(a * width + i)], values[static_cast<size_t>(b * width + i)]);
      if (c != 0) return c;
    }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  // Stable: the first row of each run of equal rows is its first occurrence.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare_rows(a, b) < 0; });

  UniqueResult result;
  std::vector<int64_t> group_of_row(static_cast<size_t>(rows));
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || compare_rows(order[i - 1], order[i]) != 0) result.groups.push_back({order[i], 0});
    result.groups.back().count += 1;
    group_of_row[static_cast<size_t>(order[i])] = static_cast<int64_t>(result.groups.size()) - 1;
  }
  std::vector<int64_t> position(result.groups.size());  // sorted group → output position
  std::iota(position.begin(), position.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(result.groups.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) {
      return result.groups[static_cast<size_t>(a)].first < result.groups[static_cast<size_t>(b)].first;
    });
    std::vector<UniqueGroup> reordered;
    for (size_t p = 0; p < by_first.size(); ++p) {
      reordered.push_back(result.groups[static_cast<size_t>(by_first[p])]);
      position[static_cast<size_t>(by_first[p])] = static_cast<int64_t>(p);
    }
    result.groups = std::move(reordered);
  }
  result.inverse.reserve(static_cast<size_t>(rows));
  for (int64_t g : group_of_row) result.inverse.push_back(position[static_cast<size_t>(g)]);
  return result;
}

// Realizes X in a type that orders its values exactly: f64 holds every float type, i64 every
// signed integer and bool, u64 every unsigned integer.
UniqueResult unique_groups(const OnnxNode& node, const Tensor& rows_first, bool sorted) {
  int64_t rows = rows_first.dim(0);
  int64_t width = rows == 0 ? 0 : rows_first.numel() / rows;
  ScalarType type = rows_first.dtype();
  auto realized = [&]<class T>(T) { return realize_values<T>(node, rows_first, 0, "X"); };
  if (is_floating(type)) return group_rows(realized(double{}), rows, width, sorted);
  if (type == ScalarType::UInt8 || type == ScalarType::UInt16 || type == ScalarType::UInt32 || type == ScalarType::UInt64)
    return group_rows(realized(uint64_t{}), rows, width, sorted);
  if (is_integral(type) || type == ScalarType::Bool) return group_rows(realized(int64_t{}), rows, width, sorted);
  node.fail("unsupported: X of type " + scalar_type_name(type));
}

// Unique in a plan, without an axis: the element order and equality of unique_groups (NaN equals
// NaN and sorts last, −0 equals +0) as n × n comparisons. An element opens a group when no earlier
// element equals it; its group's rank counts the group openers before it (in value order when
// sorted, in position order otherwise). The group count is a run-bound size in 1..n, and output
// slot p holds the opener whose rank is p: a reduction over the n elements per slot, O(n²) work.
Outputs unique_in_plan(const OnnxNode& node, bool sorted) {
  const Tensor& x = node.input(0);
  int64_t n = x.numel();
  if (n == 0) node.fail("unsupported: Unique of an empty tensor whose values are known only when the plan runs");
  Tensor values = x.reshape({n});
  Tensor mine = values.reshape({1, n});    // [j][i]: element i, compared with …
  Tensor other = values.reshape({n, 1});   // … element j
  Tensor same = other.eq(mine), before = other.lt(mine);
  if (is_floating(x.dtype())) {
    Tensor other_nan = other.isnan(), mine_nan = mine.isnan();
    same = same.logical_or(other_nan.logical_and(mine_nan));
    before = before.logical_or(other_nan.logical_not().logical_and(mine_nan));
  }
  Tensor position = Tensor::arange(n, ScalarType::Int64);
  Tensor earlier = position.reshape({n, 1}).lt(position.reshape({1, n}));  // [j][i] = j < i
  Tensor opens = same.logical_and(earlier).cast(ScalarType::Int64).sum({0}).eq(Tensor::zeros({}, ScalarType::Int64));  // [n]
  Tensor opener = opens.reshape({n, 1});
  // Group rank: for an opener, the openers before its value (sorted) or before its position; every
  // element then takes the rank of the one opener it equals.
  Tensor ahead = sorted ? before : earlier.logical_and(same.logical_not());
  Tensor opener_rank = opener.logical_and(ahead).cast(ScalarType::Int64).sum({0});  // [n], valid at openers
  Tensor rank = (opener.logical_and(same).cast(ScalarType::Int64) * opener_rank.reshape({n, 1})).sum({0});  // [n]
  Tensor count = opens.cast(ScalarType::Int64).sum();
  Dim groups = run_bound_size(count, str_cat("Unique(", node.output_name(0), ")"), 1, n, node.describe());
  Tensor slot = reshape_to(arange_dim(groups, ScalarType::Int64), {groups, 1});
  // Reading the count orders its kernel before the ones it sizes (every slot is below it).
  Tensor live = slot.lt(count);
  Tensor hit = rank.reshape({1, n}).eq(slot).logical_and(opens.reshape({1, n})).logical_and(live);  // [groups, n]
  Tensor indices = (hit.cast(ScalarType::Int64) * position.reshape({1, n})).sum({1});
  Tensor counts = rank.reshape({1, n}).eq(slot).logical_and(live).cast(ScalarType::Int64).sum({1});
  return declared_outputs(node, {values.take(indices, 0), indices, rank, counts});
}

Outputs unique(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  bool sorted = node.attr_int("sorted", 1) != 0;
  if (decided_at_run_time(node, x)) {
    if (node.has_attribute("axis"))
      node.fail("unsupported: Unique with an axis over values known only when the plan runs");
    return unique_in_plan(node, sorted);
  }
  // Without an axis the elements of the flattened input are the rows; with one, the slices along it.
  bool has_axis = node.has_attribute("axis");
  int64_t axis = 0;
  Tensor source = x.reshape({x.numel()});
  Tensor rows_first = source;
  if (has_axis) {
    if (x.ndim() == 0) node.fail("axis is given but X is a scalar");
    axis = normalize_axis(node, node.attr_int("axis"), x.ndim());
    std::vector<int64_t> order{axis};
    for (int64_t i = 0; i < x.ndim(); ++i)
      if (i != axis) order.push_back(i);
    source = x;
    rows_first = x.permute(order);
  }
  UniqueResult result = unique_groups(node, rows_first, sorted);

  std::vector<int64_t> first, counts;
  for (const UniqueGroup& group : result.groups) {
    first.push_back(group.first);
    counts.push_back(group.count);
  }
  Tensor indices = int64_vector(first);
  Tensor y = source.take(indices, axis);  // the values stay lazy: only the grouping was realized
  return declared_outputs(node, {y, indices, int64_vector(result.inverse), int64_vector(counts)});
}

// ---------------------------------------------------------------------------------------------
// Compress: numpy.compress. The condition may be shorter than the axis (the rest is dropped).

Outputs compress(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const Tensor& condition = node.input(1);
  if (condition.ndim() != 1) node.fail("condition must be 1-D");
  bool has_axis = node.has_attribute("axis");
  if (has_axis && x.ndim() == 0) node.fail("axis is given but the input is a scalar");
  int64_t axis = has_axis ? normalize_axis(node, node.attr_int("axis"), x.ndim()) : 0;
  Tensor source = has_axis ? x : x.reshape({x.numel()});
  int64_t available = source.dim(axis);
  if (decided_at_run_time(node, condition)) {
    if (condition.dim(0) > available)
      node.fail(str_cat("condition has ", condition.dim(0), " entries but the selected axis has only ", available));
    Tensor keep = condition.dtype() == ScalarType::Bool ? condition : condition.ne(Tensor::zeros({}, condition.dtype()));
    return {source.take(select_at_run_time(node, keep).positions, axis)};
  }
  std::vector<uint8_t> keep = realize_nonzero_mask(node, 1, "condition");
  if (static_cast<int64_t>(keep.size()) > available)
    node.fail("condition has " + std::to_string(keep.size()) + " entries but the selected axis has only " +
              std::to_string(available));
  std::vector<int64_t> selected;
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i]) selected.push_back(static_cast<int64_t>(i));
  return {source.take(int64_vector(selected), axis)};
}

// ---------------------------------------------------------------------------------------------
// TfIdfVectorizer (integer pools; kiln has no string tensors).

enum class TfIdfMode { TermFrequency, InverseDocumentFrequency, Both };

TfIdfMode tf_idf_mode(const OnnxNode& node) {
  std::string mode = node.attr_string("mode");
  if (mode == "TF") return TfIdfMode::TermFrequency;
  if (mode == "IDF") return TfIdfMode::InverseDocumentFrequency;
  if (mode == "TFIDF") return TfIdfMode::Both;
  node.fail("unsupported: mode '" + mode + "' (expected TF, IDF or TFIDF)");
}

Outputs tf_idf_vectorizer(const OnnxNode& node) {
  if (node.has_attribute("pool_strings")) node.fail("unsupported: pool_strings (kiln has no string tensors)");
  const Tensor& x = node.input(0);
  if (x.ndim() != 1 && x.ndim() != 2) node.fail("X must be 1-D or 2-D");
  if (!is_integral(x.dtype())) node.fail("X must be an integer tensor, not " + scalar_type_name(x.dtype()));
  TfIdfMode mode = tf_idf_mode(node);
  int64_t min_length = node.attr_int("min_gram_length"), max_length = node.attr_int("max_gram_length");
  int64_t max_skip = node.attr_int("max_skip_count");
  std::vector<int64_t> pool = node.attr_ints("pool_int64s");
  std::vector<int64_t> level_start = node.attr_ints("ngram_counts");
  std::vector<int64_t> output_index = node.attr_ints("ngram_indexes");
  if (min_length < 1 || max_length < min_length) node.fail("need 1 <= min_gram_length <= max_gram_length");
  if (max_skip < 0) node.fail("max_skip_count must not be negative");

  // The pool: level n (n-grams of length n + 1) starts at element level_start[n]; every n-gram
  // gets an ordinal (its position among all pool n-grams), which ngram_indexes and weights follow.
  std::map<std::vector<int64_t>, int64_t> ordinal_of;
  int64_t ordinal = 0;
  for (size_t level = 0; level < level_start.size(); ++level) {
    int64_t length = static_cast<int64_t>(level) + 1;
    int64_t begin = level_start[level];
    int64_t end = level + 1 < level_start.size() ? level_start[level + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % length != 0)
      node.fail("ngram_counts does not split pool_int64s into whole n-grams at level " + std::to_string(length));
    for (int64_t at = begin; at < end; at += length, ++ordinal)
      ordinal_of[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + length)] = ordinal;
  }
  if (static_cast<int64_t>(output_index.size()) != ordinal)
    node.fail("ngram_indexes has " + std::to_string(output_index.size()) + " entries but the pool holds " +
              std::to_string(ordinal) + " n-grams");
  std::vector<double> weights = node.attr_floats("weights", std::vector<double>(static_cast<size_t>(ordinal), 1.0));
  if (static_cast<int64_t>(weights.size()) != ordinal) node.fail("weights must have one entry per pool n-gram");
  int64_t width = 0;
  for (int64_t index : output_index) {
    if (index < 0) node.fail("ngram_indexes must not be negative");
    width = std::max(width, index + 1);
  }

  std::vector<int64_t> tokens = realize_values<int64_t>(node, x, 0, "X");
  int64_t batch = x.ndim() == 2 ? x.dim(0) : 1;
  int64_t length = x.dim(-1);
  std::vector<double> output(static_cast<size_t>(batch * width), 0.0);
  std::vector<int64_t> found(static_cast<size_t>(ordinal));
  for (int64_t row = 0; row < batch; ++row) {
    std::fill(found.begin(), found.end(), 0);
    const int64_t* row_tokens = tokens.data() + row * length;
    for (int64_t n = min_length; n <= max_length && n <= static_cast<int64_t>(level_start.size()); ++n) {
      // An n-gram with skip s takes every (s + 1)-th token; 1-grams are counted once, not per skip.
      int64_t skips = n == 1 ? 0 : max_skip;
      for (int64_t skip = 0; skip <= skips; ++skip)
        for (int64_t start = 0; start + (n - 1) * (skip + 1) < length; ++start) {
          std::vector<int64_t> gram;
          for (int64_t i = 0; i < n; ++i) gram.push_back(row_tokens[start + i * (skip + 1)]);
          auto hit = ordinal_of.find(gram);
          if (hit != ordinal_of.end()) found[static_cast<size_t>(hit->second)] += 1;
        }
    }
    for (int64_t g = 0; g < ordinal; ++g) {
      double count = static_cast<double>(found[static_cast<size_t>(g)]);
      double weight = weights[static_cast<size_t>(g)];
      double value = mode == TfIdfMode::TermFrequency ? count
                     : mode == TfIdfMode::InverseDocumentFrequency ? (count > 0 ? weight : 0.0)
                                                                    : count * weight;
      output[static_cast<size_t>(row * width + output_index[static_cast<size_t>(g)])] += value;
    }
  }
  Shape shape = x.ndim() == 2 ? Shape{batch, width} : Shape{width};
  return {Tensor::from_vector(output, shape).cast(ScalarType::Float32)};
}

}  // namespace

void register_data_dependent_ops(OpRegistry& registry) {
  registry.add("NonZero", non_zero, 9);
  registry.add("Unique", unique, 11);
  registry.add("Compress", compress, 9);
  registry.add("TfIdfVectorizer", tf_idf_vectorizer, 9);
}

}  // namespace kiln::onnx_import
