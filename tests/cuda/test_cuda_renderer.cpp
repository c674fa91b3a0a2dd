// The C-style renderer's CUDA C output on small kernel ASTs, compared as text: what differs from
// OpenCL C (the kernel prefix, the thread index, type names through the preamble's typedefs, bitcast
// intrinsics, f16 through PTX conversions). Needs neither NVRTC nor a GPU; test_cuda_nvrtc.cpp
// compiles such kernels.
#include <doctest/doctest.h>

#include <cctype>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/codegen_test_helpers.h"
#include "support/error.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::string render(const UOpPtr& ast, const CDeviceFeatures& features = cuda_device_features(90)) {
  return cuda_render_kernel(ast, features).source;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_SUITE("cuda-renderer") {

TEST_CASE("an elementwise kernel: extern \"C\" __global__, one thread per index of axis 0, guarded") {
  UOpPtr i = range(37, 0);
  UOpPtr ast = kernel("E_37", {store(index(global(dtypes::f32, 37, 0), i),
                                     load(index(global(dtypes::f32, 37, 1), i)) + load(index(global(dtypes::f32, 37, 2), i)))});
  RenderedKernel rendered = cuda_render_kernel(ast, cuda_device_features(90));
  CHECK(rendered.name == "E_37");
  CHECK(rendered.buffer_count == 3);
  std::string body = rendered.source.substr(rendered.source.find("extern"));
  CHECK(body ==
        "extern \"C\" __global__ void E_37(float* data0, const float* data1, const float* data2) {\n"
        "  int ridx0 = (int)(blockIdx.x * (ulong)blockDim.x + threadIdx.x);\n"
        "  if (ridx0 < ((int)37L)) {\n"
        "    float v1 = data1[ridx0];\n"
        "    float v2 = data2[ridx0];\n"
        "    float v3 = (v1 + v2);\n"
        "    data0[ridx0] = v3;\n"
        "  }\n"
        "}\n");
  // The preamble names the OpenCL-style types the shared renderer writes; no pragma, no include.
  CHECK(contains(rendered.source, "typedef unsigned long ulong;\n"));
  CHECK(!contains(rendered.source, "#pragma"));
  CHECK(!contains(rendered.source, "#include"));
}

TEST_CASE("float bits go through CUDA's intrinsics: NaN literals, MAX's helper") {
  UOpPtr i = range(4, 0), j = range(8, 1000);
  UOpPtr in = global(dtypes::f32, 32, 1);
  UOpPtr at = UOp::make(Ops::ADD, dtypes::index, {UOp::make(Ops::MUL, dtypes::index, {i, idx(8)}), j});
  UOpPtr ast = kernel("r_4_8", {store(index(global(dtypes::f32, 4, 0), i), reduce(Ops::MAX, load(index(in, at)), {j}))});
  std::string source = render(ast);
  CHECK(contains(source, "acc0[0] = __int_as_float((int)(4286578688U));"));  // -inf, MAX's identity
  CHECK(contains(source, "static __device__ __forceinline__ float kiln_max_float(float x, float y)"));
  CHECK(contains(source, "((uint)__float_as_int(x)) & ((uint)__float_as_int(y))"));
  UOpPtr d = load(index(global(dtypes::f64, 4, 1), i));
  std::string f64 = render(kernel("f64_bits", {store(index(global(dtypes::u64, 4, 0), i), UOp::make(Ops::BITCAST, dtypes::u64, {d}))}));
  CHECK(contains(f64, "((ulong)__double_as_longlong(v1))"));
}

TEST_CASE("f16 is a ushort widened and rounded by PTX cvt helpers, present only when used") {
  UOpPtr i = range(8, 0);
  UOpPtr half_value = load(index(global(dtypes::f16, 8, 1), i));
  UOpPtr doubled = UOp::make(Ops::ADD, dtypes::f16, {half_value, half_value});
  std::string source = render(kernel("half_add", {store(index(global(dtypes::f16, 8, 0), i), doubled)}));
  CHECK(contains(source, "void half_add(ushort* data0, const ushort* data1)"));
  CHECK(contains(source, "ushort v2 = kiln_f32_to_f16((kiln_f16_to_f32(v1) + kiln_f16_to_f32(v1)));"));
  CHECK(contains(source, "asm(\"cvt.rn.f16.f32 %0, %1;\""));
  CHECK(contains(source, "asm(\"cvt.f32.f16 %0, %1;\""));
  // A sign flip flips the top bit of the ushort (`-` would negate the integer: -inf became a
  // denormal before this was caught on OpenCL, whose f16 shares the path).
  UOpPtr negated = UOp::make(Ops::NEG, dtypes::f16, {half_value});
  CHECK(contains(render(kernel("half_neg", {store(index(global(dtypes::f16, 8, 0), i), negated)})), "(v1 ^ 0x8000u)"));
  std::string plain = render(kernel("f32_copy", {store(index(global(dtypes::f32, 8, 0), i), load(index(global(dtypes::f32, 8, 1), i)))}));
  CHECK(!contains(plain, "cvt."));
}

TEST_CASE("every helper function the integer, cast and bf16 paths define is named by a C identifier") {
  // Type names with spaces (unsigned char, long long) would make names such as `kiln_max_unsigned char`;
  // the dialect's one-word type names keep them identifiers.
  UOpPtr i = range(4, 0);
  std::vector<UOpPtr> stores;
  int64_t slot = 1;
  for (DType dtype : {dtypes::i8, dtypes::u8, dtypes::i64, dtypes::u64}) {
    UOpPtr x = load(index(global(dtypes::f32, 4, slot++), i));
    UOpPtr y = load(index(global(dtype, 4, slot++), i));
    UOpPtr converted = UOp::make(Ops::CAST, dtype, {x});
    stores.push_back(store(index(global(dtype, 4, slot++), i), UOp::make(Ops::IDIV, dtype, {converted, y})));
    stores.push_back(store(index(global(dtypes::bf16, 4, slot++), i), UOp::make(Ops::CAST, dtypes::bf16, {y})));
  }
  std::string source = render(kernel("helpers", std::move(stores)));
  size_t at = 0;
  int helpers = 0;
  while ((at = source.find("static __device__ __forceinline__ ", at)) != std::string::npos) {
    at += std::string("static __device__ __forceinline__ ").size();
    size_t open = source.find('(', at);
    std::string declaration = source.substr(at, open - at);  // "TYPE NAME"
    std::string name = declaration.substr(declaration.rfind(' ') + 1);
    CAPTURE(declaration);
    for (char c : name) CHECK((std::isalnum(static_cast<unsigned char>(c)) || c == '_'));
    CHECK(name.rfind("kiln_", 0) == 0);
    ++helpers;
  }
  CHECK(helpers >= 8);  // 4 float → integer casts, 4 divisions, the i64/u64 → bf16 sticky helpers, bf16 rounding
  CHECK(contains(source, "schar kiln_float_to_schar(float x)"));
}

TEST_CASE("f16 on an architecture without it is refused with a UserError naming dtype, op and device") {
  UOpPtr i = range(4, 0);
  UOpPtr ast = kernel("half_copy", {store(index(global(dtypes::f16, 4, 0), i), load(index(global(dtypes::f16, 4, 1), i)))});
  CHECK_THROWS_WITH_AS(render(ast, cuda_device_features(50)),
                       "unsupported: f16 (DEFINE_GLOBAL in kernel 'half_copy') on CUDA C device 'cuda:sm_50': the "
                       "device lacks compute capability 5.3",
                       UserError);
}

}  // TEST_SUITE
