// The C-style renderer's OpenCL C output on small kernel ASTs, compared as text: the kernel
// signature, the work-item index of axis 0, loops, accumulators, masks, vectors as lanes, the
// helper functions that carry kiln's semantics, and the extension pragmas. Needs no device.
#include <doctest/doctest.h>

#include "codegen/c_style/opencl_codegen.h"
#include "codegen/codegen_test_helpers.h"
#include "support/error.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const CDeviceFeatures kEverything{"test device", true, true};

std::string render(const UOpPtr& ast, const CDeviceFeatures& features = kEverything) {
  return opencl_render_kernel(ast, features).source;
}

// The source without its first line (a comment naming the kernel) and blank lines.
std::string body_of(const std::string& source) { return source.substr(source.find('\n') + 1); }

}  // namespace

TEST_SUITE("opencl-renderer") {

TEST_CASE("an elementwise kernel: one work-item per index of axis 0, guarded") {
  UOpPtr i = range(37, 0);
  UOpPtr ast = kernel("E_37", {store(index(global(dtypes::f32, 37, 0), i),
                                     load(index(global(dtypes::f32, 37, 1), i)) + load(index(global(dtypes::f32, 37, 2), i)))});
  RenderedKernel rendered = opencl_render_kernel(ast, kEverything);
  CHECK(rendered.name == "E_37");
  CHECK(rendered.buffer_count == 3);
  CHECK(body_of(rendered.source) ==
        "#pragma OPENCL FP_CONTRACT OFF\n"
        "__kernel void E_37(__global float* data0, __global const float* data1, __global const float* data2) {\n"
        "  int ridx0 = (int)get_global_id(0);\n"
        "  if (ridx0 < ((int)37L)) {\n"
        "    float v1 = data1[ridx0];\n"
        "    float v2 = data2[ridx0];\n"
        "    float v3 = (v1 + v2);\n"
        "    data0[ridx0] = v3;\n"
        "  }\n"
        "}\n");
}

TEST_CASE("index math is 32-bit where every index value fits, else 64-bit") {
  // 2^31 - 2^16 is the largest extent that keeps 32 bits: the grid rounds up to whole blocks, and
  // those threads' indices must not wrap past the guard.
  for (int64_t extent : {int64_t{37}, (int64_t{1} << 31) - (int64_t{1} << 16), (int64_t{1} << 31) - (int64_t{1} << 16) + 1,
                         int64_t{3} << 31}) {
    CAPTURE(extent);
    UOpPtr i = range(extent, 0);
    UOpPtr ast = kernel("E_big", {store(index(global(dtypes::u8, extent, 0), i), load(index(global(dtypes::u8, extent, 1), i)))});
    std::string source = render(ast);
    bool narrow = extent <= (int64_t{1} << 31) - (int64_t{1} << 16);
    CHECK(source.find(narrow ? "int ridx0 = (int)get_global_id(0);" : "long ridx0 = (long)get_global_id(0);") !=
          std::string::npos);
  }
  // A product that exceeds 32 bits inside the index keeps the whole kernel 64-bit.
  UOpPtr i = range(1 << 20, 0), j = range(4096, 1);
  UOpPtr at = UOp::make(Ops::ADD, dtypes::index, {UOp::make(Ops::MUL, dtypes::index, {i, idx(4096)}), j});
  UOpPtr wide = kernel("E_2d", {store(index(global(dtypes::u8, int64_t{1} << 32, 0), at), const_int(dtypes::u8, 1))});
  CHECK(render(wide).find("for (long ridx") != std::string::npos);
}

TEST_CASE("a reduction: a for loop over the reduce axis and an accumulator array") {
  UOpPtr i = range(4, 0), j = range(8, 1000);
  UOpPtr in = global(dtypes::f32, 32, 1);
  UOpPtr at = UOp::make(Ops::ADD, dtypes::index, {UOp::make(Ops::MUL, dtypes::index, {i, idx(8)}), j});
  UOpPtr ast = kernel("r_4_8", {store(index(global(dtypes::f32, 4, 0), i), reduce(Ops::MAX, load(index(in, at)), {j}))});
  std::string source = render(ast);
  CHECK(source.find("float acc0[1];") != std::string::npos);
  CHECK(source.find("acc0[0] = as_float(4286578688U);") != std::string::npos);  // -inf, MAX's identity
  CHECK(source.find("for (int ridx") != std::string::npos);
  CHECK(source.find("kiln_max_float(") != std::string::npos);
  CHECK(source.find("static inline float kiln_max_float(float x, float y)") != std::string::npos);
}

TEST_CASE("masked loads become a conditional read, masked stores a conditional write") {
  UOpPtr i = range(16, 0);
  UOpPtr valid = UOp::make(Ops::CMPLT, dtypes::bool_, {i, idx(10)});
  UOpPtr value = load(index(global(dtypes::i32, 10, 1), i, valid), const_int(dtypes::i32, -1));
  std::string source = render(kernel("masked", {store(index(global(dtypes::i32, 16, 0), i, valid), value)}));
  CHECK(source.find("int v2 = (v1 ? data1[ridx0] : ((int)-1L));") != std::string::npos);
  CHECK(source.find("if (v1) data0[ridx0] = v2;") != std::string::npos);
}

TEST_CASE("integer arithmetic wraps through the unsigned type; division has a helper") {
  UOpPtr i = range(8, 0);
  UOpPtr a = load(index(global(dtypes::i32, 8, 1), i)), b = load(index(global(dtypes::i32, 8, 2), i));
  UOpPtr ast = kernel("ints", {store(index(global(dtypes::i32, 8, 0), i),
                                     UOp::make(Ops::IDIV, dtypes::i32, {a * b, b}))});
  std::string source = render(ast);
  CHECK(source.find("((int)((uint)v1 * (uint)v2))") != std::string::npos);
  CHECK(source.find("static inline int kiln_idiv_int(int x, int y) { return y == 0 ? 0 : y == -1 ? (int)(0u - (uint)x) : x / y; }") !=
        std::string::npos);
}

TEST_CASE("bool is a byte in memory, f16 is bits converted by vload_half/vstore_half_rte, f64 enables its extension") {
  UOpPtr i = range(8, 0);
  UOpPtr flag = load(index(global(dtypes::bool_, 8, 1), i));
  UOpPtr half_value = load(index(global(dtypes::f16, 8, 2), i));
  UOpPtr doubled = UOp::make(Ops::ADD, dtypes::f16, {half_value, half_value});
  UOpPtr ast = kernel("mixed", {store(index(global(dtypes::bool_, 8, 0), i), UOp::make(Ops::NOT, dtypes::bool_, {flag})),
                                store(index(global(dtypes::f16, 8, 3), i), doubled),
                                store(index(global(dtypes::f64, 8, 4), i), UOp::make(Ops::CAST, dtypes::f64, {doubled}))});
  std::string source = render(ast);
  CHECK(source.find("__global uchar* data0, __global const uchar* data1, __global const ushort* data2") != std::string::npos);
  CHECK(source.find("(data1[ridx0] != 0)") != std::string::npos);
  CHECK(source.find("data0[ridx0] = (uchar)") != std::string::npos);
  CHECK(source.find("ushort v4 = kiln_f32_to_f16((kiln_f16_to_f32(v3) + kiln_f16_to_f32(v3)));") != std::string::npos);
  CHECK(source.find("return vload_half(0, (const half*)&h);") != std::string::npos);
  CHECK(source.find("vstore_half_rte(f, 0, (half*)&h);") != std::string::npos);
  CHECK(source.find("cl_khr_fp16") == std::string::npos);  // no extension: a pointer to half is core OpenCL C
  CHECK(source.find("#pragma OPENCL EXTENSION cl_khr_fp64 : enable") != std::string::npos);
}

TEST_CASE("vectors are rendered lane by lane") {
  DType f32x4(ScalarType::Float32, 4);
  UOpPtr i = range(2, 0);
  UOpPtr at = UOp::make(Ops::MUL, dtypes::index, {i, idx(4)});
  UOpPtr vector = UOp::make(Ops::LOAD, f32x4, {index(global(dtypes::f32, 8, 1), at)});
  UOpPtr lane2 = UOp::make(Ops::GEP, dtypes::f32, {vector}, std::vector<int64_t>{2});
  UOpPtr splat = UOp::make(Ops::VECTORIZE, f32x4, {lane2, lane2, lane2, lane2});
  std::string source = render(kernel("vec", {store(index(global(dtypes::f32, 8, 0), at), vector * splat)}));
  // One load per lane from the index on, each lane times lane 2, one store per lane.
  CHECK(source.find("    float v2 = data1[v1];\n"
                    "    float v3 = data1[v1 + 1];\n"
                    "    float v4 = data1[v1 + 2];\n"
                    "    float v5 = data1[v1 + 3];\n"
                    "    float v6 = (v2 * v4);\n"
                    "    float v7 = (v3 * v4);\n"
                    "    float v8 = (v4 * v4);\n"
                    "    float v9 = (v5 * v4);\n"
                    "    data0[v1] = v6;\n"
                    "    data0[v1 + 1] = v7;\n"
                    "    data0[v1 + 2] = v8;\n"
                    "    data0[v1 + 3] = v9;\n") != std::string::npos);
}

TEST_CASE("bf16 lives in a ushort: widened to f32 by a shift, rounded back by a helper") {
  UOpPtr i = range(4, 0);
  UOpPtr x = load(index(global(dtypes::bf16, 4, 1), i));
  std::string source = render(kernel("bf16", {store(index(global(dtypes::bf16, 4, 0), i), x * x)}));
  CHECK(source.find("__global ushort* data0, __global const ushort* data1") != std::string::npos);
  CHECK(source.find("ushort v2 = kiln_f32_to_bf16((as_float(((uint)v1 << 16)) * as_float(((uint)v1 << 16))));") !=
        std::string::npos);
  CHECK(source.find("static inline ushort kiln_f32_to_bf16(float v)") != std::string::npos);
}

TEST_CASE("floats are written exactly, infinities and NaN as bit patterns") {
  UOpPtr i = range(3, 0);
  UOpPtr x = load(index(global(dtypes::f32, 3, 1), i));
  UOpPtr ast = kernel("consts", {store(index(global(dtypes::f32, 3, 0), i),
                                       x * const_float(dtypes::f32, 0.1) + const_float(dtypes::f32, std::nan("")))});
  std::string source = render(ast);
  CHECK(source.find("(0x1.99999ap-4f)") != std::string::npos);  // 0.1 rounded to f32
  CHECK(source.find("as_float(2143289344U)") != std::string::npos);  // quiet NaN
}

TEST_CASE("dtypes the device lacks are refused with a UserError naming dtype, op, kernel and device") {
  UOpPtr i = range(4, 0);
  UOpPtr ast = kernel("double_copy", {store(index(global(dtypes::f64, 4, 0), i), load(index(global(dtypes::f64, 4, 1), i)))});
  CDeviceFeatures no_double{"pocl-test", true, false};
  CHECK_THROWS_WITH_AS(render(ast, no_double),
                       "unsupported: f64 (DEFINE_GLOBAL in kernel 'double_copy') on OpenCL C device 'pocl-test': the "
                       "device lacks the cl_khr_fp64 extension",
                       UserError);
  // f16 needs nothing of the device (it is stored as bits): a device without cl_khr_fp16 runs it.
  UOpPtr half_copy = kernel("half_copy", {store(index(global(dtypes::f16, 4, 0), i), load(index(global(dtypes::f16, 4, 1), i)))});
  CHECK(render(half_copy, CDeviceFeatures{"pocl-test", false, true}).find("vload_half") != std::string::npos);
}

}  // TEST_SUITE
