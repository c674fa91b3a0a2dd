// Auto-completion and checking of a model's config against its plan (model_config.h).
#include "model_config.h"

#include <algorithm>
#include <climits>
#include <sstream>

#include "dtype_map.h"
#include "triton_status.h"

namespace kiln::serving {
namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "," : "") + std::to_string(dims[i]);
  return text + "]";
}

TRITONSERVER_Error* config_error(const std::string& message) {
  return error(TRITONSERVER_ERROR_INVALID_ARG, "kiln backend config: " + message);
}

// The dims Triton shows for a plan tensor: without the batch dimension when batching.
std::vector<int64_t> config_dims(const TensorSpec& tensor, int64_t max_batch_size) {
  return max_batch_size > 0 ? std::vector<int64_t>(tensor.shape.begin() + 1, tensor.shape.end()) : tensor.shape;
}

Json tensor_entry(const TensorSpec& tensor, int64_t max_batch_size) {
  Json entry = Json::object();
  entry.set("name", Json::string(tensor.name));
  entry.set("data_type", Json::string(config_dtype_name(tensor.dtype)));
  Json dims = Json::array();
  for (int64_t dim : config_dims(tensor, max_batch_size)) dims.push(Json::number(dim));
  entry.set("dims", std::move(dims));
  return entry;
}

bool has_entries(const Json& config, const char* key) {
  const Json* list = config.find(key);
  return list && list->is_array() && !list->items().empty();
}

// Checks the config's `input` or `output` list against the plan's tensors.
TRITONSERVER_Error* check_tensors(const Json& config, const char* key, const std::vector<TensorSpec>& tensors,
                                  int64_t max_batch_size, bool every_one_needed) {
  const Json* list = config.find(key);
  std::vector<std::string> named;
  if (list && list->is_array()) {
    for (const Json& entry : list->items()) {
      const Json* name = entry.find("name");
      std::string tensor_name = name ? name->text() : "";
      auto tensor = std::find_if(tensors.begin(), tensors.end(),
                                 [&](const TensorSpec& spec) { return spec.name == tensor_name; });
      if (tensor == tensors.end()) {
        std::string known;
        for (const TensorSpec& spec : tensors) known += (known.empty() ? "'" : ", '") + spec.name + "'";
        return config_error(std::string(key) + " '" + tensor_name + "' is not in the plan (its " + key + "s: " +
                            known + ")");
      }
      named.push_back(tensor_name);
      const Json* dtype = entry.find("data_type");
      std::string expected = config_dtype_name(tensor->dtype);
      if (!dtype || dtype->text() != expected)
        return config_error(std::string(key) + " '" + tensor_name + "' has data_type " +
                            (dtype ? dtype->text() : "(none)") + "; the plan's is " + expected);
      if (entry.find("reshape"))
        return config_error("unsupported: reshape on " + std::string(key) + " '" + tensor_name + "'");
      std::vector<int64_t> dims;
      if (const Json* list_dims = entry.find("dims"))
        for (const Json& dim : list_dims->items()) dims.push_back(dim.as_int().value_or(INT64_MIN));
      std::vector<int64_t> plan_dims = config_dims(*tensor, max_batch_size);
      bool fits = dims.size() == plan_dims.size();
      for (size_t i = 0; fits && i < dims.size(); ++i)
        fits = plan_dims[i] == -1 ? (dims[i] == -1 || dims[i] >= 0) : dims[i] == plan_dims[i];
      if (!fits)
        return config_error(std::string(key) + " '" + tensor_name + "' has dims " + dims_text(dims) +
                            "; the plan's are " + dims_text(plan_dims) + " (-1: symbolic" +
                            (max_batch_size > 0 ? "; without the batch dimension, as max_batch_size > 0)" : ")"));
    }
  }
  if (every_one_needed)
    for (const TensorSpec& tensor : tensors)
      if (std::find(named.begin(), named.end(), tensor.name) == named.end())
        return config_error("plan " + std::string(key) + " '" + tensor.name + "' is missing from the config");
  return nullptr;
}

TRITONSERVER_Error* read_tensor(const kiln_plan* plan, size_t index, bool input, TensorSpec* out) {
  const char* name = nullptr;
  kiln_dtype dtype{};
  size_t rank = 0;
  const int64_t* shape = nullptr;
  const int64_t* variables = nullptr;
  kiln_status status = input ? kiln_plan_input_info_v2(plan, index, &name, &dtype, &rank, &shape, nullptr, &variables)
                             : kiln_plan_output_info_v2(plan, index, &name, &dtype, &rank, &shape, nullptr, &variables);
  if (status) return kiln_error(status, "cannot read the plan's interface");
  out->name = name;
  out->dtype = dtype;
  out->shape.assign(shape, shape + rank);
  out->variables.assign(variables, variables + rank);
  return nullptr;
}

}  // namespace

TRITONSERVER_Error* read_parameters(const Json& config, BackendParameters* out) {
  const Json* parameters = config.find("parameters");
  if (!parameters || !parameters->is_object()) return nullptr;
  for (size_t i = 0; i < parameters->keys().size(); ++i) {
    const std::string& key = parameters->keys()[i];
    const Json* value = parameters->items()[i].find("string_value");
    std::string text = value ? value->text() : "";
    if (key == "threads") {
      std::optional<int64_t> threads = Json::string(text).as_int();
      if (!threads || *threads < 1 || *threads > 4096)
        return config_error("parameter threads is '" + text + "'; it takes a number of threads from 1 to 4096");
      out->threads = int(*threads);
    } else if (key == "shapes") {
      std::istringstream specs(text);
      for (std::string spec; specs >> spec;) out->shapes.push_back(spec);
    } else {
      // A misspelt key would otherwise be ignored in silence.
      return config_error("unknown parameter '" + key + "' (the kiln backend reads: threads, shapes)");
    }
  }
  return nullptr;
}

TRITONSERVER_Error* read_interface(const kiln_plan* plan, PlanInterface* out) {
  out->inputs.resize(kiln_plan_input_count(plan));
  out->outputs.resize(kiln_plan_output_count(plan));
  for (size_t i = 0; i < out->inputs.size(); ++i) KILN_TRITON_TRY(read_tensor(plan, i, true, &out->inputs[i]));
  for (size_t i = 0; i < out->outputs.size(); ++i) KILN_TRITON_TRY(read_tensor(plan, i, false, &out->outputs[i]));
  out->variables.resize(kiln_plan_variable_count(plan));
  for (size_t i = 0; i < out->variables.size(); ++i) {
    const char* name = nullptr;
    Variable& variable = out->variables[i];
    if (kiln_status status = kiln_plan_variable_info(plan, i, &name, &variable.min, &variable.max))
      return kiln_error(status, "cannot read the plan's variables");
    variable.name = name;
  }
  return nullptr;
}

int64_t batch_variable(const PlanInterface& plan) {
  if (plan.inputs.empty() || plan.inputs[0].shape.empty()) return -1;
  int64_t variable = plan.inputs[0].variables[0];
  if (variable < 0 || plan.variables[size_t(variable)].min > 1) return -1;
  for (const auto* list : {&plan.inputs, &plan.outputs})
    for (const TensorSpec& tensor : *list)
      if (tensor.shape.empty() || tensor.variables[0] != variable) return -1;
  return variable;
}

TRITONSERVER_Error* complete_config(Json* config, const PlanInterface& plan, bool auto_complete,
                                    int64_t* out_max_batch_size, bool* out_changed) {
  *out_changed = false;
  const Json* given = config->find("max_batch_size");
  int64_t max_batch_size = given ? given->as_int().value_or(0) : 0;
  const int64_t batch = batch_variable(plan);
  if (auto_complete) {
    bool inputs_given = has_entries(*config, "input");
    if (!inputs_given && max_batch_size == 0 && batch >= 0) {
      max_batch_size = std::min<int64_t>(plan.variables[size_t(batch)].max, INT32_MAX);
      config->set("max_batch_size", Json::number(max_batch_size));
      *out_changed = true;
    }
    for (const auto& [key, tensors] : {std::pair{"input", &plan.inputs}, std::pair{"output", &plan.outputs}}) {
      if (has_entries(*config, key)) continue;
      Json list = Json::array();
      for (const TensorSpec& tensor : *tensors) list.push(tensor_entry(tensor, max_batch_size > 0 ? 1 : 0));
      config->set(key, std::move(list));
      *out_changed = true;
    }
  }
  if (max_batch_size < 0) return config_error("max_batch_size is " + std::to_string(max_batch_size));
  if (max_batch_size > 0) {
    if (batch < 0)
      return config_error("max_batch_size " + std::to_string(max_batch_size) +
                          " needs a plan whose inputs and outputs all lead with one symbolic batch dimension "
                          "whose range starts at 1 (compile with e.g. --shape batch=1..8); set max_batch_size: 0");
    const Variable& variable = plan.variables[size_t(batch)];
    if (max_batch_size > variable.max)
      return config_error("max_batch_size " + std::to_string(max_batch_size) + " exceeds the plan's range of '" +
                          variable.name + "', " + std::to_string(variable.min) + ".." + std::to_string(variable.max));
  }
  KILN_TRITON_TRY(check_tensors(*config, "input", plan.inputs, max_batch_size, true));
  KILN_TRITON_TRY(check_tensors(*config, "output", plan.outputs, max_batch_size, false));
  *out_max_batch_size = max_batch_size;
  return nullptr;
}

TRITONSERVER_Error* read_instance_count(const Json& config, int* out_count) {
  int count = 0;
  if (const Json* groups = config.find("instance_group"); groups && groups->is_array()) {
    for (const Json& group : groups->items()) {
      const Json* kind = group.find("kind");
      std::string kind_name = kind ? kind->text() : "KIND_CPU";
      if (kind_name != "KIND_CPU" && kind_name != "KIND_AUTO")
        return error(TRITONSERVER_ERROR_UNSUPPORTED,
                     "kiln backend config: unsupported: instance_group kind " + kind_name +
                         " (the kiln backend runs KIND_CPU instances only; serve a CUDA plan through "
                         "libkiln directly)");
      const Json* group_count = group.find("count");
      count += int(group_count ? group_count->as_int().value_or(1) : 1);
    }
  }
  *out_count = std::max(count, 1);
  return nullptr;
}

}  // namespace kiln::serving
