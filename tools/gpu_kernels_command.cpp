// `kiln gpu-kernels`: the model's schedule as `kiln compile` makes it, each distinct kernel rendered
// for the GPU target and compiled, with progress and a summary. Writes nothing unless --dump.
#include "gpu_kernels_command.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/cuda/nvrtc_compiler.h"
#include "codegen/target.h"
#include "driver/run_on_device.h"
#include "compile_onnx_file.h"
#include "model_arguments.h"
#include "opt/optimize_schedule.h"
#include "plan/plan_writer.h"
#include "support/error.h"
#include "support/large_stack.h"

namespace kiln::tools {
namespace {

// Exit statuses as the other commands: 1 bad input or a kernel that does not build, 2 bad command
// line, 3 kiln bug.
constexpr int kExitError = 1, kExitUsage = 2, kExitInternal = 3;

using Clock = std::chrono::steady_clock;

void print_help(std::ostream& out) {
  out << "usage: kiln gpu-kernels MODEL.onnx --target cuda [--arch N] [--dump DIR] [--shape SPEC...]\n"
         "\n"
         "Builds every kernel of MODEL for a GPU without running anything: the schedule that\n"
         "'kiln compile' makes, each distinct kernel rendered as CUDA C and compiled by NVRTC (loaded\n"
         "at run time) to PTX and to a cubin for sm_N, which runs NVRTC's PTX assembler. Prints one\n"
         "progress line per 50 kernels and a summary:\n"
         "    kernels K distinct D ptx_bytes P cubin_bytes C seconds S\n"
         "A kernel that does not compile stops the run with its name and NVRTC's log (exit 1).\n"
         "\n"
         "options:\n"
         "  --target cuda    the GPU language (only cuda so far; OpenCL kernels are built by the\n"
         "                   device's driver at run time: KILN_DEVICE=opencl, docs/backends.md)\n"
         "  --arch N         compute capability to compile for, as NN (default 90: H100)\n"
         "  --dump DIR       also write each kernel's NAME.cu and NAME.ptx into DIR\n"
         "  --shape SPEC...  input shapes, as for 'kiln compile'\n"
         "  -h, --help       show this help\n";
}

int usage_error(const std::string& message) {
  std::cerr << "kiln gpu-kernels: " << message << " (try 'kiln gpu-kernels --help')\n";
  return kExitUsage;
}

struct Options {
  std::string model_path, target, dump_dir;
  int architecture = 90;
  std::vector<onnx_import::ShapeSpec> shapes;
};

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw UserError("cannot write " + path.string());
}

int build_kernels(const Options& options) {
  const Clock::time_point start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  auto say = [&](const std::string& line) { std::fprintf(stderr, "kiln gpu-kernels: [%6.1fs] %s\n", seconds(), line.c_str()); };
  std::string why_not;
  const NvrtcInfo* nvrtc = nvrtc_info(&why_not);
  if (nvrtc == nullptr) throw UserError("unsupported: CUDA code needs NVRTC: " + why_not);
  say(str_cat("NVRTC ", nvrtc->major, ".", nvrtc->minor, " (", nvrtc->library, "), sm_", options.architecture));
  if (!options.dump_dir.empty()) std::filesystem::create_directories(options.dump_dir);

  onnx_import::OnnxCompileOptions compile_options;
  compile_options.shapes = options.shapes;
  compile_options.progress = say;
  PlanWriteOptions write_options;
  write_options.progress = say;
  write_options.device = "cuda";  // the kernels of a CUDA plan: f16 weights stay f16, as there
  // Import and scheduling recurse as deep as the graph: on a large stack, as `kiln compile` runs them.
  // The graph outlives the lambda: the schedule's weight buffers belong to its tensors.
  onnx_import::OnnxGraph graph;
  std::optional<PlanSchedule> scheduled;
  run_on_large_stack([&] {
    ScopedGraphTarget target(&cuda_target_caps(options.architecture));  // the layouts a CUDA plan of the model has
    graph = onnx_import::build_onnx_graph(options.model_path, compile_options);
    scheduled = schedule_plan(graph.outputs, write_options);
  });
  Schedule& schedule = scheduled->schedule;
  optimize_schedule(schedule, cuda_target_caps(options.architecture));

  CDeviceFeatures features = cuda_device_features(options.architecture);
  std::set<std::string> built;
  size_t ptx_bytes = 0, cubin_bytes = 0;
  for (const ScheduledKernel& kernel : schedule.kernels) {
    if (!built.insert(kernel.name()).second) continue;  // a symbol names its AST: equal names, equal code
    RenderedKernel rendered = cuda_render_kernel(kernel.ast, features);
    CudaBinary binary = compile_cuda(rendered.source, rendered.name + ".cu", options.architecture);
    ptx_bytes += binary.ptx.size();
    cubin_bytes += binary.cubin.size();
    if (!options.dump_dir.empty()) {
      write_file(std::filesystem::path(options.dump_dir) / (rendered.name + ".cu"), rendered.source);
      write_file(std::filesystem::path(options.dump_dir) / (rendered.name + ".ptx"), binary.ptx);
    }
    if (built.size() % 50 == 0) say(str_cat(built.size(), " kernels compiled"));
  }
  std::printf("kernels %zu distinct %zu ptx_bytes %zu cubin_bytes %zu seconds %.1f\n", schedule.kernels.size(),
              built.size(), ptx_bytes, cubin_bytes, seconds());
  return 0;
}

}  // namespace

int gpu_kernels_command(const std::vector<std::string>& arguments) {
  Options options;
  ModelArguments model;
  try {
    for (size_t i = 0; i < arguments.size(); ++i) {
      const std::string& argument = arguments[i];
      auto value = [&]() -> const std::string* {
        if (i + 1 >= arguments.size()) return nullptr;
        model.end_shapes();
        return &arguments[++i];
      };
      if (argument == "-h" || argument == "--help") {
        print_help(std::cout);
        return 0;
      }
      ModelArguments::Taken taken = model.take(argument);
      if (taken == ModelArguments::Taken::SecondModel)
        return usage_error("one model at a time ('" + argument + "' is a second one)");
      if (taken == ModelArguments::Taken::Yes) continue;
      if (argument == "--target" || argument == "--dump") {
        const std::string* text = value();
        if (text == nullptr) return usage_error(argument + " needs a value");
        (argument == "--target" ? options.target : options.dump_dir) = *text;
      } else if (argument == "--arch") {
        const std::string* text = value();
        int number = 0;
        size_t used = 0;
        try {
          if (text != nullptr) number = std::stoi(*text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (text == nullptr || used != text->size() || number < 30 || number > 1000)
          return usage_error("--arch needs a compute capability such as 80 or 90");
        options.architecture = number;
      } else {
        return usage_error("unknown option '" + argument + "'");
      }
    }
    options.model_path = model.model_path;
    options.shapes = model.shapes;
    if (options.model_path.empty()) return usage_error("no model given");
    if (options.target.empty()) return usage_error("no target given (--target cuda)");
    if (options.target != "cuda")
      return usage_error("unknown target '" + options.target + "' (only cuda builds ahead of time so far)");
    return build_kernels(options);
  } catch (const Error& error) {
    std::cerr << "kiln gpu-kernels: " << error.what() << "\n";
    return kExitError;
  } catch (const std::exception& error) {
    std::cerr << "kiln gpu-kernels: internal error: " << error.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace kiln::tools
