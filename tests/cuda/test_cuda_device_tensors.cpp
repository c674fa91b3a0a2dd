// Device tensors on a GPU (kiln_run_options.tensors_on_device): a CUDA plan reads and writes the
// caller's CUdeviceptrs in place and computes what the CPU plan of the same graph computes. Needs
// NVRTC and a CUDA device; skipped (77) without them. The caller's memory comes from this process's
// CudaDevice, whose primary context is the one libkiln's CUDA plans use (one per device and process).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

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

}  // namespace

TEST_CASE("a CUDA plan runs on the caller's device memory in place") {
  // A matmul and a long row softmax (a warp per row) over a 6 x 768 input.
  Tensor x = graph_input("x", {6, 768}, ScalarType::Float32);
  Tensor w = Tensor::from_vector(ramp(768 * 32, 0.05f), {768, 32});
  Tensor scores = x.matmul(w).relu();
  Tensor probabilities = x.softmax(-1);
  std::vector<std::pair<std::string, Tensor>> inputs{{"x", x}},
      outputs{{"scores", scores}, {"probabilities", probabilities}};
  PlanWriteOptions cuda_options;
  cuda_options.device = "cuda";
  std::string cuda_bytes = write_plan(inputs, outputs, cuda_options), cpu_bytes = write_plan(inputs, outputs);
  kiln_plan *gpu = nullptr, *cpu = nullptr;
  REQUIRE_MESSAGE(kiln_plan_load_buffer(cuda_bytes.data(), cuda_bytes.size(), &gpu) == KILN_OK, kiln_error_message());
  REQUIRE(kiln_plan_load_buffer(cpu_bytes.data(), cpu_bytes.size(), &cpu) == KILN_OK);
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
  kiln_plan_free(gpu);
  kiln_plan_free(cpu);
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
