// ONNX losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), selection (TopK), the scatters
// (ScatterElements, ScatterND, Scatter), Einsum and CumProd.
//
// kiln has no data-dependent write or sort primitive, so the index-driven ops here are built from
// comparisons against arange() ("one-hot" masks) followed by where() and a reduction. That keeps
// every op lazy and fusable but costs memory/time proportional to the mask:
//   - TopK ranks each element by comparing it with every other element on the axis: O(n²) per row;
//   - ScatterElements compares each index with every slot of the axis: O(m·n) per row;
//   - ScatterND compares each index tuple with every addressable slot: O(M·L·R) overall;
//   - Einsum multiplies the broadcast operands over the union of all labels before summing;
//   - CumProd multiplies under a triangular mask: O(n²) per row.
// That is fine for the modest axis sizes these ops see in exported models and the conformance
// tests; a large-axis user would need dedicated kernels.
#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "op_helpers.h"
#include "op_registry.h"
#include "shape_values.h"
#include "support/error.h"
#include "tensor/run_bound.h"
#include "tensor/tensor_internal.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

Tensor zero_of(ScalarType type) { return Tensor::scalar(0.0, type); }

// ---------------------------------------------------------------------------------------------
// Losses

enum class LossReduction { None, Sum, Mean };

LossReduction loss_reduction(const OnnxNode& node) {
  std::string reduction = node.attr_string("reduction", std::string("mean"));
  if (reduction == "none") return LossReduction::None;
  if (reduction == "sum") return LossReduction::Sum;
  if (reduction == "mean") return LossReduction::Mean;
  node.fail("unsupported: reduction '" + reduction + "'");
}

// NegativeLogLikelihoodLoss on (N, C, d1…dk) log-probabilities and (N, d1…dk) class targets.
// Shared by SoftmaxCrossEntropyLoss, whose spec defines it as this applied to log_softmax.
Tensor nll_loss(const OnnxNode& node, const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                LossReduction reduction) {
  if (input.ndim() < 2) node.fail("input must be at least (N, C)");
  if (target.ndim() != input.ndim() - 1) node.fail("target must have the input's rank minus one");
  if (target.dim(0) != input.dim(0)) node.fail("target and input differ in batch size");
  for (int64_t d = 1; d < target.ndim(); ++d)
    if (target.dim(d) != input.dim(d + 1)) node.fail("target's spatial dimensions differ from the input's");
  if (weight && (weight->ndim() != 1 || weight->dim(0) != input.dim(1)))
    node.fail("weight must be a 1-D tensor with one entry per class");

  Tensor classes = target.cast(ScalarType::Int64);
  std::optional<Tensor> keep;  // false where target == ignore_index
  if (node.has_attribute("ignore_index")) {
    keep = classes.ne(Tensor::scalar(static_cast<double>(node.attr_int("ignore_index")), ScalarType::Int64));
    // ignore_index may lie outside [0, C) (negative or past the end): never index with it.
    classes = keep->where(classes, zero_of(ScalarType::Int64));
  }
  Tensor picked = input.gather(1, classes.unsqueeze(1)).squeeze({1});
  Tensor loss = picked.neg();
  // Per-element weight: weight[target], zeroed where ignored (those also leave the mean's divisor).
  std::optional<Tensor> element_weight;
  if (weight) element_weight = weight->take(classes, 0);
  if (keep) {
    Tensor base = element_weight ? *element_weight : Tensor::ones(classes.shape(), input.dtype());
    element_weight = keep->where(base, zero_of(input.dtype()));
  }
  if (element_weight) loss = loss * *element_weight;

  switch (reduction) {
    case LossReduction::None: return loss;
    case LossReduction::Sum: return loss.sum();
    case LossReduction::Mean:
      // The spec's weighted mean divides by the total weight of the counted elements.
      return element_weight ? loss.sum() / element_weight->sum() : loss.mean();
  }
  node.fail("unsupported reduction");
}

Outputs negative_log_likelihood_loss(const OnnxNode& node) {
  std::optional<Tensor> weight;
  if (node.has_input(2)) weight = node.input(2);
  return {nll_loss(node, node.input(0), node.input(1), weight, loss_reduction(node))};
}

Outputs softmax_cross_entropy_loss(const OnnxNode& node) {
  const Tensor& scores = node.input(0);
  if (scores.ndim() < 2) node.fail("scores must be at least (N, C)");
  std::optional<Tensor> weight;
  if (node.has_input(2)) weight = node.input(2);
  Tensor log_prob = scores.log_softmax(1);
  Tensor loss = nll_loss(node, log_prob, node.input(1), weight, loss_reduction(node));
  // The optional second output is the log-probabilities, when the node declares it.
  if (node.output_count() >= 2) return {loss, log_prob};
  return {loss};
}

// ---------------------------------------------------------------------------------------------
// TopK

// Whether `value` is a shape value whose elements are all known (computed from an input's fixed
// dims): input_ints reads it now, so it is no value the run decides.
bool known_shape_value(const Tensor& value) {
  std::optional<Dims> elements = shape_value_of(value);
  return elements && all_known(*elements);
}

// Whether `size` >= 0 at every value of the variables: by its bounds, or, where those are too
// loose for a clamp (min(300, n) - n) and it reads one variable of at most 2^16 values, by
// evaluating it at each of them.
bool never_negative(const Dim& size) {
  if (size.min() >= 0) return true;
  std::vector<VariableSpec> variables;
  for (const UOp* node : toposort(size.expression()))
    if (node->op() == Ops::DEFINE_VAR) variables.push_back(node->arg_variable());
  if (variables.size() != 1 || variables[0].max - variables[0].min > (int64_t{1} << 16)) return false;
  for (int64_t value = variables[0].min; value <= variables[0].max; ++value)
    if (evaluate_size(size, {{variables[0].name, value}}) < 0) return false;
  return true;
}

Outputs top_k(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t rank = x.ndim();
  if (rank == 0) node.fail("input must have at least one axis");
  int64_t axis = normalize_axis(node, node.attr_int("axis", -1), rank);
  // The axis may be symbolic: a length a NonZero count decides (a detector's per-class scores
  // above a threshold), sized for its largest value like any symbolic axis.
  const Dim n = dims_of(x)[static_cast<size_t>(axis)];
  // k: known now (an attribute before opset 10, an initializer or a computed constant), a size
  // expression (torch's min(300, n) of a shape), or in a plan a graph input's value, which the
  // run decides (docs/symbolic-shapes.md, stage 6): a run-bound size in 0..n, so a k past the
  // axis is refused by kiln_plan_run, not at compile time.
  Dim k = 0;
  std::optional<Tensor> run_k;  // the run-time k, as an int64 scalar
  std::optional<Dims> k_sizes = node.opset() < 10 ? std::nullopt : shape_value_of(node.input(1));
  if (node.opset() < 10) {
    k = node.attr_int("k");  // opset 10 moved k from an attribute to an input
  } else if (k_sizes && !all_known(*k_sizes)) {
    if (k_sizes->size() != 1) node.fail("K must hold exactly one value");
    k = k_sizes->front();
  } else if (reads_graph_input(node.input(1)) && !known_shape_value(node.input(1))) {
    const Tensor& given = node.input(1);
    if (given.numel() != 1) node.fail("K must hold exactly one value");
    run_k = given.reshape({}).cast(ScalarType::Int64);
    k = run_bound_size(*run_k, str_cat("TopK(", node.output_name(0), ")"), 0, n.max(), node.describe());
  } else {
    std::vector<int64_t> ks = node.input_ints(1);
    if (ks.size() != 1) node.fail("K must hold exactly one value");
    k = ks[0];
  }
  if (k.is_known() && n.is_known() && (k.value() < 0 || k.value() > n.value()))
    node.fail("K = " + std::to_string(k.value()) + " is out of range for an axis of " + std::to_string(n.value()));
  // A symbolic k or axis: k <= n must hold at every size (min(300, n) does), or the run could
  // ask for more elements than the axis has.
  if ((!k.is_known() || !n.is_known()) && !run_k && (!never_negative(n - k) || !never_negative(k)))
    node.fail(str_cat("unsupported: K = ", k.text(), " may exceed the axis length ", n.text(), " at some sizes"));
  bool largest = node.attr_int("largest", 1) != 0;
  // sorted = 0 leaves the output order unspecified, so the sorted order is a valid answer for it.

  std::vector<int64_t> order = axis_to_last(rank, axis);
  Tensor rows = x.permute(order);    // (…, n)
  Tensor mine = rows.unsqueeze(-1);  // (…, n, 1): element i being ranked
  Tensor other = rows.unsqueeze(-2); // (…, 1, n): element j it is compared with
  // rank(i) = #{j that come before i}: strictly better values, then equal values at lower index
  // (the spec's tie rule). The ranks are a permutation of 0…n-1, so slot p picks exactly one i.
  Tensor better = largest ? other.gt(mine) : other.lt(mine);
  Tensor same = other.eq(mine);
  if (is_floating(x.dtype())) {
    // NaN compares false with everything; order it as the largest value (numpy's convention) so
    // that the ranks still form a permutation.
    Tensor other_nan = other.isnan(), mine_nan = mine.isnan();
    Tensor nan_first = largest ? other_nan.logical_and(mine_nan.logical_not())
                               : mine_nan.logical_and(other_nan.logical_not());
    better = better.logical_or(nan_first);
    same = same.logical_or(other_nan.logical_and(mine_nan));
  }
  Tensor position = arange_dim(n, ScalarType::Int64);
  Tensor earlier = reshape_to(position, {1, n}).lt(reshape_to(position, {n, 1}));  // [i][j] = j < i
  Tensor element_rank = better.logical_or(same.logical_and(earlier)).cast(ScalarType::Int64).sum({-1});
  Tensor wanted = reshape_to(arange_dim(k, ScalarType::Int64), {1, k});
  Tensor slot = element_rank.unsqueeze(-1).eq(wanted);  // (…, n, k)
  // A run-time k: reading it orders the kernel that stores it before the ones it sizes (every slot
  // is below it, so nothing changes).
  if (run_k) slot = slot.logical_and(wanted.lt(*run_k));
  Tensor values = slot.where(mine, zero_of(x.dtype())).sum({-2});
  Tensor indices = slot.where(reshape_to(position, {n, 1}), zero_of(ScalarType::Int64)).sum({-2});
  std::vector<int64_t> back = inverse_permutation(order);
  return {values.cast(x.dtype()).permute(back), indices.cast(ScalarType::Int64).permute(back)};
}

// ---------------------------------------------------------------------------------------------
// Scatters

enum class ScatterReduction { None, Add, Mul, Max, Min };

ScatterReduction scatter_reduction(const OnnxNode& node) {
  std::string reduction = node.attr_string("reduction", std::string("none"));
  if (reduction == "none") return ScatterReduction::None;
  if (reduction == "add") return ScatterReduction::Add;
  if (reduction == "mul") return ScatterReduction::Mul;
  if (reduction == "max") return ScatterReduction::Max;
  if (reduction == "min") return ScatterReduction::Min;
  node.fail("unsupported: reduction '" + reduction + "'");
}

// Writes updates into data along a slot axis: data (P…, n), hits (P…, m, n) true where update m
// targets slot n, updates (P…, m); all broadcast over P…. Returns (P…, n).
Tensor scatter_combine(const Tensor& data, const Tensor& hits, const Tensor& updates, ScatterReduction reduction) {
  ScalarType type = data.dtype();
  Tensor update = updates.cast(type).unsqueeze(-1);  // (P…, m, 1)
  switch (reduction) {
    case ScatterReduction::None: {
      // Duplicate targets are undefined in the spec; keep the last update (the reference's
      // sequential loop) rather than summing them.
      int64_t m = hits.dim(-2);
      Tensor order = Tensor::arange(m).reshape({m, 1});
      Tensor latest = hits.where(order, Tensor::scalar(-1.0, ScalarType::Int64)).max({-2}, true);  // (P…, 1, n)
      Tensor chosen = hits.logical_and(order.eq(latest));
      Tensor written = chosen.where(update, zero_of(type)).sum({-2});
      return latest.squeeze({-2}).ge(Tensor::scalar(0.0, ScalarType::Int64)).where(written, data).cast(type);
    }
    case ScatterReduction::Add: return (data + hits.where(update, zero_of(type)).sum({-2})).cast(type);
    case ScatterReduction::Mul: return (data * hits.where(update, Tensor::scalar(1.0, type)).prod({-2})).cast(type);
    case ScatterReduction::Max:
      // Slots an update misses contribute the data value itself, so no type-specific -inf is needed.
      return data.maximum(hits.where(update, data.unsqueeze(-2)).max({-2})).cast(type);
    case ScatterReduction::Min: return data.minimum(hits.where(update, data.unsqueeze(-2)).min({-2})).cast(type);
  }
  return data;
}

Outputs scatter_elements_impl(const OnnxNode& node, ScatterReduction reduction) {
  const Tensor& data = node.input(0);
  const Tensor& indices = node.input(1);
  const Tensor& updates = node.input(2);
  int64_t rank = data.ndim();
  if (rank == 0) node.fail("data must have at least one axis");
  if (indices.ndim() != rank) node.fail("indices must have the data's rank");
  if (updates.shape() != indices.shape()) node.fail("updates must have the indices' shape");
  int64_t axis = normalize_axis(node, node.attr_int("axis", 0), rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && indices.dim(d) > data.dim(d)) node.fail("indices are larger than data on axis " + std::to_string(d));

  int64_t n = data.dim(axis);
  std::vector<int64_t> order = axis_to_last(rank, axis);
  Tensor target = indices.cast(ScalarType::Int64).permute(order);  // (I…, m)
  Tensor bound = Tensor::scalar(static_cast<double>(n), ScalarType::Int64);
  target = target.lt(zero_of(ScalarType::Int64)).where(target + bound, target);  // negative = from the end
  Tensor hits = target.unsqueeze(-1).eq(Tensor::arange(n));  // (I…, m, n)
  Tensor update = updates.permute(order);                   // (I…, m)
  // Indices may cover only a leading block of the other axes: pad the masks with "no update".
  std::vector<int64_t> pads;
  bool padded = false;
  for (int64_t p = 0; p + 1 < rank; ++p) {
    int64_t missing = data.dim(order[static_cast<size_t>(p)]) - target.dim(p);
    pads.insert(pads.end(), {0, missing});
    padded = padded || missing > 0;
  }
  if (padded) {
    hits = hits.cast(ScalarType::UInt8).pad(pads).ne(Tensor::scalar(0.0, ScalarType::UInt8));
    update = update.pad(pads);
  }
  Tensor result = scatter_combine(data.permute(order), hits, update, reduction);
  return {result.permute(inverse_permutation(order))};
}

Outputs scatter_elements(const OnnxNode& node) { return scatter_elements_impl(node, scatter_reduction(node)); }

// The deprecated Scatter (opsets 9–10) is ScatterElements without reduction.
Outputs scatter(const OnnxNode& node) { return scatter_elements_impl(node, ScatterReduction::None); }

Outputs scatter_nd(const OnnxNode& node) {
  const Tensor& data = node.input(0);
  const Tensor& indices = node.input(1);
  const Tensor& updates = node.input(2);
  ScatterReduction reduction = scatter_reduction(node);
  int64_t rank = data.ndim();
  if (indices.ndim() < 1) node.fail("indices must have at least one axis");
  int64_t k = indices.dim(-1);
  if (k < 1 || k > rank) node.fail("the last axis of indices must have 1 to rank(data) entries");
  Shape expected(indices.shape().begin(), indices.shape().end() - 1);
  expected.insert(expected.end(), data.shape().begin() + k, data.shape().end());
  if (updates.shape() != expected) node.fail("updates must have shape indices.shape[:-1] + data.shape[k:]");

  // Address the first k axes of data as one linear slot axis of L entries, each holding R values.
  int64_t slots = shape_product(data.shape(), 0, static_cast<size_t>(k));
  int64_t width = shape_product(data.shape(), static_cast<size_t>(k), data.shape().size());
  int64_t count = shape_product(indices.shape(), 0, indices.shape().size() - 1);
  std::vector<int64_t> dims(data.shape().begin(), data.shape().begin() + k), strides(static_cast<size_t>(k), 1);
  for (int64_t d = k - 2; d >= 0; --d)
    strides[static_cast<size_t>(d)] = strides[static_cast<size_t>(d + 1)] * dims[static_cast<size_t>(d + 1)];
  Tensor tuple = indices.cast(ScalarType::Int64);
  Tensor bounds = int64_vector(dims);
  tuple = tuple.lt(zero_of(ScalarType::Int64)).where(tuple + bounds, tuple);  // negative = from the end
  Tensor linear = (tuple * int64_vector(strides)).sum({-1}).reshape({count});
  Tensor hits = linear.reshape({1, count, 1}).eq(Tensor::arange(slots).reshape({1, 1, slots}));  // (1, M, L)
  Tensor values = data.reshape({slots, width}).permute({1, 0});                                  // (R, L)
  Tensor update = updates.reshape({count, width}).permute({1, 0});                               // (R, M)
  Tensor result = scatter_combine(values, hits, update, reduction);
  return {result.permute({1, 0}).reshape(data.shape())};
}

// ---------------------------------------------------------------------------------------------
// Einsum

constexpr int kEllipsisLabel = 1000;  // ellipsis axis e gets label kEllipsisLabel + e (letters are < 256)

// One einsum term as labels, with -1 standing for "..." until the operand's rank is known.
std::vector<int> parse_term(const OnnxNode& node, const std::string& term) {
  std::vector<int> labels;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (c == '.') {
      if (term.compare(i, 3, "...") != 0 || seen_ellipsis) node.fail("malformed ellipsis in equation term '" + term + "'");
      seen_ellipsis = true;
      labels.push_back(-1);
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      labels.push_back(static_cast<unsigned char>(c));
    } else {
      node.fail(std::string("unsupported: character '") + c + "' in the einsum equation");
    }
  }
  return labels;
}

// Replaces the ellipsis of `labels` by `count` ellipsis labels, right-aligned among `total`
// (numpy broadcasts the ellipsis dimensions from the right).
std::vector<int> expand_ellipsis(const std::vector<int>& labels, int64_t count, int64_t total) {
  std::vector<int> result;
  for (int label : labels) {
    if (label != -1) {
      result.push_back(label);
      continue;
    }
    for (int64_t e = total - count; e < total; ++e) result.push_back(kEllipsisLabel + static_cast<int>(e));
  }
  return result;
}

Outputs einsum(const OnnxNode& node) {
  std::string equation;
  for (char c : node.attr_string("equation"))
    if (c != ' ') equation += c;
  std::string left = equation, right;
  bool explicit_output = false;
  if (size_t arrow = equation.find("->"); arrow != std::string::npos) {
    left = equation.substr(0, arrow);
    right = equation.substr(arrow + 2);
    explicit_output = true;
  }
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = left.find(',', start);
    terms.push_back(left.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  size_t operands = 0;
  for (size_t i = 0; i < node.input_count(); ++i) operands += node.has_input(i) ? 1 : 0;
  if (terms.size() != operands) node.fail("the equation names " + std::to_string(terms.size()) + " operands but the node has " + std::to_string(operands));

  // Resolve each operand's labels, including how many dimensions its ellipsis covers.
  std::vector<Tensor> tensors;
  std::vector<std::vector<int>> raw;
  int64_t ellipsis_rank = 0;
  std::vector<int64_t> ellipsis_counts;
  for (size_t t = 0; t < terms.size(); ++t) {
    tensors.push_back(node.input(t));
    raw.push_back(parse_term(node, terms[t]));
    int64_t letters = static_cast<int64_t>(std::count_if(raw[t].begin(), raw[t].end(), [](int l) { return l != -1; }));
    bool has_ellipsis = letters != static_cast<int64_t>(raw[t].size());
    int64_t covered = tensors[t].ndim() - letters;
    if (covered < 0 || (!has_ellipsis && covered != 0))
      node.fail("term '" + terms[t] + "' does not match its operand's rank " + std::to_string(tensors[t].ndim()));
    ellipsis_counts.push_back(covered);
    ellipsis_rank = std::max(ellipsis_rank, covered);
  }
  std::vector<std::vector<int>> labels;
  for (size_t t = 0; t < terms.size(); ++t) labels.push_back(expand_ellipsis(raw[t], ellipsis_counts[t], ellipsis_rank));

  // Repeated labels within one operand take its diagonal: mask with the identity, sum one copy away.
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (bool again = true; again;) {
      again = false;
      for (size_t a = 0; a < labels[t].size() && !again; ++a) {
        for (size_t b = a + 1; b < labels[t].size() && !again; ++b) {
          if (labels[t][a] != labels[t][b]) continue;
          int64_t size = tensors[t].dim(static_cast<int64_t>(a));
          if (tensors[t].dim(static_cast<int64_t>(b)) != size) node.fail("a repeated label has different sizes");
          Shape mask_shape(labels[t].size(), 1);
          mask_shape[a] = size;
          mask_shape[b] = size;
          Tensor mask = Tensor::eye(size, size, 0, ScalarType::Bool).reshape(mask_shape);
          tensors[t] = mask.where(tensors[t], zero_of(tensors[t].dtype())).sum({static_cast<int64_t>(b)});
          labels[t].erase(labels[t].begin() + static_cast<std::ptrdiff_t>(b));
          again = true;
        }
      }
    }
  }

  // The output labels: explicit, or numpy's implicit form (ellipsis, then once-used letters sorted).
  std::map<int, int64_t> uses;
  for (const auto& term : labels)
    for (int label : term) ++uses[label];
  std::vector<int> output;
  if (explicit_output) {
    output = expand_ellipsis(parse_term(node, right), ellipsis_rank, ellipsis_rank);
    for (size_t i = 0; i < output.size(); ++i) {
      if (!uses.count(output[i])) node.fail("output label '" + std::string(1, static_cast<char>(output[i])) + "' is not in any input");
      if (std::count(output.begin(), output.end(), output[i]) != 1) node.fail("unsupported: a repeated output label");
    }
  } else {
    for (int64_t e = 0; e < ellipsis_rank; ++e) output.push_back(kEllipsisLabel + static_cast<int>(e));
    for (const auto& [label, count] : uses)  // std::map iterates in label (ASCII) order
      if (label < kEllipsisLabel && count == 1) output.push_back(label);
  }

  // Lay every operand out over all labels (output first, then the summed ones), multiply with
  // broadcasting, and sum the non-output axes.
  std::vector<int> all = output;
  for (const auto& term : labels)
    for (int label : term)
      if (std::find(all.begin(), all.end(), label) == all.end()) all.push_back(label);
  Tensor product;
  for (size_t t = 0; t < tensors.size(); ++t) {
    std::vector<int64_t> order;
    Shape full(all.size(), 1);
    for (size_t position = 0; position < all.size(); ++position) {
      auto found = std::find(labels[t].begin(), labels[t].end(), all[position]);
      if (found == labels[t].end()) continue;
      int64_t axis = found - labels[t].begin();
      order.push_back(axis);
      full[position] = tensors[t].dim(axis);
    }
    Tensor laid = tensors[t].permute(order).reshape(full);
    product = product.defined() ? product * laid : laid;
  }
  std::vector<int64_t> summed;
  for (size_t position = output.size(); position < all.size(); ++position) summed.push_back(static_cast<int64_t>(position));
  if (!summed.empty()) product = product.sum(summed);
  return {product.cast(tensors[0].dtype())};
}

// ---------------------------------------------------------------------------------------------
// CumProd

Outputs cum_prod(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t rank = x.ndim();
  if (rank == 0) node.fail("input must have at least one axis");
  std::vector<int64_t> axis_value = node.input_ints(1);
  if (axis_value.size() != 1) node.fail("axis must hold exactly one value");
  int64_t axis = normalize_axis(node, axis_value[0], rank);
  bool exclusive = node.attr_int("exclusive", 0) != 0;
  bool reverse = node.attr_int("reverse", 0) != 0;
  int64_t n = x.dim(axis);
  std::vector<int64_t> order = axis_to_last(rank, axis);
  Tensor rows = x.permute(order).unsqueeze(-2);  // (…, 1, n): factor j
  Tensor i = Tensor::arange(n).reshape({n, 1}), j = Tensor::arange(n).reshape({1, n});
  // Output i multiplies the factors j selected by this triangular mask (no cumprod primitive).
  Tensor include = reverse ? (exclusive ? j.gt(i) : j.ge(i)) : (exclusive ? j.lt(i) : j.le(i));
  Tensor result = include.where(rows, Tensor::scalar(1.0, x.dtype())).prod({-1});
  return {result.cast(x.dtype()).permute(inverse_permutation(order))};
}

}  // namespace

void register_loss_ops(OpRegistry& registry) {
  registry.add("NegativeLogLikelihoodLoss", negative_log_likelihood_loss, 12);
  registry.add("SoftmaxCrossEntropyLoss", softmax_cross_entropy_loss, 12);
  registry.add("TopK", top_k, 1);
  registry.add("Scatter", scatter, 9);
  registry.add("ScatterElements", scatter_elements, 11);
  registry.add("ScatterND", scatter_nd, 11);
  registry.add("Einsum", einsum, 12);
  registry.add("CumProd", cum_prod, 1);
}

}  // namespace kiln::onnx_import
