// The entry points Triton calls in libtriton_kiln.so: backend, model and instance life cycle and
// execution. Each turns exceptions into a TRITONSERVER_Error, so nothing escapes into the server.
#include <algorithm>
#include <memory>
#include <new>
#include <string>
#include <thread>

#include "execute.h"
#include "json.h"
#include "model_config.h"
#include "model_state.h"
#include "plan_source.h"
#include "triton_status.h"

namespace kiln::serving {
namespace {

template <typename Body>
TRITONSERVER_Error* guarded(const char* where, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return error(TRITONSERVER_ERROR_UNAVAILABLE, std::string("kiln backend: out of memory in ") + where);
  } catch (const std::exception& exception) {
    return error(TRITONSERVER_ERROR_INTERNAL, std::string("kiln backend: ") + where + ": " + exception.what());
  }
}

TRITONSERVER_Error* read_config(TRITONBACKEND_Model* model, Json* out) {
  TRITONSERVER_Message* message = nullptr;
  KILN_TRITON_TRY(TRITONBACKEND_ModelConfig(model, 1, &message));
  const char* text = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* failure = TRITONSERVER_MessageSerializeToJson(message, &text, &size);
  std::string why;
  std::optional<Json> parsed;
  if (!failure) parsed = Json::parse(std::string_view(text, size), &why);
  TRITONSERVER_MessageDelete(message);
  if (failure) return failure;
  if (!parsed) return error(TRITONSERVER_ERROR_INTERNAL, "kiln backend: the server's model config is not JSON: " + why);
  *out = std::move(*parsed);
  return nullptr;
}

TRITONSERVER_Error* write_config(TRITONBACKEND_Model* model, const Json& config) {
  std::string text = config.dump();
  TRITONSERVER_Message* message = nullptr;
  KILN_TRITON_TRY(TRITONSERVER_MessageNewFromSerializedJson(&message, text.data(), text.size()));
  TRITONSERVER_Error* failure = TRITONBACKEND_ModelSetConfig(model, 1, message);
  TRITONSERVER_MessageDelete(message);
  return failure;
}

TRITONSERVER_Error* initialize_model(TRITONBACKEND_Model* model) {
  auto state = std::make_unique<ModelState>();
  const char* name = nullptr;
  KILN_TRITON_TRY(TRITONBACKEND_ModelName(model, &name));
  state->name = name;
  KILN_TRITON_TRY(TRITONBACKEND_ModelVersion(model, &state->version));
  TRITONBACKEND_ArtifactType artifact{};
  const char* location = nullptr;
  KILN_TRITON_TRY(TRITONBACKEND_ModelRepository(model, &artifact, &location));
  if (artifact != TRITONBACKEND_ARTIFACT_FILESYSTEM)
    return error(TRITONSERVER_ERROR_UNSUPPORTED, "kiln backend: unsupported: a model repository not on a file system");

  Json config;
  KILN_TRITON_TRY(read_config(model, &config));
  BackendParameters parameters;
  KILN_TRITON_TRY(read_parameters(config, &parameters));
  KILN_TRITON_TRY(read_instance_count(config, &state->instance_count));
  state->threads_per_instance = parameters.threads;

  PlanRequest request;
  request.version_directory = std::string(location) + "/" + std::to_string(state->version);
  if (const Json* filename = config.find("default_model_filename")) request.default_model_filename = filename->text();
  request.shapes = parameters.shapes;
  request.model_name = state->name;
  kiln_plan* plan = nullptr;
  std::string description;
  KILN_TRITON_TRY(load_plan(request, &plan, &description));
  state->plan.reset(plan);
  KILN_TRITON_TRY(read_interface(plan, &state->interface));

  bool auto_complete = false;
  KILN_TRITON_TRY(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete));
  bool changed = false;
  KILN_TRITON_TRY(complete_config(&config, state->interface, auto_complete, &state->max_batch_size, &changed));
  if (changed) KILN_TRITON_TRY(write_config(model, config));

  log(TRITONSERVER_LOG_INFO, "kiln: model '" + state->name + "' version " + std::to_string(state->version) +
                                 ": " + description + ", max_batch_size " + std::to_string(state->max_batch_size) +
                                 ", " + std::to_string(state->instance_count) + " instance(s)");
  KILN_TRITON_TRY(TRITONBACKEND_ModelSetState(model, state.get()));
  state.release();  // owned by the server until TRITONBACKEND_ModelFinalize
  return nullptr;
}

TRITONSERVER_Error* initialize_instance(TRITONBACKEND_ModelInstance* instance) {
  TRITONSERVER_InstanceGroupKind kind{};
  KILN_TRITON_TRY(TRITONBACKEND_ModelInstanceKind(instance, &kind));
  if (kind != TRITONSERVER_INSTANCEGROUPKIND_CPU)
    return error(TRITONSERVER_ERROR_UNSUPPORTED,
                 "kiln backend: unsupported: instances of a kind other than KIND_CPU (KIND_GPU is not implemented)");
  TRITONBACKEND_Model* model = nullptr;
  KILN_TRITON_TRY(TRITONBACKEND_ModelInstanceModel(instance, &model));
  void* model_state = nullptr;
  KILN_TRITON_TRY(TRITONBACKEND_ModelState(model, &model_state));
  auto state = std::make_unique<InstanceState>();
  state->model = static_cast<ModelState*>(model_state);
  state->instance = instance;
  const char* name = nullptr;
  KILN_TRITON_TRY(TRITONBACKEND_ModelInstanceName(instance, &name));
  state->name = name;
  kiln_run_options_init(&state->run_options);
  // Instances share the cores: by default each takes its share, so N instances running at once do
  // not oversubscribe the machine.
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const ModelState& model_info = *state->model;
  state->run_options.thread_count = model_info.threads_per_instance > 0
                                        ? model_info.threads_per_instance
                                        : std::max(1, cores / model_info.instance_count);
  state->input_staging.resize(model_info.interface.inputs.size());
  state->output_staging.resize(model_info.interface.outputs.size());
  log(TRITONSERVER_LOG_INFO, "kiln: instance '" + state->name + "': " +
                                 std::to_string(state->run_options.thread_count) + " thread(s)");
  KILN_TRITON_TRY(TRITONBACKEND_ModelInstanceSetState(instance, state.get()));
  state.release();  // owned by the server until TRITONBACKEND_ModelInstanceFinalize
  return nullptr;
}

}  // namespace
}  // namespace kiln::serving

using namespace kiln::serving;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return guarded("TRITONBACKEND_Initialize", [&]() -> TRITONSERVER_Error* {
    uint32_t major = 0, minor = 0;
    KILN_TRITON_TRY(TRITONBACKEND_ApiVersion(&major, &minor));
    if (major != KILN_TRITON_API_MAJOR || minor < KILN_TRITON_API_MINOR)
      return error(TRITONSERVER_ERROR_UNSUPPORTED,
                   "kiln backend: unsupported: this server's backend API is " + std::to_string(major) + "." +
                       std::to_string(minor) + "; libtriton_kiln needs " + std::to_string(KILN_TRITON_API_MAJOR) +
                       ".x with x >= " + std::to_string(KILN_TRITON_API_MINOR));
    const char* name = nullptr;
    KILN_TRITON_TRY(TRITONBACKEND_BackendName(backend, &name));
    log(TRITONSERVER_LOG_INFO, std::string("kiln: backend '") + name + "' with libkiln " + kiln_version() +
                                   " (backend API " + std::to_string(major) + "." + std::to_string(minor) + ")");
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return guarded("TRITONBACKEND_ModelInitialize", [&] { return initialize_model(model); });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  KILN_TRITON_TRY(TRITONBACKEND_ModelState(model, &state));
  delete static_cast<ModelState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return guarded("TRITONBACKEND_ModelInstanceInitialize", [&] { return initialize_instance(instance); });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  KILN_TRITON_TRY(TRITONBACKEND_ModelInstanceState(instance, &state));
  delete static_cast<InstanceState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests, uint32_t request_count) {
  void* state = nullptr;
  KILN_TRITON_TRY(TRITONBACKEND_ModelInstanceState(instance, &state));
  // execute_requests answers and releases every request itself, errors included, and catches what
  // its steps throw; only its own bookkeeping (out of memory) can throw past it, and an exception
  // must not unwind into the server.
  try {
    execute_requests(*static_cast<InstanceState*>(state), requests, request_count);
  } catch (const std::exception& exception) {
    log(TRITONSERVER_LOG_ERROR, std::string("kiln: execution failed: ") + exception.what());
  }
  return nullptr;
}

}  // extern "C"
