// ONNX ops without a family of their own: ReverseSequence, Det, and the optimizer steps of the
// ai.onnx.preview.training domain (Adagrad, Adam, Momentum).
//
// Det is an LU factorisation with partial pivoting, unrolled over the (static) matrix size: each
// step picks the largest-magnitude pivot of the leading column (argmax + one-hot row selection, as
// kiln has no data-dependent row swap), eliminates below it and continues on the trailing
// submatrix. det = (-1)^swaps · Π pivots. The optimizers are elementwise formulas per tensor.
#include <string>

#include "op_helpers.h"
#include "op_registry.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

Tensor constant(ScalarType type, double value) { return Tensor::scalar(value, type); }

// ---------------------------------------------------------------------------------------------
// ReverseSequence: the first sequence_lens[b] elements along the time axis of batch entry b are
// reversed, the rest copied. Built as a gather with the source index len-1-t (t < len) or t.

Outputs reverse_sequence(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (x.ndim() < 2) node.fail("input must have rank 2 or more");
  int64_t batch_axis = node.attr_int("batch_axis", 1), time_axis = node.attr_int("time_axis", 0);
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) || batch_axis == time_axis)
    node.fail("batch_axis and time_axis must be 0 and 1 in some order");
  int64_t steps = x.dim(time_axis), batch = x.dim(batch_axis);
  const Tensor& lengths = node.input(1);
  if (lengths.shape() != Shape{batch}) node.fail("sequence_lens must have shape (batch_size)");

  Shape time_shape(static_cast<size_t>(x.ndim()), 1), batch_shape(static_cast<size_t>(x.ndim()), 1);
  time_shape[static_cast<size_t>(time_axis)] = steps;
  batch_shape[static_cast<size_t>(batch_axis)] = batch;
  Tensor t = Tensor::arange(steps).reshape(time_shape);
  // Lengths outside [0, steps] are invalid; clamping them keeps every gather index in range.
  Tensor length = lengths.cast(ScalarType::Int64).reshape(batch_shape).clip(0.0, static_cast<double>(steps));
  Tensor source = t.lt(length).where(length - t - Tensor::scalar(1.0, ScalarType::Int64), t);
  return {x.gather(time_axis, source.expand(x.shape()))};
}

// ---------------------------------------------------------------------------------------------
// Det

// Determinants of (…, n, n) matrices.
Tensor determinant(const Tensor& matrices) {
  ScalarType type = matrices.dtype();
  int64_t n = matrices.dim(-1);
  Shape batch(matrices.shape().begin(), matrices.shape().end() - 2);
  Tensor det = Tensor::ones(batch, type);
  Tensor zero = constant(type, 0.0);
  Tensor rest = matrices;  // the trailing submatrix still to factor, (…, m, m)
  for (int64_t m = n; m > 0; --m) {
    Tensor pivot_index = rest.slice(-1, 0, 1).abs().argmax(-2, true);        // (…, 1, 1)
    Tensor is_pivot_row = Tensor::arange(m).reshape({m, 1}).eq(pivot_index);  // (…, m, 1)
    Tensor pivot_row = is_pivot_row.where(rest, zero).sum({-2}, true);        // (…, 1, m)
    Tensor pivot = pivot_row.slice(-1, 0, 1);                                  // (…, 1, 1)
    // A row swap (pivot not already on top) flips the determinant's sign.
    Tensor sign = pivot_index.eq(Tensor::scalar(0.0, ScalarType::Int64)).where(constant(type, 1.0), constant(type, -1.0));
    det = det * (pivot * sign).reshape(batch);
    if (m == 1) break;
    // Rows 1…m-1 after swapping the pivot row with row 0: row 0 lands where the pivot row was.
    Tensor top_row = rest.slice(-2, 0, 1);
    Tensor below = is_pivot_row.slice(-2, 1, m).where(top_row, rest.slice(-2, 1, m));  // (…, m-1, m)
    // A zero pivot means a zero column (it has the largest magnitude): det is already 0, and a
    // divisor of 1 keeps the remaining steps finite.
    Tensor divisor = pivot.eq(zero).where(constant(type, 1.0), pivot);
    Tensor factor = below.slice(-1, 0, 1) / divisor;
    rest = (below - factor * pivot_row).slice(-1, 1, m);
  }
  return det;
}

Outputs det(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (!is_floating(x.dtype())) node.fail("input must be a floating-point tensor");
  if (x.ndim() < 2 || x.dim(-1) != x.dim(-2)) node.fail("input must be (…, M, M) square matrices");
  // Half-precision elimination loses too much; factor in f32 and round once at the end.
  ScalarType compute = x.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  return {determinant(x.cast(compute)).cast(x.dtype())};
}

// ---------------------------------------------------------------------------------------------
// ai.onnx.preview.training optimizers: inputs R (learning rate), T (update count), then `groups`
// lists of n tensors each (X…, G…, and the optimizer's state…); outputs X_new…, then each state's
// new values. Several tensors are updated independently with the same formula.

struct OptimizerInputs {
  Tensor rate, count;
  int64_t tensors = 0;  // n
  std::vector<std::vector<Tensor>> groups;  // groups[g][i]: the g-th list, i-th tensor
};

OptimizerInputs read_optimizer_inputs(const OnnxNode& node, int64_t groups) {
  int64_t variadic = static_cast<int64_t>(node.input_count()) - 2;
  if (variadic <= 0 || variadic % groups != 0)
    node.fail("expects R, T and then " + std::to_string(groups) + " lists of the same number of tensors");
  OptimizerInputs inputs;
  inputs.rate = node.input(0);
  inputs.count = node.input(1);
  if (inputs.rate.numel() != 1 || inputs.count.numel() != 1) node.fail("R and T must be scalars");
  inputs.tensors = variadic / groups;
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<Tensor> list;
    for (int64_t i = 0; i < inputs.tensors; ++i) {
      const Tensor& tensor = node.input(static_cast<size_t>(2 + g * inputs.tensors + i));
      if (!is_floating(tensor.dtype())) node.fail("the optimized tensors must be floating-point");
      list.push_back(tensor);
    }
    inputs.groups.push_back(std::move(list));
  }
  return inputs;
}

// R and T as scalars of X's dtype.
Tensor scalar_of(const Tensor& value, ScalarType type) { return value.reshape({}).cast(type); }

Outputs adagrad(const OnnxNode& node) {
  OptimizerInputs in = read_optimizer_inputs(node, 3);  // X, G, H
  double decay = node.attr_float("decay_factor", 0.0), epsilon = node.attr_float("epsilon", 1e-6);
  double norm = node.attr_float("norm_coefficient", 0.0);
  Outputs new_x, new_h;
  for (int64_t i = 0; i < in.tensors; ++i) {
    const Tensor& x = in.groups[0][static_cast<size_t>(i)];
    const Tensor& g = in.groups[1][static_cast<size_t>(i)];
    const Tensor& h = in.groups[2][static_cast<size_t>(i)];
    ScalarType type = x.dtype();
    Tensor rate = scalar_of(in.rate, type) / (scalar_of(in.count, type) * decay + 1.0);
    Tensor gradient = x * norm + g;
    Tensor accumulated = h + gradient * gradient;
    new_x.push_back((x - rate * gradient / (accumulated.sqrt() + epsilon)).cast(type));
    new_h.push_back(accumulated.cast(type));
  }
  new_x.insert(new_x.end(), new_h.begin(), new_h.end());
  return new_x;
}

Outputs adam(const OnnxNode& node) {
  OptimizerInputs in = read_optimizer_inputs(node, 4);  // X, G, V, H
  double alpha = node.attr_float("alpha", 0.9), beta = node.attr_float("beta", 0.999);
  double epsilon = node.attr_float("epsilon", 1e-6), norm = node.attr_float("norm_coefficient", 0.0);
  double norm_post = node.attr_float("norm_coefficient_post", 0.0);
  Outputs new_x, new_v, new_h;
  for (int64_t i = 0; i < in.tensors; ++i) {
    const Tensor& x = in.groups[0][static_cast<size_t>(i)];
    const Tensor& g = in.groups[1][static_cast<size_t>(i)];
    const Tensor& v = in.groups[2][static_cast<size_t>(i)];
    const Tensor& h = in.groups[3][static_cast<size_t>(i)];
    ScalarType type = x.dtype();
    Tensor gradient = x * norm + g;
    Tensor momentum = v * alpha + gradient * (1.0 - alpha);
    Tensor squared = h * beta + gradient * gradient * (1.0 - beta);
    // Bias correction from the second step on (T > 0); at T = 0 it would divide by zero.
    Tensor rate = scalar_of(in.rate, type), count = scalar_of(in.count, type);
    Tensor corrected = rate * (1.0 - constant(type, beta).pow(count)).sqrt() / (1.0 - constant(type, alpha).pow(count));
    Tensor adjusted_rate = count.gt(constant(type, 0.0)).where(corrected, rate);
    Tensor updated = x - adjusted_rate * momentum / (squared.sqrt() + epsilon);
    new_x.push_back((updated * (1.0 - norm_post)).cast(type));
    new_v.push_back(momentum.cast(type));
    new_h.push_back(squared.cast(type));
  }
  new_x.insert(new_x.end(), new_v.begin(), new_v.end());
  new_x.insert(new_x.end(), new_h.begin(), new_h.end());
  return new_x;
}

Outputs momentum(const OnnxNode& node) {
  OptimizerInputs in = read_optimizer_inputs(node, 3);  // X, G, V
  double alpha = node.attr_float("alpha"), beta = node.attr_float("beta");
  double norm = node.attr_float("norm_coefficient");
  std::string mode = node.attr_string("mode");
  if (mode != "standard" && mode != "nesterov") node.fail("unsupported: mode '" + mode + "'");
  Outputs new_x, new_v;
  for (int64_t i = 0; i < in.tensors; ++i) {
    const Tensor& x = in.groups[0][static_cast<size_t>(i)];
    const Tensor& g = in.groups[1][static_cast<size_t>(i)];
    const Tensor& v = in.groups[2][static_cast<size_t>(i)];
    ScalarType type = x.dtype();
    Tensor rate = scalar_of(in.rate, type);
    Tensor gradient = x * norm + g;
    // The first step (T = 0) takes the whole gradient: beta only scales later ones.
    Tensor gradient_scale = scalar_of(in.count, type).gt(constant(type, 0.0)).where(constant(type, beta), constant(type, 1.0));
    Tensor velocity = v * alpha + gradient_scale * gradient;
    Tensor direction = mode == "nesterov" ? gradient + velocity * alpha : velocity;
    new_x.push_back((x - rate * direction).cast(type));
    new_v.push_back(velocity.cast(type));
  }
  new_x.insert(new_x.end(), new_v.begin(), new_v.end());
  return new_x;
}

}  // namespace

void register_misc_ops(OpRegistry& registry) {
  registry.add("ReverseSequence", reverse_sequence, 10);
  registry.add("Det", det, 11);
  const std::string training = "ai.onnx.preview.training";
  registry.add("Adagrad", adagrad, 1, training);
  registry.add("Adam", adam, 1, training);
  registry.add("Momentum", momentum, 1, training);
}

}  // namespace kiln::onnx_import
