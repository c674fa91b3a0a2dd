// C shims of kiln.h for plans: argument checks, then the runtime (src/plan/, src/runtime/cpu/);
// every exception is caught here and becomes a kiln_status plus a per-thread message.
#include <atomic>
#include <cstring>
#include <exception>
#include <algorithm>
#include <new>
#include <string>

#include "error_bridge.h"
#include "kiln/kiln.h"
#include "runtime/cpu/plan_runner.h"
#include "runtime/device_plan.h"
#include "support/limits.h"

struct kiln_plan {
  kiln_plan(kiln::PlanBytes bytes, const kiln::PlanRunnerOptions& options) : runner(std::move(bytes), options) {}
  kiln::PlanRunner runner;
};

struct kiln_cancel {
  std::atomic<int> requested{0};
};

namespace {

// One message per thread: threads sharing a plan never read each other's errors.
thread_local std::string last_error;

kiln_status fail(kiln_status status, const std::string& message) {
  try {
    last_error = message;
  } catch (...) {
    // No memory for the message: the status still says what happened.
  }
  return status;
}

template <class Body>
kiln_status guarded(const char* function, Body&& body) {
  try {
    last_error.clear();
    body();
    return KILN_OK;
  } catch (const kiln::PlanError& error) {
    return fail(error.status(), error.what());
  } catch (const std::bad_alloc&) {
    return fail(KILN_ERROR_OUT_OF_MEMORY, std::string(function) + ": out of memory");
  } catch (const std::exception& error) {
    return fail(KILN_ERROR_INTERNAL, std::string(function) + ": internal error: " + error.what());
  } catch (...) {
    return fail(KILN_ERROR_INTERNAL, std::string(function) + ": internal error (unknown exception)");
  }
}

kiln_status null_argument(const char* function, const char* argument) {
  return fail(KILN_ERROR_INVALID_ARGUMENT, std::string(function) + ": " + argument + " is NULL");
}

kiln_status value_info(const char* function, const kiln_plan* plan, size_t index, bool output, const char** out_name,
                       kiln_dtype* out_dtype, size_t* out_rank, const int64_t** out_shape) {
  if (plan == nullptr) return null_argument(function, "plan");
  const auto& values = output ? plan->runner.outputs() : plan->runner.inputs();
  if (index >= values.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT, std::string(function) + ": index " + std::to_string(index) +
                                                 " is out of range (the plan has " + std::to_string(values.size()) +
                                                 (output ? " output" : " input") + (values.size() == 1 ? ")" : "s)"));
  const kiln::PlanValue& value = values[index];
  if (out_name) *out_name = value.name.c_str();
  if (out_dtype) *out_dtype = value.dtype;
  if (out_rank) *out_rank = value.shape.size();
  if (out_shape) *out_shape = value.shape.data();
  last_error.clear();
  return KILN_OK;
}

kiln_status value_info_v2(const char* function, const kiln_plan* plan, size_t index, bool output,
                          const char** out_name, kiln_dtype* out_dtype, size_t* out_rank, const int64_t** out_shape,
                          const char* const** out_dims, const int64_t** out_variables) {
  kiln_status status = value_info(function, plan, index, output, out_name, out_dtype, out_rank, out_shape);
  if (status != KILN_OK) return status;
  const kiln::PlanShapes& shapes = plan->runner.shapes();
  const kiln::PlanShapes::DimArrays& arrays = output ? shapes.output_arrays(index) : shapes.input_arrays(index);
  if (out_dims) *out_dims = arrays.texts.data();
  if (out_variables) *out_variables = arrays.variables.data();
  return KILN_OK;
}

// Copies the first `size` bytes of a caller's options struct over the defaults, so that a caller
// built against an older, shorter struct gets defaults for the fields it does not know.
template <class Options>
bool read_options(const Options* given, Options& options, const char* function) {
  if (given == nullptr) return true;
  if (given->size == 0) {
    fail(KILN_ERROR_INVALID_ARGUMENT,
         std::string(function) + ": options->size is 0 (initialise the options with their _init function)");
    return false;
  }
  std::memcpy(&options, given, std::min(given->size, sizeof(Options)));
  options.size = sizeof(Options);
  return true;
}

kiln_status load(const char* function, const kiln_plan_options* given, kiln_plan** out_plan,
                 kiln::PlanBytes (*bytes)(const void*, size_t), const void* data, size_t size) {
  kiln_plan_options options;
  kiln_plan_options_init(&options);
  if (!read_options(given, options, function)) return KILN_ERROR_INVALID_ARGUMENT;
  if ((options.allocator.alloc == nullptr) != (options.allocator.free == nullptr))
    return fail(KILN_ERROR_INVALID_ARGUMENT,
                std::string(function) + ": options->allocator needs both alloc and free, or neither");
  if (options.thread_count < 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT, std::string(function) + ": options->thread_count is negative (" +
                                                 std::to_string(options.thread_count) + ")");
  kiln::PlanRunnerOptions runner_options;
  runner_options.allocator = options.allocator;
  runner_options.log = options.log;
  runner_options.log_user_data = options.log_user_data;
  runner_options.log_level = options.log_level;
  runner_options.thread_count = options.thread_count;
  runner_options.parallel_for = options.parallel_for;
  runner_options.parallel_for_user_data = options.parallel_for_user_data;
  runner_options.max_memory_bytes = options.max_memory_bytes;
  return guarded(function, [&] { *out_plan = new kiln_plan(bytes(data, size), runner_options); });
}

kiln::PlanBytes map_path(const void* path, size_t) { return kiln::PlanBytes::map_file(static_cast<const char*>(path)); }
kiln::PlanBytes copy_bytes(const void* data, size_t size) { return kiln::PlanBytes::copy_buffer(data, size); }

}  // namespace

extern "C" {

kiln_status kiln_private_set_error_message(kiln_status status, const char* message) {
  try {
    if (message == nullptr) last_error.clear();
    else last_error = message;
  } catch (...) {
  }
  return status;
}

const char* kiln_status_string(kiln_status status) {
  switch (status) {
    case KILN_OK: return "KILN_OK";
    case KILN_ERROR_INVALID_ARGUMENT: return "KILN_ERROR_INVALID_ARGUMENT";
    case KILN_ERROR_IO: return "KILN_ERROR_IO";
    case KILN_ERROR_INVALID_PLAN: return "KILN_ERROR_INVALID_PLAN";
    case KILN_ERROR_UNSUPPORTED_VERSION: return "KILN_ERROR_UNSUPPORTED_VERSION";
    case KILN_ERROR_UNSUPPORTED_TARGET: return "KILN_ERROR_UNSUPPORTED_TARGET";
    case KILN_ERROR_OUT_OF_MEMORY: return "KILN_ERROR_OUT_OF_MEMORY";
    case KILN_ERROR_INTERNAL: return "KILN_ERROR_INTERNAL";
    case KILN_ERROR_CANCELLED: return "KILN_ERROR_CANCELLED";
    case KILN_ERROR_INVALID_MODEL: return "KILN_ERROR_INVALID_MODEL";
  }
  return "unknown status";
}

const char* kiln_error_message(void) { return last_error.c_str(); }

const char* kiln_dtype_name(kiln_dtype dtype) {
  switch (dtype) {
    case KILN_DTYPE_BOOL: return "bool";
    case KILN_DTYPE_INT8: return "int8";
    case KILN_DTYPE_INT16: return "int16";
    case KILN_DTYPE_INT32: return "int32";
    case KILN_DTYPE_INT64: return "int64";
    case KILN_DTYPE_UINT8: return "uint8";
    case KILN_DTYPE_UINT16: return "uint16";
    case KILN_DTYPE_UINT32: return "uint32";
    case KILN_DTYPE_UINT64: return "uint64";
    case KILN_DTYPE_FLOAT16: return "float16";
    case KILN_DTYPE_BFLOAT16: return "bfloat16";
    case KILN_DTYPE_FLOAT32: return "float32";
    case KILN_DTYPE_FLOAT64: return "float64";
  }
  return "unknown";
}

size_t kiln_dtype_size(kiln_dtype dtype) {
  switch (dtype) {
    case KILN_DTYPE_BOOL: case KILN_DTYPE_INT8: case KILN_DTYPE_UINT8: return 1;
    case KILN_DTYPE_INT16: case KILN_DTYPE_UINT16: case KILN_DTYPE_FLOAT16: case KILN_DTYPE_BFLOAT16: return 2;
    case KILN_DTYPE_INT32: case KILN_DTYPE_UINT32: case KILN_DTYPE_FLOAT32: return 4;
    case KILN_DTYPE_INT64: case KILN_DTYPE_UINT64: case KILN_DTYPE_FLOAT64: return 8;
  }
  return 0;
}

kiln_status kiln_plan_load_file(const char* path, kiln_plan** out_plan) {
  if (path == nullptr) return null_argument("kiln_plan_load_file", "path");
  if (out_plan == nullptr) return null_argument("kiln_plan_load_file", "out_plan");
  return load("kiln_plan_load_file", nullptr, out_plan, map_path, path, 0);
}

kiln_status kiln_plan_load_buffer(const void* data, size_t size, kiln_plan** out_plan) {
  if (data == nullptr) return null_argument("kiln_plan_load_buffer", "data");
  if (out_plan == nullptr) return null_argument("kiln_plan_load_buffer", "out_plan");
  return load("kiln_plan_load_buffer", nullptr, out_plan, copy_bytes, data, size);
}

void kiln_plan_options_init(kiln_plan_options* options) {
  if (options == nullptr) return;
  *options = kiln_plan_options{};
  options->size = sizeof(kiln_plan_options);
  options->log_level = KILN_LOG_INFO;
}

kiln_status kiln_plan_load_file_v2(const char* path, const kiln_plan_options* options, kiln_plan** out_plan) {
  if (path == nullptr) return null_argument("kiln_plan_load_file_v2", "path");
  if (out_plan == nullptr) return null_argument("kiln_plan_load_file_v2", "out_plan");
  return load("kiln_plan_load_file_v2", options, out_plan, map_path, path, 0);
}

kiln_status kiln_plan_load_buffer_v2(const void* data, size_t size, const kiln_plan_options* options,
                                     kiln_plan** out_plan) {
  if (data == nullptr) return null_argument("kiln_plan_load_buffer_v2", "data");
  if (out_plan == nullptr) return null_argument("kiln_plan_load_buffer_v2", "out_plan");
  return load("kiln_plan_load_buffer_v2", options, out_plan, copy_bytes, data, size);
}

kiln_status kiln_cancel_create(kiln_cancel** out_cancel) {
  if (out_cancel == nullptr) return null_argument("kiln_cancel_create", "out_cancel");
  return guarded("kiln_cancel_create", [&] { *out_cancel = new kiln_cancel; });
}

void kiln_cancel_free(kiln_cancel* cancel) { delete cancel; }

void kiln_cancel_request(kiln_cancel* cancel) {
  if (cancel != nullptr) cancel->requested.store(1, std::memory_order_release);
}

void kiln_cancel_reset(kiln_cancel* cancel) {
  if (cancel != nullptr) cancel->requested.store(0, std::memory_order_release);
}

int kiln_cancel_is_requested(const kiln_cancel* cancel) {
  return cancel != nullptr && cancel->requested.load(std::memory_order_acquire) != 0;
}

void kiln_run_options_init(kiln_run_options* options) {
  if (options == nullptr) return;
  *options = kiln_run_options{};
  options->size = sizeof(kiln_run_options);
}

kiln_status kiln_plan_run_with_options(const kiln_plan* plan, const kiln_tensor* inputs, size_t input_count,
                                       const kiln_tensor* outputs, size_t output_count,
                                       const kiln_run_options* given) {
  if (plan == nullptr) return null_argument("kiln_plan_run_with_options", "plan");
  kiln_run_options options;
  kiln_run_options_init(&options);
  if (!read_options(given, options, "kiln_plan_run_with_options")) return KILN_ERROR_INVALID_ARGUMENT;
  if (options.thread_count < 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_run_with_options: options->thread_count is negative (" +
                                                 std::to_string(options.thread_count) + ")");
  kiln::RunSettings settings;
  settings.thread_count = options.thread_count;
  settings.cancel = options.cancel ? &options.cancel->requested : nullptr;
  settings.tensors_on_device = options.tensors_on_device != 0;
  settings.queue = options.queue;
  settings.output_shapes = options.output_shapes;
  return guarded("kiln_plan_run_with_options",
                 [&] { plan->runner.run(inputs, input_count, outputs, output_count, settings); });
}

void kiln_plan_free(kiln_plan* plan) { delete plan; }

size_t kiln_plan_input_count(const kiln_plan* plan) { return plan ? plan->runner.inputs().size() : 0; }
size_t kiln_plan_output_count(const kiln_plan* plan) { return plan ? plan->runner.outputs().size() : 0; }

kiln_status kiln_plan_input_info(const kiln_plan* plan, size_t index, const char** out_name, kiln_dtype* out_dtype,
                                 size_t* out_rank, const int64_t** out_shape) {
  return value_info("kiln_plan_input_info", plan, index, false, out_name, out_dtype, out_rank, out_shape);
}

kiln_status kiln_plan_output_info(const kiln_plan* plan, size_t index, const char** out_name, kiln_dtype* out_dtype,
                                  size_t* out_rank, const int64_t** out_shape) {
  return value_info("kiln_plan_output_info", plan, index, true, out_name, out_dtype, out_rank, out_shape);
}

size_t kiln_plan_variable_count(const kiln_plan* plan) { return plan ? plan->runner.shapes().variables().size() : 0; }

kiln_status kiln_plan_variable_info(const kiln_plan* plan, size_t index, const char** out_name, int64_t* out_min,
                                    int64_t* out_max) {
  if (plan == nullptr) return null_argument("kiln_plan_variable_info", "plan");
  const auto& variables = plan->runner.shapes().variables();
  if (index >= variables.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_variable_info: index " + std::to_string(index) +
                                                 " is out of range (the plan has " + std::to_string(variables.size()) +
                                                 (variables.size() == 1 ? " variable)" : " variables)"));
  if (out_name) *out_name = variables[index].name.c_str();
  if (out_min) *out_min = variables[index].min;
  if (out_max) *out_max = variables[index].max;
  last_error.clear();
  return KILN_OK;
}

kiln_status kiln_plan_variable_source(const kiln_plan* plan, size_t index, kiln_variable_source* out_source) {
  if (plan == nullptr) return null_argument("kiln_plan_variable_source", "plan");
  if (out_source == nullptr) return null_argument("kiln_plan_variable_source", "out_source");
  const auto& variables = plan->runner.shapes().variables();
  if (index >= variables.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_variable_source: index " + std::to_string(index) +
                                                 " is out of range (the plan has " + std::to_string(variables.size()) +
                                                 (variables.size() == 1 ? " variable)" : " variables)"));
  *out_source = plan->runner.shapes().run_bound(index) ? KILN_VARIABLE_FROM_RUN : KILN_VARIABLE_FROM_SHAPES;
  last_error.clear();
  return KILN_OK;
}

kiln_status kiln_plan_input_info_v2(const kiln_plan* plan, size_t index, const char** out_name, kiln_dtype* out_dtype,
                                    size_t* out_rank, const int64_t** out_shape, const char* const** out_dims,
                                    const int64_t** out_variables) {
  return value_info_v2("kiln_plan_input_info_v2", plan, index, false, out_name, out_dtype, out_rank, out_shape,
                       out_dims, out_variables);
}

kiln_status kiln_plan_output_info_v2(const kiln_plan* plan, size_t index, const char** out_name, kiln_dtype* out_dtype,
                                     size_t* out_rank, const int64_t** out_shape, const char* const** out_dims,
                                     const int64_t** out_variables) {
  return value_info_v2("kiln_plan_output_info_v2", plan, index, true, out_name, out_dtype, out_rank, out_shape,
                       out_dims, out_variables);
}

kiln_status kiln_plan_output_shape(const kiln_plan* plan, const kiln_tensor* inputs, size_t input_count,
                                   size_t output_index, int64_t* out_shape, size_t capacity, size_t* out_rank) {
  const char* function = "kiln_plan_output_shape";
  if (plan == nullptr) return null_argument(function, "plan");
  const auto& outputs = plan->runner.outputs();
  if (output_index >= outputs.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT, std::string(function) + ": output_index " + std::to_string(output_index) +
                                                 " is out of range (the plan has " + std::to_string(outputs.size()) +
                                                 (outputs.size() == 1 ? " output)" : " outputs)"));
  size_t rank = outputs[output_index].shape.size();
  if (out_shape == nullptr && capacity > 0) return null_argument(function, "out_shape");
  if (capacity < rank)
    return fail(KILN_ERROR_INVALID_ARGUMENT, std::string(function) + ": capacity " + std::to_string(capacity) +
                                                 " is less than the rank of output '" + outputs[output_index].name +
                                                 "' (" + std::to_string(rank) + ")");
  return guarded(function, [&] {
    // Computed aside, so that out_shape is untouched on an error.
    int64_t shape[kiln::limits::kMaxTensorRank];
    plan->runner.output_shape(inputs, input_count, output_index, shape, function);
    std::copy(shape, shape + rank, out_shape);
    if (out_rank) *out_rank = rank;
  });
}

kiln_status kiln_plan_run(const kiln_plan* plan, const kiln_tensor* inputs, size_t input_count,
                          const kiln_tensor* outputs, size_t output_count) {
  if (plan == nullptr) return null_argument("kiln_plan_run", "plan");
  return guarded("kiln_plan_run", [&] { plan->runner.run(inputs, input_count, outputs, output_count); });
}

kiln_status kiln_plan_describe(const kiln_plan* plan, const char** out_target_triple, const char** out_cpu_name,
                               uint64_t* out_arena_bytes, uint64_t* out_weights_bytes, size_t* out_kernel_count) {
  if (plan == nullptr) return null_argument("kiln_plan_describe", "plan");
  const auto& meta = plan->runner.metadata();
  if (out_target_triple) *out_target_triple = meta.target_triple()->c_str();
  if (out_cpu_name) *out_cpu_name = meta.cpu_name()->c_str();
  if (out_arena_bytes) *out_arena_bytes = static_cast<uint64_t>(meta.arena_bytes());
  if (out_weights_bytes) *out_weights_bytes = plan->runner.weights_bytes();
  if (out_kernel_count) *out_kernel_count = meta.kernels()->size();
  last_error.clear();
  return KILN_OK;
}

kiln_status kiln_plan_device(const kiln_plan* plan, const char** out_device, void** out_context, void** out_queue) {
  if (plan == nullptr) return null_argument("kiln_plan_device", "plan");
  const kiln::DevicePlan* device = plan->runner.device_plan();
  if (out_device) *out_device = device != nullptr ? device->device_name().c_str() : "cpu";
  if (out_context) *out_context = device != nullptr ? device->native_context() : nullptr;
  if (out_queue) *out_queue = device != nullptr ? device->native_queue() : nullptr;
  last_error.clear();
  return KILN_OK;
}

kiln_status kiln_plan_kernel_info(const kiln_plan* plan, size_t index, const char** out_symbol,
                                  int64_t* out_parallel_extent) {
  if (plan == nullptr) return null_argument("kiln_plan_kernel_info", "plan");
  const auto& kernels = *plan->runner.metadata().kernels();
  if (index >= kernels.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_kernel_info: index " + std::to_string(index) +
                                                 " is out of range (the plan has " + std::to_string(kernels.size()) +
                                                 " kernels)");
  const auto* kernel = kernels.Get(static_cast<flatbuffers::uoffset_t>(index));
  if (out_symbol) *out_symbol = kernel->symbol()->c_str();
  if (out_parallel_extent) *out_parallel_extent = kernel->parallel_extent();
  last_error.clear();
  return KILN_OK;
}

}  // extern "C"
