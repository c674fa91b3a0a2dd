// `kiln bench`: times a plan the way an application would run it, through libkiln's C API only (a
// model given as .onnx is compiled first, in process). Prints a human summary, then one
// "KEY VALUE" line per figure, the format bench/compare_onnxruntime.py parses. With --profile or
// --trace, more runs follow through the runtime's PlanRunner with each launch timed: a per-kernel
// table, a Chrome trace file (docs/profiling.md).
#include "bench_command.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>

#include <unistd.h>

#include "kiln/kiln.h"
#include "plan/plan_dtype.h"
#include "plan/plan_reader.h"
#include "chrome_trace.h"
#include "plan_commands.h"
#include "runtime/cpu/plan_runner.h"
#include "support/atomic_file.h"
#include "support/error.h"
#include "support/kernel_profile.h"
#include "npy_file.h"
#include "tensor_file.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;
constexpr int kExitError = 1, kExitUsage = 2, kExitInternal = 3;

void print_bench_help(std::ostream& out) {
  out << "usage: kiln bench PLAN|MODEL.onnx [--threads N] [--iterations N] [--warmup N] [--seed N]\n"
         "                  [--profile] [--trace FILE] [--shape SPEC...] [--input NAME=FILE...]\n"
         "\n"
         "Times PLAN through libkiln's C API: load, a first run, --warmup untimed runs, then\n"
         "--iterations timed runs on seeded random inputs of each input's dtype and shape. Given an\n"
         "ONNX model, compiles it first (to a temporary plan, removed afterwards; --shape as for\n"
         "'kiln compile'). Prints a summary, then the machine-readable lines\n"
         "    compile_ms X   (only for a model)   load_ms X   first_run_ms X\n"
         "    min_ms X   median_ms X   p90_ms X   peak_rss_mib X\n"
         "With --profile, another --iterations runs follow with every kernel launch timed, and a\n"
         "table with one row per kernel, slowest first: launches per run, ms per run, share of the\n"
         "kernels' time, GFLOP/s and GB/s (from the compiler's estimates) and the model nodes it\n"
         "computes.\n"
         "With --trace FILE, those runs are also written to FILE as a Chrome trace (JSON; open it in\n"
         "https://ui.perfetto.dev or chrome://tracing): one event per run, per kernel launch (named\n"
         "like the table's rows, with the model nodes) and per chunk of a launch, one track per thread.\n"
         "\n"
         "options:\n"
         "  --threads N     kernel threads (sets KILN_THREADS; default: libkiln's, one per core)\n"
         "  --iterations N  timed runs (default 100)\n"
         "  --warmup N      untimed runs after the first one (default 10)\n"
         "  --seed N        seed of the random inputs (default 0)\n"
         "  --input NAME=FILE  input NAME from a .npy or ONNX TensorProto file, not random values\n"
         "                  (its shape must be the input's: --shape sets a symbolic plan's)\n"
         "  --profile       time each kernel launch and print the per-kernel table\n"
         "  --trace FILE    write the timed runs as a Chrome trace (Perfetto) to FILE\n"
         "  --shape SPEC... shapes for a model's symbolic dimensions: INPUT=D1,D2 or SYMBOL=N;\n"
         "                  for a symbolic plan, its variables' values: VARIABLE=N (default: each\n"
         "                  variable's maximum, the largest run the plan allows)\n"
         "  -h, --help      show this help\n";
}

struct Options {
  std::string path;
  long threads = 0, iterations = 100, warmup = 10;
  uint64_t seed = 0;
  bool profile = false;
  std::string trace_path;  // empty: no trace
  std::vector<std::string> shapes;
  std::vector<std::pair<std::string, std::string>> input_files;  // --input NAME=FILE
};

struct PlanDeleter {
  void operator()(kiln_plan* plan) const { kiln_plan_free(plan); }
};
struct AlignedDeleter {
  void operator()(void* data) const { std::free(data); }
};
using AlignedBuffer = std::unique_ptr<unsigned char[], AlignedDeleter>;

// 64-byte aligned, so libkiln uses the buffer in place (kiln.h: kiln_tensor).
AlignedBuffer aligned_buffer(size_t bytes) {
  size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void* data = std::aligned_alloc(64, rounded);
  if (!data) throw UserError(str_cat("cannot allocate ", bytes, " bytes"));
  std::memset(data, 0, rounded);
  return AlignedBuffer(static_cast<unsigned char*>(data));
}

uint16_t float_to_half(float value) {  // round to nearest; values here are small normals or zero
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  if (exponent <= 0) return static_cast<uint16_t>(sign);
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t mantissa = bits & 0x7fffffu;
  uint32_t half = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  if (mantissa & 0x1000u) ++half;
  return static_cast<uint16_t>(half);
}

// Seeded values of the right kind: floats ~ N(0, 1), integers 0..9 (small, so that index inputs stay
// in range), bools 0/1.
void fill_random(kiln_dtype dtype, unsigned char* data, size_t count, std::mt19937_64& random) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> digit(0, 9);
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case KILN_DTYPE_FLOAT32: reinterpret_cast<float*>(data)[i] = normal(random); break;
      case KILN_DTYPE_FLOAT64: reinterpret_cast<double*>(data)[i] = normal(random); break;
      case KILN_DTYPE_FLOAT16: reinterpret_cast<uint16_t*>(data)[i] = float_to_half(normal(random)); break;
      case KILN_DTYPE_BFLOAT16:
        reinterpret_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(normal(random)) >> 16);
        break;
      case KILN_DTYPE_BOOL: data[i] = static_cast<unsigned char>(digit(random) & 1); break;
      case KILN_DTYPE_INT8: case KILN_DTYPE_UINT8: data[i] = static_cast<unsigned char>(digit(random)); break;
      case KILN_DTYPE_INT16: case KILN_DTYPE_UINT16:
        reinterpret_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(digit(random));
        break;
      case KILN_DTYPE_INT32: case KILN_DTYPE_UINT32:
        reinterpret_cast<uint32_t*>(data)[i] = static_cast<uint32_t>(digit(random));
        break;
      case KILN_DTYPE_INT64: case KILN_DTYPE_UINT64:
        reinterpret_cast<uint64_t*>(data)[i] = static_cast<uint64_t>(digit(random));
        break;
    }
  }
}

double peak_rss_mib() {  // VmHWM: the process's peak resident set
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return NAN;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

bool has_suffix(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A tensor the benchmark owns: its shape (pointing into the plan, or for a symbolic plan into
// `shape`) and a buffer.
struct Binding {
  kiln_tensor view{};
  std::vector<int64_t> shape;
  AlignedBuffer buffer;
};

// A symbolic plan's input shapes for the benchmark: each variable at its --shape VARIABLE=N value,
// else at its maximum; a dimension that is an expression of the variables is evaluated with the
// plan's own size program. Empty for a fixed-shape plan.
std::vector<std::vector<int64_t>> symbolic_input_shapes(const std::string& plan_path, const kiln_plan* plan,
                                                        const std::vector<std::string>& specs) {
  size_t variable_count = kiln_plan_variable_count(plan);
  if (variable_count == 0) return {};
  std::vector<int64_t> values(variable_count);
  std::vector<std::string> names(variable_count);
  std::vector<std::pair<int64_t, int64_t>> ranges(variable_count);
  for (size_t v = 0; v < variable_count; ++v) {
    const char* name;
    kiln_plan_variable_info(plan, v, &name, &ranges[v].first, &ranges[v].second);
    names[v] = name;
    values[v] = ranges[v].second;
  }
  for (const std::string& spec : specs) {
    size_t equals = spec.find('=');
    size_t v = std::find(names.begin(), names.end(), spec.substr(0, equals)) - names.begin();
    char* end = nullptr;
    long long value = equals == std::string::npos ? 0 : std::strtoll(spec.c_str() + equals + 1, &end, 10);
    if (v == names.size() || end == nullptr || *end != '\0' || end == spec.c_str() + equals + 1)
      throw UserError(str_cat("--shape '", spec, "' is not VARIABLE=N for a variable of the plan"));
    if (value < ranges[v].first || value > ranges[v].second)
      throw UserError(str_cat("--shape ", spec, ": the plan allows ", names[v], " in ", ranges[v].first, "..",
                              ranges[v].second));
    values[v] = value;
  }
  PlanBytes bytes = PlanBytes::map_file(plan_path);
  PlanShapes shapes(*verify_plan(bytes.data(), bytes.size()).metadata);
  std::vector<std::vector<int64_t>> result;
  for (const std::vector<PlanDim>& dims : shapes.input_dims()) {
    std::vector<int64_t> shape;
    for (const PlanDim& dim : dims)
      shape.push_back(dim.size >= 0 ? dim.size : PlanShapes::evaluate(dim.program, values, "kiln bench", [] {
        return std::string("an input dimension");
      }));
    result.push_back(std::move(shape));
  }
  return result;
}

std::string shape_list(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t d = 0; d < shape.size(); ++d) text += str_cat(d ? ", " : "", shape[d]);
  return text + ")";
}

// --input NAME=FILE: the input's random values replaced by a .npy or TensorProto file's (a detector's
// speed depends on what the image holds). The file must match the input's dtype and bound shape
// (a symbolic plan's: --shape gives it).
void fill_from_file(std::vector<Binding>& inputs, const std::string& name, const std::string& file) {
  auto binding = std::find_if(inputs.begin(), inputs.end(), [&](const Binding& b) { return name == b.view.name; });
  if (binding == inputs.end()) throw UserError(str_cat("--input names no input of the plan: '", name, "'"));
  std::vector<int64_t> shape(binding->view.shape, binding->view.shape + binding->view.rank), given;
  std::string bytes;
  kiln_dtype dtype = KILN_DTYPE_FLOAT32;
  if (has_suffix(file, ".npy")) {
    NpyArray array = read_npy_file(file);
    given = array.shape;
    dtype = array.dtype;
    bytes = std::move(array.bytes);
  } else {
    NamedTensor read = read_tensor_file(file);
    given.assign(read.tensor.shape().begin(), read.tensor.shape().end());
    std::optional<kiln_dtype> type = plan::plan_dtype_of(read.tensor.dtype());
    if (!type) throw UserError(str_cat("--input ", name, "=", file, ": a plan has no ", scalar_type_name(read.tensor.dtype())));
    dtype = *type;
    bytes.resize(static_cast<size_t>(read.tensor.numel()) * scalar_type_size(read.tensor.dtype()));
    read.tensor.copy_to(bytes.data(), bytes.size());
  }
  if (given != shape || dtype != binding->view.dtype || bytes.size() != binding->view.byte_size)
    throw UserError(str_cat("--input ", name, "=", file, ": the file holds ", kiln_dtype_name(dtype), " ",
                            shape_list(given), ", the input is bound as ", kiln_dtype_name(binding->view.dtype), " ",
                            shape_list(shape), " (a symbolic plan's sizes come from --shape)"));
  std::memcpy(binding->buffer.get(), bytes.data(), bytes.size());
}

// `input_shapes`: a symbolic plan's (symbolic_input_shapes); its output shapes then come from
// kiln_plan_output_shape for `inputs`.
std::vector<Binding> bind_tensors(const kiln_plan* plan, bool outputs, std::mt19937_64& random,
                                  const std::vector<std::vector<int64_t>>& input_shapes,
                                  const std::vector<kiln_tensor>& inputs = {}) {
  size_t count = outputs ? kiln_plan_output_count(plan) : kiln_plan_input_count(plan);
  std::vector<Binding> bindings(count);
  for (size_t i = 0; i < count; ++i) {
    kiln_tensor& view = bindings[i].view;
    if (outputs) kiln_plan_output_info(plan, i, &view.name, &view.dtype, &view.rank, &view.shape);
    else kiln_plan_input_info(plan, i, &view.name, &view.dtype, &view.rank, &view.shape);
    if (!input_shapes.empty()) {
      std::vector<int64_t>& shape = bindings[i].shape;
      if (outputs) {
        shape.resize(view.rank);
        kiln_status status = kiln_plan_output_shape(plan, inputs.data(), inputs.size(), i, shape.data(), view.rank, nullptr);
        if (status != KILN_OK) throw UserError(str_cat(kiln_error_message(), " (", kiln_status_string(status), ")"));
      } else {
        shape = input_shapes[i];
      }
      view.shape = shape.data();
    }
    size_t elements = 1;
    for (size_t d = 0; d < view.rank; ++d) elements *= static_cast<size_t>(view.shape[d]);
    view.byte_size = elements * kiln_dtype_size(view.dtype);
    bindings[i].buffer = aligned_buffer(view.byte_size);
    view.data = bindings[i].buffer.get();
    if (!outputs) fill_random(view.dtype, bindings[i].buffer.get(), elements, random);
  }
  return bindings;
}

std::string shape_text(const kiln_tensor& view) {
  std::string text = "(";
  for (size_t d = 0; d < view.rank; ++d) text += str_cat(d ? ", " : "", view.shape[d]);
  return text + ")";
}

// --profile and --trace: the plan loaded again, this time as the runtime's PlanRunner (the code
// libkiln runs, compiled into this tool; the C API has no per-kernel timing), run `iterations` times
// on the same tensors with every launch timed (and, for --trace, every chunk recorded). The table
// and the trace's file name are printed after the benchmark's figures.
void profile_runs(const std::string& plan_path, const std::vector<kiln_tensor>& inputs,
                  const std::vector<kiln_tensor>& outputs, const Options& options) {
  PlanRunner runner(PlanBytes::map_file(plan_path));
  const auto& kernels = *runner.metadata().kernels();
  const long iterations = options.iterations;
  size_t rank_sum = 0;
  for (const kiln_tensor& view : outputs) rank_sum += view.rank;
  std::vector<int64_t> run_shapes(rank_sum);  // outputs whose shapes the run decides need it
  RunSettings settings;
  settings.output_shapes = run_shapes.data();
  runner.run(inputs.data(), inputs.size(), outputs.data(), outputs.size(), settings);  // untimed: a first run
  std::vector<double> seconds(kernels.size(), 0.0);
  std::unique_ptr<ChromeTraceRecorder> recorder;
  if (!options.trace_path.empty()) recorder = std::make_unique<ChromeTraceRecorder>();
  settings.kernel_seconds = seconds.data();
  settings.tracer = recorder.get();
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i) {
    auto run_start = std::chrono::steady_clock::now();
    runner.run(inputs.data(), inputs.size(), outputs.data(), outputs.size(), settings);
    if (recorder) recorder->run(run_start, std::chrono::steady_clock::now());
  }
  double run_ms = milliseconds_since(start) / static_cast<double>(iterations);

  std::vector<KernelLaunchTiming> launches;
  std::vector<TracedKernel> traced;
  double kernel_ms = 0;
  size_t symbolic_kernels = 0;
  for (flatbuffers::uoffset_t k = 0; k < kernels.size(); ++k) {
    const plan_fb::Kernel* kernel = kernels.Get(k);
    KernelLaunchTiming launch;
    launch.name = kernel->symbol()->str();
    launch.milliseconds = seconds[k] * 1000 / static_cast<double>(iterations);
    // A kernel with symbolic sizes has its estimates at the variables' maxima, not at this run's
    // shapes: its rates would be made up, so the table says "-" for them.
    bool symbolic = kernel->variables() != nullptr || kernel->parallel_extent_program() != nullptr ||
                    kernel->slot_sizes() != nullptr;
    symbolic_kernels += symbolic ? 1 : 0;
    launch.flops = symbolic ? 0 : kernel->estimated_flops();
    launch.bytes = symbolic ? 0 : kernel->estimated_bytes();
    if (kernel->sources() != nullptr)
      for (const flatbuffers::String* source : *kernel->sources()) launch.sources.push_back(source->str());
    kernel_ms += launch.milliseconds;
    TracedKernel described{launch.name, {}, launch.flops, launch.bytes};
    for (const std::string& source : launch.sources) described.sources.push_back(short_source_label(source));
    traced.push_back(std::move(described));
    launches.push_back(std::move(launch));
  }
  if (options.profile) {
    char line[160];
    std::snprintf(line, sizeof line,
                  "profile: %ld runs with each launch timed%s: %.4f ms per run, %.4f ms in kernels\n", iterations,
                  recorder ? " and traced" : "", run_ms, kernel_ms);
    std::cout << "\n" << line;
    for (const std::string& row : format_kernel_profile(launches)) std::cout << row << "\n";
    if (symbolic_kernels > 0)
      std::cout << symbolic_kernels << " of " << kernels.size()
                << " launches have symbolic sizes: the compiler's work estimates are for the variables' maxima, so "
                   "their GFLOP/s and GB/s are shown as -\n";
  }
  if (recorder) {
    std::string json = recorder->json("kiln bench " + options.path, traced);
    std::string temporary = str_cat(options.trace_path, ".tmp-", getpid());
    if (auto failure = write_file_atomically(options.trace_path, temporary, json))
      throw UserError(str_cat("cannot write the trace to '", options.trace_path, "'",
                              failure->reason.empty() ? "" : ": " + failure->reason));
    std::cout << "trace: " << iterations << " runs of " << kernels.size() << " kernels written to "
              << options.trace_path << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  }
}

int bench(const Options& options) {
  if (options.threads > 0) setenv("KILN_THREADS", std::to_string(options.threads).c_str(), 1);
  std::string plan_path = options.path;
  std::string temporary;
  double compile_ms = NAN;
  if (has_suffix(options.path, ".onnx")) {
    temporary = (fs::temp_directory_path() / str_cat("kiln-bench-", getpid(), ".kiln")).string();
    auto start = std::chrono::steady_clock::now();
    compile_model(options.path, temporary, options.shapes);
    compile_ms = milliseconds_since(start);
    plan_path = temporary;
  }
  struct RemoveTemporary {
    std::string path;
    ~RemoveTemporary() {
      if (!path.empty()) std::remove(path.c_str());
    }
  } remove_temporary{temporary};

  auto load_start = std::chrono::steady_clock::now();
  kiln_plan* loaded = nullptr;
  kiln_status status = kiln_plan_load_file(plan_path.c_str(), &loaded);
  double load_ms = milliseconds_since(load_start);
  if (status != KILN_OK) {
    std::cerr << "kiln bench: " << plan_path << ": " << kiln_error_message() << " (" << kiln_status_string(status)
              << ")\n";
    return kExitError;
  }
  std::unique_ptr<kiln_plan, PlanDeleter> plan(loaded);
  std::mt19937_64 random(options.seed);
  // A symbolic plan takes --shape as its variables' values; a compiled model's --shape was used up.
  std::vector<std::vector<int64_t>> input_shapes =
      symbolic_input_shapes(plan_path, plan.get(), temporary.empty() ? options.shapes : std::vector<std::string>{});
  if (input_shapes.empty() && temporary.empty() && !options.shapes.empty())
    std::cerr << "kiln bench: note: --shape applies to ONNX models and symbolic plans only; this plan's shapes are fixed\n";
  std::vector<Binding> inputs = bind_tensors(plan.get(), false, random, input_shapes);
  for (const auto& [name, file] : options.input_files) fill_from_file(inputs, name, file);
  std::vector<kiln_tensor> input_views, output_views;
  for (const Binding& binding : inputs) input_views.push_back(binding.view);
  std::vector<Binding> outputs = bind_tensors(plan.get(), true, random, input_shapes, input_views);
  for (const Binding& binding : outputs) output_views.push_back(binding.view);

  // Every output's shape comes back from the run, so a plan whose output shapes the run decides
  // (a detector's count) runs too; the buffers are at the outputs' upper bounds.
  size_t rank_sum = 0;
  for (const kiln_tensor& view : output_views) rank_sum += view.rank;
  std::vector<int64_t> run_shapes(rank_sum);
  kiln_run_options run_options;
  kiln_run_options_init(&run_options);
  run_options.output_shapes = run_shapes.data();
  auto run_once = [&]() {
    kiln_status run_status = kiln_plan_run_with_options(plan.get(), input_views.data(), input_views.size(),
                                                        output_views.data(), output_views.size(), &run_options);
    if (run_status != KILN_OK)
      throw UserError(str_cat(kiln_error_message(), " (", kiln_status_string(run_status), ")"));
  };
  auto first_start = std::chrono::steady_clock::now();
  run_once();
  double first_run_ms = milliseconds_since(first_start);
  for (long i = 0; i < options.warmup; ++i) run_once();
  std::vector<double> latencies;
  latencies.reserve(static_cast<size_t>(options.iterations));
  for (long i = 0; i < options.iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    run_once();
    latencies.push_back(milliseconds_since(start));
  }
  std::sort(latencies.begin(), latencies.end());
  // Percentiles by linear interpolation between order statistics (numpy.percentile's default).
  auto percentile = [&](double q) {
    double rank = q / 100.0 * static_cast<double>(latencies.size() - 1);
    size_t low = static_cast<size_t>(rank);
    size_t high = std::min(low + 1, latencies.size() - 1);
    return latencies[low] + (latencies[high] - latencies[low]) * (rank - static_cast<double>(low));
  };

  std::cout << "plan: " << (temporary.empty() ? plan_path : options.path + " (compiled)") << "\n";
  for (const Binding& binding : inputs) {
    auto file = std::find_if(options.input_files.begin(), options.input_files.end(),
                             [&](const auto& entry) { return entry.first == binding.view.name; });
    std::cout << "input " << binding.view.name << ": " << kiln_dtype_name(binding.view.dtype) << " "
              << shape_text(binding.view)
              << (file != options.input_files.end() ? " (from " + file->second + ")"
                                                    : str_cat(" (random, seed ", options.seed, ")"))
              << "\n";
  }
  const char* threads = std::getenv("KILN_THREADS");
  std::cout << "threads: " << (threads ? threads : "default (one per core)") << ", " << options.warmup
            << " warm-up runs, " << options.iterations << " timed runs\n";
  char line[64];
  auto figure = [&](const char* key, double value) {
    std::snprintf(line, sizeof line, "%s %.4f\n", key, value);
    std::cout << line;
  };
  if (!std::isnan(compile_ms)) figure("compile_ms", compile_ms);
  figure("load_ms", load_ms);
  figure("first_run_ms", first_run_ms);
  figure("min_ms", latencies.front());
  figure("median_ms", percentile(50));
  figure("p90_ms", percentile(90));
  figure("peak_rss_mib", peak_rss_mib());
  if (options.profile || !options.trace_path.empty()) profile_runs(plan_path, input_views, output_views, options);
  return 0;
}

int usage_error(const std::string& message) {
  std::cerr << "kiln bench: " << message << " (try 'kiln bench --help')\n";
  return kExitUsage;
}

// Parses a count option's value; false when it is not an integer >= minimum.
bool parse_count(const std::string& text, long minimum, long& value) {
  char* end = nullptr;
  errno = 0;
  long parsed = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || parsed < minimum) return false;
  value = parsed;
  return true;
}

}  // namespace

int bench_command(const std::vector<std::string>& arguments) {
  Options options;
  bool in_shapes = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const std::string& argument = arguments[i];
    if (argument == "-h" || argument == "--help") {
      print_bench_help(std::cout);
      return 0;
    }
    if (argument == "--threads" || argument == "--iterations" || argument == "--warmup" || argument == "--seed") {
      in_shapes = false;
      if (i + 1 >= arguments.size()) return usage_error(argument + " needs a value");
      const std::string& value = arguments[++i];
      long parsed = 0;
      long minimum = argument == "--threads" || argument == "--iterations" ? 1 : 0;
      if (!parse_count(value, minimum, parsed))
        return usage_error(str_cat(argument, " takes an integer of at least ", minimum, ", got '", value, "'"));
      if (argument == "--threads") options.threads = parsed;
      else if (argument == "--iterations") options.iterations = parsed;
      else if (argument == "--warmup") options.warmup = parsed;
      else options.seed = static_cast<uint64_t>(parsed);
    } else if (argument == "--profile") {
      in_shapes = false;
      options.profile = true;
    } else if (argument == "--trace") {
      in_shapes = false;
      if (i + 1 >= arguments.size() || arguments[i + 1].empty()) return usage_error("--trace needs a file name");
      options.trace_path = arguments[++i];
    } else if (argument == "--input") {
      in_shapes = false;
      size_t equals = i + 1 < arguments.size() ? arguments[i + 1].find('=') : std::string::npos;
      if (equals == std::string::npos || equals == 0) return usage_error("--input needs NAME=FILE");
      options.input_files.emplace_back(arguments[i + 1].substr(0, equals), arguments[i + 1].substr(equals + 1));
      ++i;
    } else if (argument == "--shape") {
      in_shapes = true;
    } else if (argument.rfind("--shape=", 0) == 0) {
      options.shapes.push_back(argument.substr(8));
    } else if (!argument.empty() && argument[0] == '-') {
      return usage_error("unknown option '" + argument + "'");
    } else if (in_shapes && argument.find('=') != std::string::npos) {
      options.shapes.push_back(argument);
    } else if (options.path.empty()) {
      options.path = argument;
      in_shapes = false;
    } else {
      return usage_error("one plan or model at a time ('" + argument + "' is a second one)");
    }
  }
  if (options.path.empty()) return usage_error("no plan or model given");
  try {
    return bench(options);
  } catch (const Error& error) {
    std::cerr << "kiln bench: " << error.what() << "\n";
    return kExitError;
  } catch (const PlanError& error) {  // --profile's own load and runs
    std::cerr << "kiln bench: " << options.path << ": " << error.what() << "\n";
    return kExitError;
  } catch (const std::exception& error) {
    std::cerr << "kiln bench: internal error: " << error.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace kiln::tools
