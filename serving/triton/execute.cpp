// execute_requests (execute.h): check, group, run, scatter, report statistics, respond.
#include "execute.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <string>

#include "dtype_map.h"
#include "triton_status.h"

namespace kiln::serving {
namespace {

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

struct Chunk {
  const void* data;
  size_t bytes;
};

// One request's view of one plan input.
struct InputView {
  std::vector<int64_t> shape;
  std::vector<Chunk> chunks;  // Triton may hand an input over in several buffers
  size_t bytes = 0;
};

struct Pending {
  TRITONBACKEND_Request* request = nullptr;
  TRITONBACKEND_Response* response = nullptr;
  TRITONSERVER_Error* error = nullptr;  // set: answered with this error
  std::vector<InputView> inputs;        // per plan input
  std::vector<bool> wanted;             // per plan output: asked for by the request
  int64_t batch = 1;                    // rows it contributes (1 without batching)
  uint64_t compute_start = 0, compute_end = 0;
};

TRITONSERVER_Error* request_error(const ModelState& model, const std::string& message) {
  return error(TRITONSERVER_ERROR_INVALID_ARG, "model '" + model.name + "': " + message);
}

// Reads and checks the request's inputs against the plan (dtype, rank, byte size, memory); the
// plan checks the dimensions themselves when it runs, with its own messages.
TRITONSERVER_Error* read_request(const ModelState& model, Pending* pending) {
  const PlanInterface& plan = model.interface;
  pending->inputs.resize(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const TensorSpec& spec = plan.inputs[i];
    TRITONBACKEND_Input* input = nullptr;
    if (TRITONSERVER_Error* missing = TRITONBACKEND_RequestInput(pending->request, spec.name.c_str(), &input)) {
      TRITONSERVER_ErrorDelete(missing);
      return request_error(model, "missing input '" + spec.name + "'");
    }
    TRITONSERVER_DataType dtype{};
    const int64_t* shape = nullptr;
    uint32_t rank = 0, buffer_count = 0;
    uint64_t byte_size = 0;
    KILN_TRITON_TRY(TRITONBACKEND_InputProperties(input, nullptr, &dtype, &shape, &rank, &byte_size, &buffer_count));
    if (dtype != triton_dtype(spec.dtype))
      return request_error(model, "input '" + spec.name + "' is " + triton_dtype_name(dtype) + "; the plan takes " +
                                      triton_dtype_name(triton_dtype(spec.dtype)));
    InputView& view = pending->inputs[i];
    view.shape.assign(shape, shape + rank);
    if (rank != spec.shape.size())
      return request_error(model, "input '" + spec.name + "' has shape " + shape_text(view.shape) + " of rank " +
                                      std::to_string(rank) + "; the plan takes rank " +
                                      std::to_string(spec.shape.size()) +
                                      (model.max_batch_size > 0 ? " (with the batch dimension first)" : ""));
    size_t elements = 1;
    for (int64_t dim : view.shape) elements *= size_t(dim < 0 ? 0 : dim);
    const size_t expected = elements * kiln_dtype_size(spec.dtype);
    if (byte_size != expected)
      return request_error(model, "input '" + spec.name + "' has " + std::to_string(byte_size) + " bytes; shape " +
                                      shape_text(view.shape) + " of " + triton_dtype_name(dtype) + " needs " +
                                      std::to_string(expected));
    for (uint32_t b = 0; b < buffer_count; ++b) {
      const void* data = nullptr;
      uint64_t bytes = 0;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
      int64_t memory_id = 0;
      KILN_TRITON_TRY(TRITONBACKEND_InputBuffer(input, b, &data, &bytes, &memory, &memory_id));
      if (memory == TRITONSERVER_MEMORY_GPU)
        return error(TRITONSERVER_ERROR_UNSUPPORTED,
                     "model '" + model.name + "': unsupported: input '" + spec.name + "' in GPU memory");
      view.chunks.push_back({data, size_t(bytes)});
    }
    view.bytes = size_t(byte_size);
    if (model.max_batch_size > 0) {
      if (rank == 0) return request_error(model, "input '" + spec.name + "' has no batch dimension");
      if (i == 0) pending->batch = view.shape[0];
      if (view.shape[0] != pending->batch)
        return request_error(model, "input '" + spec.name + "' has batch " + std::to_string(view.shape[0]) +
                                        " but '" + plan.inputs[0].name + "' has " + std::to_string(pending->batch));
      if (pending->batch < 1 || pending->batch > model.max_batch_size)
        return request_error(model, "batch " + std::to_string(pending->batch) + " is outside 1.." +
                                        std::to_string(model.max_batch_size));
    }
  }
  uint32_t output_count = 0;
  KILN_TRITON_TRY(TRITONBACKEND_RequestOutputCount(pending->request, &output_count));
  pending->wanted.assign(plan.outputs.size(), output_count == 0);  // none named: all of them
  for (uint32_t o = 0; o < output_count; ++o) {
    const char* name = nullptr;
    KILN_TRITON_TRY(TRITONBACKEND_RequestOutputName(pending->request, o, &name));
    bool found = false;
    for (size_t p = 0; p < plan.outputs.size(); ++p)
      if (plan.outputs[p].name == name) pending->wanted[p] = found = true;
    if (!found) return request_error(model, std::string("no output named '") + name + "'");
  }
  return nullptr;
}

// Runs one group of requests that agree on every dimension but the batch.
void run_group(InstanceState& instance, std::vector<Pending*>& group, uint64_t exec_start) {
  const ModelState& model = *instance.model;
  const PlanInterface& plan = model.interface;
  const bool batching = model.max_batch_size > 0;
  int64_t rows = 0;
  for (Pending* pending : group) rows += pending->batch;
  const bool alone = group.size() == 1;

  auto fail_all = [&](TRITONSERVER_Error* failure) {
    for (Pending* pending : group)
      pending->error = TRITONSERVER_ErrorNew(TRITONSERVER_ErrorCode(failure), TRITONSERVER_ErrorMessage(failure));
    TRITONSERVER_ErrorDelete(failure);
  };

  // Inputs: a lone request's single buffers are used in place; otherwise gathered in order.
  std::vector<std::vector<int64_t>> input_shapes(plan.inputs.size());
  std::vector<kiln_tensor> inputs(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    input_shapes[i] = group[0]->inputs[i].shape;
    if (batching) input_shapes[i][0] = rows;
    size_t bytes = 0;
    for (Pending* pending : group) bytes += pending->inputs[i].bytes;
    const void* data = nullptr;
    if (alone && group[0]->inputs[i].chunks.size() == 1) {
      data = group[0]->inputs[i].chunks[0].data;
    } else {
      std::byte* gathered = instance.input_staging[i].reserve(bytes);
      size_t offset = 0;
      for (Pending* pending : group)
        for (const Chunk& chunk : pending->inputs[i].chunks) {
          if (chunk.bytes) std::memcpy(gathered + offset, chunk.data, chunk.bytes);
          offset += chunk.bytes;
        }
      data = gathered;
    }
    inputs[i] = {plan.inputs[i].name.c_str(), plan.inputs[i].dtype, input_shapes[i].size(), input_shapes[i].data(),
                 const_cast<void*>(data), bytes};
  }

  // Output shapes at these inputs (kiln checks the inputs here, with its messages).
  std::vector<std::vector<int64_t>> output_shapes(plan.outputs.size());
  std::vector<kiln_tensor> outputs(plan.outputs.size());
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    std::vector<int64_t>& shape = output_shapes[o];
    shape.resize(plan.outputs[o].shape.size());
    size_t rank = 0;
    if (kiln_status status =
            kiln_plan_output_shape(model.plan.get(), inputs.data(), inputs.size(), o, shape.data(), shape.size(), &rank))
      return fail_all(kiln_error(status, "model '" + model.name + "'"));
    size_t bytes = kiln_dtype_size(plan.outputs[o].dtype);
    for (int64_t dim : shape) bytes *= size_t(dim);
    outputs[o] = {plan.outputs[o].name.c_str(), plan.outputs[o].dtype, shape.size(), shape.data(), nullptr, bytes};
  }

  // A lone request's wanted outputs are written straight into its response; the rest to staging.
  std::vector<TRITONBACKEND_Output*> direct(plan.outputs.size(), nullptr);
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    if (alone && group[0]->wanted[o]) {
      TRITONBACKEND_Output* output = nullptr;
      void* buffer = nullptr;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
      int64_t memory_id = 0;
      TRITONSERVER_Error* failure = TRITONBACKEND_ResponseOutput(group[0]->response, &output, outputs[o].name,
                                                                 triton_dtype(outputs[o].dtype), outputs[o].shape,
                                                                 uint32_t(outputs[o].rank));
      if (!failure) failure = TRITONBACKEND_OutputBuffer(output, &buffer, outputs[o].byte_size, &memory, &memory_id);
      if (failure) return fail_all(failure);
      if (memory != TRITONSERVER_MEMORY_GPU) {
        outputs[o].data = buffer;
        direct[o] = output;
        continue;
      }
      return fail_all(error(TRITONSERVER_ERROR_UNSUPPORTED, "unsupported: an output buffer in GPU memory"));
    }
    outputs[o].data = instance.output_staging[o].reserve(outputs[o].byte_size);
  }

  const uint64_t compute_start = now_ns();
  kiln_status status = kiln_plan_run_with_options(model.plan.get(), inputs.data(), inputs.size(), outputs.data(),
                                                  outputs.size(), &instance.run_options);
  const uint64_t compute_end = now_ns();
  for (Pending* pending : group) {
    pending->compute_start = compute_start;
    pending->compute_end = compute_end;
  }
  if (status) return fail_all(kiln_error(status, "model '" + model.name + "'"));

  // Scatter: each request's rows of each wanted output (row-major, so one contiguous slice).
  int64_t row = 0;
  for (Pending* pending : group) {
    for (size_t o = 0; o < plan.outputs.size() && !pending->error; ++o) {
      if (!pending->wanted[o] || direct[o]) continue;
      std::vector<int64_t> shape = output_shapes[o];
      size_t row_bytes = batching && rows > 0 ? outputs[o].byte_size / size_t(rows) : outputs[o].byte_size;
      if (batching) shape[0] = pending->batch;
      size_t bytes = batching ? row_bytes * size_t(pending->batch) : outputs[o].byte_size;
      const std::byte* source = static_cast<const std::byte*>(outputs[o].data) + (batching ? row_bytes * size_t(row) : 0);
      TRITONBACKEND_Output* output = nullptr;
      void* buffer = nullptr;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
      int64_t memory_id = 0;
      TRITONSERVER_Error* failure = TRITONBACKEND_ResponseOutput(pending->response, &output, outputs[o].name,
                                                                 triton_dtype(outputs[o].dtype), shape.data(),
                                                                 uint32_t(shape.size()));
      if (!failure) failure = TRITONBACKEND_OutputBuffer(output, &buffer, bytes, &memory, &memory_id);
      if (!failure && memory == TRITONSERVER_MEMORY_GPU)
        failure = error(TRITONSERVER_ERROR_UNSUPPORTED, "unsupported: an output buffer in GPU memory");
      if (failure) {
        pending->error = failure;
        break;
      }
      if (bytes) std::memcpy(buffer, source, bytes);
    }
    row += pending->batch;
  }
  // One batch statistic per run of the plan: Triton counts executions and batch sizes from these.
  if (TRITONSERVER_Error* failure = TRITONBACKEND_ModelInstanceReportBatchStatistics(
          instance.instance, uint64_t(rows), exec_start, compute_start, compute_end, now_ns()))
    TRITONSERVER_ErrorDelete(failure);
}

// Sends the response (with its error, if any), reports the request's statistics and releases it.
void finish(InstanceState& instance, Pending& pending, uint64_t exec_start) {
  if (pending.response) {
    if (TRITONSERVER_Error* failure =
            TRITONBACKEND_ResponseSend(pending.response, KILN_TRITON_RESPONSE_COMPLETE_FINAL, pending.error)) {
      log(TRITONSERVER_LOG_ERROR, std::string("kiln: cannot send a response: ") + TRITONSERVER_ErrorMessage(failure));
      TRITONSERVER_ErrorDelete(failure);
    }
  }
  if (pending.error) {
    log(TRITONSERVER_LOG_VERBOSE, std::string("kiln: request failed: ") + TRITONSERVER_ErrorMessage(pending.error));
  }
  const uint64_t compute_start = pending.compute_start ? pending.compute_start : exec_start;
  const uint64_t compute_end = pending.compute_end ? pending.compute_end : compute_start;
  if (TRITONSERVER_Error* failure = TRITONBACKEND_ModelInstanceReportStatistics(
          instance.instance, pending.request, pending.error == nullptr, exec_start, compute_start, compute_end, now_ns()))
    TRITONSERVER_ErrorDelete(failure);
  if (pending.error) TRITONSERVER_ErrorDelete(pending.error);
  pending.error = nullptr;
  if (TRITONSERVER_Error* failure = TRITONBACKEND_RequestRelease(pending.request, KILN_TRITON_REQUEST_RELEASE_ALL))
    TRITONSERVER_ErrorDelete(failure);
}

}  // namespace

void execute_requests(InstanceState& instance, TRITONBACKEND_Request** requests, uint32_t request_count) {
  const uint64_t exec_start = now_ns();
  const ModelState& model = *instance.model;
  if (TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_VERBOSE))
    log(TRITONSERVER_LOG_VERBOSE, "kiln: instance '" + instance.name + "' executes " + std::to_string(request_count) +
                                      " request(s)");
  std::vector<Pending> pending(request_count);
  for (uint32_t r = 0; r < request_count; ++r) {
    pending[r].request = requests[r];
    pending[r].compute_start = exec_start;
    if (TRITONSERVER_Error* failure = TRITONBACKEND_ResponseNew(&pending[r].response, requests[r])) {
      pending[r].response = nullptr;  // nothing can be sent; the request is still released
      pending[r].error = failure;
      continue;
    }
    try {
      pending[r].error = read_request(model, &pending[r]);
    } catch (const std::exception& exception) {
      pending[r].error = error(TRITONSERVER_ERROR_INTERNAL, std::string("kiln backend: ") + exception.what());
    }
  }

  // Groups: the requests whose inputs agree on every dimension after the batch (all of them alike
  // without batching would be wrong: then each request is a group of its own).
  std::map<std::vector<int64_t>, std::vector<Pending*>> groups;
  std::vector<std::vector<Pending*>> singles;
  for (Pending& item : pending) {
    if (item.error) continue;
    item.compute_start = 0;
    if (model.max_batch_size == 0) {
      singles.push_back({&item});
      continue;
    }
    std::vector<int64_t> key;
    for (const InputView& view : item.inputs) {
      key.push_back(int64_t(view.shape.size()));
      key.insert(key.end(), view.shape.begin() + 1, view.shape.end());
    }
    std::vector<Pending*>& group = groups[key];
    // Triton never batches past max_batch_size; a group that would is split all the same.
    int64_t rows = 0;
    for (Pending* member : group) rows += member->batch;
    if (rows + item.batch > model.max_batch_size) {
      singles.push_back(std::move(group));
      group.clear();
    }
    group.push_back(&item);
  }
  for (auto& [key, group] : groups)
    if (!group.empty()) singles.push_back(std::move(group));
  if (singles.size() > 1 && model.max_batch_size > 0)
    log(TRITONSERVER_LOG_VERBOSE, "kiln: " + std::to_string(request_count) + " requests of '" + model.name + "' in " +
                                      std::to_string(singles.size()) + " runs (their shapes differ past the batch)");
  for (std::vector<Pending*>& group : singles) {
    try {
      run_group(instance, group, exec_start);
    } catch (const std::exception& exception) {
      for (Pending* member : group)
        if (!member->error)
          member->error = error(TRITONSERVER_ERROR_INTERNAL, std::string("kiln backend: ") + exception.what());
    }
  }
  for (Pending& item : pending) finish(instance, item, exec_start);
}

}  // namespace kiln::serving
