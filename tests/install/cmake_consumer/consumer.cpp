// A C++ program outside kiln, built with CMake's find_package(kiln) against an installed kiln: it
// compiles an ONNX matrix product (C = A B) into a plan with libkiln-compiler (kiln::compiler), runs
// the plan with libkiln (kiln::runtime) and checks every element against its own product.
//   usage: consumer_cpp MODEL.onnx PLAN   writes PLAN, prints "ok: ..." and exits 0 when it matches
#include <kiln/compiler.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

struct PlanDeleter {
  void operator()(kiln_plan* plan) const { kiln_plan_free(plan); }
};

int fail(const std::string& what, kiln_status status) {
  std::fprintf(stderr, "consumer_cpp: %s: %s (%s)\n", what.c_str(), kiln_error_message(), kiln_status_string(status));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer_cpp MODEL.onnx PLAN\n");
    return 2;
  }
  kiln_compile_options options;
  kiln_compile_options_init(&options);
  kiln_status status = kiln_compile_onnx_file(argv[1], &options, argv[2]);
  if (status != KILN_OK) return fail(std::string("compiling ") + argv[1], status);

  kiln_plan* loaded = nullptr;
  status = kiln_plan_load_file(argv[2], &loaded);
  if (status != KILN_OK) return fail(argv[2], status);
  std::unique_ptr<kiln_plan, PlanDeleter> plan(loaded);

  const int64_t* shape_a = nullptr;
  const int64_t* shape_b = nullptr;
  size_t rank_a = 0, rank_b = 0;
  if (kiln_plan_input_info(plan.get(), 0, nullptr, nullptr, &rank_a, &shape_a) != KILN_OK ||
      kiln_plan_input_info(plan.get(), 1, nullptr, nullptr, &rank_b, &shape_b) != KILN_OK || rank_a != 2 ||
      rank_b != 2 || shape_a[1] != shape_b[0]) {
    std::fprintf(stderr, "consumer_cpp: expected a plan of a matrix product\n");
    return 1;
  }
  const size_t rows = static_cast<size_t>(shape_a[0]), depth = static_cast<size_t>(shape_a[1]);
  const size_t columns = static_cast<size_t>(shape_b[1]);
  std::vector<float> a(rows * depth), b(depth * columns), c(rows * columns, NAN);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.125f - 1.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5) % 9) * 0.25f - 1.0f;
  const int64_t shape_c[2] = {shape_a[0], shape_b[1]};
  const kiln_tensor inputs[2] = {
      {nullptr, KILN_DTYPE_FLOAT32, 2, shape_a, a.data(), a.size() * sizeof(float)},
      {nullptr, KILN_DTYPE_FLOAT32, 2, shape_b, b.data(), b.size() * sizeof(float)},
  };
  const kiln_tensor output = {nullptr, KILN_DTYPE_FLOAT32, 2, shape_c, c.data(), c.size() * sizeof(float)};
  status = kiln_plan_run(plan.get(), inputs, 2, &output, 1);
  if (status != KILN_OK) return fail("kiln_plan_run", status);

  double max_error = 0;
  for (size_t r = 0; r < rows; ++r)
    for (size_t col = 0; col < columns; ++col) {
      double expected = 0;
      for (size_t k = 0; k < depth; ++k) expected += double(a[r * depth + k]) * b[k * columns + col];
      double error = std::fabs(c[r * columns + col] - expected);
      max_error = std::max(max_error, error);
      if (!(error <= 1e-5 * (1 + std::fabs(expected)))) {
        std::fprintf(stderr, "consumer_cpp: c[%zu][%zu] = %g, expected %g\n", r, col, c[r * columns + col], expected);
        return 1;
      }
    }
  std::printf("ok: libkiln-compiler and libkiln %s: compiled %s and ran it, a %zux%zu by %zux%zu product within "
              "1e-5 (max error %.2g)\n",
              kiln_version(), argv[1], rows, depth, depth, columns, max_error);
  return 0;
}
