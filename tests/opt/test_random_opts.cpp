// The correctness oracle for the Opt actions (issue 12, item 5): every kernel of a corpus built
// through the Tensor API runs unoptimised (the reference), then under random valid Opt sequences and
// under the heuristics' own choice, on the same inputs, and the results must agree.
//
//   KILN_OPT_ORACLE_CASES=n  random Opt sequences over the whole corpus (default 300, spread evenly
//                            over its kernels); e.g. KILN_OPT_ORACLE_CASES=2000 for a longer run.
//   KILN_CPU_TARGET=avx2     the meson test `opt-avx2` runs this executable with 256-bit vectors.
//
// Each kernel is checked in schedule order, right after its reference ran, so it reads exactly the
// buffers it reads in a real run. An optimised variant writes into copies of its output buffers taken
// before the reference ran (filled with a sentinel byte plus a guard tail), so an element it fails to
// store, or a store past the end, shows up. Integer and bool results must match bit for bit; float
// results within rtol plus an atol that grows with the reduction length (reassociation and FMA change
// the rounding, nothing else may). A failure prints the kernel, its AST, and the Opt sequence, shrunk
// to the fewest opts that still fail.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/target.h"
#include "ir/build.h"
#include "ir/printer.h"
#include "ir/substitute.h"
#include "kiln/kiln.hpp"
#include "opt/expand.h"
#include "opt/heuristics.h"
#include "opt/opt.h"
#include "passes/pipeline.h"
#include "passes/symbolic.h"
#include "runtime/host_buffer.h"
#include "schedule/schedule.h"
#include "support/error.h"
#include "tensor/tensor_internal.h"
#include "tensor/tensor_test_helpers.h"

namespace kiln {
namespace {

using S = ScalarType;
using test::Random;

constexpr int64_t kDefaultCases = 300;
// The product of the amounts of one sequence's opts: 4 opts of 16·8·8·7 would make kernels of tens
// of thousands of operations, slow to compile and no more likely to break.
constexpr int64_t kMaxExpansion = 256;
constexpr unsigned char kSentinel = 0xA5;
constexpr size_t kGuardBytes = 64;

int64_t cases_from_environment() {
  const char* text = std::getenv("KILN_OPT_ORACLE_CASES");
  if (text == nullptr || *text == '\0') return kDefaultCases;
  return std::max<int64_t>(0, std::strtoll(text, nullptr, 10));
}

// ---- the corpus ----

// A realized input: values in [low, high] (integers for integer types), from a seeded generator.
Tensor input(Shape shape, S type, uint64_t seed, double low = -1, double high = 1) {
  int64_t count = test::numel_of(shape);
  return test::to_tensor(test::host(type, shape, test::sample_values(type, count, low, high, seed)));
}
Tensor f32(Shape shape, uint64_t seed, double low = -1, double high = 1) { return input(std::move(shape), S::Float32, seed, low, high); }

struct Case {
  const char* name;
  std::function<std::vector<Tensor>()> build;
};

Tensor conv(const Tensor& x, const Tensor& w, const Tensor& bias, std::vector<int64_t> stride,
            std::vector<int64_t> padding, int64_t groups = 1) {
  ConvOptions options;
  options.stride = std::move(stride);
  options.padding = std::move(padding);
  options.groups = groups;
  return x.conv(w, bias, options);
}

std::vector<Case> corpus() {
  return {
      // matmul: odd and even sizes, a long reduction, integer and f64/f16 element types
      {"matmul 7x13x7", [] { return std::vector{f32({7, 13}, 1).matmul(f32({13, 7}, 2))}; }},
      {"matmul 16x24x32", [] { return std::vector{f32({16, 24}, 3).matmul(f32({24, 32}, 4))}; }},
      {"matmul 13x1000x16", [] { return std::vector{f32({13, 1000}, 5).matmul(f32({1000, 16}, 6))}; }},
      {"matmul 48x32x64", [] { return std::vector{f32({48, 32}, 7).matmul(f32({32, 64}, 8))}; }},
      // The heuristics' tile takes all 6 rows (axis 0 unrolled whole) and then reorders the loops.
      {"matmul 6x64x640", [] { return std::vector{f32({6, 64}, 7).matmul(f32({64, 640}, 8))}; }},
      {"matvec 1000x24", [] { return std::vector{f32({1000}, 9).matmul(f32({1000, 24}, 10))}; }},
      {"matvec 1x1280x40 (reduction unrolled 8 and 2)",
       [] { return std::vector{f32({1, 1280}, 9).matmul(f32({1280, 40}, 10))}; }},
      {"matmul i32 7x13x16",
       [] { return std::vector{input({7, 13}, S::Int32, 11, -50, 50).matmul(input({13, 16}, S::Int32, 12, -50, 50))}; }},
      {"matmul f64 13x7x24",
       [] { return std::vector{input({13, 7}, S::Float64, 13).matmul(input({7, 24}, S::Float64, 14))}; }},
      {"matmul f16 16x24x16",
       [] { return std::vector{input({16, 24}, S::Float16, 15).matmul(input({24, 16}, S::Float16, 16))}; }},
      {"batched matmul 3x13x16x24", [] { return std::vector{f32({3, 13, 16}, 17).matmul(f32({3, 16, 24}, 18))}; }},
      {"broadcast batched matmul 2x3x7x16x8",
       [] { return std::vector{f32({2, 1, 7, 16}, 19).matmul(f32({3, 16, 8}, 20))}; }},
      // convolutions
      {"conv 3x3 pad 1", [] { return std::vector{conv(f32({2, 3, 13, 13}, 21), f32({8, 3, 3, 3}, 22), f32({8}, 23), {}, {1, 1, 1, 1})}; }},
      {"conv 3x3 stride 2 pad 1",
       [] { return std::vector{conv(f32({1, 4, 16, 16}, 24), f32({16, 4, 3, 3}, 25), Tensor(), {2, 2}, {1, 1, 1, 1}).relu()}; }},
      {"conv 3x3 asymmetric pad stride 2x1",
       [] { return std::vector{conv(f32({1, 3, 13, 24}, 26), f32({8, 3, 3, 3}, 27), Tensor(), {2, 1}, {0, 1, 1, 2})}; }},
      {"conv 1x1", [] { return std::vector{conv(f32({1, 16, 7, 7}, 28), f32({24, 16, 1, 1}, 29), f32({24}, 30), {}, {})}; }},
      // 169 pixels allow no tile rows: the heuristics merge them and pad them to 176 or 175.
      {"conv 1x1 at 28x28 + add (49 pixel vectors paired by a SPLIT, the last pair clamped)", [] {
         return std::vector{(conv(f32({1, 24, 28, 28}, 28), f32({32, 24, 1, 1}, 29), f32({32}, 30), {}, {}) + f32({1, 32, 28, 28}, 31)).relu()};
       }},
      {"conv 1x1 at 13x13", [] { return std::vector{conv(f32({1, 16, 13, 13}, 28), f32({32, 16, 1, 1}, 29), Tensor(), {}, {}).relu()}; }},
      {"depthwise conv 3x3",
       [] { return std::vector{conv(f32({1, 8, 16, 16}, 31), f32({8, 1, 3, 3}, 32), f32({8}, 33), {}, {1, 1, 1, 1}, 8)}; }},
      // reductions and what surrounds them
      {"sum inner 24x1000", [] { return std::vector{f32({24, 1000}, 34).sum({1})}; }},
      {"sum outer 48x32", [] { return std::vector{f32({48, 32}, 35).sum({0})}; }},
      {"sum middle 7x16x13", [] { return std::vector{f32({7, 16, 13}, 36).sum({1}, true) * 2.0}; }},
      {"sum all 16x24", [] { return std::vector{f32({16, 24}, 37).sum()}; }},
      {"max inner 13x64", [] { return std::vector{f32({13, 64}, 38).max({1})}; }},
      {"max outer 7x48", [] { return std::vector{f32({7, 48}, 39).max({0})}; }},
      // Rows a multiple of the lanes: the heuristics gather the row maximum's lanes over the rows.
      {"max inner 24x40", [] { return std::vector{f32({24, 40}, 91).max({1})}; }},
      {"softmax 2x8x48", [] { return std::vector{f32({2, 8, 48}, 92, -4, 4).softmax(-1)}; }},
      {"prod inner 7x16", [] { return std::vector{f32({7, 16}, 40, 0.5, 1.5).prod({1})}; }},
      {"sum i32 13x1000", [] { return std::vector{input({13, 1000}, S::Int32, 41, -100, 100).sum({1})}; }},
      {"min i32 outer 64x7", [] { return std::vector{input({64, 7}, S::Int32, 42, -1000, 1000).min({0})}; }},
      {"argmax 13x48", [] { return std::vector{f32({13, 48}, 43).argmax(1)}; }},
      {"centre rows 16x48", [] {
         Tensor x = f32({16, 48}, 44);
         return std::vector{x - x.mean({1}, true)};
       }},
      {"softmax 13x64", [] { return std::vector{f32({13, 64}, 45, -4, 4).softmax(-1)}; }},
      {"layer norm 16x48", [] { return std::vector{f32({16, 48}, 46).layer_norm(f32({48}, 47), f32({48}, 48))}; }},
      {"max pool 2x2", [] {
         PoolOptions options;
         options.kernel = {2, 2};
         return std::vector{f32({1, 4, 16, 16}, 49).max_pool(options)};
       }},
      {"max pool 3x3 stride 2 at 27x27", [] {
         PoolOptions options;
         options.kernel = {3, 3};
         options.stride = {2, 2};
         return std::vector{f32({1, 8, 27, 27}, 50).max_pool(options)};
       }},
      {"avg pool 3x3 pad 1", [] {
         PoolOptions options;
         options.kernel = {3, 3};
         options.stride = {1, 1};
         options.padding = {1, 1, 1, 1};
         return std::vector{f32({1, 2, 13, 13}, 50).avg_pool(options)};
       }},
      // elementwise with broadcasts, several outputs
      {"broadcast 7x13x16", [] { return std::vector{f32({7, 1, 16}, 51) + f32({1, 13, 16}, 52) * f32({16}, 53)}; }},
      {"relu affine 1000", [] { return std::vector{(f32({1000}, 54) * 3.0 - 0.5).relu()}; }},
      {"two outputs 48x16", [] {
         Tensor x = f32({48, 16}, 55);
         return std::vector{x + 1.0, x * x};
       }},
      {"i32 idiv mod 13x16", [] {
         Tensor a = input({13, 16}, S::Int32, 56, -1000, 1000), b = input({16}, S::Int32, 57, 1, 9);
         return std::vector{a.idiv(b) + a.mod(b)};
       }},
      // movement
      {"pad 7x13", [] { return std::vector{f32({7, 13}, 58).pad({1, 2, 3, 0}) * 2.0 + 1.0}; }},
      {"pad reflect 16x13", [] { return std::vector{f32({16, 13}, 59).pad({2, 2, 1, 3}, PadMode::Reflect)}; }},
      {"permute 16x24x7", [] { return std::vector{f32({16, 24, 7}, 60).permute({2, 0, 1}) + 1.0}; }},
      {"transpose 24x32", [] { return std::vector{f32({24, 32}, 61).transpose() * 3.0}; }},
      {"flip shrink 13x48", [] { return std::vector{f32({13, 48}, 62).flip({1}).shrink({{1, 12}, {8, 40}}) - 1.0}; }},
      {"concat 7x13+7x16", [] { return std::vector{Tensor::concat({f32({7, 13}, 63), f32({7, 16}, 64) * 2.0}, 1)}; }},
      // gathers
      {"take axis 0 13x16", [] {
         return std::vector{f32({13, 16}, 65).take(input({7}, S::Int64, 66, -13, 12), 0)};
       }},
      {"take axis 1 16x24", [] {
         return std::vector{f32({16, 24}, 67).take(input({32}, S::Int32, 68, 0, 23), 1) * 2.0};
       }},
      {"gather axis 1 13x16", [] {
         return std::vector{f32({13, 16}, 69).gather(1, input({13, 7}, S::Int64, 70, 0, 15))};
       }},
      // casts
      {"f32 to i32 24x32", [] { return std::vector{f32({24, 32}, 71, -100, 100).cast(S::Int32)}; }},
      {"i32 to f32 13x48", [] { return std::vector{input({13, 48}, S::Int32, 72, -5000, 5000).cast(S::Float32) * 0.5}; }},
      {"f32 to f64 sum 16x64", [] {
         Tensor a = f32({16, 64}, 73).cast(S::Float64), b = f32({16, 64}, 74).cast(S::Float64);
         return std::vector{(a * b).sum({1})};
       }},
      {"f64 to f32 7x1000", [] { return std::vector{(input({7, 1000}, S::Float64, 75) * 3.0).cast(S::Float32)}; }},
      {"i32 to f64 48x16", [] { return std::vector{input({48, 16}, S::Int32, 76, -100, 100).cast(S::Float64) / 7.0}; }},
      // bool compares and where
      {"where compare 24x32", [] {
         Tensor a = f32({24, 32}, 77), b = f32({24, 32}, 78);
         return std::vector{a.gt(b).where(a, b * 2.0)};
       }},
      {"bool output 24x16", [] {
         Tensor a = f32({24, 16}, 79), b = f32({16}, 80);
         return std::vector{a.lt(Tensor::scalar(0.25)).logical_and(b.ge(Tensor::scalar(0.0)))};
       }},
      {"where i32 13x48", [] {
         Tensor a = input({13, 48}, S::Int32, 81, -100, 100), b = input({13, 48}, S::Int32, 82, -100, 100);
         return std::vector{a.gt(b).where(a, b)};
       }},
      {"bool to f32 64x7", [] {
         Tensor a = f32({64, 7}, 83);
         return std::vector{a.gt(Tensor::scalar(0.0)).cast(S::Float32) + a};
       }},
      // transcendentals
      {"exp 13x64", [] { return std::vector{f32({13, 64}, 84, -10, 10).exp()}; }},
      {"log 7x48", [] { return std::vector{f32({7, 48}, 85, 0.001, 100).log()}; }},
      {"sin 24x32", [] { return std::vector{f32({24, 32}, 86, -10, 10).sin()}; }},
      {"exp sin log 16x24", [] {
         Tensor x = f32({16, 24}, 87);
         return std::vector{x.sin().exp() + (x * x + 1.0).log()};
       }},
      {"log sum exp 16x1000", [] { return std::vector{f32({16, 1000}, 88, -3, 3).exp().sum({1}).log()}; }},
      // f16 values (vectors the renderer widens to f32 vectors per op)
      {"f16 broadcast 16x24", [] {
         return std::vector{input({16, 24}, S::Float16, 89) * input({24}, S::Float16, 90) + input({16, 24}, S::Float16, 91)};
       }},
      {"f16 sum 13x64", [] { return std::vector{input({13, 64}, S::Float16, 92).sum({1})}; }},
      {"f16 exp sin 7x32", [] {
         Tensor x = input({7, 32}, S::Float16, 93, -3, 3);
         return std::vector{x.exp() + x.sin()};
       }},
      // Compares of f16 values: the heuristics vectorise these themselves (compares_f16).
      {"f16 residual relu and max 4x14x14", [] {
         Tensor x = input({4, 14, 14}, S::Float16, 107), y = input({4, 14, 14}, S::Float16, 108);
         return std::vector{(x + y).relu(), x.maximum(y), x.gt(y).cast(S::Float16)};
       }},
      {"f16 casts 24x16", [] {
         Tensor x = input({24, 16}, S::Float16, 94, -100, 100);
         return std::vector{x.cast(S::Float32) * 0.25, f32({24, 16}, 95, -100, 100).cast(S::Float16)};
       }},
      // bf16 values (i16 vectors widened by a shift, rounded back with integer vector ops)
      {"bf16 broadcast 16x24", [] {
         return std::vector{input({16, 24}, S::BFloat16, 96) * input({24}, S::BFloat16, 97) +
                            input({16, 24}, S::BFloat16, 98)};
       }},
      {"bf16 sum 13x64", [] { return std::vector{input({13, 64}, S::BFloat16, 99).sum({1})}; }},
      {"bf16 matmul 16x24 by 24x16", [] {
         return std::vector{input({16, 24}, S::BFloat16, 100).matmul(input({24, 16}, S::BFloat16, 101))};
       }},
      {"bf16 exp sin neg 7x32", [] {
         Tensor x = input({7, 32}, S::BFloat16, 102, -3, 3);
         return std::vector{x.exp() + x.sin() - x.neg()};
       }},
      {"bf16 casts 24x16", [] {
         Tensor x = input({24, 16}, S::BFloat16, 103, -100, 100);
         Tensor i = input({24, 16}, S::Int16, 104, -300, 300), j = input({24, 16}, S::Int32, 105, -70000, 70000);
         return std::vector{x.cast(S::Float32) * 0.25, f32({24, 16}, 106, -100, 100).cast(S::BFloat16),
                            x.cast(S::Float16), i.cast(S::BFloat16) + j.cast(S::BFloat16),
                            x.gt(Tensor::scalar(0.5)).cast(S::BFloat16), x.cast(S::Int32)};
       }},
  };
}

// ---- running kernels ----

// Every buffer a graph's tensors hold, by BUFFER id (what realize() binds to the Input buffers).
std::unordered_map<int64_t, std::shared_ptr<HostBuffer>> graph_buffers(const std::vector<Tensor>& outputs) {
  std::unordered_map<int64_t, std::shared_ptr<HostBuffer>> buffers;
  std::unordered_set<const detail::TensorData*> seen;
  std::vector<const detail::TensorData*> stack;
  for (const Tensor& t : outputs) stack.push_back(&t.data());
  while (!stack.empty()) {
    const detail::TensorData* data = stack.back();
    stack.pop_back();
    if (!seen.insert(data).second) continue;
    if (data->buffer) buffers.emplace(data->buffer_id, data->buffer);
    for (const auto& source : data->inputs) stack.push_back(source.get());
  }
  return buffers;
}

// A schedule buffer's bytes followed by a guard, everything filled with kSentinel (or a copy).
std::shared_ptr<HostBuffer> guarded_buffer(size_t bytes, const void* contents = nullptr) {
  auto buffer = std::make_shared<HostBuffer>(dtypes::u8, static_cast<int64_t>(bytes + kGuardBytes), HostBuffer::Fill::None);
  std::memset(buffer->data(), kSentinel, bytes + kGuardBytes);
  if (contents != nullptr) std::memcpy(buffer->data(), contents, bytes);
  return buffer;
}

bool guard_intact(const HostBuffer& buffer, size_t bytes) {
  const auto* guard = static_cast<const unsigned char*>(buffer.data()) + bytes;
  return std::all_of(guard, guard + kGuardBytes, [](unsigned char b) { return b == kSentinel; });
}

// The DEFINE_GLOBAL slots a kernel stores to.
std::vector<size_t> stored_slots(const UOpPtr& ast) {
  std::vector<size_t> slots;
  for (const UOpPtr& store : ast->srcs()) {
    auto slot = static_cast<size_t>(store->src(0)->src(0)->arg_int());
    if (std::find(slots.begin(), slots.end(), slot) == slots.end()) slots.push_back(slot);
  }
  return slots;
}

// The number of values one output element combines: the product of the reduce ranges' extents.
int64_t reduction_length(const UOpPtr& ast) {
  int64_t length = 1;
  for (const UOp* range : kernel_ranges(ast))
    if (axis_kind(range->arg_int()) == AxisKind::Reduce && range->src(0)->is_const())
      length *= static_cast<int64_t>(range->src(0)->const_int());
  return length;
}

std::string opts_text(const std::vector<Opt>& opts) {
  std::string text;
  for (const Opt& opt : opts) text += (text.empty() ? "" : ", ") + opt.text();
  return text.empty() ? "(none)" : text;
}

template <class T>
T element(const unsigned char* bytes, size_t i) {
  T value;
  std::memcpy(&value, bytes + i * sizeof(T), sizeof(T));
  return value;
}

double element_value(DType dtype, const unsigned char* bytes, size_t i) {
  switch (dtype.scalar()) {
    case S::Float16: return static_cast<double>(test::f16_value(element<uint16_t>(bytes, i)));
    case S::BFloat16: return static_cast<double>(test::bf16_value(element<uint16_t>(bytes, i)));
    case S::Float32: return element<float>(bytes, i);
    default: return element<double>(bytes, i);
  }
}

// Machine epsilon and relative tolerance of a float dtype.
std::pair<double, double> float_precision(DType dtype) {
  switch (dtype.scalar()) {
    case S::Float16: return {std::ldexp(1.0, -10), 4e-3};
    case S::BFloat16: return {std::ldexp(1.0, -7), 3e-2};
    case S::Float64: return {std::ldexp(1.0, -52), 1e-12};
    default: return {std::ldexp(1.0, -23), 1e-5};
  }
}

// The first element where `got` and `expected` (count elements of dtype) disagree beyond the
// tolerance, described; nullopt when they agree. `worst` grows to the largest float error seen, as
// a fraction of the tolerance.
std::optional<std::string> mismatch(DType dtype, const unsigned char* got, const unsigned char* expected, int64_t count,
                                    int64_t reduce_length, double& worst) {
  size_t size = static_cast<size_t>(dtype.scalar_bytes());
  if (!dtype.is_float()) {
    for (size_t i = 0; i < static_cast<size_t>(count); ++i)
      if (std::memcmp(got + i * size, expected + i * size, size) != 0) {
        int64_t g = 0, e = 0;
        std::memcpy(&g, got + i * size, size);  // little endian: the low bytes
        std::memcpy(&e, expected + i * size, size);
        return str_cat("element ", i, " of ", count, " (", dtype.name(), "): got bits ", g, ", expected ", e);
      }
    return std::nullopt;
  }
  double scale = 1;
  for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
    double e = element_value(dtype, expected, i);
    if (std::isfinite(e)) scale = std::max(scale, std::fabs(e));
  }
  auto [epsilon, rtol] = float_precision(dtype);
  double atol = 2 * epsilon * static_cast<double>(reduce_length) * scale;
  for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
    double g = element_value(dtype, got, i), e = element_value(dtype, expected, i);
    bool finite = std::isfinite(e) && std::isfinite(g);
    if (finite) worst = std::max(worst, std::fabs(g - e) / (atol + rtol * std::fabs(e)));
    bool match = std::isnan(e) || std::isnan(g) ? std::isnan(e) && std::isnan(g)
                 : !finite                        ? g == e
                                                  : std::fabs(g - e) <= atol + rtol * std::fabs(e);
    if (!match)
      return str_cat("element ", i, " of ", count, " (", dtype.name(), "): got ", test::value_text(g), ", expected ",
                     test::value_text(e), " (atol ", atol, ", rtol ", rtol, ")");
  }
  return std::nullopt;
}

// One kernel of a schedule, at the point of the reference run where it runs: its arguments, and its
// stored buffers before and after the reference.
class KernelOracle {
 public:
  KernelOracle(const Schedule& schedule, const ScheduledKernel& kernel, std::vector<void*> arguments, std::string symbol_prefix)
      : kernel_(kernel), arguments_(std::move(arguments)), symbol_prefix_(std::move(symbol_prefix)),
        reduce_length_(reduction_length(kernel.ast)) {
    for (size_t slot : stored_slots(kernel.ast)) {
      const ScheduledBuffer& buffer = schedule.buffers[static_cast<size_t>(kernel.buffers[slot])];
      outputs_.push_back({slot, buffer.dtype, buffer.count, static_cast<size_t>(buffer.bytes()), {}, {}});
    }
  }

  // Runs the unoptimised kernel in place (the shared buffers then hold the reference results).
  void run_reference() {
    for (Output& output : outputs_) output.before = snapshot(output);
    run(compile(kernel_.ast), parallel_extent_of(kernel_.ast).value(), arguments_, nullptr);
    for (Output& output : outputs_) output.after = snapshot(output);
  }

  // Runs `opts` applied to the kernel on copies of its outputs; the failure, described, or nullopt.
  std::optional<std::string> check(const std::vector<Opt>& opts, Random& random) {
    std::vector<void*> arguments = arguments_;
    std::vector<std::shared_ptr<HostBuffer>> copies;
    try {
      UOpPtr optimised = apply_opts(kernel_.ast, opts);
      for (const Output& output : outputs_) {
        copies.push_back(guarded_buffer(output.bytes, output.before.data()));
        arguments[output.slot] = copies.back()->data();
      }
      run(compile(optimised), parallel_extent_of(optimised).value(), arguments, &random);
    } catch (const std::exception& error) {
      return str_cat("threw: ", error.what());
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const Output& output = outputs_[i];
      if (!guard_intact(*copies[i], output.bytes)) return str_cat("stored past the end of slot ", output.slot);
      auto got = static_cast<const unsigned char*>(copies[i]->data());
      if (auto problem = mismatch(output.dtype, got, output.after.data(), output.count, reduce_length_, worst_error_))
        return str_cat("slot ", output.slot, ": ", *problem);
    }
    return std::nullopt;
  }

  // The shortest sub-sequence of a failing `opts` that still fails (removing one opt at a time).
  std::vector<Opt> shrink(std::vector<Opt> opts, Random& random) {
    for (size_t i = 0; i < opts.size() && opts.size() > 1;) {
      std::vector<Opt> fewer = opts;
      fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
      bool applies = true;
      try {
        apply_opts(kernel_.ast, fewer);
      } catch (const InvalidOpt&) {
        applies = false;
      }
      if (applies && check(fewer, random)) {
        opts = std::move(fewer);
        i = 0;
      } else {
        ++i;
      }
    }
    return opts;
  }

  const ScheduledKernel& kernel() const { return kernel_; }
  double worst_error() const { return worst_error_; }  // largest float error checked / its tolerance

 private:
  struct Output {
    size_t slot;
    DType dtype;
    int64_t count;
    size_t bytes;
    std::vector<unsigned char> before, after;
  };

  std::vector<unsigned char> snapshot(const Output& output) const {
    auto data = static_cast<const unsigned char*>(arguments_[output.slot]);
    return {data, data + output.bytes};
  }

  // Loaded kernels are cached by symbol, so every variant gets its own.
  KernelFunction compile(const UOpPtr& ast) {
    ScheduledKernel variant = kernel_;
    variant.ast = UOp::make(Ops::SINK, dtypes::void_, ast->srcs(), str_cat(symbol_prefix_, "v", variants_++));
    variant.parallel_extent = parallel_extent_of(ast);
    return compile_cpu_kernel(variant).function;
  }

  // Over [0, extent) of axis 0: in one call, or (with `random`) in up to three chunks, last first.
  static void run(KernelFunction function, int64_t extent, const std::vector<void*>& arguments, Random* random) {
    std::vector<int64_t> cuts{0, extent};
    if (random != nullptr && extent > 1)
      for (uint64_t n = random->next() % 3; n > 0; --n) cuts.push_back(1 + static_cast<int64_t>(random->next() % static_cast<uint64_t>(extent - 1)));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t i = cuts.size() - 1; i > 0; --i) function(arguments.data(), cuts[i - 1], cuts[i]);
  }

  const ScheduledKernel& kernel_;
  std::vector<void*> arguments_;
  std::string symbol_prefix_;
  int64_t reduce_length_;
  int variants_ = 0;
  double worst_error_ = 0;
  std::vector<Output> outputs_;
};

// Every Opt the oracle may draw for `ast` now: UPCAST of an output or reduce axis by 2/4/8/16, UNROLL of an
// output or reduce axis by 2/3/4/5/7/8, each dividing the axis and within the expansion budget;
// PADTO of an output axis to a multiple of 4/8/16; SPLIT of an output axis by 3 or 8 and BLOCKS of
// one into 2 or 3 blocks (padded where that does not divide it); SWAP and MERGE of two output axes.
std::vector<Opt> candidate_opts(const UOpPtr& ast, int64_t expansion) {
  std::vector<Opt> candidates;
  for (const UOp* range : kernel_ranges(ast)) {
    if (!range->src(0)->is_const()) continue;
    auto extent = static_cast<int64_t>(range->src(0)->const_int());
    AxisKind kind = axis_kind(range->arg_int());
    auto add = [&](OptOp op, std::initializer_list<int64_t> amounts) {
      for (int64_t amount : amounts) {
        if (extent % amount == 0 && amount * expansion <= kMaxExpansion)
          candidates.push_back({op, range->arg_int(), amount});
      }
    };
    if (kind == AxisKind::Loop || kind == AxisKind::Reduce) add(OptOp::Upcast, {2, 4, 8, 16});
    if (kind == AxisKind::Loop || kind == AxisKind::Reduce) add(OptOp::Unroll, {2, 3, 4, 5, 7, 8});
    if (kind != AxisKind::Loop) continue;
    for (int64_t multiple : {4, 8, 16})
      if (extent % multiple != 0 && extent < 4096) candidates.push_back({OptOp::Padto, range->arg_int(), multiple});
    for (int64_t amount : {3, 8})
      if (amount < extent) candidates.push_back({OptOp::Split, range->arg_int(), amount});
    for (int64_t blocks : {2, 3})
      if (blocks < extent) candidates.push_back({OptOp::Blocks, range->arg_int(), blocks});
    for (const UOp* other : kernel_ranges(ast))
      if (other != range && axis_kind(other->arg_int()) == AxisKind::Loop && other->src(0)->is_const()) {
        candidates.push_back({OptOp::Swap, range->arg_int(), other->arg_int()});
        candidates.push_back({OptOp::Merge, range->arg_int(), other->arg_int()});
      }
  }
  return candidates;
}

// 1–4 opts that apply one after the other (and the AST they make); those that throw InvalidOpt (a
// second UPCAST) are skipped.
std::vector<Opt> random_opts(const UOpPtr& ast, Random& random, int& skipped, UOpPtr& current) {
  std::vector<Opt> opts;
  current = ast;
  int64_t expansion = 1;
  for (uint64_t length = 1 + random.next() % 4; opts.size() < length;) {
    std::vector<Opt> candidates = candidate_opts(current, expansion);
    bool applied = false;
    while (!candidates.empty() && !applied) {
      size_t pick = static_cast<size_t>(random.next() % candidates.size());
      try {
        current = apply_opt(current, candidates[pick]);
        opts.push_back(candidates[pick]);
        if (candidates[pick].op == OptOp::Upcast || candidates[pick].op == OptOp::Unroll) expansion *= candidates[pick].amount;
        applied = true;
      } catch (const InvalidOpt&) {
        ++skipped;
        candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(pick));
      }
    }
    if (!applied) break;
  }
  return opts;
}

struct Tally {
  int kernels = 0, sequences = 0, heuristic = 0, skipped = 0, failures = 0;
  double worst_error = 0;  // of the float results that passed or failed, as a fraction of their tolerance
};

void report_failure(const KernelOracle& oracle, const char* case_name, const char* source, const std::vector<Opt>& opts,
                    const std::vector<Opt>& shrunk, const std::string& problem) {
  FAIL_CHECK(str_cat("case '", case_name, "', kernel ", oracle.kernel().name(), ", ", source, " opts ", opts_text(opts),
                     "\n  shrunk to: ", opts_text(shrunk), "\n  ", problem, "\n  kernel AST:\n",
                     print_graph(oracle.kernel().ast)));
}

// The schedule of `outputs` with a pointer per schedule buffer: the graph's own data for inputs, a
// guarded buffer of its own for every other (no arena reuse: each kernel's inputs stay readable).
struct BoundSchedule {
  Schedule schedule;
  std::vector<std::shared_ptr<HostBuffer>> owned;
  std::vector<void*> pointers;

  std::vector<void*> arguments(const ScheduledKernel& kernel) const {
    std::vector<void*> result;
    for (int buffer : kernel.buffers) result.push_back(pointers[static_cast<size_t>(buffer)]);
    return result;
  }
};

BoundSchedule bind_schedule(const std::vector<Tensor>& outputs) {
  BoundSchedule bound;
  std::vector<UOpPtr> nodes;
  for (const Tensor& t : outputs) nodes.push_back(t.data().node);
  bound.schedule = create_schedule(nodes);
  auto inputs = graph_buffers(outputs);
  for (const ScheduledBuffer& buffer : bound.schedule.buffers) {
    if (buffer.kind == ScheduledBuffer::Kind::Input) {
      REQUIRE(inputs.count(buffer.input_id) == 1);
      // Held here: the caller's Tensors may be temporaries that die before the kernels run.
      bound.owned.push_back(inputs.at(buffer.input_id));
      bound.pointers.push_back(inputs.at(buffer.input_id)->data());
    } else {
      bound.owned.push_back(guarded_buffer(static_cast<size_t>(buffer.bytes())));
      bound.pointers.push_back(bound.owned.back()->data());
    }
  }
  return bound;
}

// Checks every kernel of one corpus case; `per_kernel` random sequences each.
void check_case(const Case& test_case, size_t case_index, int64_t per_kernel, Tally& tally) {
  std::vector<Tensor> outputs = test_case.build();
  BoundSchedule bound = bind_schedule(outputs);
  const Schedule& schedule = bound.schedule;
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const ScheduledKernel& kernel = schedule.kernels[k];
    KernelOracle oracle(schedule, kernel, bound.arguments(kernel), str_cat(kernel.name(), "_c", case_index, "k", k));
    oracle.run_reference();
    ++tally.kernels;
    Random random(test::mix64(case_index * 1000 + k + 1));
    std::unordered_set<UOpPtr, UOpPtrHash> tried{kernel.ast};

    auto try_opts = [&](const std::vector<Opt>& opts, const char* source) {
      if (auto problem = oracle.check(opts, random)) {
        ++tally.failures;
        report_failure(oracle, test_case.name, source, opts, oracle.shrink(opts, random), *problem);
      }
    };

    std::vector<Opt> chosen = hand_coded_opts(kernel.ast, host_cpu_caps());
    if (!chosen.empty()) {
      ++tally.heuristic;
      try {
        tried.insert(apply_opts(kernel.ast, chosen));
      } catch (const InvalidOpt&) {
      }  // check() reports it
      try_opts(chosen, "heuristic");
    }
    // Distinct optimised ASTs only; a small kernel may have fewer than per_kernel of them.
    for (int64_t n = 0, draws = 0; n < per_kernel && draws < 8 * per_kernel; ++draws) {
      UOpPtr optimised;
      std::vector<Opt> opts = random_opts(kernel.ast, random, tally.skipped, optimised);
      if (opts.empty()) break;
      if (!tried.insert(optimised).second) continue;
      ++n;
      ++tally.sequences;
      try_opts(opts, "random");
    }
    tally.worst_error = std::max(tally.worst_error, oracle.worst_error());
  }
}

TEST_SUITE("opt") {

TEST_CASE("every kernel of the corpus computes the same under random Opt sequences and the heuristics' choice") {
  std::vector<Case> cases = corpus();
  // Spread the sequences evenly: count the corpus's kernels first (scheduling only).
  int64_t kernel_count = 0;
  for (const Case& test_case : cases) {
    std::vector<UOpPtr> nodes;
    for (const Tensor& t : test_case.build()) nodes.push_back(t.data().node);
    kernel_count += static_cast<int64_t>(create_schedule(nodes).kernels.size());
  }
  int64_t total = cases_from_environment();
  int64_t per_kernel = kernel_count == 0 ? 0 : (total + kernel_count - 1) / kernel_count;
  Tally tally;
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i], i, per_kernel, tally);
  MESSAGE(str_cat("opt oracle on ", host_cpu_caps().name, ": ", cases.size(), " graphs, ", tally.kernels, " kernels, ",
                  tally.sequences, " random Opt sequences (", per_kernel, " per kernel at most), ", tally.heuristic,
                  " heuristic choices, ", tally.skipped, " InvalidOpt skipped, ", tally.failures, " failures; largest float error ", tally.worst_error,
                  " of its tolerance"));
  CHECK(tally.kernels > 50);
  CHECK(tally.heuristic > 0);
}

TEST_CASE("apply_opt rejects the Opts that do not fit a kernel") {
  Tensor a = f32({16, 24}, 1), b = f32({24, 32}, 2);
  Schedule schedule = create_schedule({a.matmul(b).data().node});
  REQUIRE(schedule.kernels.size() == 1);
  const UOpPtr& ast = schedule.kernels[0].ast;
  int64_t reduce_axis = kFirstReduceAxis;
  CHECK_THROWS_AS(apply_opt(ast, {OptOp::Unroll, 0, 5}), InvalidOpt);              // 5 does not divide 16
  CHECK_THROWS_AS(apply_opt(ast, {OptOp::Unroll, 7, 2}), InvalidOpt);              // no such axis
  CHECK_THROWS_AS(apply_opts(ast, {{OptOp::Upcast, 1, 4}, {OptOp::Upcast, 0, 4}}), InvalidOpt);  // a second UPCAST
  CHECK_THROWS_AS(apply_opts(ast, {{OptOp::Unroll, 1, 4}, {OptOp::Unroll, kFirstUnrollAxis, 2}}), InvalidOpt);
  CHECK_NOTHROW(apply_opts(ast, {{OptOp::Upcast, 1, 8}, {OptOp::Unroll, 1, 2}, {OptOp::Unroll, reduce_axis, 3}}));
}

TEST_CASE("an f16 matmul is vectorised as f32 would be: an UPCAST of an f32 vector's lanes") {
  // f16 used to leave a whole kernel scalar (ResNet-50 fp16 ran 40x onnxruntime on the CPU); its
  // lanes count as f32 lanes, since the renderer computes each op on f32 vectors.
  Schedule schedule =
      create_schedule({input({64, 96}, S::Float16, 7).matmul(input({96, 64}, S::Float16, 8)).data().node});
  REQUIRE(schedule.kernels.size() == 1);
  std::vector<Opt> opts = hand_coded_opts(schedule.kernels[0].ast, host_cpu_caps());
  auto upcast = std::ranges::find_if(opts, [](const Opt& opt) { return opt.op == OptOp::Upcast; });
  REQUIRE(upcast != opts.end());
  CHECK(upcast->amount == host_cpu_caps().vector_lanes(dtypes::f32));
}

TEST_CASE("an f16 kernel that compares is vectorised by kiln, not left to LLVM; its f32 twin and an f16 copy are") {
  // Streaming kernels are left to LLVM's loop vectoriser, which on x86 without AVX512-FP16 turns
  // compares of f16 values into compares of halves, scalarised lane by lane (ResNet-50 fp16's
  // residual ReLU kernels ran 4-10x slower than the f32 ones). kiln's own vectors compare in f32.
  auto opts_of = [](const Tensor& t) {
    Schedule schedule = create_schedule({t.data().node});
    REQUIRE(schedule.kernels.size() == 1);
    return hand_coded_opts(schedule.kernels[0].ast, host_cpu_caps());
  };
  auto upcasts = [](const std::vector<Opt>& opts) {
    return std::ranges::any_of(opts, [](const Opt& opt) { return opt.op == OptOp::Upcast; });
  };
  CHECK(upcasts(opts_of((input({1, 64, 14, 14}, S::Float16, 60) + input({1, 64, 14, 14}, S::Float16, 61)).relu())));
  CHECK_FALSE(upcasts(opts_of((f32({1, 64, 14, 14}, 62) + f32({1, 64, 14, 14}, 63)).relu())));
  CHECK_FALSE(upcasts(opts_of(input({64, 56}, S::Float16, 64).pad({0, 0, 1, 1}))));
}

TEST_CASE("a loop that ends at a symbolic variable is neither upcast nor unrolled; PADTO and SPLIT take it (docs/symbolic-shapes.md, decision 7)") {
  UOpPtr n = variable("n", 1, 64);
  UOpPtr x = UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(AddrSpace::Global, 64), {}, int64_t{1});
  UOpPtr out = UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(AddrSpace::Global, 64), {}, int64_t{0});
  UOpPtr i = range(n, 0);
  UOpPtr load = UOp::make(Ops::LOAD, dtypes::f32, {UOp::make(Ops::INDEX, x->dtype(), {x, i})});
  UOpPtr ast = UOp::make(Ops::SINK, dtypes::void_,
                         {UOp::make(Ops::STORE, dtypes::void_, {UOp::make(Ops::INDEX, out->dtype(), {out, i}), load})},
                         std::string("scale_n"));
  CHECK(hand_coded_opts(ast, host_cpu_caps()).empty());
  CHECK_THROWS_AS(apply_opt(ast, {OptOp::Upcast, 0, 8}), InvalidOpt);
  CHECK_THROWS_AS(apply_opt(ast, {OptOp::Unroll, 0, 2}), InvalidOpt);
  // PADTO runs it to ceil(n / 8)·8, the stores masked past n.
  UOpPtr padded = apply_opt(ast, {OptOp::Padto, 0, 8});
  REQUIRE(kernel_ranges(padded).size() == 1);
  const UOpPtr& padded_end = kernel_ranges(padded)[0]->src(0);
  CHECK(!padded_end->is_const());
  CHECK(static_cast<int64_t>(padded_end->vmin()) == 8);
  CHECK(static_cast<int64_t>(padded_end->vmax()) == 64);
  // SPLIT makes it a symbolic outer loop of ceil(n / 8) and a constant inner one.
  UOpPtr split = apply_opt(ast, {OptOp::Split, 0, 8});
  std::vector<const UOp*> ranges = kernel_ranges(split);
  REQUIRE(ranges.size() == 2);
  CHECK(!ranges[0]->src(0)->is_const());
  CHECK(ranges[1]->arg_int() == 1);
  CHECK(ranges[1]->src(0)->is_const());
  CHECK(ranges[1]->src(0)->const_int() == 8);
  CHECK_THROWS_AS(apply_opt(ast, {OptOp::Split, 1000, 8}), InvalidOpt);
  CHECK_THROWS_AS(apply_opt(ast, {OptOp::Split, 0, 1}), InvalidOpt);
  CHECK_THROWS_AS(apply_opt(ast, {OptOp::Split, 0, 65}), InvalidOpt);  // n is at most 64
  CHECK_NOTHROW(apply_opt(ast, {OptOp::Split, 0, 64}));
}

TEST_CASE("PADTO and SPLIT on a reduce loop of symbolic extent: the padded steps add the identity, the split is exact") {
  // out[0] = sum over i < n of (x[i]·2 + 1): a padded step loads 0, whose value 1 must not count.
  UOpPtr n = variable("n", 1, 64);
  UOpPtr x = UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(AddrSpace::Global, 64), {}, int64_t{1});
  UOpPtr out = UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(AddrSpace::Global, 1), {}, int64_t{0});
  UOpPtr i = range(n, kFirstReduceAxis);
  UOpPtr load = UOp::make(Ops::LOAD, dtypes::f32, {UOp::make(Ops::INDEX, x->dtype(), {x, i})});
  UOpPtr term = load * const_float(dtypes::f32, 2.0) + const_float(dtypes::f32, 1.0);
  UOpPtr sum = UOp::make(Ops::REDUCE, dtypes::f32, {term, i}, Ops::ADD);
  UOpPtr zero = const_int(dtypes::index, 0);
  UOpPtr ast = UOp::make(Ops::SINK, dtypes::void_, {UOp::make(Ops::STORE, dtypes::void_, {UOp::make(Ops::INDEX, out->dtype(), {out, zero}), sum})},
                         std::string("sum_n"));
  // Not divisible before the PADTO: a clamped extra step would add the last term twice.
  CHECK_THROWS_AS(apply_opt(ast, {OptOp::Split, kFirstReduceAxis, 8}), InvalidOpt);
  CHECK_THROWS_AS(apply_opt(ast, {OptOp::Padto, kFirstReduceAxis, 65}), InvalidOpt);  // n is at most 64
  UOpPtr padded = apply_opt(ast, {OptOp::Padto, kFirstReduceAxis, 8});
  std::vector<const UOp*> nodes = toposort(padded);
  auto reduce = std::ranges::find_if(nodes, [](const UOp* node) { return node->op() == Ops::REDUCE; });
  REQUIRE(reduce != nodes.end());
  CHECK((*reduce)->src(0)->op() == Ops::WHERE);  // the identity past n
  auto masked_load = std::ranges::find_if(nodes, [](const UOp* node) { return node->op() == Ops::LOAD; });
  REQUIRE(masked_load != nodes.end());
  CHECK((*masked_load)->src(0)->src_count() == 3);  // no read past n
  UOpPtr vectorised = apply_opts(ast, {{OptOp::Padto, kFirstReduceAxis, 8}, {OptOp::Split, kFirstReduceAxis, 8},
                                       {OptOp::Upcast, kFirstReduceAxis + 1, 8}});
  std::vector<const UOp*> ranges = kernel_ranges(vectorised);
  CHECK(std::ranges::any_of(ranges, [](const UOp* r) { return axis_kind(r->arg_int()) == AxisKind::Upcast; }));
  CHECK(std::ranges::any_of(ranges, [](const UOp* r) { return r->arg_int() == kFirstReduceAxis && !r->src(0)->is_const(); }));
}

namespace {

// How far the store of `kernel` moves in memory per step of `range` (nullopt: not a constant).
std::optional<int64_t> store_step(const UOpPtr& kernel, const UOp* range) {
  for (const UOp* node : toposort(kernel)) {
    if (node->op() != Ops::STORE) continue;
    const UOpPtr& offset = node->src(0)->src(1);
    UOpPtr step = simplify(substitute(offset, {{range, range->self() + 1}}) - offset);
    if (step->is_const()) return static_cast<int64_t>(step->const_int());
    return std::nullopt;
  }
  return std::nullopt;
}

// The AST of the first kernel of `schedule` that has a reduction (a conv after its weight copies).
UOpPtr first_reduction_ast(const Schedule& schedule) {
  auto kernel = std::ranges::find_if(schedule.kernels, [](const ScheduledKernel& candidate) {
    return std::ranges::any_of(toposort(candidate.ast), [](const UOp* node) { return node->op() == Ops::REDUCE; });
  });
  REQUIRE(kernel != schedule.kernels.end());
  return kernel->ast;
}

// The heuristics' opts for the conv kernel (the first kernel with a reduction) of `x` convolved
// with a (32, 16, k, k) weight, zero-padded by k / 2 on every side.
std::vector<Opt> symbolic_width_conv_opts(int64_t k, UOpPtr& ast) {
  Tensor x = symbolic_graph_input("x", {1, 16, 14, size_variable("w", 1, 200)}, ScalarType::Float32);
  ConvOptions same;
  same.padding = std::vector<int64_t>(4, k / 2);
  Schedule schedule = create_schedule({x.conv(f32({32, 16, k, k}, 14), f32({32}, 15), same).data().node});
  UOpPtr conv_ast = first_reduction_ast(schedule);
  ast = conv_ast;
  return hand_coded_opts(ast, host_cpu_caps());
}

// The axis id of the block loop that opts' PADTO and SPLIT of the symbolic width make (-1 when
// they are not there, as a pair on the same axis by at least 4 lanes). Opts before them (a MERGE
// of the rows and the width, a 1x1 conv's) are applied first.
int64_t width_block_axis(const UOpPtr& ast, const std::vector<Opt>& opts) {
  auto padto = std::ranges::find_if(opts, [](const Opt& opt) { return opt.op == OptOp::Padto; });
  if (padto == opts.end() || padto + 1 == opts.end() || padto->amount < 4) return -1;
  const Opt& split = *(padto + 1);
  if (split.op != OptOp::Split || split.axis != padto->axis || split.amount != padto->amount) return -1;
  int64_t block_axis = -1;
  UOpPtr blocked = apply_opts(ast, {opts.begin(), padto + 2});  // (alive while its ranges are read)
  for (const UOp* range : kernel_ranges(blocked))
    if (axis_kind(range->arg_int()) == AxisKind::Loop) block_axis = std::max(block_axis, range->arg_int());
  return block_axis;
}

}  // namespace

TEST_CASE("a conv over a symbolic image width: its pixels in padded vector blocks; the block is a 1x1 conv's vector, a 3x3 conv's rows") {
  // The stores run along the width, which is symbolic: PADTO(lanes) then SPLIT(lanes) make a
  // constant block loop of one vector, which the heuristics vectorise and tile.
  // tests/tensor/test_symbolic_tensor.cpp runs such convs at several widths.
  UOpPtr pointwise;
  std::vector<Opt> opts = symbolic_width_conv_opts(1, pointwise);
  int64_t block = width_block_axis(pointwise, opts);
  REQUIRE(block >= 0);
  CHECK(std::ranges::any_of(opts, [&](const Opt& opt) { return opt.op == OptOp::Upcast && opt.axis == block; }));
  CHECK(opts.front().op == OptOp::Merge);  // the 14 rows and the width as one loop of pixels
  CHECK_NOTHROW(apply_opts(pointwise, opts));
  // With kernel taps the filters are the vector, a full one, and the block's pixels the tile's rows
  // (symbolic_tiles.cpp, vector_block_opts).
  UOpPtr taps;
  opts = symbolic_width_conv_opts(3, taps);
  block = width_block_axis(taps, opts);
  REQUIRE(block >= 0);
  auto upcast = std::ranges::find_if(opts, [](const Opt& opt) { return opt.op == OptOp::Upcast; });
  REQUIRE(upcast != opts.end());
  CHECK(upcast->axis != block);
  CHECK(upcast->amount == host_cpu_caps().vector_lanes(dtypes::f32));
  CHECK(std::ranges::any_of(opts, [&](const Opt& opt) { return opt.op == OptOp::Unroll && opt.axis == block; }));
  CHECK_NOTHROW(apply_opts(taps, opts));
}

TEST_CASE("a stem conv over a symbolic image keeps its pixels as the vector: a scatter of symbolic stride needs a long reduction") {
  // 3 -> 16 channels, 3x3, stride 2 (27 reduction steps). With a known image the filters are the
  // vector, stored lane by lane into planes a constant stride apart; over an image of any size
  // the planes lie a symbolic stride apart, and the pixels' block is the vector instead.
  ConvOptions stem;
  stem.stride = {2, 2};
  stem.padding = {1, 1, 1, 1};
  Tensor weight = f32({16, 3, 3, 3}, 20), bias = f32({16}, 21);
  auto upcast_store_stride = [&](const Tensor& x) -> std::optional<int64_t> {
    Schedule schedule = create_schedule({x.conv(weight, bias, stem).data().node});
    UOpPtr ast = first_reduction_ast(schedule);
    std::vector<Opt> opts = hand_coded_opts(ast, host_cpu_caps());
    auto upcast = std::ranges::find_if(opts, [](const Opt& opt) { return opt.op == OptOp::Upcast; });
    REQUIRE(upcast != opts.end());
    // The UPCAST's range before it was applied: its step in the store.
    UOpPtr before = apply_opts(ast, {opts.begin(), upcast});
    for (const UOp* range : kernel_ranges(before))
      if (range->arg_int() == upcast->axis) return store_step(before, range);
    return std::nullopt;
  };
  Tensor symbolic = symbolic_graph_input("x", {1, 3, size_variable("h", 64, 512), size_variable("w", 64, 512)}, ScalarType::Float32);
  CHECK(upcast_store_stride(symbolic) == int64_t{1});
  CHECK(upcast_store_stride(f32({1, 3, 64, 64}, 22)) != int64_t{1});
  // Its stride-2 windows divide a merged pixel index again, so the rows and columns stay apart,
  // and the image's rows, SPLIT in pairs, are the tile's second column (with_row_pairs).
  Schedule schedule = create_schedule({symbolic.conv(weight, bias, stem).data().node});
  std::vector<Opt> opts = hand_coded_opts(first_reduction_ast(schedule), host_cpu_caps());
  CHECK_FALSE(std::ranges::any_of(opts, [](const Opt& opt) { return opt.op == OptOp::Merge; }));
  CHECK(std::ranges::any_of(opts, [](const Opt& opt) { return opt.op == OptOp::Split && opt.amount == 2; }));
  CHECK(std::ranges::any_of(opts, [](const Opt& opt) { return opt.op == OptOp::Unroll && opt.amount == 2; }));
}

TEST_CASE("a symbolic batch as axis 0 is merged with the channels, so that threads have work at batch 1") {
  // (An elementwise kernel over a contiguous tensor runs as one loop of batch × 4704 already.)
  Tensor x = symbolic_graph_input("x", {size_variable("batch", 1, 8), 24, 14, 14}, ScalarType::Float32);
  Schedule schedule = create_schedule({x.conv(f32({32, 24, 1, 1}, 16)).data().node});
  UOpPtr conv_ast = first_reduction_ast(schedule);
  const UOpPtr& ast = conv_ast;
  std::vector<Opt> opts = hand_coded_opts(ast, host_cpu_caps());
  REQUIRE(!opts.empty());
  CHECK(opts.back().op == OptOp::Merge);
  CHECK(opts.back().axis == 0);
  Dim parallel = parallel_extent_of(apply_opts(ast, opts));
  CHECK(!parallel.is_known());
  CHECK(parallel.min() >= 2);
  // With 116 filters (wider than order_output_axes's kWideEnoughToSplit) the batch stays outermost
  // too: filters first would have each filter tile read every image of the batch.
  Schedule wide = create_schedule({x.conv(f32({116, 24, 1, 1}, 19)).data().node});
  UOpPtr wide_conv_ast = first_reduction_ast(wide);
  for (const UOp* range : kernel_ranges(wide_conv_ast))
    if (range->arg_int() == 0) CHECK(!range->src(0)->is_const());
  std::vector<Opt> wide_opts = hand_coded_opts(wide_conv_ast, host_cpu_caps());
  REQUIRE(!wide_opts.empty());
  CHECK(wide_opts.back().op == OptOp::Merge);
  CHECK(wide_opts.back().axis == 0);
  // An elementwise kernel's batch is merged with a loop other than its store-contiguous one (a
  // channels-last copy, (batch, 7, 7, 24)): merged, a loop runs outermost, and the vector is inside.
  Tensor small = symbolic_graph_input("x", {size_variable("batch", 1, 8), 24, 7, 7}, ScalarType::Float32);
  Schedule copy = create_schedule({(small.permute({0, 2, 3, 1}) * 2.0f).data().node});
  REQUIRE(copy.kernels.size() == 1);
  std::vector<Opt> copy_opts = hand_coded_opts(copy.kernels[0].ast, host_cpu_caps());
  REQUIRE(!copy_opts.empty());
  CHECK(copy_opts.back().op == OptOp::Merge);
  UOpPtr before_merge = apply_opts(copy.kernels[0].ast, {copy_opts.begin(), copy_opts.end() - 1});
  for (const UOp* range : kernel_ranges(before_merge))
    if (range->arg_int() == copy_opts.back().amount) CHECK(range->src(0)->const_int() == 7);
  // A batch that may reach past kSmallSymbolicAxis (rows of batch × sequence) keeps its axis 0.
  Tensor rows = symbolic_graph_input("x", {size_variable("rows", 1, 512), 24}, ScalarType::Float32);
  Schedule row_schedule = create_schedule({(rows * 2.0f).data().node});
  REQUIRE(row_schedule.kernels.size() == 1);
  for (const Opt& opt : hand_coded_opts(row_schedule.kernels[0].ast, host_cpu_caps())) CHECK(opt.op != OptOp::Merge);
}

TEST_CASE("over an image of any size, a symbolic batch gives axis 0 to the rows when the filters leave threads too little") {
  // Both convs read an image of symbolic height and width, batch 1..2. 32 filters with kernel taps
  // are one tile (a full vector, unrolled twice): no constant loop is left to merge the batch with.
  // 24 filters of a 1x1 conv are 3 tiles, which two threads split 2 + 1. In both the image's rows
  // become axis 0: at least 14 at every size, or 7 pairs of them where the 1x1 conv's tile takes
  // two rows as its columns.
  auto conv_opts = [](int64_t filters, int64_t k, UOpPtr& ast) {
    Tensor x = symbolic_graph_input("x", {size_variable("batch", 1, 2), 24, size_variable("h", 14, 32), size_variable("w", 14, 32)},
                                    ScalarType::Float32);
    ConvOptions same;
    same.padding = std::vector<int64_t>(4, k / 2);
    Schedule schedule = create_schedule({x.conv(f32({filters, 24, k, k}, 17), f32({filters}, 18), same).data().node});
    UOpPtr conv_ast = first_reduction_ast(schedule);
    ast = conv_ast;
    return hand_coded_opts(ast, host_cpu_caps());
  };
  for (auto [filters, k] : {std::pair<int64_t, int64_t>{32, 3}, {24, 1}}) {
    CAPTURE(filters);
    UOpPtr ast;
    std::vector<Opt> opts = conv_opts(filters, k, ast);
    REQUIRE(!opts.empty());
    CHECK(opts.back().op == OptOp::Swap);
    CHECK(opts.back().axis == 0);
    Dim parallel = parallel_extent_of(apply_opts(ast, opts));
    CHECK(!parallel.is_known());
    CHECK(parallel.min() >= 7);
  }
}

TEST_CASE("a kernel with symbolic rows: a SPLIT of them into blocks, then the heuristics' opts on constant loops") {
  // (n, 64) · (64, 32) with n a size variable: the rows are split into ceil(n / 8) blocks of 8,
  // whose constant inner loop is the register tile's rows; the columns are vectorised and tiled as
  // in a fixed-size matmul. tests/tensor/test_symbolic_tensor.cpp runs such kernels at several n.
  Tensor x = symbolic_graph_input("x", {size_variable("n", 1, 512), 64}, ScalarType::Float32);
  Schedule schedule = create_schedule({x.matmul(f32({64, 32}, 6)).data().node});
  REQUIRE(schedule.kernels.size() == 1);
  const UOpPtr& ast = schedule.kernels[0].ast;
  std::vector<Opt> opts = hand_coded_opts(ast, host_cpu_caps());
  REQUIRE(opts.size() >= 2);
  CHECK(opts[0].op == OptOp::Split);
  CHECK(opts[0].amount == 8);
  UOpPtr blocked = apply_opt(ast, opts[0]);
  int64_t block_axis = -1;
  for (const UOp* range : kernel_ranges(blocked))
    if (axis_kind(range->arg_int()) == AxisKind::Loop) block_axis = std::max(block_axis, range->arg_int());
  bool tiles_block = false;
  for (size_t i = 1; i < opts.size(); ++i) {
    CAPTURE(opts[i].text());
    for (const UOp* range : kernel_ranges(blocked))
      if (range->arg_int() == opts[i].axis) CHECK(range->src(0)->is_const());
    tiles_block = tiles_block || (opts[i].op == OptOp::Unroll && opts[i].axis == block_axis);
  }
  CHECK(tiles_block);
  UOpPtr optimised = apply_opts(ast, opts);
  CHECK(!parallel_extent_of(optimised).is_known());
  // A constant row count that no tile divides (37, a prime) gets the same blocks, the last padded;
  // one that a tile divides (40) keeps its plain tile.
  auto first_opts = [](int64_t rows) {
    Schedule fixed = create_schedule({f32({rows, 64}, 7).matmul(f32({64, 32}, 6)).data().node});
    REQUIRE(fixed.kernels.size() == 1);
    return hand_coded_opts(fixed.kernels[0].ast, host_cpu_caps());
  };
  std::vector<Opt> prime = first_opts(37), even = first_opts(40);
  REQUIRE(!prime.empty());
  CHECK(prime[0].op == OptOp::Split);
  CHECK(std::none_of(even.begin(), even.end(), [](const Opt& opt) { return opt.op == OptOp::Split; }));
  // Rows that never reach two blocks (a batch of at most 4) are not split.
  Tensor few = symbolic_graph_input("x", {size_variable("b", 1, 4), 64}, ScalarType::Float32);
  Schedule small = create_schedule({few.matmul(f32({64, 32}, 6)).data().node});
  REQUIRE(small.kernels.size() == 1);
  for (const Opt& opt : hand_coded_opts(small.kernels[0].ast, host_cpu_caps())) CHECK(opt.op != OptOp::Split);
  // Sums of integer products (a quantized model's matmuls, compute-bound even over few rows) take
  // blocks of 4: over 9 rows they compute 12, not 16.
  Tensor ints = symbolic_graph_input("x", {size_variable("n", 1, 512), 64}, ScalarType::Int32);
  Schedule integer = create_schedule({ints.matmul(input({64, 32}, S::Int32, 9)).data().node});
  REQUIRE(integer.kernels.size() == 1);
  std::vector<Opt> integer_opts = hand_coded_opts(integer.kernels[0].ast, host_cpu_caps());
  REQUIRE(!integer_opts.empty());
  CHECK(integer_opts[0].op == OptOp::Split);
  CHECK(integer_opts[0].amount == 4);
}

TEST_CASE("the heuristics leave threads an axis 0 to split when a tile takes all the filters") {
  // 32 filters are two AVX-512 vectors: the register tile covers every filter, and axis 0 would be
  // a single iteration (one thread). A pixel-row loop becomes axis 0 instead.
  Tensor conv = f32({1, 16, 56, 56}, 11).conv(f32({32, 16, 1, 1}, 12), f32({32}, 13));
  Schedule schedule = create_schedule({conv.data().node});
  REQUIRE(!schedule.kernels.empty());
  const UOpPtr& ast = schedule.kernels.back().ast;  // (a weight copy into panels may come first)
  REQUIRE(schedule.kernels.back().name().rfind("r_32_", 0) == 0);
  std::vector<Opt> opts = hand_coded_opts(ast, host_cpu_caps());
  REQUIRE(!opts.empty());
  Dim extent = parallel_extent_of(apply_opts(ast, opts));
  REQUIRE(extent.is_known());
  CHECK(extent.value() >= 2);
  // 96 filters at 14×14: three filter tiles of 32 would split 2 + 1 over two threads; axis 0 is
  // two blocks of 7 pixel rows × the 3 tiles instead (row blocks, the test after next), which two
  // threads split 3 + 3 (before row blocks: the tiles merged with the 14 rows, 42 units).
  Tensor narrow = f32({1, 64, 14, 14}, 14).conv(f32({96, 64, 1, 1}, 15), f32({96}, 16));
  Schedule narrow_schedule = create_schedule({narrow.data().node});
  const UOpPtr& narrow_ast = narrow_schedule.kernels.back().ast;
  REQUIRE(narrow_schedule.kernels.back().name().rfind("r_96_", 0) == 0);
  std::vector<Opt> narrow_opts = hand_coded_opts(narrow_ast, host_cpu_caps());
  Dim narrow_extent = parallel_extent_of(apply_opts(narrow_ast, narrow_opts));
  REQUIRE(narrow_extent.is_known());
  CAPTURE(narrow_opts.size());
  CHECK(narrow_extent.value() >= 6);
  CHECK(narrow_extent.value() % 2 == 0);
}

// The register tile's rows and vector columns in a kernel's heuristic opts.
std::pair<int64_t, int64_t> tile_rows_and_columns(const std::vector<Opt>& opts) {
  int64_t rows = 1, columns = 1, upcast_axis = -1;
  for (const Opt& opt : opts)
    if (opt.op == OptOp::Upcast) upcast_axis = opt.axis;
  for (const Opt& opt : opts) {
    if (opt.op != OptOp::Unroll || axis_kind(opt.axis) != AxisKind::Loop) continue;
    (opt.axis == upcast_axis ? columns : rows) *= opt.amount;
  }
  return {rows, columns};
}

TEST_CASE("the heuristics: with 32 registers the register tile takes the most rows that fit") {
  // A matmul of 56 rows by 32 columns: two vector columns (AVX-512), and of the row counts that
  // divide 56, 8 fits beside them (16 accumulators, 8 broadcasts, 2 loads). With 16 registers two
  // columns allow 4 rows.
  Schedule schedule = create_schedule({f32({56, 64}, 21).matmul(f32({64, 32}, 22)).data().node});
  REQUIRE(schedule.kernels.size() == 1);
  TargetCaps caps = host_cpu_caps();
  caps.vector_bytes = 64;  // 16 f32 lanes, whatever the host (the heuristics read only the caps)
  for (int registers : {32, 16}) {
    caps.vector_registers = registers;
    auto [rows, columns] = tile_rows_and_columns(hand_coded_opts(schedule.kernels[0].ast, caps));
    CAPTURE(registers);
    CHECK(columns == 2);
    CHECK(rows == (registers == 32 ? 8 : 4));
  }
}

// The host's target with fixed caches, whatever the host: 48 KB L1, 2 MB L2, AVX-512 lanes.
TargetCaps avx512_with_fixed_caches() {
  TargetCaps caps = host_cpu_caps();
  caps.vector_bytes = 64;
  caps.vector_registers = 32;
  caps.l1_bytes = 48 << 10;
  caps.l2_bytes = 2 << 20;
  return caps;
}

TEST_CASE("the heuristics: a matmul whose row operand streams from beyond the L2 takes 64-column strips") {
  TargetCaps caps = avx512_with_fixed_caches();
  auto tile_of = [&](int64_t m, int64_t k, int64_t n) {
    Schedule schedule = create_schedule({f32({m, k}, 71).matmul(f32({k, n}, 72)).data().node});
    REQUIRE(!schedule.kernels.empty());
    return tile_rows_and_columns(hand_coded_opts(schedule.kernels.back().ast, caps));
  };
  // 1024³: a 4 MB row operand, re-read once per strip: 4 rows × 4 columns.
  CHECK(tile_of(1024, 1024, 1024) == std::pair<int64_t, int64_t>{4, 4});
  // 512³ (a 1 MB row operand) and BERT-base's 128×768 · 768×3072 (384 KB) stay in the L2: 8 × 2.
  CHECK(tile_of(512, 512, 512) == std::pair<int64_t, int64_t>{8, 2});
  CHECK(tile_of(128, 768, 3072) == std::pair<int64_t, int64_t>{8, 2});
  // A small right operand (1024×1024 · 1024×64: 256 KB) is not re-read from far; 8 × 2.
  CHECK(tile_of(1024, 1024, 64) == std::pair<int64_t, int64_t>{8, 2});
  // With 16 registers a 4×4 tile does not fit (16 accumulators + 4 + 4).
  caps.vector_registers = 16;
  CHECK(tile_of(1024, 1024, 1024).second <= 2);
}

TEST_CASE("the heuristics: an odd number of vectors, 15 or more, pairs up into two columns by a SPLIT") {
  TargetCaps caps = avx512_with_fixed_caches();
  // The tile of a 1x1 conv's last kernel: {rows, columns, whether the vector loop is SPLIT in pairs}.
  auto tile_of = [&](int64_t filters, int64_t channels, int64_t height, int64_t width) {
    Tensor conv = f32({1, channels, height, width}, 61).conv(f32({filters, channels, 1, 1}, 62), f32({filters}, 63));
    Schedule schedule = create_schedule({conv.data().node});
    REQUIRE(!schedule.kernels.empty());
    std::vector<Opt> opts = hand_coded_opts(schedule.kernels.back().ast, caps);
    UOpPtr tiled = apply_opts(schedule.kernels.back().ast, opts);  // every opt applies
    int64_t vector_axis = -1, paired_axis = -1, rows = 1, columns = 1;
    for (const Opt& opt : opts) {
      if (opt.op == OptOp::Upcast) vector_axis = opt.axis;
      // A SPLIT of the vector loop by 2 before any UNROLL: the pair (later SPLITs are row blocks).
      if (opt.op == OptOp::Split && opt.axis == vector_axis && opt.amount == 2 && paired_axis == -1) paired_axis = -2;
      if (opt.op != OptOp::Unroll || axis_kind(opt.axis) != AxisKind::Loop) continue;
      if (paired_axis == -2) paired_axis = opt.axis;  // the pair's new loop, unrolled next
      (opt.axis == vector_axis || opt.axis == paired_axis ? columns : rows) *= opt.amount;
    }
    return std::tuple<int64_t, int64_t, bool>{rows, columns, paired_axis >= 0};
  };
  // ResNet-50's 128 -> 512 at 28×28: 49 vectors of pixels, 8 filter rows × a pair of columns.
  CHECK(tile_of(512, 128, 28, 28) == std::tuple<int64_t, int64_t, bool>{8, 2, true});
  // YOLOX's 32 -> 64 at 52×52: 169 vectors.
  CHECK(tile_of(64, 32, 52, 52) == std::tuple<int64_t, int64_t, bool>{8, 2, true});
  // 56×56 is 196 vectors, an even count: two columns of the vector loop itself.
  CHECK(tile_of(256, 64, 56, 56) == std::tuple<int64_t, int64_t, bool>{8, 2, false});
  // At 112×112 an image row is 7 vectors; the merged image's 784 give the tile two columns.
  CHECK(tile_of(16, 32, 112, 112) == std::tuple<int64_t, int64_t, bool>{8, 2, false});
  // 13 vectors (13×16 pixels): a pair would add 1/13 of the work; one column.
  CHECK(std::get<2>(tile_of(256, 64, 13, 16)) == false);
}

TEST_CASE("the heuristics: a 1x1 conv keeps its filter tiles outermost when its weights leave L1 and its input stays in L2") {
  TargetCaps caps = avx512_with_fixed_caches();
  // Whether the pixel vectors end up the outermost loop: a SWAP, or the vector axis is axis 0.
  auto columns_outermost = [&](int64_t filters, int64_t channels, int64_t size) {
    Tensor conv = f32({1, channels, size, size}, 31).conv(f32({filters, channels, 1, 1}, 32), f32({filters}, 33));
    Schedule schedule = create_schedule({conv.data().node});
    REQUIRE(!schedule.kernels.empty());
    std::vector<Opt> opts = hand_coded_opts(schedule.kernels.back().ast, caps);
    auto upcast = std::find_if(opts.begin(), opts.end(), [](const Opt& opt) { return opt.op == OptOp::Upcast; });
    REQUIRE(upcast != opts.end());
    // SWAPs after a SPLIT make row blocks axis 0 (the next test), not the tile's loop order. (A
    // SPLIT that an UNROLL follows pairs the vectors into the tile's columns; it is no row block.)
    auto split = opts.begin();
    while (split != opts.end() &&
           (split->op != OptOp::Split || (split + 1 != opts.end() && (split + 1)->op == OptOp::Unroll)))
      ++split;
    return upcast->axis == 0 || std::any_of(opts.begin(), split, [](const Opt& opt) { return opt.op == OptOp::Swap; });
  };
  // ResNet-50's 64 -> 256 at 56×56: 64 KB of weights, an 800 KB input. Filter tiles outermost.
  CHECK_FALSE(columns_outermost(256, 64, 56));
  // YOLOX's 64 -> 64 at 52×52: 16 KB of weights stay in L1 while the pixel strips go by.
  CHECK(columns_outermost(64, 64, 52));
  // 128 -> 256 at 56×56: a 1.6 MB input is more than half the L2; one strip of it is not.
  CHECK(columns_outermost(256, 128, 56));
}

TEST_CASE("the heuristics: a 1x1 conv over an image of any size runs its image rows outermost when the largest input leaves the L2") {
  TargetCaps caps = avx512_with_fixed_caches();
  // DeepLabV3's 672 -> 112 (300 KB of weights) over a batch of 1 or 2 images of up to 32×32 (up to
  // 5.5 MB of input, which each of 14 filter tiles re-read from the L3) and of up to 12×12 (774 KB).
  // Not an expansion (16 -> 64 over up to 256×256: 8 MB of input, 32 MB of output), whose rows
  // outermost would store short runs into all 64 output planes at each step.
  auto rows_outermost = [&](int64_t channels, int64_t filters, int64_t largest) {
    Tensor x = symbolic_graph_input("x", {size_variable("batch", 1, 2), channels, size_variable("h", 7, largest), size_variable("w", 7, largest)},
                                    ScalarType::Float32);
    Schedule schedule = create_schedule({x.conv(f32({filters, channels, 1, 1}, 34), f32({filters}, 35)).data().node});
    UOpPtr ast = first_reduction_ast(schedule);
    std::vector<Opt> opts = hand_coded_opts(ast, caps);
    std::string chosen;
    for (const Opt& opt : opts) chosen += opt.text() + " ";
    CAPTURE(chosen);
    // Axis 0 of the tiled conv is then a symbolic loop that the weights do not depend on.
    UOpPtr tiled = apply_opts(ast, opts);
    const UOp* axis_0 = nullptr;
    for (const UOp* range : kernel_ranges(tiled))
      if (range->arg_int() == 0) axis_0 = range;
    REQUIRE(axis_0 != nullptr);
    bool weight_reads_axis_0 = false;
    for (const UOp* node : toposort(tiled))
      if (node->op() == Ops::INDEX && node->src(0)->dtype().pointer_size() == filters * channels)
        weight_reads_axis_0 = weight_reads_axis_0 || std::ranges::count(toposort(node->self()), axis_0) != 0;
    return !axis_0->src(0)->is_const() && !weight_reads_axis_0;
  };
  CHECK(rows_outermost(672, 112, 32));
  CHECK_FALSE(rows_outermost(672, 112, 12));
  CHECK_FALSE(rows_outermost(16, 64, 256));
}

TEST_CASE("the heuristics: a transposing copy with a per-column scale takes its stores as the vector, the other loop unrolled") {
  // (128, 64) scaled per column and stored as (64, 128): the scale moves along the loop that
  // transpose_opts would swap in, so it is not swapped; the 128 stores of a row are the vector and
  // 8 of the 64 rows are unrolled, each vector gathering from the same 8 lines as the last
  // (transposed_block_opts). Over a symbolic row count the stores' loop is PADTO'd and SPLIT first.
  auto copy_opts = [](const Tensor& x) {
    Tensor scaled = x * f32({64}, 41);
    Schedule schedule = create_schedule({contiguous(scaled.transpose(0, 1)).data().node});
    REQUIRE(!schedule.kernels.empty());
    const UOpPtr& ast = schedule.kernels.back().ast;
    std::vector<Opt> opts = hand_coded_opts(ast, host_cpu_caps());
    CHECK_NOTHROW(apply_opts(ast, opts));
    return opts;
  };
  const int64_t lanes = host_cpu_caps().vector_lanes(dtypes::f32);
  std::vector<Opt> fixed = copy_opts(f32({128, 64}, 40));
  CHECK(std::ranges::any_of(fixed, [&](const Opt& opt) { return opt.op == OptOp::Upcast && opt.amount == lanes; }));
  CHECK(std::ranges::any_of(fixed, [](const Opt& opt) { return opt.op == OptOp::Unroll && opt.amount == 8; }));
  CHECK(std::ranges::none_of(fixed, [](const Opt& opt) { return opt.op == OptOp::Swap; }));
  std::vector<Opt> symbolic = copy_opts(symbolic_graph_input("x", {size_variable("n", 1, 512), 64}, ScalarType::Float32));
  CHECK(symbolic.size() >= 4);
  CHECK(symbolic[0].op == OptOp::Padto);
  CHECK(symbolic[1].op == OptOp::Split);
  CHECK(std::ranges::any_of(symbolic, [](const Opt& opt) { return opt.op == OptOp::Unroll && opt.amount == 8; }));
}

TEST_CASE("the heuristics: a conv split by filters gets pixel-row blocks as axis 0 when its weights are small") {
  TargetCaps caps = avx512_with_fixed_caches();
  auto last_kernel = [](const Tensor& t) {
    Schedule schedule = create_schedule({t.data().node});
    REQUIRE(!schedule.kernels.empty());
    return schedule.kernels.back().ast;
  };
  auto has_split = [](const std::vector<Opt>& opts) {
    return std::any_of(opts.begin(), opts.end(), [](const Opt& opt) { return opt.op == OptOp::Split; });
  };
  // MobileNetV2's 1x1 64 -> 96 at 14×14 (24 KB of weights), stored over NCHW: its filter tiles were
  // axis 0, so two threads split it by channels. With blocks of 7 rows outermost, the second half
  // of axis 0 starts at row 7 of channel 0: thread 1 computes the image's lower half.
  UOpPtr conv = last_kernel(f32({1, 64, 14, 14}, 51).conv(f32({96, 64, 1, 1}, 52), f32({96}, 53)));
  std::vector<Opt> opts = hand_coded_opts(conv, caps);
  std::string chosen;
  for (const Opt& opt : opts) chosen += opt.text() + " ";
  CAPTURE(chosen);
  REQUIRE(has_split(opts));
  UOpPtr blocked = apply_opts(conv, opts);
  const UOp* axis_0 = nullptr;
  std::unordered_map<const UOp*, UOpPtr> at_half;
  for (const UOp* range : kernel_ranges(blocked)) {
    if (range->arg_int() == 0) axis_0 = range;
    at_half[range] = const_int(dtypes::index, 0);
  }
  REQUIRE(axis_0 != nullptr);
  REQUIRE(axis_0->src(0)->is_const());
  auto half = static_cast<int64_t>(axis_0->src(0)->const_int()) / 2;
  at_half[axis_0] = const_int(dtypes::index, half);
  const UOp* store = nullptr;
  for (const UOp* node : toposort(blocked))
    if (node->op() == Ops::STORE) store = node;
  REQUIRE(store != nullptr);
  UOpPtr offset = simplify(substitute(store->src(0)->src(1), at_half));
  REQUIRE(offset->is_const());
  CHECK(offset->const_int() == 7 * 14);
  // A tuning database's entry made before row blocks (the tiles alone) gets the same blocks when
  // compiled (optimize_schedule), and an entry that has them is left as it is.
  std::vector<Opt> tiles(opts.begin(), std::find_if(opts.begin(), opts.end(), [](const Opt& opt) { return opt.op == OptOp::Split; }));
  CHECK(with_thread_row_blocks(conv, tiles, caps) == opts);
  CHECK(with_thread_row_blocks(conv, opts, caps) == opts);
  // YOLOX's 1x1 64 -> 64 at 26×26: its pixels merge into one loop, so input and weight each depend
  // on one output loop (the input, 173 KB against 16 KB, is the activation), and after a tile of 4
  // pixels the 169 left are odd: two blocks, the second one short.
  std::vector<Opt> merged = hand_coded_opts(last_kernel(f32({1, 64, 26, 26}, 59).conv(f32({64, 64, 1, 1}, 60), f32({64}, 61))), caps);
  CHECK(has_split(merged));
  // A matmul whose weight is the larger operand (128 KB against 32 KB) is left as it is: the
  // weight's own loop, its columns, is the one the threads split already. ZFNet's 3x3 384 -> 512 at 12×12
  // (7 MB of weights, read once per block) keeps its filter tiles outermost.
  CHECK_FALSE(has_split(hand_coded_opts(last_kernel(f32({64, 128}, 54).matmul(f32({128, 256}, 55))), caps)));
  ConvOptions same;
  same.padding = {1, 1, 1, 1};
  CHECK_FALSE(has_split(hand_coded_opts(last_kernel(f32({1, 384, 12, 12}, 56).conv(f32({512, 384, 3, 3}, 57), f32({512}, 58), same)), caps)));
}

TEST_CASE("the heuristics: a register tile of a grouped conv has at least 8 accumulators") {
  // ShuffleNet's 1x1 group convs: 4 groups of 68 filters at 14×14, stored through the channel
  // shuffle that follows them (group and filter become separate loops). The pixels are the vector
  // and the filters of a group the tile's rows, of which 68 allows 4; 4 accumulators wait on their
  // own FMAs (4-cycle latency, two per cycle), so a second output loop is unrolled as well.
  TargetCaps caps = host_cpu_caps();
  caps.vector_bytes = 64;
  caps.vector_registers = 32;
  ConvOptions grouped;
  grouped.groups = 4;
  Tensor conv = f32({1, 272, 14, 14}, 41).conv(f32({272, 68, 1, 1}, 42), f32({272}, 43), grouped).relu();
  Tensor shuffled = contiguous(conv.reshape({1, 4, 68, 14, 14}).permute({0, 2, 1, 3, 4}).reshape({1, 272, 14, 14}));
  Schedule schedule = create_schedule({shuffled.data().node});
  REQUIRE(!schedule.kernels.empty());
  std::vector<Opt> opts = hand_coded_opts(schedule.kernels.back().ast, caps);
  std::string chosen;
  for (const Opt& opt : opts) chosen += opt.text() + " ";
  CAPTURE(chosen);
  int64_t accumulators = 1;
  for (const Opt& opt : opts)
    if (opt.op == OptOp::Unroll && opt.axis < kFirstReduceAxis) accumulators *= opt.amount;
  CHECK(accumulators >= 8);
}

TEST_CASE("the heuristics: a transposing copy swaps its loops; a matrix-vector product unrolls its reduction") {
  TargetCaps caps = host_cpu_caps();
  auto only_kernel = [](const Tensor& t) {
    Schedule schedule = create_schedule({t.data().node});
    REQUIRE(schedule.kernels.size() == 1);
    return schedule.kernels[0].ast;
  };
  // (40, 24) stored row by row, read column by column: the inner loop becomes the one the load walks.
  std::vector<Opt> transpose = hand_coded_opts(only_kernel(contiguous(f32({24, 40}, 1).transpose())), caps);
  REQUIRE(transpose.size() == 1);
  CHECK(transpose[0].op == OptOp::Swap);
  // Every other column of (24, 80), transposed (the copy a stride-2 1x1 conv reads): the load steps
  // by 2 along the loop that becomes the inner one, still its lines in order.
  std::vector<Opt> strided =
      hand_coded_opts(only_kernel(contiguous(f32({24, 80}, 6).slice(1, 0, 79, 2).transpose())), caps);
  REQUIRE(strided.size() == 1);
  CHECK(strided[0].op == OptOp::Swap);
  // A 2x2 max pool of a (1, 32, 32, 32) image plus a bias per channel, stored channels-last (VGG-19's
  // pools store into the next conv's channels-last input): the window is read like a copy, and the
  // bias does not move along the image row that becomes the inner loop.
  Tensor image = f32({1, 32, 32, 32}, 7) + f32({32}, 8).reshape({1, 32, 1, 1});
  PoolOptions window{{2, 2}, {}, {}, {}, false, false};
  Schedule pooled = create_schedule({contiguous(image.max_pool(window).permute({0, 2, 3, 1})).data().node});
  REQUIRE(pooled.kernels.size() == 1);
  std::vector<Opt> pool = hand_coded_opts(pooled.kernels[0].ast, caps);
  REQUIRE(pool.size() == 1);
  CHECK(pool[0].op == OptOp::Swap);
  // A second load that is contiguous along the stores (a + b.T) keeps the store order.
  std::vector<Opt> sum = hand_coded_opts(only_kernel(f32({40, 24}, 2) + f32({24, 40}, 3).transpose()), caps);
  CHECK(std::none_of(sum.begin(), sum.end(), [](const Opt& opt) { return opt.op == OptOp::Swap; }));
  // (1, 1280) · (1280, 40): no row to tile, so the reduction is unrolled by 8 and 2.
  std::vector<Opt> matvec = hand_coded_opts(only_kernel(f32({1, 1280}, 4).matmul(f32({1280, 40}, 5))), caps);
  int64_t reduce_unroll = 1;
  for (const Opt& opt : matvec)
    if (opt.op == OptOp::Unroll && axis_kind(opt.axis) == AxisKind::Reduce) reduce_unroll *= opt.amount;
  CHECK(reduce_unroll == 16);
}

TEST_CASE("the heuristics: a maximum to one value takes its vector along the reduction; a sum is left to LLVM") {
  TargetCaps caps = host_cpu_caps();
  if (!caps.supports_vector_ops) return;  // nothing to choose
  // A whole (64, 512) tensor's max and min: no output axis, so the lanes run along the inner
  // reduce loop (LLVM kept such loops scalar: the max's NaN handling). A sum is LLVM's to vectorise.
  for (int which : {0, 1, 2}) {
    Tensor x = f32({64, 512}, 9);
    Schedule schedule = create_schedule({(which == 0 ? x.max() : which == 1 ? x.min() : x.sum()).data().node});
    REQUIRE(schedule.kernels.size() == 1);
    std::vector<Opt> opts = hand_coded_opts(schedule.kernels[0].ast, caps);
    if (which == 2) {
      CHECK(opts.empty());
      continue;
    }
    // The lanes along the reduction, and four vectors a step (independent maxima in a tree).
    REQUIRE(opts.size() == 2);
    CHECK(opts[0].op == OptOp::Upcast);
    CHECK(axis_kind(opts[0].axis) == AxisKind::Reduce);
    CHECK(opts[0].amount >= 4);
    CHECK(opts[1] == Opt{OptOp::Unroll, opts[0].axis, 4});
  }
  // From 64K elements on, the maximum is taken in parts (Tensor's reduce): a first kernel of 64
  // outputs, which threads share, each a long reduction with the same lanes and four vectors a
  // step; then the maximum of the 64. Exact: a maximum in any order.
  Tensor big = f32({128, 1024}, 10);
  Tensor maximum = big.max();
  Schedule parts = create_schedule({maximum.data().node});
  REQUIRE(parts.kernels.size() == 2);
  const ScheduledKernel& first = parts.kernels[0];
  CHECK(first.parallel_extent.max() >= 2);
  std::vector<Opt> opts = hand_coded_opts(first.ast, caps);
  auto has = [&](OptOp op, int amount) {
    return std::any_of(opts.begin(), opts.end(), [&](const Opt& opt) {
      return opt.op == op && axis_kind(opt.axis) == AxisKind::Reduce && (amount == 0 || opt.amount == amount);
    });
  };
  CHECK(has(OptOp::Upcast, 0));
  CHECK(has(OptOp::Unroll, 4));
  std::vector<float> values = big.to_vector<float>();
  CHECK(maximum.item() == *std::max_element(values.begin(), values.end()));
}

TEST_CASE("the heuristics: a short-window sum of an expensive value takes gathered lanes; a cheap one and a long row do not") {
  TargetCaps caps = host_cpu_caps();
  if (!caps.supports_vector_ops) return;  // nothing to choose
  // A QDQ model's pooled activation: quantized, dequantized, HardSwish'd, quantized and dequantized
  // again per element (~25 ALU ops), then a 7x7 average per channel.
  auto fake_quantize = [](const Tensor& t, double scale) {
    Tensor s = Tensor::scalar(scale, S::Float32);
    return t.div(s).round().add(Tensor::scalar(3, S::Float32)).clip(0, 255).sub(Tensor::scalar(3, S::Float32)).mul(s);
  };
  auto expensive = [&](const Tensor& t) {
    Tensor q = fake_quantize(t, 0.05);
    Tensor hardswish = q.mul(q.mul(Tensor::scalar(1.0 / 6, S::Float32)).add(Tensor::scalar(0.5, S::Float32)).clip(0, 1));
    return fake_quantize(hardswish, 0.02);
  };
  auto vector_of = [](const std::vector<Opt>& opts) {
    for (const Opt& opt : opts)
      if (opt.op == OptOp::Upcast) return opt;
    return Opt{OptOp::Swap, -1, 0};
  };
  Tensor x = f32({1, 576, 7, 7}, 5);
  Schedule pooled = create_schedule({expensive(x).mean({2, 3}).data().node});
  REQUIRE(pooled.kernels.size() == 1);
  Opt vector = vector_of(hand_coded_opts(pooled.kernels[0].ast, caps));
  CHECK(vector.op == OptOp::Upcast);
  CHECK(axis_kind(vector.axis) == AxisKind::Loop);  // the channels, each lane's window gathered
  // A cheap value (a ReLU) is not worth the gathers.
  Schedule cheap = create_schedule({x.relu().mean({2, 3}).data().node});
  REQUIRE(cheap.kernels.size() == 1);
  CHECK(vector_of(hand_coded_opts(cheap.kernels[0].ast, caps)).op != OptOp::Upcast);
  // A long contiguous row (256 steps) stays with LLVM's vectoriser along the row.
  Schedule rows = create_schedule({expensive(f32({64, 256}, 6)).sum({1}).data().node});
  REQUIRE(rows.kernels.size() == 1);
  Opt row_vector = vector_of(hand_coded_opts(rows.kernels[0].ast, caps));
  CHECK_FALSE((row_vector.op == OptOp::Upcast && axis_kind(row_vector.axis) == AxisKind::Loop));
}

TEST_CASE("the heuristics: a 13x13 1x1 conv pads its merged pixels for a register tile; a strided max pool does not merge its vector") {
  TargetCaps caps = host_cpu_caps();
  auto reduction_kernel = [](const Tensor& t) {
    Schedule schedule = create_schedule({t.data().node});
    for (const ScheduledKernel& kernel : schedule.kernels)
      if (kernel.name().rfind("r_", 0) == 0) return kernel.ast;
    FAIL("no reduction kernel");
    return UOpPtr();
  };
  // 169 pixels: no row count of a register tile divides them, so they are merged and padded, and the
  // tile holds at least 6 accumulators (without the padding: one column of 4 rows over 13 padded to 16).
  std::vector<Opt> conv_opts = hand_coded_opts(
      reduction_kernel(conv(f32({1, 64, 13, 13}, 1), f32({256, 64, 1, 1}, 2), Tensor(), {}, {})), caps);
  CHECK(std::any_of(conv_opts.begin(), conv_opts.end(), [](const Opt& opt) { return opt.op == OptOp::Merge; }));
  CHECK(std::any_of(conv_opts.begin(), conv_opts.end(), [](const Opt& opt) { return opt.op == OptOp::Padto; }));
  int64_t accumulators = 1;
  for (const Opt& opt : conv_opts)
    if (opt.op == OptOp::Unroll && axis_kind(opt.axis) == AxisKind::Loop) accumulators *= opt.amount;
  CHECK(accumulators >= 6);
  // A stride-2 depthwise conv reads its lanes two apart, a strided gather the renderer loads as
  // wide vectors and a shuffle: it gets a vector without tile rows (it had none and ran scalar).
  ConvOptions strided_depthwise;
  strided_depthwise.stride = {2, 2};
  strided_depthwise.groups = 32;
  std::vector<Opt> depthwise_opts =
      hand_coded_opts(reduction_kernel(f32({1, 32, 33, 33}, 4).conv(f32({32, 1, 3, 3}, 5), Tensor(), strided_depthwise)), caps);
  if (caps.vector_lanes(dtypes::f32) >= 8)
    CHECK(std::any_of(depthwise_opts.begin(), depthwise_opts.end(), [](const Opt& opt) { return opt.op == OptOp::Upcast; }));
  // A stride-2 window gathers its lanes; merged pixels would need a division per lane.
  PoolOptions options;
  options.kernel = {3, 3};
  options.stride = {2, 2};
  std::vector<Opt> pool_opts = hand_coded_opts(reduction_kernel(f32({1, 64, 55, 55}, 3).max_pool(options)), caps);
  CHECK_FALSE(pool_opts.empty());
  CHECK(std::none_of(pool_opts.begin(), pool_opts.end(), [](const Opt& opt) { return opt.op == OptOp::Merge; }));
  // Its channels are the tile's rows (max_pool_tile): 8 of them with 32 registers, 4 with 16.
  if (caps.vector_lanes(dtypes::f32) >= 8) {
    int64_t vector_axis = -1, channel_rows = 0;
    for (const Opt& opt : pool_opts)
      if (opt.op == OptOp::Upcast) vector_axis = opt.axis;
    for (const Opt& opt : pool_opts)
      if (opt.op == OptOp::Unroll && opt.axis != vector_axis && axis_kind(opt.axis) == AxisKind::Loop) channel_rows = opt.amount;
    CHECK(channel_rows == (caps.vector_registers >= 32 ? 8 : 4));
  }
}

// A regression: an UNROLL that takes a reduce axis whole once left its outer range (extent 1, folded
// to CONST 0) in the REDUCE's range list, which the linearizer rejected.
TEST_CASE("an UPCAST of a reduce axis: each lane reduces every W-th step, then the lanes are combined") {
  struct Reduction {
    const char* name;
    Tensor value;
    std::vector<Opt> opts;
  };
  std::vector<Reduction> reductions{
      {"sum", f32({4, 64}, 110).sum({1}), {{OptOp::Upcast, kFirstReduceAxis, 16}}},
      {"sum, lanes and an unroll", f32({4, 96}, 111).sum({1}),
       {{OptOp::Upcast, kFirstReduceAxis, 8}, {OptOp::Unroll, kFirstReduceAxis, 3}}},
      {"max, every step a lane", f32({3, 8}, 112, -5, 5).max({1}), {{OptOp::Upcast, kFirstReduceAxis, 8}}},
      {"f16 variance", [] {
         Tensor centred = (input({2, 48}, S::Float16, 113) + input({48}, S::Float16, 114)).cast(S::Float32) - 0.25;
         return (centred * centred).sum({1});
       }(), {{OptOp::Upcast, kFirstReduceAxis, 16}}},
  };
  for (size_t i = 0; i < reductions.size(); ++i) {
    const Reduction& reduction = reductions[i];
    INFO(reduction.name);
    BoundSchedule bound = bind_schedule({reduction.value});
    REQUIRE(bound.schedule.kernels.size() == 1);
    const ScheduledKernel& kernel = bound.schedule.kernels[0];
    // Symbols are per process: each case its own prefix.
    KernelOracle oracle(bound.schedule, kernel, bound.arguments(kernel), str_cat("oracle_reduce_upcast_", i, "_"));
    oracle.run_reference();
    Random random(2);
    std::optional<std::string> problem = oracle.check(reduction.opts, random);
    INFO(problem.value_or(""));
    CHECK(!problem);
    // After the expander: a vector REDUCE (unless the lanes were the whole reduction), its lanes
    // combined, and no REDUCE left over the lanes.
    UOpPtr expanded = vectorize_upcast(expand_unrolls(apply_opts(kernel.ast, reduction.opts)));
    bool vector_reduce = false, lanes_left = false;
    for (const UOp* node : toposort(expanded)) {
      if (node->op() == Ops::REDUCE && node->dtype().count() > 1) vector_reduce = true;
      if (node->op() == Ops::RANGE && axis_kind(node->arg_int()) == AxisKind::Upcast) lanes_left = true;
    }
    CHECK(vector_reduce == (std::string(reduction.name) != "max, every step a lane"));
    CHECK_FALSE(lanes_left);
  }
}

TEST_CASE("a kernel name met again with another AST is refused, not run as the old kernel") {
  // Kernel names carry their AST's hash; names made by hand (as this file's oracles make them) must
  // not collide, and a collision is an error rather than a silent reuse of the first kernel.
  BoundSchedule sums = bind_schedule({f32({2, 8}, 120).sum({1})});
  BoundSchedule maxima = bind_schedule({f32({2, 8}, 121).max({1})});
  REQUIRE(sums.schedule.kernels.size() == 1);
  REQUIRE(maxima.schedule.kernels.size() == 1);
  auto named = [](ScheduledKernel kernel) {
    kernel.ast = UOp::make(Ops::SINK, dtypes::void_, kernel.ast->srcs(), std::string("same_name_other_ast"));
    return kernel;
  };
  ScheduledKernel first = named(sums.schedule.kernels[0]);
  bool compiled = compile_cpu_kernel(first).function != nullptr;
  CHECK(compiled);
  CHECK(compile_cpu_kernel(first).reused);
  CHECK_THROWS_WITH_AS(compile_cpu_kernel(named(maxima.schedule.kernels[0])),
                       doctest::Contains("was loaded earlier for another AST"), InternalError);
}

TEST_CASE("a reduce axis unrolled whole") {
  BoundSchedule bound = bind_schedule({f32({2, 3}, 1).sum({1})});
  REQUIRE(bound.schedule.kernels.size() == 1);
  const ScheduledKernel& kernel = bound.schedule.kernels[0];
  KernelOracle oracle(bound.schedule, kernel, bound.arguments(kernel), "oracle_whole_reduce_unroll_");
  oracle.run_reference();
  Random random(1);
  std::optional<std::string> problem = oracle.check({{OptOp::Unroll, kFirstReduceAxis, 3}}, random);
  INFO(problem.value_or(""));
  CHECK(!problem);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kiln
