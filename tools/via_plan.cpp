// ViaPlanRunner: model + inputs → plan bytes (compile_onnx_plan) → kiln_plan_load_buffer → kiln_plan_run.
#include "via_plan.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "compile_onnx_file.h"
#include "plan/plan_dtype.h"
#include "support/error.h"

namespace kiln::tools {
namespace {

// "name=2,3;other=;" — the plan cache's key and the --shape specs it stands for.
std::string shape_key(const std::vector<std::pair<std::string, Tensor>>& inputs) {
  std::string key;
  for (const auto& [name, tensor] : inputs) {
    key += name + "=";
    for (size_t axis = 0; axis < tensor.shape().size(); ++axis)
      key += (axis ? "," : "") + std::to_string(tensor.shape()[axis]);
    key += ";";
  }
  return key;
}

// A tensor's elements as `kiln compile --value` text: integers exactly, floats with every digit.
std::vector<std::string> value_elements(const Tensor& tensor) {
  std::vector<std::string> elements;
  if (tensor.dtype() == ScalarType::Float32 || tensor.dtype() == ScalarType::Float64 ||
      tensor.dtype() == ScalarType::Float16 || tensor.dtype() == ScalarType::BFloat16) {
    for (double value : tensor.cast(ScalarType::Float64).to_vector<double>()) {
      char text[40];
      std::snprintf(text, sizeof text, "%.17g", value);
      elements.emplace_back(text);
    }
  } else {
    for (int64_t value : tensor.cast(ScalarType::Int64).to_vector<int64_t>()) elements.push_back(std::to_string(value));
  }
  return elements;
}

// The input a compile failed for want of as a node's parameter: "the value of graph input 'NAME' is
// needed at compile time as a parameter" (OnnxNode::input_ints, input_doubles), or "" for any
// other failure. Inputs whose data a node needs (NonMaxSuppression's boxes, Unique's values) are
// never pinned: the plan would then compute nothing from its inputs.
std::string input_needed_at_compile_time(const std::string& message) {
  const std::string prefix = "the value of graph input '";
  size_t begin = message.find(prefix);
  if (begin == std::string::npos) return "";
  begin += prefix.size();
  size_t end = message.find("' is needed at compile time as a parameter", begin);
  return end == std::string::npos ? "" : message.substr(begin, end - begin);
}

[[noreturn]] void throw_c_api_error(const std::string& what, kiln_status status) {
  throw UserError(str_cat(what, ": ", kiln_error_message(), " (", kiln_status_string(status), ")"));
}

}  // namespace

ViaPlanRunner::ViaPlanRunner(std::string model_path, std::string target)
    : model_path_(std::move(model_path)), target_(std::move(target)) {}

ViaPlanRunner::~ViaPlanRunner() = default;

// The range --via-plan gives an input whose elements may be sizes read at run time (--value
// NAME=MIN..MAX): 0..max(16, twice its largest element), for an int64 scalar or 1-D input of at
// most 64 non-negative elements; nothing for any other.
std::optional<std::pair<int64_t, int64_t>> run_time_size_range(const Tensor& value) {
  if (value.dtype() != ScalarType::Int64 || value.ndim() > 1 || value.numel() > 64) return std::nullopt;
  int64_t largest = 0;
  for (int64_t element : value.to_vector<int64_t>()) {
    if (element < 0) return std::nullopt;
    largest = std::max(largest, element);
  }
  return std::make_pair(int64_t{0}, std::max<int64_t>(16, 2 * largest));
}

kiln_plan* ViaPlanRunner::plan_for(const std::vector<std::pair<std::string, Tensor>>& inputs) {
  auto find_input = [&](const std::string& name) -> const Tensor* {
    for (const auto& [input, tensor] : inputs)
      if (input == name) return &tensor;
    return nullptr;
  };
  auto listed = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (;;) {
    onnx_import::OnnxCompileOptions options;
    std::string key = symbols_.empty() ? shape_key(inputs) : "symbolic";
    for (const auto& [name, range] : ranged_) {
      options.values.push_back({name, {}, range});
      key += str_cat("|", name, "=", range.first, "..", range.second);
    }
    for (const std::string& name : pinned_) {
      const Tensor* value = find_input(name);
      if (value == nullptr) throw UserError(str_cat("a data set lacks input '", name, "'"));
      options.values.push_back({name, value_elements(*value), std::nullopt});
      key += "|" + name + "=";
      for (const std::string& element : options.values.back().elements) key += element + ",";
    }
    if (auto found = plans_.find(key); found != plans_.end()) return found->second.get();
    if (symbols_.empty())
      for (const auto& [name, tensor] : inputs) options.shapes.push_back({name, tensor.shape()});
    else
      options.shapes = symbols_;
    options.device = target_;
    std::string bytes;
    try {
      bytes = onnx_import::compile_onnx_plan(model_path_, options);
    } catch (const UserError& error) {
      // An input a node reads as a parameter: first as sizes the run reads (--value NAME=MIN..MAX,
      // one plan for every value in range), and where the graph needs it as constants after all
      // (a reduction's axes) or cannot take it as sizes, pinned to this data set's value, as an
      // application that always feeds that value would (the plan refuses any other).
      bool cpu = target_.empty() || target_ == "cpu";
      std::string needed = input_needed_at_compile_time(error.what());
      auto ranged = std::find_if(ranged_.begin(), ranged_.end(), [&](const auto& entry) { return entry.first == needed; });
      if (cpu && !needed.empty() && ranged != ranged_.end()) {
        pinned_.push_back(needed);
        ranged_.erase(ranged);
        continue;
      }
      if (cpu && !needed.empty() && find_input(needed) != nullptr && !listed(pinned_, needed)) {
        if (auto range = run_time_size_range(*find_input(needed)))
          ranged_.emplace_back(needed, *range);
        else
          pinned_.push_back(needed);
        continue;
      }
      // Any other failure while inputs are taken as sizes (an op that cannot take them, a Reshape
      // to them): pin the latest one instead. Each input moves once, so this ends.
      if (cpu && !ranged_.empty()) {
        pinned_.push_back(ranged_.back().first);
        ranged_.pop_back();
        continue;
      }
      throw;
    }
    kiln_plan* plan = nullptr;
    kiln_status status = kiln_plan_load_buffer(bytes.data(), bytes.size(), &plan);
    if (status != KILN_OK) throw_c_api_error("loading the compiled plan", status);
    plans_.emplace(key, plan);
    return plan;
  }
}

std::vector<std::pair<std::string, Tensor>> ViaPlanRunner::run(const std::vector<std::pair<std::string, Tensor>>& inputs) {
  kiln_plan* plan = plan_for(inputs);

  // Inputs: each tensor's bytes, named, in the caller's order (the C API matches them by name).
  std::vector<std::string> input_bytes(inputs.size());
  std::vector<kiln_tensor> input_views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& tensor = inputs[i].second;
    std::optional<kiln_dtype> dtype = plan::plan_dtype_of(tensor.dtype());
    if (!dtype)
      throw UserError(str_cat("unsupported: input '", inputs[i].first, "' is ", scalar_type_name(tensor.dtype()),
                              ", which a plan cannot hold"));
    input_bytes[i].resize(static_cast<size_t>(tensor.numel()) * scalar_type_size(tensor.dtype()));
    tensor.copy_to(input_bytes[i].data(), input_bytes[i].size());
    input_views.push_back({inputs[i].first.c_str(), *dtype, tensor.shape().size(), tensor.shape().data(),
                           input_bytes[i].data(), input_bytes[i].size()});
  }

  // Outputs: buffers sized from the plan's own description of each output (a symbolic plan's
  // shapes computed for these inputs).
  size_t output_count = kiln_plan_output_count(plan);
  std::vector<std::string> output_bytes(output_count);
  std::vector<kiln_tensor> output_views;
  std::vector<std::pair<std::string, std::pair<ScalarType, Shape>>> described;
  for (size_t i = 0; i < output_count; ++i) {
    const char* name = nullptr;
    kiln_dtype dtype{};
    size_t rank = 0;
    const int64_t* shape = nullptr;
    kiln_status status = kiln_plan_output_info(plan, i, &name, &dtype, &rank, &shape);
    if (status != KILN_OK) throw_c_api_error(str_cat("describing output ", i), status);
    std::optional<ScalarType> type = plan::scalar_type_of_plan_dtype(dtype);
    if (!type) throw UserError(str_cat("output '", name, "' has a dtype (", static_cast<int>(dtype), ") kiln does not know"));
    Shape dims(shape, shape + rank);
    // A symbolic plan (stage 4 compiles one per model) computes its output shapes from the inputs'.
    if (kiln_plan_variable_count(plan) > 0) {
      status = kiln_plan_output_shape(plan, input_views.data(), input_views.size(), i, dims.data(), rank, nullptr);
      if (status != KILN_OK) throw_c_api_error(str_cat("computing the shape of output '", name, "'"), status);
    }
    size_t count = 1;
    for (int64_t size : dims) count *= static_cast<size_t>(size);
    output_bytes[i].resize(count * kiln_dtype_size(dtype));
    described.push_back({name, {*type, dims}});
  }
  for (size_t i = 0; i < output_count; ++i) {
    const Shape& dims = described[i].second.second;
    output_views.push_back({described[i].first.c_str(), *plan::plan_dtype_of(described[i].second.first), dims.size(),
                            dims.data(), output_bytes[i].data(), output_bytes[i].size()});
  }

  // Every output's shape comes back from the run: an output whose shape the run decides (a NonZero
  // count) was given a buffer at its upper bound (kiln_plan_output_shape), and holds its real shape
  // row-major from the start.
  size_t rank_sum = 0;
  for (const auto& entry : described) rank_sum += entry.second.second.size();
  std::vector<int64_t> shapes(rank_sum);
  kiln_run_options run_options;
  kiln_run_options_init(&run_options);
  run_options.output_shapes = shapes.data();
  kiln_status status = kiln_plan_run_with_options(plan, input_views.data(), input_views.size(), output_views.data(),
                                                  output_views.size(), &run_options);
  if (status != KILN_OK) throw_c_api_error("running the plan", status);

  std::vector<std::pair<std::string, Tensor>> outputs;
  size_t at = 0;
  for (size_t i = 0; i < output_count; ++i) {
    size_t rank = described[i].second.second.size();
    Shape shape(shapes.begin() + static_cast<std::ptrdiff_t>(at), shapes.begin() + static_cast<std::ptrdiff_t>(at + rank));
    at += rank;
    outputs.emplace_back(described[i].first, Tensor::from_data(output_bytes[i].data(), shape, described[i].second.first));
  }
  return outputs;
}

}  // namespace kiln::tools
