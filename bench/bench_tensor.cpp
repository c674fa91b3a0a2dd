// Tensor benchmarks: fp32 and u8×s8 matmul GFLOP/s / GOP/s (256³ to 2048³) and elementwise GB/s, each next to the
// machine's measured peak (bench/peak.h). Kernels are compiled once, then timed alone: the best of
// several runs, through the same thread pool realize() uses. End-to-end realize() time, which adds
// scheduling and kernel lookup, is printed too.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string_view>
#include <vector>

#include "kiln/kiln.hpp"
#include "passes/pipeline.h"
#include "peak.h"
#include "runtime/thread_pool.h"
#include "schedule/schedule.h"
#include "tensor/tensor_internal.h"
#include "tensor/winograd.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Compiles the graph of `output` (whose inputs are realized) and returns the best kernel time.
struct Timing {
  double kernel_seconds;
  double median_kernel_seconds;
  double realize_seconds;
  size_t kernels;
};

// The kernels run `repeats` times, and then on until `min_seconds` of runs have passed (at most
// 1000 runs). This VM's neighbours take whole cores away for tens of milliseconds at a time: eight
// runs of a 7 ms matmul (56 ms) were often all slowed: their best read 56-66 % of the peak
// where a second of runs read 86-89 % (bench/README.md, tenth session). The peak (peak.h) is a
// best of seven runs too.
Timing time_graph(const Tensor& output, const std::vector<Tensor>& inputs, int repeats, double min_seconds = 0) {
  Schedule schedule = create_schedule({output.data().node});
  optimize_schedule(schedule, host_cpu_caps());
  std::vector<KernelFunction> functions;
  for (const ScheduledKernel& kernel : schedule.kernels) functions.push_back(compile_cpu_kernel(kernel).function);
  std::vector<std::shared_ptr<HostBuffer>> owned;
  std::vector<void*> pointers(schedule.buffers.size());
  auto arena = std::make_shared<HostBuffer>(dtypes::u8, schedule.arena_bytes);
  // Every buffer with data that the graph holds (its inputs, and values folded into weights).
  std::vector<const detail::TensorData*> stack{&output.data()}, held;
  for (const Tensor& input : inputs) stack.push_back(&input.data());
  while (!stack.empty()) {
    const detail::TensorData* data = stack.back();
    stack.pop_back();
    if (data->buffer) held.push_back(data);
    for (const auto& source : data->inputs) stack.push_back(source.get());
  }
  for (size_t b = 0; b < schedule.buffers.size(); ++b) {
    const ScheduledBuffer& buffer = schedule.buffers[b];
    if (buffer.kind == ScheduledBuffer::Kind::Input) {
      for (const detail::TensorData* data : held)
        if (data->buffer_id == buffer.input_id) pointers[b] = data->buffer->data();
    } else if (buffer.kind == ScheduledBuffer::Kind::Output) {
      owned.push_back(std::make_shared<HostBuffer>(buffer.dtype, buffer.count));
      pointers[b] = owned.back()->data();
    } else {
      pointers[b] = static_cast<char*>(arena->data()) + buffer.arena_offset;
    }
  }
  std::vector<double> times;
  auto first = Clock::now();
  while (static_cast<int>(times.size()) < repeats || (seconds_since(first) < min_seconds && times.size() < 1000)) {
    auto start = Clock::now();
    run_schedule(schedule, functions, pointers);
    times.push_back(seconds_since(start));
  }
  std::sort(times.begin(), times.end());
  double best = times.front(), median = times[times.size() / 2];
  double best_realize = 1e30;
  for (int i = 0; i < std::max(1, repeats / 3); ++i) {
    Tensor copy = output;
    auto start = Clock::now();
    copy.realize();
    best_realize = std::min(best_realize, seconds_since(start));
  }
  return {best, median, best_realize, schedule.kernels.size()};
}

// x.conv(...) with the Winograd path switched off.
Tensor direct_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvOptions& options) {
  WinogradMode saved = winograd_mode();
  set_winograd_mode(WinogradMode::Off);
  Tensor y = x.conv(w, bias, options);
  set_winograd_mode(saved);
  return y;
}

}  // namespace

// `bench-tensor [SECTION…]` runs only the named sections (matmul, int8, conv, winograd, elementwise).
int main(int argc, char** argv) {
  auto wanted = [&](std::string_view section) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; ++i)
      if (section == argv[i]) return true;
    return false;
  };
  int threads = default_thread_pool().thread_count();
  const kiln::bench::PeakNumbers& peak = kiln::bench::machine_peak();
  std::printf("machine: %d threads; peak fp32 %.1f GFLOP/s (1 core) %.1f GFLOP/s (all); stream %.1f GB/s (1) %.1f GB/s (all)\n",
              threads, peak.gflops_one_core, peak.gflops_all_cores, peak.stream_gbs_one_thread, peak.stream_gbs_all_threads);

  if (wanted("matmul"))
    std::printf("\n%-22s %8s %12s %10s %12s %14s\n", "matmul fp32", "kernels", "GFLOP/s", "of peak", "median", "realize GFLOP/s");
  for (int64_t n : {256, 512, 1024, 2048}) {
    if (!wanted("matmul")) break;
    Tensor a = Tensor::uniform({n, n}, 1, -1, 1), b = Tensor::uniform({n, n}, 2, -1, 1);
    a.realize();
    b.realize();
    Tensor c = a.matmul(b);
    // Best over at least a second of runs (and at least 3): see time_graph.
    Timing t = time_graph(c, {a, b}, 3, 1.0);
    double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    char label[32];
    std::snprintf(label, sizeof(label), "%lld^3", static_cast<long long>(n));
    std::printf("%-22s %8zu %12.2f %9.1f%% %11.1f%% %14.2f\n", label, t.kernels, flops / t.kernel_seconds / 1e9,
                100.0 * flops / t.kernel_seconds / 1e9 / peak.gflops_all_cores,
                100.0 * flops / t.median_kernel_seconds / 1e9 / peak.gflops_all_cores, flops / t.realize_seconds / 1e9);
  }

  // u8 × s8 → i32 matmuls (MatMulInteger's form) with a constant s8 b, folded as a plan folds it
  // (in 8-bit dot-product panels where the CPU has them: docs/optimisation.md), against the
  // machine's 8-bit dot-product peak (bench/peak.h; none without AVX-512 VNNI). Results are
  // checked exactly against a plain integer product on a sample of outputs.
  if (wanted("int8")) {
    double int8_peak = kiln::bench::measure_int8_gops(threads);
    std::printf("\n%-22s %8s %12s %10s %12s   (int8 peak %.1f GOP/s, all cores)\n", "matmul u8 x s8", "kernels",
                "GOP/s", "of peak", "median", int8_peak);
    for (int64_t n : {256, 512, 1024, 2048}) {
      std::vector<uint8_t> a_values(static_cast<size_t>(n * n));
      std::vector<int8_t> b_values(static_cast<size_t>(n * n));
      for (size_t i = 0; i < a_values.size(); ++i) a_values[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
      for (size_t i = 0; i < b_values.size(); ++i) b_values[i] = static_cast<int8_t>(((i * 40503u) >> 8) & 0xff);
      Tensor a = Tensor::from_data(a_values.data(), {n, n}, ScalarType::UInt8);
      Tensor b = Tensor::from_data(b_values.data(), {n, n}, ScalarType::Int8);
      a.realize();
      b.realize();
      Tensor c = fold_constants({a.cast(ScalarType::Int32).matmul(b.cast(ScalarType::Int32))}, {a})[0];
      Timing t = time_graph(c, {a}, 3, 1.0);
      std::vector<int32_t> got = c.to_vector<int32_t>();
      int64_t wrong = 0;
      for (int64_t row = 0; row < n; row += 37)
        for (int64_t column = 0; column < n; column += 41) {
          int64_t expected = 0;
          for (int64_t k = 0; k < n; ++k)
            expected += int64_t{a_values[static_cast<size_t>(row * n + k)]} * int64_t{b_values[static_cast<size_t>(k * n + column)]};
          wrong += got[static_cast<size_t>(row * n + column)] != expected;
        }
      double ops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      char label[40];
      std::snprintf(label, sizeof(label), "%lld^3%s", static_cast<long long>(n), wrong ? " WRONG" : "");
      auto share = [&](double seconds) { return int8_peak > 0 ? 100.0 * ops / seconds / 1e9 / int8_peak : 0.0; };
      std::printf("%-22s %8zu %12.2f %9.1f%% %11.1f%%\n", label, t.kernels, ops / t.kernel_seconds / 1e9,
                  share(t.kernel_seconds), share(t.median_kernel_seconds));
      if (wrong) return 1;
    }
  }

  // ResNet-50's and MobileNetV2's convolution shapes (batch 1, weights and bias as inputs, so
  // nothing is folded). Flops count multiply-adds as 2.
  if (wanted("conv")) std::printf("\n%-22s %8s %12s %10s %14s\n", "conv fp32", "kernels", "GFLOP/s", "of peak", "realize GFLOP/s");
  struct ConvCase {
    const char* name;
    int64_t channels, filters, size, kernel, groups;
  } convs[] = {
      {"3x3 64->64 @56", 64, 64, 56, 3, 1},
      {"1x1 256->64 @56", 256, 64, 56, 1, 1},
      {"1x1 64->256 @56", 64, 256, 56, 1, 1},
      {"3x3 256->256 @14", 256, 256, 14, 3, 1},
      {"3x3 64->192 @56", 64, 192, 56, 3, 1},
      {"dw 3x3 144 @56", 144, 144, 56, 3, 144},
  };
  for (const ConvCase& c : convs) {
    if (!wanted("conv")) break;
    Tensor x = Tensor::uniform({1, c.channels, c.size, c.size}, 5, -1, 1);
    Tensor w = Tensor::uniform({c.filters, c.channels / c.groups, c.kernel, c.kernel}, 6, -1, 1);
    Tensor bias = Tensor::uniform({c.filters}, 7, -1, 1);
    x.realize();
    w.realize();
    bias.realize();
    ConvOptions options;
    int64_t pad = c.kernel / 2;
    options.padding = {pad, pad, pad, pad};
    options.groups = c.groups;
    Tensor y = direct_conv(x, w, bias, options);
    Timing t = time_graph(y, {x, w, bias}, 8);
    double flops = 2.0 * static_cast<double>(c.filters * (c.channels / c.groups) * c.kernel * c.kernel * c.size * c.size);
    std::printf("%-22s %8zu %12.2f %9.1f%% %14.2f\n", c.name, t.kernels, flops / t.kernel_seconds / 1e9,
                100.0 * flops / t.kernel_seconds / 1e9 / peak.gflops_all_cores, flops / t.realize_seconds / 1e9);
  }

  // 3x3 stride-1 convs + bias + ReLU, direct against Winograd F(2x2, 3x3) (docs/winograd.md), with the weight
  // transform folded as a plan folds it (constant weights). Both columns count the direct conv's
  // flops, so Winograd's GFLOP/s are "effective": the speed-up is their ratio.
  if (wanted("winograd")) std::printf("\n%-22s %8s %12s %8s %12s %8s %10s\n", "conv 3x3 fp32", "kernels", "direct", "kernels", "winograd",
              "speed-up", "max rel err");
  struct WinogradCase {
    const char* name;
    int64_t batch, channels, filters, size;
  } winograd_convs[] = {
      {"64->64 @56", 1, 64, 64, 56},     {"128->128 @28", 1, 128, 128, 28}, {"256->256 @14", 1, 256, 256, 14},
      {"512->512 @7", 1, 512, 512, 7},   {"32->32 @56", 1, 32, 32, 56},     {"16->16 @112", 1, 16, 16, 112},
      {"16->16 @56", 1, 16, 16, 56},     {"32->32 @112", 1, 32, 32, 112},   {"64->64 @14", 1, 64, 64, 14},
      {"256->256 @7", 1, 256, 256, 7},   {"256->256 @4", 1, 256, 256, 4},   {"64->64 @56 x2", 2, 64, 64, 56},
      {"64->64 @112", 1, 64, 64, 112},   {"128->128 @112", 1, 128, 128, 112}, {"64->64 @224", 1, 64, 64, 224},
      {"3->64 @224", 1, 3, 64, 224},
  };
  for (const WinogradCase& c : winograd_convs) {
    if (!wanted("winograd")) break;
    Tensor x = Tensor::uniform({c.batch, c.channels, c.size, c.size}, 8, -1, 1);
    Tensor w = Tensor::uniform({c.filters, c.channels, 3, 3}, 9, -1, 1);
    Tensor bias = Tensor::uniform({c.filters}, 10, -1, 1);
    x.realize();
    w.realize();
    bias.realize();
    ConvOptions options;
    options.padding = {1};
    double flops = 2.0 * static_cast<double>(c.batch * c.filters * c.channels * 9 * c.size * c.size);
    // With the ReLU that follows most convs: fused into the direct conv's kernel, one elementwise
    // pass over Winograd's output (in a network it joins the next kernel instead).
    Tensor direct = direct_conv(x, w, bias, options).relu();
    Tensor winograd = fold_constants({winograd_conv(x, w, bias, options).relu()}, {x})[0];
    Timing d = time_graph(direct, {x}, 8), t = time_graph(winograd, {x}, 8);
    std::vector<double> expected = direct.to_vector<double>(), got = winograd.to_vector<double>();
    double error = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      error = std::max(error, std::fabs(got[i] - expected[i]));
      scale = std::max(scale, std::fabs(expected[i]));
    }
    std::printf("%-22s %8zu %12.2f %8zu %12.2f %8.2f %10.1e\n", c.name, d.kernels, flops / d.kernel_seconds / 1e9,
                t.kernels, flops / t.kernel_seconds / 1e9, d.kernel_seconds / t.kernel_seconds, error / scale);
  }

  if (!wanted("elementwise")) return 0;
  std::printf("\n%-22s %8s %12s %10s %14s\n", "elementwise fp32", "kernels", "GB/s", "of stream", "realize GB/s");
  const int64_t count = int64_t{1} << 24;  // 64 MiB per operand: far beyond the caches
  Tensor a = Tensor::uniform({count}, 3), b = Tensor::uniform({count}, 4);
  a.realize();
  b.realize();
  struct Case {
    const char* name;
    Tensor output;
    double bytes;
  } cases[] = {
      {"c = a + b", a + b, 3.0 * 4 * count},
      {"c = a * 2 + 1", a * 2.0 + 1.0, 2.0 * 4 * count},
      {"c = relu(a*b+a)", (a * b + a).relu(), 3.0 * 4 * count},
  };
  for (Case& c : cases) {
    Timing t = time_graph(c.output, {a, b}, 8);
    std::printf("%-22s %8zu %12.2f %9.1f%% %14.2f\n", c.name, t.kernels, c.bytes / t.kernel_seconds / 1e9,
                100.0 * c.bytes / t.kernel_seconds / 1e9 / peak.stream_gbs_all_threads, c.bytes / t.realize_seconds / 1e9);
  }
  return 0;
}
