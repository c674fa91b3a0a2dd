// Backend parity (in the manner of ggml's test-backend-ops): every op family — elementwise math,
// transcendentals, comparisons, integer and bool logic, reductions, movement, matmul and conv,
// pooling, casts, every dtype — realized through the Tensor API on each backend and compared with
// the CPU backend, the reference (itself checked against plain C++ in the 'tensor' suite).
//
// Backends: cpu (the reference), opencl (kernels as the OpenCL target plans them: no opts), and
// opencl+cpu-opts (the same kernels optimised for the host CPU: vector lanes, unrolled register
// tiles, so the renderer's vector paths run too), opencl+tiles (GPU register tiles on every kernel
// with a reduction to share, however few its outputs); these two on f32, i32 and u8 cases only;
// opencl+tensor-cores (f16 and bf16 matmuls and convs as warp-wide WMMAs, emulated through local
// memory), on f16 and bf16 cases only.
// The table of families × backends is printed.
//
// Tolerances (|opencl - cpu| <= atol + rtol * |cpu|; NaN equals NaN, infinities must agree):
//   integers and bool: exact.
//   f64: rtol 1e-12, atol 1e-12; f32: rtol 1e-5, atol 1e-6; f16: rtol 4e-3, atol 1e-3;
//   bf16: rtol 1.6e-2, atol 1e-2 (two ulp).
// Elementwise kernels are in fact bit-exact (the same polynomials, no contraction); reductions may
// differ by the CPU's fused multiply-adds in accumulator updates and its reassociated vector sums.
#include <cstdio>
#include <functional>
#include <map>

#include "codegen/c_style/opencl_codegen.h"
#include "codegen/target.h"
#include "codegen/cuda/nvrtc_compiler.h"
#include "driver/run_on_device.h"
#include "runtime/cuda/cuda_device.h"
#include "opencl_test_helpers.h"
#include "tensor/tensor_test_helpers.h"

using namespace kiln;
using kiln::test::HostTensor;
using kiln::test::S;

namespace {

struct Backend {
  std::string name;
  ExecutionDevice device;
  const TargetCaps* caps;
  bool (*runs)(S type);  // which cases' dtypes it runs
};

// OpenCL always (this executable runs only where there is an OpenCL device), CUDA where this
// machine has a GPU and NVRTC; the table at the end says why a backend did not run.
std::string cuda_missing() {
  std::string why_not;
  if (nvrtc_info(&why_not) == nullptr) return "no NVRTC: " + why_not;
  if (!CudaDevice::available(&why_not)) return "no CUDA device: " + why_not;
  return "";
}

// OpenCL with register tiles on every kernel that has a reduction to share (opt/gpu_tiles.h): the
// device's own target tiles only kernels with tens of thousands of outputs, larger than these cases.
const TargetCaps& opencl_tiles_caps() {
  static const TargetCaps caps = [] {
    TargetCaps tiles = opencl_target_caps();
    tiles.name = "opencl+tiles";
    tiles.register_tile = 4;
    tiles.register_tile_threads = 1;
    return tiles;
  }();
  return caps;
}

// OpenCL with tensor cores (opt/gpu_tensor_cores.h), which its renderer emulates through local
// memory: the transform's loads, stores and padding, checked on PoCL by the f16 and bf16 matmuls
// and convs; with register tiles however few the outputs, so that a warp computes several tiles
// where their counts allow.
const TargetCaps& opencl_tensor_core_caps() {
  static const TargetCaps caps = [] {
    TargetCaps cores = opencl_target_caps();
    cores.name = "opencl+tensor-cores";
    cores.tensor_cores = true;
    cores.bf16_tensor_cores = true;
    cores.register_tile = 4;
    cores.register_tile_threads = 1;
    return cores;
  }();
  return caps;
}

// opencl+cpu-opts and opencl+tiles run the cases of these dtypes only: their code paths do not
// depend on the dtype's width beyond what three of them show, and every kernel costs PoCL a build
// (about a quarter of a second on a cold cache), which the suite's time limit has to pay.
bool vectorized_dtype(S type) { return type == S::Float32 || type == S::Int32 || type == S::UInt8; }
bool every_dtype(S) { return true; }
bool narrow_floats(S type) { return type == S::Float16 || type == S::BFloat16; }  // the tensor cores' operands

const std::vector<Backend>& backends() {
  static const std::vector<Backend> list = [] {
    std::vector<Backend> result{{"opencl", ExecutionDevice::OpenCL, nullptr, every_dtype},
                                {"opencl+cpu-opts", ExecutionDevice::OpenCL, &host_cpu_caps(), vectorized_dtype},
                                {"opencl+tiles", ExecutionDevice::OpenCL, &opencl_tiles_caps(), vectorized_dtype},
                                {"opencl+tensor-cores", ExecutionDevice::OpenCL, &opencl_tensor_core_caps(), narrow_floats}};
    if (cuda_missing().empty()) result.push_back({"cuda", ExecutionDevice::Cuda, nullptr, every_dtype});
    return result;
  }();
  return list;
}

struct Tolerance {
  long double relative, absolute;
};
Tolerance tolerance_of(S type) {
  switch (type) {
    case S::Float64: return {1e-12L, 1e-12L};
    case S::Float32: return {1e-5L, 1e-6L};
    case S::Float16: return {4e-3L, 1e-3L};
    case S::BFloat16: return {1.6e-2L, 1e-2L};
    default: return {0, 0};
  }
}

// Families × backends → cases that passed, for the table at the end.
std::map<std::string, std::map<std::string, int>>& table() {
  static std::map<std::string, std::map<std::string, int>> rows;
  return rows;
}

HostTensor realize_on(const Backend* backend, const std::function<Tensor()>& build) {
  if (backend == nullptr) {
    ScopedRealizeDevice cpu(ExecutionDevice::Cpu);
    return test::from_tensor(build());
  }
  ScopedRealizeDevice scope(backend->device, backend->caps);
  uint64_t launches = device_kernel_launches();
  HostTensor result = test::from_tensor(build());
  // The result came from the OpenCL device, not from a CPU fallback.
  REQUIRE(device_kernel_launches() > launches);
  return result;
}

// Runs `build` on the CPU and on the other backends that run `type`'s cases, and compares.
void check_parity(const std::string& family, const std::string& name, S type, const std::function<Tensor()>& build) {
  HostTensor expected = realize_on(nullptr, build);
  table()[family]["cpu"] += 1;
  for (const Backend& backend : backends()) {
    if (!backend.runs(type)) continue;
    HostTensor got = realize_on(&backend, build);
    INFO(family, " / ", name, " on ", backend.name, " (", test::type_name(expected.type), ", shape ",
         test::shape_text(expected.shape), ")");
    REQUIRE(got.type == expected.type);
    REQUIRE(got.shape == expected.shape);
    Tolerance tolerance = tolerance_of(expected.type);
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < got.values.size(); ++i) {
      long double g = got.values[i], e = expected.values[i];
      bool same = (std::isnan(g) && std::isnan(e)) || g == e ||
                  (std::isfinite(g) && std::isfinite(e) &&
                   std::fabs(g - e) <= tolerance.absolute + tolerance.relative * std::fabs(e));
      if (!same && bad++ == 0) first_bad = i;
    }
    INFO("first mismatch at ", first_bad, ": got ", static_cast<double>(got.values.empty() ? 0 : got.values[first_bad]),
         ", cpu ", static_cast<double>(expected.values.empty() ? 0 : expected.values[first_bad]));
    CHECK(bad == 0);
    if (bad == 0) table()[family][backend.name] += 1;
  }
}

std::vector<S> device_types(bool with_bool = true) {
  std::vector<S> types;
  for (DType dtype : testing::opencl_dtypes())
    if (with_bool || !dtype.is_bool()) types.push_back(dtype.scalar());
  return types;
}
std::vector<S> float_types() {
  std::vector<S> types;
  for (S type : device_types())
    if (test::is_float_type(type)) types.push_back(type);
  return types;
}

Tensor input(S type, Shape shape, uint64_t seed, long double low = -4, long double high = 4) {
  return test::to_tensor(test::host(type, shape, test::sample_values(type, test::numel_of(shape), low, high, seed)));
}

}  // namespace

TEST_SUITE("opencl") {

TEST_CASE("elementwise arithmetic on every dtype") {
  for (S type : device_types()) {
    std::string t = test::type_name(type);
    // One graph per dtype (it fuses into one kernel: one build per backend): broadcasting arithmetic.
    check_parity("elementwise", "add/mul/sub/max/min, broadcast " + t, type, [&] {
      Tensor a = input(type, {3, 17}, 1), b = input(type, {3, 17}, 2), c = input(type, {17}, 3);
      // bool has no subtraction (Tensor::sub refuses it): add and mul are OR and AND.
      if (type == S::Bool) return a.add(b).mul(a).add(c);
      return a.add(b).mul(a).sub(b).maximum(c).add(a.minimum(c));
    });
    if (type == S::Bool) continue;
    check_parity("elementwise", "div " + t, type, [&] { return input(type, {33}, 5).div(input(type, {33}, 6, 1, 9)); });
  }
}

TEST_CASE("transcendentals and float math: the CPU's polynomials, bit for bit") {
  for (S type : float_types()) {
    std::string t = test::type_name(type);
    check_parity("transcendental", "exp/log/sin/cos " + t, type, [&] {
      Tensor x = input(type, {64}, 7, -6, 6);
      return x.exp().add(x.abs().add(Tensor::scalar(0.5, type)).log()).add(x.sin()).add(x.cos());
    });
    check_parity("transcendental", "tanh/sigmoid/erf/gelu/sqrt " + t, type, [&] {
      Tensor x = input(type, {50}, 8, -3, 3);
      return x.tanh().add(x.sigmoid()).add(x.erf()).add(x.gelu()).add(x.abs().sqrt());
    });
    check_parity("elementwise", "floor/ceil/round/trunc/reciprocal " + t, type, [&] {
      Tensor x = input(type, {40}, 9, -9, 9);
      return x.floor().add(x.ceil()).add(x.round()).add(x.trunc()).add(x.reciprocal());
    });
  }
}

TEST_CASE("comparisons, where, integer and bool logic") {
  for (S type : device_types(false)) {
    std::string t = test::type_name(type);
    check_parity("compare/where", "lt/eq/where " + t, type, [&] {
      Tensor a = input(type, {2, 21}, 10), b = input(type, {2, 21}, 11);
      return a.lt(b).logical_or(a.eq(b)).where(a, b);
    });
    if (test::is_int_type(type)) {
      check_parity("integer", "idiv/mod/bitwise/shift " + t, type, [&] {
        Tensor a = input(type, {30}, 12, -100, 100), b = input(type, {30}, 13, 1, 7);
        return a.idiv(b).add(a.mod(b)).add(a.bitwise_xor(b)).add(a.bitwise_and(b)).add(a.shift_left(b));
      });
    }
  }
  check_parity("integer", "bool logic", S::Bool, [] {
    Tensor a = input(S::Bool, {25}, 14), b = input(S::Bool, {25}, 15);
    return a.logical_xor(b).logical_and(a.logical_not().logical_or(b));
  });
}

TEST_CASE("reductions") {
  for (S type : device_types(false)) {
    std::string t = test::type_name(type);
    // Positive values: a full sum of 210 values of either sign cancels to near 0, and the CPU's
    // 16-lane AVX-512 partial sums then differ from OpenCL's order by more than 1e-5 of the result
    // (0.0853825 against 0.0853901) while both are within f32's error bound for the sum.
    check_parity("reduce", "sum/max over an axis, full sum/min " + t, type, [&] {
      Tensor x = input(type, {6, 7, 5}, 16, 0.5, 3);
      return x.sum({1}).add(x.max({1})).add(x.sum().add(x.min()));
    });
  }
  // The composites (several kernels each) on f32 and f64 only: bf16 reductions are the f32 kernels
  // with a rounding at the end, and every kernel costs a PoCL build.
  for (S type : float_types()) {
    if (type != S::Float32 && type != S::Float64) continue;
    std::string t = test::type_name(type);
    check_parity("reduce", "mean/prod/logsumexp " + t, type, [&] {
      Tensor x = input(type, {4, 12}, 18, 0.5, 1.5);
      return x.mean({1}).add(x.prod({1})).add(x.logsumexp({1}));
    });
    check_parity("reduce", "softmax/log_softmax " + t, type, [&] {
      Tensor x = input(type, {3, 19}, 19);
      return x.softmax(-1).add(x.log_softmax(0));
    });
    check_parity("reduce", "argmax/argmin " + t, type, [&] {
      Tensor x = input(type, {5, 13}, 20);
      return x.argmax(1).add(x.argmin(1));
    });
  }
  // Few outputs, long reductions of whole warps: CUDA gives each output a warp and combines its
  // lanes with shuffles (opt/gpu_grid.h), so the sums, maxima and a LayerNorm's two rows of
  // reductions run through that path there, and through the plain loop everywhere else.
  check_parity("reduce", "long rows: sum/max/layer norm f32", S::Float32, [&] {
    Tensor x = input(S::Float32, {6, 768}, 21, 0.5, 2);
    Tensor centred = x.sub(x.mean({1}, true));
    Tensor normalised = centred.div(centred.mul(centred).mean({1}, true).add(Tensor::scalar(1e-5)).sqrt());
    return normalised.add(x.sum({1}, true)).add(x.max({1}, true)).add(x.softmax(-1));
  });
  // Fewer outputs and longer reductions, not of whole groups: a work-group per output, its lanes'
  // partials meeting in local memory (OpenCL: 64 lanes here; CUDA: 256, a butterfly per warp first),
  // the last steps masked off. The i32 sum is not shared (f32 sums and maxima only) and stays a loop.
  check_parity("reduce", "ragged long rows: a work-group per output f32", S::Float32, [&] {
    Tensor x = input(S::Float32, {3, 5000}, 22, 0.5, 2);
    Tensor full = input(S::Float32, {1000}, 23, 0.5, 2).sum();
    return x.softmax(-1).add(x.sum({1}, true)).add(x.max({1}, true)).add(full);
  });
  // Reductions over several ranges walked as one: a pool over 13 × 13 pixels, and a conv with 64
  // outputs whose 9 channels × 3 × 3 taps (81 steps, not whole groups of 8) are shared.
  check_parity("reduce", "several ranges in a work-group: a pool f32", S::Float32, [&] {
    return input(S::Float32, {1, 9, 13, 13}, 25, 0.5, 2).sum({2, 3}).max({1}, true).add(
        input(S::Float32, {1, 9, 13, 13}, 27, 0.5, 2).max({2, 3}));
  });
  check_parity("reduce", "several ranges in a work-group: a conv f32", S::Float32, [&] {
    Tensor image = input(S::Float32, {1, 9, 6, 6}, 25, 0.5, 2);
    return image.conv(input(S::Float32, {4, 9, 3, 3}, 26, 0.5, 2));
  });
  check_parity("reduce", "long rows: i32 sum", S::Int32, [&] {
    return input(S::Int32, {3, 5000}, 24).sum({1});
  });
}

TEST_CASE("movement: permute, pad, slice, flip, expand, concat, gather") {
  for (S type : {S::Float32, S::Int32, S::UInt8, S::Bool}) {
    std::string t = test::type_name(type);
    check_parity("movement", "permute/pad/slice/flip " + t, type, [&] {
      Tensor x = input(type, {3, 4, 5}, 21);
      return x.permute({2, 0, 1}).pad({1, 0, 2, 0, 1, 3}).slice(0, 1, 6, 2).flip({1});
    });
    check_parity("movement", "expand/concat " + t, type, [&] {
      Tensor x = input(type, {1, 4}, 22), y = input(type, {2, 4}, 23);
      return Tensor::concat({x.expand({3, 4}), y, x}, 0);
    });
    check_parity("movement", "gather " + t, type, [&] {
      Tensor x = input(type, {6, 5}, 24);
      Tensor indices = input(S::Int64, {4, 5}, 25, 0, 5);
      return x.gather(0, indices);
    });
  }
}

TEST_CASE("matmul, conv and pooling") {
  for (S type : float_types()) {
    std::string t = test::type_name(type);
    check_parity("matmul/conv", "matmul " + t, type, [&] {
      return input(type, {2, 9, 16}, 26, -1, 1).matmul(input(type, {16, 12}, 27, -1, 1));
    });
    check_parity("matmul/conv", "conv2d stride 2 pad 1 " + t, type, [&] {
      Tensor x = input(type, {1, 3, 11, 11}, 28, -1, 1), w = input(type, {8, 3, 3, 3}, 29, -1, 1);
      ConvOptions options;
      options.stride = {2, 2};
      options.padding = {1, 1, 1, 1};
      return x.conv(w, input(type, {8}, 30), options);
    });
    check_parity("matmul/conv", "depthwise conv " + t, type, [&] {
      Tensor x = input(type, {1, 4, 9, 9}, 31, -1, 1), w = input(type, {4, 1, 3, 3}, 32, -1, 1);
      ConvOptions options;
      options.groups = 4;
      return x.conv(w, Tensor(), options);
    });
    check_parity("pooling", "max/avg pool " + t, type, [&] {
      Tensor x = input(type, {1, 2, 10, 10}, 33);
      PoolOptions options;
      options.kernel = {3, 3};
      options.stride = {2, 2};
      options.padding = {1, 1, 1, 1};
      return x.max_pool(options).add(x.avg_pool(options));
    });
  }
  // Split reductions (gpu_grid.h): 20,480 outputs, more than a work-group each allows, of 512
  // steps: four threads of a group per output, each summing every fourth step. (Small factors:
  // sums of 512 products in another order differ by more than f32's tolerance for short sums.)
  check_parity("matmul/conv", "f32 matmul 128x512 by 512x160 (split reductions)", S::Float32, [] {
    return input(S::Float32, {128, 512}, 48, -0.25, 0.25).matmul(input(S::Float32, {512, 160}, 49, -0.25, 0.25));
  });
  // Tensor-core shapes (opencl+tensor-cores): several 16×8 tiles and 16-step blocks, ragged and
  // whole; a batch both factors read; a 1×1 conv whose pixels are the tiles' columns.
  check_parity("matmul/conv", "f16 matmul 40x72 by 72x24", S::Float16, [] {
    return input(S::Float16, {40, 72}, 37, -1, 1).matmul(input(S::Float16, {72, 24}, 38, -1, 1));
  });
  check_parity("matmul/conv", "f16 batched matmul 3x32x48 by 3x48x16", S::Float16, [] {
    return input(S::Float16, {3, 32, 48}, 39, -1, 1).matmul(input(S::Float16, {3, 48, 16}, 40, -1, 1));
  });
  check_parity("matmul/conv", "f16 1x1 conv 32 to 16 channels, relu", S::Float16, [] {
    Tensor x = input(S::Float16, {1, 32, 5, 5}, 41, -1, 1), w = input(S::Float16, {16, 32, 1, 1}, 42, -1, 1);
    return x.conv(w, input(S::Float16, {16}, 43), ConvOptions()).relu();
  });
  check_parity("matmul/conv", "f16 matmul 60x40 by 40x32 (ragged rows and steps, a warp's 4 x 4 tiles)", S::Float16, [] {
    return input(S::Float16, {60, 40}, 46, -1, 1).matmul(input(S::Float16, {40, 32}, 47, -1, 1));
  });
  check_parity("matmul/conv", "bf16 matmul 40x72 by 72x24", S::BFloat16, [] {
    return input(S::BFloat16, {40, 72}, 44, -1, 1).matmul(input(S::BFloat16, {72, 24}, 45, -1, 1));
  });
  check_parity("matmul/conv", "int32 matmul", S::Int32, [] {
    return input(S::Int32, {5, 7}, 34, -9, 9).matmul(input(S::Int32, {7, 3}, 35, -9, 9));
  });
}

TEST_CASE("casts from every dtype to every other") {
  // One realize per source dtype: its casts to every other dtype, each widened to f64 (exact for
  // every value but 64-bit integers beyond 2^53, which round the same way on both backends) and
  // stacked, so a cast family costs a handful of kernel builds, not one per pair. The ALU test
  // (test_opencl_alu.cpp) checks every pair exactly against the IR evaluator, kernel by kernel.
  for (S from : device_types()) {
    check_parity("cast", "from " + test::type_name(from), from, [&] {
      // Values that truncate, saturate and wrap in the narrower types.
      Tensor x = input(from, {24}, 36, -300, 300);
      std::vector<Tensor> casts;
      for (S to : device_types())
        if (to != from) casts.push_back(x.cast(to).cast(S::Float64));
      return Tensor::stack(casts, 0);
    });
  }
}

TEST_CASE("print the families and backends that ran") {
  std::vector<std::string> names{"cpu"};
  for (const Backend& backend : backends()) names.push_back(backend.name);
  std::printf("backend parity (cases passed per family; reference: cpu):\n  %-16s", "family");
  for (const std::string& name : names) std::printf(" %16s", name.c_str());
  std::printf("\n");
  for (auto& [family, counts] : table()) {
    std::printf("  %-16s", family.c_str());
    for (const std::string& name : names) std::printf(" %16d", counts[name]);
    std::printf("\n");
  }
  if (std::string why = cuda_missing(); !why.empty()) std::printf("  not run: cuda (%s)\n", why.c_str());
  CHECK(!table().empty());
}

}  // TEST_SUITE
