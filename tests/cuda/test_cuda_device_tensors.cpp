// Device tensors on a GPU (kiln_run_options.tensors_on_device): a CUDA plan reads and writes the
// caller's CUdeviceptrs in place and computes what the CPU plan of the same graph computes, also on a
// stream of the caller's (kiln_run_options.queue). Needs
// NVRTC and a CUDA device; skipped (77) without them. The caller's memory comes from this process's
// CudaDevice, whose primary context is the one libkiln's CUDA plans use (one per device and process).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "codegen/cuda/nvrtc_compiler.h"
#include "kiln/kiln.h"
#include "plan/plan_writer.h"
#include "runtime/cuda/cuda_device.h"
#include "tensor/tensor_internal.h"

using namespace kiln;

namespace {

std::vector<float> ramp(size_t count, float scale) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = std::sin(static_cast<float>(i) * 0.37f) * scale;
  return values;
}

// The CUDA plan and the CPU plan of one graph, loaded through libkiln.
struct PlanPair {
  kiln_plan* gpu = nullptr;
  kiln_plan* cpu = nullptr;
  PlanPair(const std::vector<std::pair<std::string, Tensor>>& inputs,
           const std::vector<std::pair<std::string, Tensor>>& outputs) {
    PlanWriteOptions cuda_options;
    cuda_options.device = "cuda";
    std::string cuda_bytes = write_plan(inputs, outputs, cuda_options), cpu_bytes = write_plan(inputs, outputs);
    REQUIRE_MESSAGE(kiln_plan_load_buffer(cuda_bytes.data(), cuda_bytes.size(), &gpu) == KILN_OK, kiln_error_message());
    REQUIRE(kiln_plan_load_buffer(cpu_bytes.data(), cpu_bytes.size(), &cpu) == KILN_OK);
  }
  ~PlanPair() {
    kiln_plan_free(gpu);
    kiln_plan_free(cpu);
  }
};

}  // namespace

TEST_CASE("a CUDA plan runs on the caller's device memory in place") {
  // A matmul and a long row softmax (a warp per row) over a 6 x 768 input.
  Tensor x = graph_input("x", {6, 768}, ScalarType::Float32);
  Tensor w = Tensor::from_vector(ramp(768 * 32, 0.05f), {768, 32});
  Tensor scores = x.matmul(w).relu();
  Tensor probabilities = x.softmax(-1);
  PlanPair plans({{"x", x}}, {{"scores", scores}, {"probabilities", probabilities}});
  kiln_plan *gpu = plans.gpu, *cpu = plans.cpu;
  const char* device = nullptr;
  void *context = nullptr, *queue = nullptr;
  REQUIRE(kiln_plan_device(gpu, &device, &context, &queue) == KILN_OK);
  CHECK(std::string(device).rfind("cuda:", 0) == 0);
  CHECK(context != nullptr);
  CHECK(queue == nullptr);

  std::vector<float> input = ramp(6 * 768, 1.0f), expected_scores(6 * 32), expected_probabilities(6 * 768);
  int64_t x_shape[] = {6, 768}, s_shape[] = {6, 32};
  kiln_tensor host_in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, input.data(), input.size() * 4};
  kiln_tensor host_out[] = {{"scores", KILN_DTYPE_FLOAT32, 2, s_shape, expected_scores.data(), expected_scores.size() * 4},
                            {"probabilities", KILN_DTYPE_FLOAT32, 2, x_shape, expected_probabilities.data(),
                             expected_probabilities.size() * 4}};
  REQUIRE(kiln_plan_run(cpu, &host_in, 1, host_out, 2) == KILN_OK);

  CudaDevice& cuda = CudaDevice::instance();
  DeviceMemory d_in = cuda.allocate(input.size() * 4), d_scores = cuda.allocate(expected_scores.size() * 4),
               d_probabilities = cuda.allocate(expected_probabilities.size() * 4);
  cuda.copy_to_device(d_in, input.data(), input.size() * 4);
  kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, d_in.handle, input.size() * 4};
  kiln_tensor out[] = {{"scores", KILN_DTYPE_FLOAT32, 2, s_shape, d_scores.handle, expected_scores.size() * 4},
                       {"probabilities", KILN_DTYPE_FLOAT32, 2, x_shape, d_probabilities.handle,
                        expected_probabilities.size() * 4}};
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.tensors_on_device = 1;
  REQUIRE_MESSAGE(kiln_plan_run_with_options(gpu, &in, 1, out, 2, &options) == KILN_OK, kiln_error_message());
  std::vector<float> got_scores(expected_scores.size()), got_probabilities(expected_probabilities.size());
  cuda.copy_to_host(got_scores.data(), d_scores, got_scores.size() * 4);
  cuda.copy_to_host(got_probabilities.data(), d_probabilities, got_probabilities.size() * 4);
  for (size_t i = 0; i < got_scores.size(); ++i) CHECK(got_scores[i] == doctest::Approx(expected_scores[i]).epsilon(1e-4));
  for (size_t i = 0; i < got_probabilities.size(); ++i)
    CHECK(got_probabilities[i] == doctest::Approx(expected_probabilities[i]).epsilon(1e-5));
  cuda.free(d_in);
  cuda.free(d_scores);
  cuda.free(d_probabilities);
}

// The caller's side of a stream: its own entry points from the driver, as an application has them.
struct CallerStreams {
  using Stream = void*;
  int (*create)(Stream*, unsigned) = nullptr;
  int (*destroy)(Stream) = nullptr;
  int (*synchronize)(Stream) = nullptr;
  CallerStreams() {
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    REQUIRE(library != nullptr);
    create = reinterpret_cast<decltype(create)>(dlsym(library, "cuStreamCreate"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(library, "cuStreamDestroy_v2"));
    synchronize = reinterpret_cast<decltype(synchronize)>(dlsym(library, "cuStreamSynchronize"));
    REQUIRE((create != nullptr && destroy != nullptr && synchronize != nullptr));
  }
};

TEST_CASE("a CUDA plan runs on the caller's streams, with host and with device tensors") {
  Tensor x = graph_input("x", {6, 768}, ScalarType::Float32);
  Tensor w = Tensor::from_vector(ramp(768 * 32, 0.05f), {768, 32});
  Tensor scores = x.matmul(w).relu();
  PlanPair plans({{"x", x}}, {{"scores", scores}});
  kiln_plan* cpu = plans.cpu;
  int64_t x_shape[] = {6, 768}, s_shape[] = {6, 32};
  std::vector<float> first = ramp(6 * 768, 1.0f), second = ramp(6 * 768, -0.5f);
  auto expected_for = [&](std::vector<float>& input) {
    std::vector<float> expected(6 * 32);
    kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, input.data(), input.size() * 4};
    kiln_tensor out{"scores", KILN_DTYPE_FLOAT32, 2, s_shape, expected.data(), expected.size() * 4};
    REQUIRE(kiln_plan_run(cpu, &in, 1, &out, 1) == KILN_OK);
    return expected;
  };
  std::vector<float> expected_first = expected_for(first), expected_second = expected_for(second);
  CallerStreams streams;
  CallerStreams::Stream one = nullptr, two = nullptr;
  REQUIRE(streams.create(&one, 1) == 0);  // CU_STREAM_NON_BLOCKING: not ordered with the default stream
  REQUIRE(streams.create(&two, 1) == 0);

  // Host tensors on a stream: the call returns with the outputs filled.
  std::vector<float> got(6 * 32);
  kiln_tensor host_in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, first.data(), first.size() * 4};
  kiln_tensor host_out{"scores", KILN_DTYPE_FLOAT32, 2, s_shape, got.data(), got.size() * 4};
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.queue = one;
  REQUIRE_MESSAGE(kiln_plan_run_with_options(plans.gpu, &host_in, 1, &host_out, 1, &options) == KILN_OK,
                  kiln_error_message());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expected_first[i]).epsilon(1e-4));

  // Device tensors on two streams one after the other: the calls do not wait, the plan's buffers
  // are handed from one stream to the other, and each stream's outputs are its own input's.
  CudaDevice& cuda = CudaDevice::instance();
  DeviceMemory in_one = cuda.allocate(first.size() * 4), in_two = cuda.allocate(second.size() * 4),
               out_one = cuda.allocate(got.size() * 4), out_two = cuda.allocate(got.size() * 4);
  cuda.copy_to_device(in_one, first.data(), first.size() * 4);
  cuda.copy_to_device(in_two, second.data(), second.size() * 4);
  options.tensors_on_device = 1;
  auto run_on = [&](const DeviceMemory& in_memory, const DeviceMemory& out_memory, void* stream) {
    kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, in_memory.handle, first.size() * 4};
    kiln_tensor out{"scores", KILN_DTYPE_FLOAT32, 2, s_shape, out_memory.handle, got.size() * 4};
    options.queue = stream;
    REQUIRE_MESSAGE(kiln_plan_run_with_options(plans.gpu, &in, 1, &out, 1, &options) == KILN_OK, kiln_error_message());
  };
  run_on(in_one, out_one, one);
  run_on(in_two, out_two, two);
  run_on(in_one, out_one, one);
  REQUIRE(streams.synchronize(one) == 0);
  REQUIRE(streams.synchronize(two) == 0);
  std::vector<float> got_one(got.size()), got_two(got.size());
  cuda.copy_to_host(got_one.data(), out_one, got_one.size() * 4);
  cuda.copy_to_host(got_two.data(), out_two, got_two.size() * 4);
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got_one[i] == doctest::Approx(expected_first[i]).epsilon(1e-4));
    CHECK(got_two[i] == doctest::Approx(expected_second[i]).epsilon(1e-4));
  }
  // Freed while its last run may still be queued: the plan waits for it.
  run_on(in_two, out_one, one);
  kiln_plan_free(plans.gpu);
  plans.gpu = nullptr;
  REQUIRE(streams.synchronize(one) == 0);
  cuda.copy_to_host(got_one.data(), out_one, got_one.size() * 4);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got_one[i] == doctest::Approx(expected_second[i]).epsilon(1e-4));
  for (DeviceMemory memory : {in_one, in_two, out_one, out_two}) cuda.free(memory);
  streams.destroy(one);
  streams.destroy(two);
}

int main(int argc, char** argv) {
  std::string why_not;
  if (nvrtc_info(&why_not) == nullptr) {
    std::printf("skip: no NVRTC: %s\n", why_not.c_str());
    return 77;
  }
  if (!CudaDevice::available(&why_not)) {
    std::printf("skip: no CUDA device: %s\n", why_not.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
