// ONNX elementwise operators: arithmetic, activations, comparisons and logic, and the
// variadic Max/Min/Sum/Mean. Every builder maps onto Tensor's broadcasting elementwise ops; the
// activations without a Tensor primitive are written out from their ONNX definitions.
#include <cmath>
#include <limits>
#include <numbers>

#include "op_helpers.h"
#include "op_registry.h"
#include "support/error.h"
#include "tensor/tensor_internal.h"  // reads_graph_input: whether a value is known when the model is built

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

// Builders for the many ops that are one Tensor method.
OpBuilder unary(Tensor (Tensor::*method)() const) {
  return [method](const OnnxNode& node) -> Outputs { return {(node.input(0).*method)()}; };
}
// ONNX gives both inputs of these ops one type (T): a model that mixes them is invalid, and
// promoting silently (as Tensor's operators do) would compute something the model does not say.
OpBuilder binary(Tensor (Tensor::*method)(const Tensor&) const) {
  return [method](const OnnxNode& node) -> Outputs {
    const Tensor &a = node.input(0), &b = node.input(1);
    // A narrow input (float8, int4: carried as u8/i8) gets its own, clearer error after the builder.
    if (a.dtype() != b.dtype() && !node.unexpected_narrow_input())
      node.fail(str_cat("input 0 is ", scalar_type_name(a.dtype()), " but input 1 is ", scalar_type_name(b.dtype()),
                        "; both inputs must have the same type (cast one of them)"));
    return {(a.*method)(b)};
  };
}

// A constant of x's dtype (the activations' alpha/beta follow the input's float type).
Tensor constant(const Tensor& x, double value) { return Tensor::scalar(value, x.dtype()); }

// Activations written as several Tensor ops round after every step; in f16/bf16 that drifts by
// an ulp from the reference, which rounds once. They take x and compute in f32 for half types.
using Activation = Tensor (*)(const OnnxNode& node, const Tensor& x);
OpBuilder activation(Activation function) {
  return [function](const OnnxNode& node) -> Outputs {
    const Tensor& x = node.input(0);
    if (x.dtype() != ScalarType::Float16 && x.dtype() != ScalarType::BFloat16) return {function(node, x)};
    return {function(node, x.cast(ScalarType::Float32)).cast(x.dtype())};
  };
}

Outputs div(const OnnxNode& node) {
  const Tensor& a = node.input(0);
  const Tensor& b = node.input(1);
  // ONNX Div on integers truncates toward zero (C semantics); Tensor::div would give floats.
  if (is_integral(a.dtype()) && is_integral(b.dtype())) return {a.idiv(b)};
  return {a.div(b)};
}

Outputs mod(const OnnxNode& node) {
  // fmod=1: the sign of the dividend (C fmod); fmod=0: the sign of the divisor (Python %).
  if (node.attr_int("fmod", 0) != 0) return {node.input(0).fmod(node.input(1))};
  return {node.input(0).mod(node.input(1))};
}

Outputs pow(const OnnxNode& node) {
  const Tensor& base = node.input(0);
  const Tensor& exponent = node.input(1);
  // Since opset 12 the exponent may have another type; the result keeps the base's type.
  if (is_integral(base.dtype()) && !is_integral(exponent.dtype())) {
    // An integer base with a float exponent: the reference computes in f64 and truncates, so an
    // integral power like 9^3 must come out exactly 729, not 728.99… truncated to 728. Compute in
    // f64 and snap results within a few ulps of an integer before truncating.
    Tensor wide = base.cast(ScalarType::Float64).pow(exponent.cast(ScalarType::Float64));
    Tensor nearest = wide.round();
    Tensor close = (wide - nearest).abs().le(nearest.abs().maximum(Tensor::scalar(1.0, ScalarType::Float64)) *
                                             Tensor::scalar(1e-12, ScalarType::Float64));
    return {close.where(nearest, wide).trunc().cast(base.dtype())};
  }
  // A one-element exponent known when the model is built (an initializer, a Constant) enters the
  // graph as a constant, so that Tensor::pow can take a multiplication or a square root for the
  // small powers (x^2 of a spectrogram, x^0.5 of a norm) instead of the general exp2/log2 form.
  Tensor known_exponent = exponent;
  if (is_floating(base.dtype()) && !has_symbolic_shape(exponent) && exponent.numel() == 1 && !reads_graph_input(exponent))
    known_exponent = Tensor::scalar(node.input_doubles(1).at(0), exponent.dtype()).reshape(exponent.shape());
  Tensor result = base.pow(known_exponent);
  return {result.dtype() == base.dtype() ? result : result.cast(base.dtype())};
}

Tensor leaky_relu(const OnnxNode& node, const Tensor& x) {
  Tensor zero = constant(x, 0.0);
  return x.lt(zero).where(x * constant(x, node.attr_float("alpha", 0.01)), x);
}

Outputs prelu(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  return {x.lt(constant(x, 0.0)).where(x.mul(node.input(1)), x)};
}

// alpha·(e^x − 1) for x ≤ 0 (Elu, and Selu before its gamma).
Tensor elu_of(const Tensor& x, double alpha) {
  return x.gt(constant(x, 0.0)).where(x, (x.exp() - constant(x, 1.0)) * constant(x, alpha));
}

Tensor elu(const OnnxNode& node, const Tensor& x) { return elu_of(x, node.attr_float("alpha", 1.0)); }

Tensor selu(const OnnxNode& node, const Tensor& x) {
  double alpha = node.attr_float("alpha", 1.67326319217681884765625);
  double gamma = node.attr_float("gamma", 1.05070102214813232421875);
  return elu_of(x, alpha) * constant(x, gamma);
}

Tensor celu(const OnnxNode& node, const Tensor& x) {
  double alpha = node.attr_float("alpha", 1.0);
  Tensor zero = constant(x, 0.0);
  Tensor negative_part = ((x / constant(x, alpha)).exp() - constant(x, 1.0)) * constant(x, alpha);
  return x.maximum(zero) + negative_part.minimum(zero);
}

Tensor gelu(const OnnxNode& node, const Tensor& x) {
  std::string approximate = node.attr_string("approximate", "none");
  if (approximate == "none") return x.gelu();
  if (approximate != "tanh") node.fail("unsupported: Gelu approximate='" + approximate + "'");
  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the ONNX "tanh" form.
  Tensor inner = (x + x * x * x * constant(x, 0.044715)) * constant(x, std::sqrt(2.0 / std::numbers::pi));
  return x * constant(x, 0.5) * (inner.tanh() + constant(x, 1.0));
}

Tensor hard_sigmoid(const OnnxNode& node, const Tensor& x) {
  double alpha = node.attr_float("alpha", 0.2), beta = node.attr_float("beta", 0.5);
  return (x * constant(x, alpha) + constant(x, beta)).clip(0.0, 1.0);
}

Tensor hard_swish(const OnnxNode&, const Tensor& x) {
  return x * (x * constant(x, 1.0 / 6.0) + constant(x, 0.5)).clip(0.0, 1.0);
}

Tensor mish(const OnnxNode&, const Tensor& x) {
  return x * x.softplus().tanh();
}

Tensor softsign(const OnnxNode&, const Tensor& x) {
  return x / (x.abs() + constant(x, 1.0));
}

Tensor thresholded_relu(const OnnxNode& node, const Tensor& x) {
  return x.gt(constant(x, node.attr_float("alpha", 1.0))).where(x, constant(x, 0.0));
}

Tensor swish(const OnnxNode& node, const Tensor& x) {
  return x * (x * constant(x, node.attr_float("alpha", 1.0))).sigmoid();
}

// Shrink: x + bias below −lambd, x − bias above lambd, 0 between.
Tensor shrink(const OnnxNode& node, const Tensor& x) {
  double lambd = node.attr_float("lambd", 0.5), bias = node.attr_float("bias", 0.0);
  Tensor zero = constant(x, 0.0);
  Tensor below = x.lt(constant(x, -lambd)), above = x.gt(constant(x, lambd));
  return below.where(x + constant(x, bias), above.where(x - constant(x, bias), zero));
}

Outputs is_inf(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  bool positive = node.attr_int("detect_positive", 1) != 0, negative = node.attr_int("detect_negative", 1) != 0;
  Tensor inf = x.isinf();
  if (positive && negative) return {inf};
  Tensor zero = constant(x, 0.0);
  if (positive) return {inf.logical_and(x.gt(zero))};
  if (negative) return {inf.logical_and(x.lt(zero))};
  return {Tensor::zeros(x.shape(), ScalarType::Bool)};
}

Outputs bit_shift(const OnnxNode& node) {
  std::string direction = node.attr_string("direction");
  if (direction == "LEFT") return {node.input(0).shift_left(node.input(1))};
  if (direction == "RIGHT") return {node.input(0).shift_right(node.input(1))};
  node.fail("unsupported: BitShift direction '" + direction + "'");
}

Outputs where(const OnnxNode& node) { return {node.input(0).where(node.input(1), node.input(2))}; }

// Max, Min, Sum, Mean: any number of inputs, broadcast together (opset 8 added broadcasting;
// earlier opsets required equal shapes, which broadcasting also accepts).
OpBuilder variadic(Tensor (Tensor::*method)(const Tensor&) const, bool mean) {
  return [method, mean](const OnnxNode& node) -> Outputs {
    Tensor result = node.input(0);
    size_t count = node.input_count();
    for (size_t i = 1; i < count; ++i) result = (result.*method)(node.input(i));
    if (mean && count > 1) result = result / constant(result, static_cast<double>(count));
    return {result};
  };
}

Outputs clip(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  // Before opset 11 the bounds are float attributes; from 11 on they are optional scalar inputs.
  if (node.opset() < 11) {
    double low = node.attr_float("min", -std::numeric_limits<float>::max());
    double high = node.attr_float("max", std::numeric_limits<float>::max());
    return {x.clip(low, high)};
  }
  Tensor result = x;
  if (node.has_input(1)) result = result.maximum(node.input(1).reshape({}).cast(x.dtype()));
  if (node.has_input(2)) result = result.minimum(node.input(2).reshape({}).cast(x.dtype()));
  return {result};
}

Outputs identity(const OnnxNode& node) { return {node.input(0)}; }

Outputs dropout(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  // Opset 12 made training_mode an input; before, is_test/training never changed inference.
  if (node.opset() >= 12 && node.has_input(2) && node.input_ints(2).at(0) != 0) {
    double ratio = node.has_input(1) ? node.input_doubles(1).at(0) : 0.5;
    if (ratio != 0.0) node.fail("unsupported: Dropout in training mode (random masks)");
  }
  // Inference keeps every element: the optional mask is all true.
  return declared_outputs(node, {x, Tensor::ones(x.shape(), ScalarType::Bool)});
}

// ---- inverse trigonometric and hyperbolic functions, from exp/log/sqrt and a series ----

// atan(x): reduce |x| > 1 with atan(x) = π/2 − atan(1/x), then halve the angle once
// (atan(t) = 2·atan(t / (1 + √(1 + t²)))) so |t| ≤ tan(π/8) ≈ 0.414, where the odd Taylor series to
// t¹⁷ is accurate to ~1e-9 (the first dropped term is t¹⁹/19).
Tensor atan_of(const Tensor& x) {
  Tensor one = constant(x, 1.0);
  Tensor magnitude = x.abs();
  Tensor large = magnitude.gt(one);
  Tensor reduced = large.where(magnitude.reciprocal(), magnitude);
  Tensor t = reduced / ((reduced * reduced + one).sqrt() + one);
  Tensor t2 = t * t;
  Tensor series = constant(x, 1.0 / 17.0);
  for (int k = 15; k >= 1; k -= 2) {
    double coefficient = ((k / 2) % 2 == 0 ? 1.0 : -1.0) / k;
    series = series * t2 + constant(x, coefficient);  // Horner in t² of Σ (−1)^j t^2j/(2j+1)
  }
  Tensor small_angle = series * t * constant(x, 2.0);
  Tensor angle = large.where(constant(x, std::numbers::pi / 2) - small_angle, small_angle);
  return x.lt(constant(x, 0.0)).where(angle.neg(), angle);
}

Tensor atan(const OnnxNode&, const Tensor& x) { return atan_of(x); }

Tensor asin(const OnnxNode&, const Tensor& x) {
  Tensor one = constant(x, 1.0);
  // asin(x) = atan(x / √((1 − x)(1 + x))); the factored form avoids cancellation near |x| = 1.
  return atan_of(x / ((one - x) * (one + x)).sqrt());
}

Tensor acos(const OnnxNode&, const Tensor& x) {
  Tensor one = constant(x, 1.0);
  // acos(x) = 2·atan(√((1 − x)/(1 + x))): accurate near x = 1, where π/2 − asin(x) would cancel.
  return atan_of(((one - x) / (one + x)).sqrt()) * constant(x, 2.0);
}

Tensor sinh(const OnnxNode&, const Tensor& x) {
  return (x.exp() - x.neg().exp()) * constant(x, 0.5);
}

Tensor cosh(const OnnxNode&, const Tensor& x) {
  return (x.exp() + x.neg().exp()) * constant(x, 0.5);
}

Tensor asinh(const OnnxNode&, const Tensor& x) {
  // Odd symmetry keeps log's argument ≥ 1 (no cancellation for negative x).
  Tensor magnitude = x.abs();
  Tensor value = (magnitude + (magnitude * magnitude + constant(x, 1.0)).sqrt()).log();
  return x.lt(constant(x, 0.0)).where(value.neg(), value);
}

Tensor acosh(const OnnxNode&, const Tensor& x) {
  return (x + (x * x - constant(x, 1.0)).sqrt()).log();
}

Tensor atanh(const OnnxNode&, const Tensor& x) {
  Tensor one = constant(x, 1.0);
  return ((one + x) / (one - x)).log() * constant(x, 0.5);
}

}  // namespace

void register_elementwise_ops(OpRegistry& registry) {
  // Arithmetic.
  registry.add("Add", binary(&Tensor::add));
  registry.add("Sub", binary(&Tensor::sub));
  registry.add("Mul", binary(&Tensor::mul));
  registry.add("Div", div);
  registry.add("Mod", mod, 10);
  registry.add("Pow", pow);
  registry.add("Neg", unary(&Tensor::neg));
  registry.add("Abs", unary(&Tensor::abs));
  registry.add("Sign", unary(&Tensor::sign), 9);
  registry.add("Reciprocal", unary(&Tensor::reciprocal));
  registry.add("Sqrt", unary(&Tensor::sqrt));
  registry.add("Exp", unary(&Tensor::exp));
  registry.add("Log", unary(&Tensor::log));
  registry.add("Floor", unary(&Tensor::floor));
  registry.add("Ceil", unary(&Tensor::ceil));
  registry.add("Round", unary(&Tensor::round), 11);  // half to even, as ONNX specifies
  // Trigonometric and hyperbolic.
  registry.add("Sin", unary(&Tensor::sin), 7);
  registry.add("Cos", unary(&Tensor::cos), 7);
  registry.add("Tan", unary(&Tensor::tan), 7);
  registry.add("Tanh", unary(&Tensor::tanh));
  registry.add("Asin", activation(asin), 7);
  registry.add("Acos", activation(acos), 7);
  registry.add("Atan", activation(atan), 7);
  registry.add("Sinh", activation(sinh), 9);
  registry.add("Cosh", activation(cosh), 9);
  registry.add("Asinh", activation(asinh), 9);
  registry.add("Acosh", activation(acosh), 9);
  registry.add("Atanh", activation(atanh), 9);
  registry.add("Erf", unary(&Tensor::erf), 9);
  // Activations.
  registry.add("Sigmoid", unary(&Tensor::sigmoid));
  registry.add("Relu", unary(&Tensor::relu));
  registry.add("LeakyRelu", activation(leaky_relu));
  registry.add("PRelu", prelu);
  registry.add("Elu", activation(elu));
  registry.add("Selu", activation(selu));
  registry.add("Celu", activation(celu), 12);
  registry.add("Gelu", activation(gelu), 20);
  registry.add("HardSigmoid", activation(hard_sigmoid));
  registry.add("HardSwish", activation(hard_swish), 14);
  registry.add("Mish", activation(mish), 18);
  registry.add("Softplus", unary(&Tensor::softplus));
  registry.add("Softsign", activation(softsign));
  registry.add("Swish", activation(swish), 24);
  registry.add("Shrink", activation(shrink), 9);
  registry.add("ThresholdedRelu", activation(thresholded_relu), 10);
  // Classification of floats.
  registry.add("IsNaN", unary(&Tensor::isnan), 9);
  registry.add("IsInf", is_inf, 10);
  // Logic and bits.
  registry.add("Not", unary(&Tensor::logical_not));
  registry.add("And", binary(&Tensor::logical_and));
  registry.add("Or", binary(&Tensor::logical_or));
  registry.add("Xor", binary(&Tensor::logical_xor));
  registry.add("BitwiseNot", unary(&Tensor::bitwise_not), 18);
  registry.add("BitwiseAnd", binary(&Tensor::bitwise_and), 18);
  registry.add("BitwiseOr", binary(&Tensor::bitwise_or), 18);
  registry.add("BitwiseXor", binary(&Tensor::bitwise_xor), 18);
  registry.add("BitShift", bit_shift, 11);
  // Comparisons.
  registry.add("Equal", binary(&Tensor::eq));
  registry.add("Less", binary(&Tensor::lt));
  registry.add("LessOrEqual", binary(&Tensor::le), 12);
  registry.add("Greater", binary(&Tensor::gt));
  registry.add("GreaterOrEqual", binary(&Tensor::ge), 12);
  registry.add("Where", where, 9);
  // Variadic.
  registry.add("Max", variadic(&Tensor::maximum, false));
  registry.add("Min", variadic(&Tensor::minimum, false));
  registry.add("Sum", variadic(&Tensor::add, false));
  registry.add("Mean", variadic(&Tensor::add, true));
  // Clipping, types, pass-through.
  registry.add("Clip", clip);
  registry.add("Identity", identity);
  registry.add("Dropout", dropout);
}

}  // namespace kiln::onnx_import
