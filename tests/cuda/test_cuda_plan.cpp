// CUDA plans without a GPU: `write_plan` with device "cuda" stores each kernel as PTX that NVRTC
// compiled (format version 3, requirement sm_75; a symbolic plan format version 5), and libkiln refuses to load it where the CUDA
// driver is missing with KILN_ERROR_UNSUPPORTED_TARGET naming the library, while CPU plans still run.
// (The runs themselves are `cuda-plan-models`, on a machine with a GPU.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kiln/kiln.h"
#include "plan/plan_format.h"
#include "plan/plan_writer.h"
#include "tensor/tensor_internal.h"

using namespace kiln;

TEST_SUITE("cuda-plan") {

TEST_CASE("a CUDA plan holds PTX; without the CUDA driver it fails to load naming libcuda") {
  setenv("KILN_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);  // before libkiln loads the driver
  Tensor x = graph_input("x", {2, 16}, ScalarType::Float32);
  Tensor w = Tensor::from_vector<float>(std::vector<float>(16, 0.5f), {16});
  Tensor y = (x * w).sum({1});
  PlanWriteOptions options;
  options.device = "cuda";
  std::string bytes = write_plan({{"x", x}}, {{"y", y}}, options);
  CHECK(plan::read_u32(reinterpret_cast<const unsigned char*>(bytes.data()) + plan::header_field::format_version) ==
        plan::kPlanFormatVersionDevice);
  CHECK(bytes.find(".visible .entry") != std::string::npos);  // PTX, not CUDA C
  CHECK(bytes.find(".target sm_75") != std::string::npos);
  CHECK(bytes.find("sm_75") != std::string::npos);  // the requirement
  CHECK(bytes == write_plan({{"x", x}}, {{"y", y}}, options));  // byte-identical

  kiln_plan* plan = nullptr;
  CHECK(kiln_plan_load_buffer(bytes.data(), bytes.size(), &plan) == KILN_ERROR_UNSUPPORTED_TARGET);
  CHECK(plan == nullptr);
  CHECK(std::string(kiln_error_message())
            .find("the plan is for CUDA: unsupported target: CUDA: cannot load the CUDA driver (/nonexistent/libcuda.so.1") == 0);

  std::string cpu = write_plan({{"x", x}}, {{"y", y}});
  REQUIRE(kiln_plan_load_buffer(cpu.data(), cpu.size(), &plan) == KILN_OK);
  std::vector<float> in(32, 2.0f), out(2, 0.0f);
  int64_t in_shape[] = {2, 16}, out_shape[] = {2};
  kiln_tensor input{"x", KILN_DTYPE_FLOAT32, 2, in_shape, in.data(), 32 * 4};
  kiln_tensor output{"y", KILN_DTYPE_FLOAT32, 1, out_shape, out.data(), 2 * 4};
  CHECK(kiln_plan_run(plan, &input, 1, &output, 1) == KILN_OK);
  CHECK(out[1] == 16.0f);
  kiln_plan_free(plan);
}

TEST_CASE("a symbolic CUDA plan is format version 5 and its kernels take the size as a 64-bit parameter") {
  Dim n = size_variable("n", 1, 64);
  Tensor x = symbolic_graph_input("x", {n, 16}, ScalarType::Float32);
  Tensor w = Tensor::from_vector<float>(std::vector<float>(16 * 4, 0.25f), {16, 4});
  PlanWriteOptions options;
  options.device = "cuda";
  options.cuda_architecture = 90;
  std::string bytes = write_plan({{"x", x}}, {{"y", x.matmul(w).relu()}, {"total", x.sum({0})}}, options);
  CHECK(plan::read_u32(reinterpret_cast<const unsigned char*>(bytes.data()) + plan::header_field::format_version) ==
        plan::kPlanFormatVersionSymbolicDevice);
  CHECK(bytes.find(".target sm_90") != std::string::npos);
  // Both kernels read n: after their buffers (.u64 pointers) comes one more .u64 parameter, so the
  // column sums take 3 (total, x, n) and relu(x · w) 4 (y, x, w, n).
  std::vector<size_t> parameter_counts;
  for (size_t at = bytes.find(".visible .entry"); at != std::string::npos; at = bytes.find(".visible .entry", at + 1)) {
    std::string parameters = bytes.substr(at, bytes.find(')', at) - at);
    size_t count = 0;
    for (size_t p = parameters.find(".param .u64"); p != std::string::npos; p = parameters.find(".param .u64", p + 1)) ++count;
    parameter_counts.push_back(count);
  }
  std::ranges::sort(parameter_counts);
  CHECK(parameter_counts == std::vector<size_t>{3, 4});
}

TEST_CASE("a CUDA plan refuses a tuning database when written") {
  PlanWriteOptions options;
  options.device = "cuda";
  Tensor x = graph_input("x", {4}, ScalarType::Float32);
  TuningDb empty;
  options.tuning = &empty;
  CHECK_THROWS_WITH_AS(write_plan({{"x", x}}, {{"y", x * 2.0f}}, options),
                       "a tuning database applies to CPU plans only, not to device plans", UserError);
}

}  // TEST_SUITE
