// The plan sub-commands of the kiln tool. `compile` uses the compiler (compile_onnx_file, the driver it
// shares with compiler.h); `inspect` and `run` use only libkiln, so they show exactly what an
// application would see.
#include "plan_commands.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "plan/plan_dtype.h"
#include "plan/plan_reader.h"
#include "plan/size_program.h"
#include "plan/symbolic_metadata.h"
#include "kiln/kiln.h"
#include "compile_onnx_file.h"
#include "npy_file.h"
#include "onnx/onnx_pb.h"
#include "onnx_model.h"
#include "support/error.h"
#include "support/kernel_profile.h"
#include "tensor_file.h"

namespace kiln::tools {
namespace {

using onnx_import::ShapeSpec;
namespace fs = std::filesystem;

// Exit statuses: 0 success, 1 the input (model, plan, data) is wrong, 2 bad command line, 3 kiln bug.
constexpr int kExitError = 1, kExitUsage = 2, kExitInternal = 3;

// ---- compile ----

void print_compile_help(std::ostream& out) {
  out << "usage: kiln compile MODEL.onnx -o PLAN [--target cpu|aarch64|x86_64|opencl|cuda] [--cpu NAME]\n"
         "                    [--cuda-arch N] [--tuning DB] [--precision fp32|bf16]\n"
         "                    [-j N] [--shape SPEC...] [--value NAME=V[,V...]]...\n"
         "\n"
         "Compiles MODEL for this CPU into one plan file (docs/plan-format.md) that libkiln loads and\n"
         "runs without a compiler. Progress goes to stderr. The same model and options give a\n"
         "byte-identical plan.\n"
         "\n"
         "options:\n"
         "  -o, --output PLAN  the plan file to write (required)\n"
         "  --target T         cpu (default): kernels compiled for this CPU; opencl: OpenCL C kernels\n"
         "                     that libkiln builds for the machine's OpenCL device when it loads the\n"
         "                     plan; cuda: PTX compiled now by NVRTC, loaded by the CUDA driver (device\n"
         "                     plans take symbolic --shape ranges too, but no --tuning; docs/backends.md);\n"
         "                     aarch64, x86_64: kernels cross-compiled for that architecture's CPU --cpu\n"
         "                     (docs/installing.md, \"ARM64\")\n"
         "  --cpu NAME         with --target aarch64 or x86_64: the LLVM CPU name the kernels are for\n"
         "                     (neoverse-n1, cortex-a72, apple-m1, x86-64-v3, ...); default: the\n"
         "                     baseline every such machine runs (generic ARMv8-A NEON, x86-64-v3)\n"
         "  --cuda-arch N      with --target cuda: the compute capability the PTX is for, as NN\n"
         "                     (default 75; GPUs of that capability or newer run it)\n"
         "  --tuning DB        take each kernel's optimisations from DB (written by 'kiln tune',\n"
         "                     docs/tuning.md) when DB has the kernel; only read, so the same model\n"
         "                     and DB give a byte-identical plan\n"
         "  --precision P      fp32 (default): every op in the model's own types; bf16: matmuls of\n"
         "                     f32 values by a weight round both operands to bf16 and sum in f32, on\n"
         "                     AMX tiles where the CPU has them (docs/optimisation.md, \"bf16\n"
         "                     precision\"); results differ from fp32 by bf16's rounding\n"
         "  -j, --jobs N       compile kernels on N threads (default: KILN_COMPILE_THREADS, else the\n"
         "                     hardware threads, at most 16); the plan is the same for any N\n"
         "                     (docs/compile-time.md)\n"
         "  --shape SPEC...    shapes for inputs with symbolic or unknown dimensions: INPUT=D1,D2,...\n"
         "                     (a whole input shape), SYMBOL=N (one dim_param everywhere), or\n"
         "                     SYMBOL=MIN..MAX: the dim_param stays symbolic and the plan runs at any\n"
         "                     size in that range (docs/symbolic-shapes.md; scratch memory is laid out\n"
         "                     for the maxima). A dim_param no SPEC names is an error. A dimension\n"
         "                     the model leaves unnamed ('?') is INPUT[AXIS]=N or INPUT[AXIS]=MIN..MAX\n"
         "                     (quote it for the shell: --shape 'x[0]=1..8')\n"
         "  --value NAME=V,... compile for this one value of input NAME (its elements, row-major): for\n"
         "                     inputs that decide the graph's structure (a reduction's axes, Pad's\n"
         "                     pads); the plan refuses runs that give another value (decision 19 of\n"
         "                     docs/symbolic-shapes.md). Repeat it for several inputs.\n"
         "  --value NAME=MIN..MAX  each element of NAME (an int64 scalar or 1-D input: a shape, a\n"
         "                     count) is a size the run reads from the input, in that range: one plan\n"
         "                     for ConstantOfShape, Expand, Range's limit... of any such value\n"
         "  -h, --help         show this help\n";
}

// --target's CPU architectures: a cross-compiled CPU plan (CpuTarget::cross).
bool is_cpu_architecture(const std::string& target) { return target == "aarch64" || target == "x86_64"; }

int compile(const std::string& model_path, const std::string& output_path, const std::vector<ShapeSpec>& specs,
            const std::vector<onnx_import::PinnedValueSpec>& values, const std::string& tuning_path,
            const std::string& target, int cuda_architecture = 75, const std::string& cpu_name = "",
            MatmulPrecision precision = MatmulPrecision::kFloat32) {
  onnx_import::OnnxCompileOptions options;
  options.precision = precision;
  options.shapes = specs;
  options.values = values;
  options.tuning_path = tuning_path;
  options.device = is_cpu_architecture(target) ? "cpu" : target;
  options.cpu_architecture = is_cpu_architecture(target) ? target : "";
  options.cpu_name = cpu_name;
  options.cuda_architecture = cuda_architecture;
  options.progress = onnx_import::stderr_compile_progress();
  try {
    onnx_import::compile_onnx_file(model_path, output_path, options);
  } catch (const onnx_import::PlanFileError& error) {  // the tool's own wording
    using Step = onnx_import::PlanFileError::Step;
    if (error.step == Step::Write) throw UserError(str_cat("cannot write ", error.temporary));
    throw UserError(str_cat("cannot rename ", error.temporary, " to ", error.target, ": ", error.reason));
  }
  return 0;
}

// ---- shared by inspect and run ----

struct PlanHandle {
  kiln_plan* plan = nullptr;
  ~PlanHandle() { kiln_plan_free(plan); }
};

// Loads a plan, or prints libkiln's message and returns false.
bool load_plan(const char* command, const std::string& path, PlanHandle& handle) {
  kiln_status status = kiln_plan_load_file(path.c_str(), &handle.plan);
  if (status == KILN_OK) return true;
  std::cerr << "kiln " << command << ": " << path << ": " << kiln_error_message() << " ("
            << kiln_status_string(status) << ")\n";
  return false;
}

// ---- inspect ----

void print_inspect_help(std::ostream& out) {
  out << "usage: kiln inspect PLAN\n"
         "\n"
         "Loads PLAN with libkiln (verifying it) and prints its target, inputs, outputs, arena and\n"
         "weights sizes and the kernel launch list: each kernel's parallel extent (and, for a GPU\n"
         "kernel that needs one, its work-group size), the compiler's estimate of its work and the\n"
         "model nodes it computes.\n"
         "\n"
         "options:\n"
         "  -h, --help  show this help\n";
}

int inspect(const std::string& path) {
  PlanHandle handle;
  if (!load_plan("inspect", path, handle)) return kExitError;
  const char *triple = nullptr, *cpu = nullptr;
  uint64_t arena = 0, weights = 0;
  size_t kernels = 0;
  kiln_plan_describe(handle.plan, &triple, &cpu, &arena, &weights, &kernels);
  std::cout << "plan: " << path << "\ntarget: " << triple << " (cpu " << cpu << ")\n";
  size_t variable_count = kiln_plan_variable_count(handle.plan);
  std::vector<std::string> variable_names;  // for the kernels' extents below
  if (variable_count > 0) std::cout << "variables:\n";
  for (size_t v = 0; v < variable_count; ++v) {
    const char* name;
    int64_t min, max;
    kiln_plan_variable_info(handle.plan, v, &name, &min, &max);
    kiln_variable_source source = KILN_VARIABLE_FROM_SHAPES;
    kiln_plan_variable_source(handle.plan, v, &source);
    std::cout << "  " << name << ": " << min << ".." << max
              << (source == KILN_VARIABLE_FROM_RUN ? " (decided by the run)" : "") << "\n";
    variable_names.push_back(name);
  }
  for (int output = 0; output < 2; ++output) {
    size_t count = output ? kiln_plan_output_count(handle.plan) : kiln_plan_input_count(handle.plan);
    std::cout << (output ? "outputs:\n" : "inputs:\n");
    for (size_t i = 0; i < count; ++i) {
      const char* name;
      kiln_dtype dtype;
      size_t rank;
      const int64_t* shape;
      const char* const* dims;
      if (output) kiln_plan_output_info_v2(handle.plan, i, &name, &dtype, &rank, &shape, &dims, nullptr);
      else kiln_plan_input_info_v2(handle.plan, i, &name, &dtype, &rank, &shape, &dims, nullptr);
      // "(batch, 3)": a symbolic dimension by its variable or expression, as the plan states it.
      std::string text = "(";
      for (size_t d = 0; d < rank; ++d) text += (d ? ", " : "") + (dims[d] ? std::string(dims[d]) : std::to_string(shape[d]));
      std::cout << "  " << name << ": " << kiln_dtype_name(dtype) << " " << text << ")\n";
    }
  }
  std::cout << "arena: " << arena << " bytes" << (variable_count > 0 ? " (every variable at its maximum)" : "")
            << "\nweights: " << weights << " bytes\nkernels: " << kernels << "\n";
  // The cost estimates and sources are not in kiln.h: read them from the metadata, verified again.
  PlanBytes bytes = PlanBytes::map_file(path);
  const auto& metadata = *verify_plan(bytes.data(), bytes.size()).metadata->kernels();
  for (size_t k = 0; k < kernels; ++k) {
    const char* symbol;
    int64_t extent;
    kiln_plan_kernel_info(handle.plan, k, &symbol, &extent);
    const plan_fb::Kernel* kernel = metadata.Get(static_cast<flatbuffers::uoffset_t>(k));
    std::cout << "  " << symbol << " (parallel extent ";
    if (kernel->parallel_extent_program() != nullptr)
      std::cout << plan::size_program_text(program_of(kernel->parallel_extent_program()), variable_names) << ", at most ";
    std::cout << extent;
    // A GPU kernel whose code assumes its work-group size (a reduction shared through local memory).
    if (kernel->device_local_size() > 0) std::cout << ", work-group " << kernel->device_local_size();
    if (kernel->estimated_flops() > 0 || kernel->estimated_bytes() > 0) {
      char work[96];
      std::snprintf(work, sizeof work, ", ~%.3g MFLOP, ~%.3g MB", kernel->estimated_flops() / 1e6,
                    kernel->estimated_bytes() / 1e6);
      std::cout << work;
    }
    std::cout << ")";
    if (kernel->sources() != nullptr && kernel->sources()->size() > 0) {
      std::cout << " from";
      for (flatbuffers::uoffset_t i = 0; i < kernel->sources()->size(); ++i)
        std::cout << (i ? ", " : " ") << short_source_label(kernel->sources()->Get(i)->str());
    }
    std::cout << "\n";
  }
  return 0;
}

// ---- run ----

void print_run_help(std::ostream& out) {
  out << "usage: kiln run PLAN --input NAME=FILE... [--output-dir DIR] [--output-format pb|npy]\n"
         "\n"
         "Runs PLAN with libkiln on inputs read from NumPy .npy files (little-endian, C order) or\n"
         "ONNX TensorProto files (any other name) and writes each output to DIR/NAME.pb or\n"
         "DIR/NAME.npy (characters other than letters, digits, '-', '_' and '.' in NAME become\n"
         "'_'). Prints each output's name, dtype, shape and file, and the run time.\n"
         "\n"
         "options:\n"
         "  --input NAME=FILE       an input (repeat for each); NAME is the plan input's name\n"
         "  --output-dir DIR        where to write the outputs (default: the current directory)\n"
         "  --output-format FORMAT  pb (ONNX TensorProto, the default) or npy\n"
         "  -h, --help              show this help\n";
}

int onnx_type_of(kiln_dtype dtype) {
  switch (dtype) {
    case KILN_DTYPE_FLOAT32: return onnx::TensorProto::FLOAT;
    case KILN_DTYPE_UINT8: return onnx::TensorProto::UINT8;
    case KILN_DTYPE_INT8: return onnx::TensorProto::INT8;
    case KILN_DTYPE_UINT16: return onnx::TensorProto::UINT16;
    case KILN_DTYPE_INT16: return onnx::TensorProto::INT16;
    case KILN_DTYPE_INT32: return onnx::TensorProto::INT32;
    case KILN_DTYPE_INT64: return onnx::TensorProto::INT64;
    case KILN_DTYPE_BOOL: return onnx::TensorProto::BOOL;
    case KILN_DTYPE_FLOAT16: return onnx::TensorProto::FLOAT16;
    case KILN_DTYPE_FLOAT64: return onnx::TensorProto::DOUBLE;
    case KILN_DTYPE_UINT32: return onnx::TensorProto::UINT32;
    case KILN_DTYPE_UINT64: return onnx::TensorProto::UINT64;
    case KILN_DTYPE_BFLOAT16: return onnx::TensorProto::BFLOAT16;
  }
  return onnx::TensorProto::UNDEFINED;
}

kiln_dtype kiln_dtype_of(ScalarType type) {
  std::optional<kiln_dtype> dtype = plan::plan_dtype_of(type);
  if (!dtype) throw UserError(str_cat("unsupported input dtype ", scalar_type_name(type)));
  return *dtype;
}

std::string file_name_for(const std::string& name, const std::string& extension) {
  std::string safe = name.empty() ? "output" : name;
  for (char& c : safe)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  if (safe == "." || safe == "..") safe = "_";
  return safe + extension;
}

bool has_suffix(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int run(const std::string& path, const std::map<std::string, std::string>& input_files, const std::string& output_dir,
        const std::string& output_format) {
  PlanHandle handle;
  if (!load_plan("run", path, handle)) return kExitError;
  struct Value {
    std::string name;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Value> inputs, outputs;
  std::vector<kiln_tensor> input_views, output_views;
  for (const auto& [name, file] : input_files) {
    if (has_suffix(file, ".npy")) {
      NpyArray array = read_npy_file(file);
      input_views.push_back({nullptr, array.dtype, 0, nullptr, nullptr, 0});
      inputs.push_back({name, std::move(array.shape), std::move(array.bytes)});
      continue;
    }
    NamedTensor read = read_tensor_file(file);
    Value value{name, std::vector<int64_t>(read.tensor.shape().begin(), read.tensor.shape().end()), {}};
    value.bytes.resize(static_cast<size_t>(read.tensor.numel()) * scalar_type_size(read.tensor.dtype()));
    read.tensor.copy_to(value.bytes.data(), value.bytes.size());
    inputs.push_back(std::move(value));
    input_views.push_back({nullptr, kiln_dtype_of(read.tensor.dtype()), 0, nullptr, nullptr, 0});
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    input_views[i] = {inputs[i].name.c_str(), input_views[i].dtype, inputs[i].shape.size(), inputs[i].shape.data(),
                      inputs[i].bytes.data(), inputs[i].bytes.size()};
  size_t output_count = kiln_plan_output_count(handle.plan);
  outputs.resize(output_count);
  bool symbolic = kiln_plan_variable_count(handle.plan) > 0;
  for (size_t i = 0; i < output_count; ++i) {
    const char* name;
    kiln_dtype dtype;
    size_t rank;
    const int64_t* shape;
    kiln_plan_output_info(handle.plan, i, &name, &dtype, &rank, &shape);
    outputs[i].name = name;
    outputs[i].shape.assign(shape, shape + rank);
    // A symbolic plan's output shapes follow from the inputs' shapes (read from the input files).
    if (symbolic) {
      kiln_status status = kiln_plan_output_shape(handle.plan, input_views.data(), input_views.size(), i,
                                                  outputs[i].shape.data(), rank, nullptr);
      if (status != KILN_OK) {
        std::cerr << "kiln run: " << kiln_error_message() << " (" << kiln_status_string(status) << ")\n";
        return kExitError;
      }
    }
    shape = outputs[i].shape.data();
    size_t count = 1;
    for (size_t d = 0; d < rank; ++d) count *= static_cast<size_t>(shape[d]);
    outputs[i].bytes.resize(count * kiln_dtype_size(dtype));
    output_views.push_back({nullptr, dtype, rank, shape, outputs[i].bytes.data(), outputs[i].bytes.size()});
  }
  // Every output's shape comes back from the run: one whose shape the run decides (a NonZero
  // count) has a buffer at its upper bound and is written, cut to its real shape, below.
  size_t rank_sum = 0;
  for (const Value& output : outputs) rank_sum += output.shape.size();
  std::vector<int64_t> run_shapes(rank_sum);
  kiln_run_options run_options;
  kiln_run_options_init(&run_options);
  run_options.output_shapes = run_shapes.data();
  auto start = std::chrono::steady_clock::now();
  kiln_status status = kiln_plan_run_with_options(handle.plan, input_views.data(), input_views.size(),
                                                  output_views.data(), output_views.size(), &run_options);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (status != KILN_OK) {
    std::cerr << "kiln run: " << kiln_error_message() << " (" << kiln_status_string(status) << ")\n";
    return kExitError;
  }
  std::error_code error;
  fs::create_directories(output_dir, error);
  if (error) throw UserError(str_cat("cannot create ", output_dir, ": ", error.message()));
  size_t at = 0;
  for (size_t i = 0; i < output_count; ++i) {
    size_t rank = outputs[i].shape.size();
    outputs[i].shape.assign(run_shapes.begin() + static_cast<std::ptrdiff_t>(at),
                            run_shapes.begin() + static_cast<std::ptrdiff_t>(at + rank));
    at += rank;
    size_t count = 1;
    for (int64_t size : outputs[i].shape) count *= static_cast<size_t>(size);
    outputs[i].bytes.resize(count * kiln_dtype_size(output_views[i].dtype));
    std::string file = (fs::path(output_dir) / file_name_for(outputs[i].name, "." + output_format)).string();
    if (output_format == "npy") {
      write_npy_file(file, {output_views[i].dtype, outputs[i].shape, outputs[i].bytes});
    } else {
      onnx::TensorProto proto;
      proto.set_name(outputs[i].name);
      proto.set_data_type(onnx_type_of(output_views[i].dtype));
      for (int64_t size : outputs[i].shape) proto.add_dims(size);
      proto.set_raw_data(outputs[i].bytes);
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      if (!proto.SerializeToOstream(&out) || !(out.flush())) throw UserError(str_cat("cannot write ", file));
    }
    std::cout << outputs[i].name << ": " << kiln_dtype_name(output_views[i].dtype) << " "
              << shape_text(outputs[i].shape.data(), outputs[i].shape.size()) << " -> " << file << "\n";
  }
  std::cout << "run: " << ms << " ms\n";
  return 0;
}

// Runs a command body, turning exceptions into messages and exit statuses.
template <class Body>
int guarded(const char* command, Body&& body) {
  try {
    return body();
  } catch (const Error& error) {
    std::cerr << "kiln " << command << ": " << error.what() << "\n";
    return kExitError;
  } catch (const PlanError& error) {  // inspect's own read of the metadata
    std::cerr << "kiln " << command << ": " << error.what() << "\n";
    return kExitError;
  } catch (const std::exception& error) {
    std::cerr << "kiln " << command << ": internal error: " << error.what() << "\n";
    return kExitInternal;
  }
}

int usage_error(const char* command, const std::string& message) {
  std::cerr << "kiln " << command << ": " << message << " (try 'kiln " << command << " --help')\n";
  return kExitUsage;
}

// The whole of arguments[i + 1] as a decimal number in [low, high]; nullopt when it is missing,
// not a number, has trailing characters or is out of range.
std::optional<long> option_number(const std::vector<std::string>& arguments, size_t i, long low, long high) {
  if (i + 1 >= arguments.size()) return std::nullopt;
  size_t used = 0;
  long number = 0;
  try {
    number = std::stol(arguments[i + 1], &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != arguments[i + 1].size() || number < low || number > high) return std::nullopt;
  return number;
}

}  // namespace

void compile_model(const std::string& model_path, const std::string& plan_path,
                   const std::vector<std::string>& shape_specs) {
  std::vector<ShapeSpec> specs;
  for (const std::string& spec : shape_specs) specs.push_back(onnx_import::parse_shape_spec(spec));
  compile(model_path, plan_path, specs, {}, "", "cpu");
}

int compile_command(const std::vector<std::string>& arguments) {
  return guarded("compile", [&]() -> int {
    std::string model_path, output_path, tuning_path, target = "cpu", cpu_name;
    int cuda_architecture = 75;
    MatmulPrecision precision = MatmulPrecision::kFloat32;
    std::vector<ShapeSpec> specs;
    std::vector<onnx_import::PinnedValueSpec> values;
    bool in_shapes = false;
    for (size_t i = 0; i < arguments.size(); ++i) {
      const std::string& argument = arguments[i];
      if (argument == "-h" || argument == "--help") {
        print_compile_help(std::cout);
        return 0;
      }
      if (argument == "-o" || argument == "--output") {
        if (i + 1 >= arguments.size()) return usage_error("compile", argument + " needs a file name");
        output_path = arguments[++i];
        in_shapes = false;
      } else if (argument == "--target") {
        if (i + 1 >= arguments.size()) return usage_error("compile", "--target needs cpu, aarch64, x86_64, opencl or cuda");
        target = arguments[++i];
        if (target != "cpu" && target != "opencl" && target != "cuda" && !is_cpu_architecture(target))
          return usage_error("compile", "unknown target '" + target + "' (cpu, aarch64, x86_64, opencl or cuda)");
        in_shapes = false;
      } else if (argument == "--cpu") {
        if (i + 1 >= arguments.size() || arguments[i + 1].empty())
          return usage_error("compile", "--cpu needs an LLVM CPU name such as neoverse-n1");
        cpu_name = arguments[++i];
        in_shapes = false;
      } else if (argument == "--cuda-arch") {
        std::optional<long> number = option_number(arguments, i, 30, 999);
        if (!number) return usage_error("compile", "--cuda-arch needs a compute capability such as 75 or 90");
        cuda_architecture = static_cast<int>(*number);
        ++i;
        in_shapes = false;
      } else if (argument == "-j" || argument == "--jobs") {
        if (!option_number(arguments, i, 1, 1024))
          return usage_error("compile", argument + " needs a number of threads from 1 to 1024");
        // The compile reads its thread count from the environment (support/parallel_tasks.h).
        setenv("KILN_COMPILE_THREADS", arguments[++i].c_str(), 1);
        in_shapes = false;
      } else if (argument == "--tuning") {
        if (i + 1 >= arguments.size()) return usage_error("compile", "--tuning needs a database file");
        tuning_path = arguments[++i];
        in_shapes = false;
      } else if (argument == "--precision") {
        const std::string value = i + 1 < arguments.size() ? arguments[++i] : "";
        if (value != "fp32" && value != "bf16") return usage_error("compile", "--precision needs fp32 or bf16");
        precision = value == "bf16" ? MatmulPrecision::kBFloat16 : MatmulPrecision::kFloat32;
        in_shapes = false;
      } else if (argument == "--shape") {
        in_shapes = true;
      } else if (argument == "--value") {
        if (i + 1 >= arguments.size()) return usage_error("compile", "--value needs NAME=V[,V...]");
        values.push_back(onnx_import::parse_value_spec(arguments[++i]));
        in_shapes = false;
      } else if (argument.rfind("--shape=", 0) == 0) {
        specs.push_back(onnx_import::parse_shape_spec(argument.substr(8)));
      } else if (!argument.empty() && argument[0] == '-') {
        return usage_error("compile", "unknown option '" + argument + "'");
      } else if (in_shapes && argument.find('=') != std::string::npos) {
        specs.push_back(onnx_import::parse_shape_spec(argument));
      } else if (model_path.empty()) {
        model_path = argument;
        in_shapes = false;
      } else {
        return usage_error("compile", "one model at a time ('" + argument + "' is a second one)");
      }
    }
    if (model_path.empty()) return usage_error("compile", "no model given");
    if (output_path.empty()) return usage_error("compile", "no output plan given (-o PLAN)");
    if (!cpu_name.empty() && !is_cpu_architecture(target))
      return usage_error("compile", "--cpu needs --target aarch64 or --target x86_64");
    return compile(model_path, output_path, specs, values, tuning_path, target, cuda_architecture, cpu_name, precision);
  });
}

int inspect_command(const std::vector<std::string>& arguments) {
  return guarded("inspect", [&]() -> int {
    std::string path;
    for (const std::string& argument : arguments) {
      if (argument == "-h" || argument == "--help") {
        print_inspect_help(std::cout);
        return 0;
      }
      if (!argument.empty() && argument[0] == '-') return usage_error("inspect", "unknown option '" + argument + "'");
      if (!path.empty()) return usage_error("inspect", "one plan at a time");
      path = argument;
    }
    if (path.empty()) return usage_error("inspect", "no plan given");
    return inspect(path);
  });
}

int run_command(const std::vector<std::string>& arguments) {
  return guarded("run", [&]() -> int {
    std::string path, output_dir = ".", output_format = "pb";
    std::map<std::string, std::string> inputs;
    for (size_t i = 0; i < arguments.size(); ++i) {
      const std::string& argument = arguments[i];
      if (argument == "-h" || argument == "--help") {
        print_run_help(std::cout);
        return 0;
      }
      if (argument == "--input" || argument == "--output-dir" || argument == "--output-format") {
        if (i + 1 >= arguments.size()) return usage_error("run", argument + " needs a value");
        const std::string& value = arguments[++i];
        if (argument == "--output-dir") {
          output_dir = value;
          continue;
        }
        if (argument == "--output-format") {
          if (value != "pb" && value != "npy")
            return usage_error("run", "--output-format is pb or npy, got '" + value + "'");
          output_format = value;
          continue;
        }
        size_t equals = value.rfind('=');
        if (equals == std::string::npos || equals == 0 || equals + 1 == value.size())
          return usage_error("run", "--input takes NAME=FILE, got '" + value + "'");
        if (!inputs.emplace(value.substr(0, equals), value.substr(equals + 1)).second)
          return usage_error("run", "input '" + value.substr(0, equals) + "' is given twice");
      } else if (!argument.empty() && argument[0] == '-') {
        return usage_error("run", "unknown option '" + argument + "'");
      } else if (path.empty()) {
        path = argument;
      } else {
        return usage_error("run", "one plan at a time");
      }
    }
    if (path.empty()) return usage_error("run", "no plan given");
    return run(path, inputs, output_dir, output_format);
  });
}

}  // namespace kiln::tools
