// C shims of kiln.h for plans: argument checks, then the runtime (src/plan/, src/runtime/cpu/);
// every exception is caught here and becomes a kiln_status plus a per-thread message.
#include <exception>
#include <new>
#include <string>

#include "kiln/kiln.h"
#include "runtime/cpu/plan_runner.h"

struct kiln_plan {
  explicit kiln_plan(kiln::PlanBytes bytes) : runner(std::move(bytes)) {}
  kiln::PlanRunner runner;
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

}  // namespace

extern "C" {

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
  return guarded("kiln_plan_load_file", [&] { *out_plan = new kiln_plan(kiln::PlanBytes::map_file(path)); });
}

kiln_status kiln_plan_load_buffer(const void* data, size_t size, kiln_plan** out_plan) {
  if (data == nullptr) return null_argument("kiln_plan_load_buffer", "data");
  if (out_plan == nullptr) return null_argument("kiln_plan_load_buffer", "out_plan");
  return guarded("kiln_plan_load_buffer", [&] { *out_plan = new kiln_plan(kiln::PlanBytes::copy_buffer(data, size)); });
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
