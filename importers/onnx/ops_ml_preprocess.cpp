// The feature transforms of ai.onnx.ml that scikit-learn pipelines export: Scaler, Normalizer,
// Binarizer, Imputer, OneHotEncoder, LabelEncoder (numeric keys and values), ArrayFeatureExtractor,
// and ZipMap (its map output becomes the probability tensor itself). All are elementwise or
// row-wise formulas with constant attributes; where the ONNX text is loose, the behaviour is
// onnxruntime's. kiln has no string dtype: string categories, labels and keys fail with an
// "unsupported: …" error naming the node.
#include <cmath>
#include <limits>
#include <string>

#include "ml_support.h"
#include "op_helpers.h"
#include "op_registry.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

[[noreturn]] void fail_strings(const OnnxNode& node, const std::string& attribute) {
  node.fail("unsupported: string " + attribute + ": kiln has no string dtype");
}

// A per-column list (length 1: every column; length C: one per column) as a constant of `type`
// that broadcasts against (…, C).
Tensor per_column(const OnnxNode& node, const std::string& name, const std::vector<double>& values, int64_t columns,
                  ScalarType type) {
  if (values.size() == 1) return Tensor::scalar(values[0], type);
  if (static_cast<int64_t>(values.size()) != columns)
    node.fail("attribute '" + name + "' has " + std::to_string(values.size()) + " values; it needs 1 or one per column (" +
              std::to_string(columns) + ")");
  return Tensor::from_vector(values, {columns}).cast(type);
}

int64_t column_count(const OnnxNode& node, const Tensor& x) {
  if (x.ndim() == 0) node.fail("input X must have at least one dimension");
  return x.dim(-1);
}

// Scaler: Y = (X - offset) · scale, in f32.
Outputs scaler(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t columns = column_count(node, x);
  std::vector<double> offset = node.attr_floats("offset", std::vector<double>{0.0});
  std::vector<double> scale = node.attr_floats("scale", std::vector<double>{1.0});
  Tensor values = x.cast(ScalarType::Float32);
  return {(values - per_column(node, "offset", offset, columns, ScalarType::Float32)) *
          per_column(node, "scale", scale, columns, ScalarType::Float32)};
}

// Normalizer: each row divided by its MAX (the largest value, not magnitude), L1 or L2 norm; a
// row whose divisor is 0 is copied unchanged. Y is f32.
Outputs normalizer(const OnnxNode& node) {
  Tensor rows = feature_rows(node, node.input(0), ScalarType::Float32);
  std::string norm = node.attr_string("norm", "MAX");
  Tensor divisor;
  if (norm == "MAX") divisor = rows.max({1}, true);
  else if (norm == "L1") divisor = rows.abs().sum({1}, true);
  else if (norm == "L2") divisor = (rows * rows).sum({1}, true).sqrt();
  else node.fail("norm '" + norm + "' is not one of MAX, L1, L2");
  Tensor zero = scalar_like(divisor, 0.0);
  Tensor normalized = divisor.eq(zero).where(rows, rows / divisor);
  return {node.input(0).ndim() == 1 ? normalized.reshape({rows.dim(1)}) : normalized};
}

// Binarizer: 1 where X > threshold, else 0, in X's type.
Outputs binarizer(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (x.dtype() == ScalarType::Bool) node.fail("input X must be numeric, not bool");
  double threshold = node.attr_float("threshold", 0.0);
  ScalarType compare = x.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  Tensor above = x.cast(compare).gt(Tensor::scalar(threshold, compare));
  return {above.where(scalar_like(x, 1.0), scalar_like(x, 0.0))};
}

// Imputer: the entries equal to the replaced value (NaN: the NaN entries) become the imputed value
// of their column. Float inputs use the *_float(s) attributes, integer ones the *_int64(s).
Outputs imputer(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t columns = column_count(node, x);
  if (is_floating(x.dtype())) {
    std::vector<double> imputed = node.attr_floats("imputed_value_floats", std::vector<double>{});
    if (imputed.empty()) node.fail("imputed_value_floats is required for a floating-point input");
    double replaced = node.attr_float("replaced_value_float", 0.0);
    Tensor missing = std::isnan(replaced) ? x.isnan() : x.eq(scalar_like(x, replaced));
    return {missing.where(per_column(node, "imputed_value_floats", imputed, columns, x.dtype()), x)};
  }
  if (!is_integral(x.dtype())) node.fail("input X must be a float or integer tensor");
  std::vector<int64_t> imputed = node.attr_ints("imputed_value_int64s", std::vector<int64_t>{});
  if (imputed.empty()) node.fail("imputed_value_int64s is required for an integer input");
  std::vector<double> as_doubles(imputed.begin(), imputed.end());
  int64_t replaced = node.attr_int("replaced_value_int64", 0);
  Tensor imputed_values = imputed.size() == 1 ? Tensor::scalar(static_cast<double>(imputed[0]), ScalarType::Int64)
                                              : int64_vector(imputed);
  if (imputed.size() != 1 && static_cast<int64_t>(imputed.size()) != columns)
    node.fail("attribute 'imputed_value_int64s' has " + std::to_string(imputed.size()) +
              " values; it needs 1 or one per column (" + std::to_string(columns) + ")");
  Tensor missing = x.cast(ScalarType::Int64).eq(Tensor::scalar(static_cast<double>(replaced), ScalarType::Int64));
  return {missing.where(imputed_values.cast(x.dtype()), x)};
}

// OneHotEncoder: Y[…, k] = 1 where X (truncated to an integer) is category k, float. zeros = 0
// asks for an error on an unknown category; a compiled plan cannot raise one, so such a row is all
// zeros, as with zeros = 1 (docs/onnx-importer.md says so).
Outputs one_hot_encoder(const OnnxNode& node) {
  if (node.has_attribute("cats_strings")) fail_strings(node, "categories (cats_strings)");
  std::vector<int64_t> categories = node.attr_ints("cats_int64s", std::vector<int64_t>{});
  if (categories.empty()) node.fail("cats_int64s is required (and must not be empty)");
  int64_t zeros = node.attr_int("zeros", 1);
  if (zeros != 0 && zeros != 1) node.fail("zeros must be 0 or 1, not " + std::to_string(zeros));
  const Tensor& x = node.input(0);
  if (x.dtype() == ScalarType::Bool) node.fail("input X must be numeric, not bool");
  Tensor values = (is_floating(x.dtype()) ? x.trunc() : x).cast(ScalarType::Int64);
  Tensor hit = values.unsqueeze(-1).eq(int64_vector(categories));
  return {hit.where(Tensor::scalar(1.0), Tensor::scalar(0.0))};
}

// ArrayFeatureExtractor: the entries of X's last axis at the indices Y (flattened): shape
// X.shape[:-1] + [len(Y)], or (1, len(Y)) for a 1-D X. An index past the end (an error in
// onnxruntime) reads 0.
Outputs array_feature_extractor(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const Tensor& indices = node.input(1);
  if (x.ndim() == 0) node.fail("input X must have at least one dimension");
  if (!is_integral(indices.dtype())) node.fail("input Y (the indices) must be an integer tensor");
  if (indices.numel() == 0) node.fail("input Y (the indices) is empty");
  Tensor picked = x.take(indices.reshape({indices.numel()}), x.ndim() - 1);
  return {x.ndim() == 1 ? picked.reshape({1, indices.numel()}) : picked};
}

// LabelEncoder with numeric keys and values (opsets 2-4): each X entry equal to a key becomes its
// value, anything else the default. Float keys match NaN to NaN.
struct LabelMap {
  Tensor keys, values, fallback;
};

// A FLOATS attribute as a 1-D f32 tensor.
Tensor float_vector(const std::vector<double>& values) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).cast(ScalarType::Float32);
}

LabelMap read_label_map(const OnnxNode& node) {
  if (node.opset() < 2) fail_strings(node, "labels (LabelEncoder opset 1 maps strings to integers)");
  for (const char* name : {"keys_strings", "values_strings"})
    if (node.has_attribute(name)) fail_strings(node, std::string("labels (") + name + ")");
  LabelMap map;
  if (node.has_attribute("keys_int64s")) map.keys = int64_vector(node.attr_ints("keys_int64s"));
  else if (node.has_attribute("keys_floats")) map.keys = float_vector(node.attr_floats("keys_floats"));
  else if (node.opset() >= 4 && node.has_attribute("keys_tensor")) map.keys = node.attr_tensor("keys_tensor");
  else node.fail("no keys: one of keys_int64s, keys_floats (or keys_tensor from opset 4) is required");
  if (node.has_attribute("values_int64s")) map.values = int64_vector(node.attr_ints("values_int64s"));
  else if (node.has_attribute("values_floats")) map.values = float_vector(node.attr_floats("values_floats"));
  else if (node.opset() >= 4 && node.has_attribute("values_tensor")) map.values = node.attr_tensor("values_tensor");
  else node.fail("no values: one of values_int64s, values_floats (or values_tensor from opset 4) is required");
  map.keys = map.keys.reshape({map.keys.numel()});
  map.values = map.values.reshape({map.values.numel()});
  if (map.keys.numel() != map.values.numel())
    node.fail("there are " + std::to_string(map.keys.numel()) + " keys but " + std::to_string(map.values.numel()) + " values");
  if (map.keys.numel() == 0) node.fail("the key list is empty");
  ScalarType value_type = map.values.dtype();
  if (node.opset() >= 4 && node.has_attribute("default_tensor")) {
    Tensor fallback = node.attr_tensor("default_tensor");
    if (fallback.numel() != 1) node.fail("default_tensor must hold one value");
    map.fallback = fallback.reshape({}).cast(value_type);
  } else if (is_floating(value_type)) {
    map.fallback = Tensor::scalar(node.attr_float("default_float", -0.0), value_type);
  } else {
    map.fallback = Tensor::scalar(static_cast<double>(node.attr_int("default_int64", -1)), value_type);
  }
  return map;
}

Outputs label_encoder(const OnnxNode& node) {
  LabelMap map = read_label_map(node);
  const Tensor& x = node.input(0);
  if (x.dtype() != map.keys.dtype())
    node.fail("input X is " + std::string(scalar_type_name(x.dtype())) + " but the keys are " +
              scalar_type_name(map.keys.dtype()));
  Tensor wide = x.unsqueeze(-1);
  Tensor match = wide.eq(map.keys);
  if (is_floating(x.dtype())) match = match.logical_or(wide.isnan().logical_and(map.keys.isnan()));
  Tensor found = match.max({-1});
  Tensor first = match.cast(ScalarType::Int32).argmax(-1);  // the first key that matches
  return {found.where(map.values.take(first, 0), map.fallback)};
}

// ZipMap: onnxruntime returns a sequence of {class label: probability} maps. kiln has no map
// values, so the output is the (N, C) probability tensor itself, column k holding the probability
// of classlabels_int64s[k]; nothing is lost, as the keys are the node's constant labels.
Outputs zip_map(const OnnxNode& node) {
  if (node.has_attribute("classlabels_strings"))
    node.fail("unsupported: ZipMap with string keys (classlabels_strings) cannot be represented without a string "
              "dtype; convert with skl2onnx option {'zipmap': False} (options={id(model): {'zipmap': False}}) to get "
              "the probabilities as a tensor");
  std::vector<int64_t> labels = node.attr_ints("classlabels_int64s", std::vector<int64_t>{});
  if (labels.empty()) node.fail("one of classlabels_int64s or classlabels_strings is required");
  const Tensor& x = node.input(0);
  if (x.dtype() != ScalarType::Float32) node.fail("input X must be float32");
  Tensor rows = feature_rows(node, x, ScalarType::Float32);
  if (rows.dim(1) != static_cast<int64_t>(labels.size()))
    node.fail("X has " + std::to_string(rows.dim(1)) + " columns but there are " + std::to_string(labels.size()) +
              " class labels");
  return {rows};
}

}  // namespace

void register_ml_preprocess_ops(OpRegistry& registry) {
  const std::string ml = "ai.onnx.ml";
  registry.add("Scaler", scaler, 1, ml);
  registry.add("Normalizer", normalizer, 1, ml);
  registry.add("Binarizer", binarizer, 1, ml);
  registry.add("Imputer", imputer, 1, ml);
  registry.add("OneHotEncoder", one_hot_encoder, 1, ml);
  registry.add("ArrayFeatureExtractor", array_feature_extractor, 1, ml);
  registry.add("LabelEncoder", label_encoder, 1, ml);
  registry.add("ZipMap", zip_map, 1, ml);
}

}  // namespace kiln::onnx_import
