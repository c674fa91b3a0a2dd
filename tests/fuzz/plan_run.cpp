// See plan_run.h.
#include "plan_run.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace kiln::fuzz {
namespace {

constexpr uint64_t kMaxBytes = uint64_t{16} << 20;

struct FreeDeleter {
  void operator()(void* pointer) const { std::free(pointer); }
};

// The caller's side of one input or output: its description and its 64-byte-aligned buffer.
struct Buffer {
  kiln_tensor tensor{};
  std::unique_ptr<void, FreeDeleter> memory;
};

using InfoFunction = kiln_status (*)(const kiln_plan*, size_t, const char**, kiln_dtype*, size_t*, const int64_t**);

// Describes and allocates every value `info` reports; false when one is too large for the fuzzer.
bool make_buffers(const kiln_plan* plan, size_t count, InfoFunction info, std::vector<Buffer>& buffers,
                  uint64_t& total) {
  for (size_t i = 0; i < count; ++i) {
    Buffer& buffer = buffers.emplace_back();
    kiln_tensor& tensor = buffer.tensor;
    if (info(plan, i, &tensor.name, &tensor.dtype, &tensor.rank, &tensor.shape) != KILN_OK) std::abort();
    uint64_t bytes = kiln_dtype_size(tensor.dtype);
    for (size_t axis = 0; axis < tensor.rank; ++axis)
      if (tensor.shape[axis] < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(tensor.shape[axis]), &bytes))
        return false;
    total += bytes;
    if (total > kMaxBytes) return false;
    tensor.byte_size = bytes;
    buffer.memory.reset(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64));
    tensor.data = buffer.memory.get();
  }
  return true;
}

}  // namespace

void run_with_fixed_inputs(const kiln_plan* plan) {
  std::vector<Buffer> inputs, outputs;
  uint64_t total = 0;
  if (!make_buffers(plan, kiln_plan_input_count(plan), kiln_plan_input_info, inputs, total) ||
      !make_buffers(plan, kiln_plan_output_count(plan), kiln_plan_output_info, outputs, total))
    return;
  // Small integers as bytes read as valid values of every dtype (bool included: 0 or 1).
  for (Buffer& input : inputs) {
    auto* bytes = static_cast<unsigned char*>(input.tensor.data);
    for (size_t i = 0; i < input.tensor.byte_size; ++i) bytes[i] = static_cast<unsigned char>(i % 2);
  }
  std::vector<kiln_tensor> input_tensors, output_tensors;
  for (const Buffer& input : inputs) input_tensors.push_back(input.tensor);
  for (const Buffer& output : outputs) output_tensors.push_back(output.tensor);
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.thread_count = 1;
  kiln_plan_run_with_options(plan, input_tensors.data(), input_tensors.size(), output_tensors.data(),
                             output_tensors.size(), &options);
}

}  // namespace kiln::fuzz
