// `kiln test-onnx`: runs ONNX backend-test folders and compares with their reference outputs.
//
// Each test runs in a forked child process with a deadline, so that a crash (a kiln bug) or a hang
// in one test becomes a FAIL line and the run goes on. The parent never touches the compiler: it
// only walks folders and waits for children, so forking from it is safe (no threads to lose).
#include "test_onnx.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "narrow_types.h"
#include "onnx/onnx_pb.h"
#include "onnx_model.h"
#include "support/error.h"
#include "tensor_file.h"
#include "via_plan.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

// The ONNX backend tests' rule (numpy.testing.assert_allclose): |actual - expected| <= atol + rtol * |expected|.
// The defaults are the node tests'; real models are compared with a looser atol (--atol 1e-4 in
// the model tests), because their outputs pass through thousands of rounded operations.
// Set once by the command before any test runs (the forked children inherit them).
struct Tolerances {
  double relative = 1e-3;
  double absolute = 1e-7;
};
Tolerances tolerances;
constexpr int kDefaultTimeoutSeconds = 60;

void print_help(std::ostream& out) {
  out << "usage: kiln test-onnx [options] DIR...\n"
         "\n"
         "Each DIR is an ONNX test folder (model.onnx plus test_data_set_N/input_K.pb and output_K.pb)\n"
         "or a folder holding such folders (searched recursively). Every test runs in its own child\n"
         "process; a crash or a hang is reported as a failure and the run continues.\n"
         "Outputs must match the references in dtype and shape, and in value within\n"
         "|actual - expected| <= atol + rtol * |expected| (NaN equals NaN; integers and bools exactly).\n"
         "\n"
         "Prints 'FAIL name: reason' per failing test, then 'N passed, M failed, K skipped' (skipped:\n"
         "no test data). Exit status 0 when nothing failed.\n"
         "\n"
         "options:\n"
         "  --timeout S      seconds one test may take, compile included (default 60)\n"
         "  --rtol X         relative tolerance (default 1e-3)\n"
         "  --atol X         absolute tolerance (default 1e-7, the ONNX node tests' rule)\n"
         "  --report-only    exit with status 0 even when tests fail\n"
         "  -v, --verbose    also print 'PASS name' and 'SKIP name: reason' lines\n"
         "  --via-plan       run each model as an application would: compiled to a plan (the `kiln compile`\n"
         "                   path) and run through libkiln's C API; tensor inputs and outputs only. A\n"
         "                   model whose named symbolic dims take different sizes in its data sets\n"
         "                   compiles once, symbolic over each one's range (PASS says so with -v);\n"
         "                   otherwise one fixed plan per distinct set of input shapes\n"
         "  --plan-target T  with --via-plan: compile the plans for T, cpu (default), opencl or cuda\n"
         "                   (kernels built and run on the machine's OpenCL or CUDA device by libkiln)\n"
         "  --timings        print per passing test how long loading, the first run (graph build, kernel\n"
         "                   compile or cache load, run) and a second run of the first data set took\n"
         "  -h, --help       show this help\n";
}

enum class Outcome { Pass, Fail, Skip };

// --timings: the child measures its test and reports the figures in its PASS message.
bool g_measure_timings = false;
// --via-plan: the child compiles plans and runs them through the C API instead of running in process.
bool g_via_plan = false;
std::string g_plan_target = "cpu";

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Result {
  Outcome outcome = Outcome::Fail;
  std::string message;
};

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.empty() ? std::string("(no message)") : line;
}

// The name a test is reported under: its folder's name, however the folder was written
// ("dir/", "dir/.", "." or "../x" all name the folder itself, never an empty or "." name).
std::string test_name(const fs::path& folder) {
  std::error_code error;
  fs::path path = fs::absolute(folder, error).lexically_normal();
  if (error) path = folder.lexically_normal();
  while (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  std::string name = path.filename().string();
  return name.empty() ? path.string() : name;
}

void find_tests(const fs::path& folder, std::vector<fs::path>& tests) {
  if (fs::exists(folder / "model.onnx")) {
    tests.push_back(folder);
    return;
  }
  std::vector<fs::path> children;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.is_directory()) children.push_back(entry.path());
  std::sort(children.begin(), children.end());
  for (const auto& child : children) find_tests(child, tests);
}

// Files named prefix + number + ".pb", ordered by the number (input_10 after input_9).
std::vector<fs::path> numbered_files(const fs::path& folder, const std::string& prefix) {
  std::vector<std::pair<long, fs::path>> found;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || entry.path().extension() != ".pb") continue;
    const std::string number = name.substr(prefix.size(), name.size() - prefix.size() - 3);
    if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(std::stol(number), entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> paths;
  for (auto& [index, path] : found) paths.push_back(path);
  return paths;
}

std::string shape_text(const Shape& shape) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ")";
  return out.str();
}

// Empty when `actual` matches `expected`, else the reason (max error and its index).
std::string compare(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype())
    return str_cat("dtype ", scalar_type_name(actual.dtype()), ", expected ", scalar_type_name(expected.dtype()));
  if (actual.shape() != expected.shape())
    return str_cat("shape ", shape_text(actual.shape()), ", expected ", shape_text(expected.shape()));
  const ScalarType type = expected.dtype();
  const bool is_float = type == ScalarType::Float16 || type == ScalarType::BFloat16 || type == ScalarType::Float32 ||
                        type == ScalarType::Float64;
  if (!is_float) {
    // Integers and bools are compared exactly (u64 through its own type so no value is rounded).
    auto first_difference = [&](const auto& got, const auto& want) -> std::string {
      size_t mismatches = 0, first = 0;
      for (size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i] && mismatches++ == 0) first = i;
      if (mismatches == 0) return {};
      return str_cat(mismatches, " of ", want.size(), " values differ; first at index ", first, ": got ",
                     +got[first], ", expected ", +want[first]);
    };
    if (type == ScalarType::UInt64)
      return first_difference(actual.to_vector<uint64_t>(), expected.to_vector<uint64_t>());
    return first_difference(actual.cast(ScalarType::Int64).to_vector<int64_t>(),
                            expected.cast(ScalarType::Int64).to_vector<int64_t>());
  }
  const std::vector<double> got = actual.to_vector<double>();
  const std::vector<double> want = expected.to_vector<double>();
  size_t mismatches = 0, worst = 0;
  double worst_excess = -1.0, worst_error = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double a = got[i], e = want[i];
    if (std::isnan(a) && std::isnan(e)) continue;
    if (std::isinf(e) || std::isinf(a)) {
      if (a == e) continue;
      ++mismatches;
      if (worst_excess < INFINITY) worst = i, worst_excess = INFINITY, worst_error = INFINITY;
      continue;
    }
    const double error = std::isnan(a) || std::isnan(e) ? NAN : std::fabs(a - e);
    const double allowed = tolerances.absolute + tolerances.relative * std::fabs(e);
    if (error <= allowed) continue;
    ++mismatches;
    const double excess = std::isnan(error) ? INFINITY : error - allowed;
    if (excess > worst_excess) worst = i, worst_excess = excess, worst_error = error;
  }
  if (mismatches == 0) return {};
  return str_cat(mismatches, " of ", want.size(), " values differ; max error ", worst_error, " at index ", worst,
                 " (got ", got[worst], ", expected ", want[worst], ")");
}

// Test data of an older ONNX (Debian's libonnx-testdata) stores BFLOAT16 tensors as UINT16 bit
// patterns: when the model declares bf16 and the file holds u16, the bits are the bf16 values.
NamedTensor with_legacy_bfloat16(NamedTensor file, int32_t declared_type) {
  if (declared_type == onnx::TensorProto_DataType_BFLOAT16 && file.elem_type == onnx::TensorProto_DataType_UINT16) {
    file.tensor = file.tensor.bitcast(ScalarType::BFloat16);
    file.elem_type = declared_type;
  }
  return file;
}

// Narrow float values (float8, float4) compared by what they decode to, so that every NaN
// encoding matches every other; narrow integers compare as their carriers.
std::string compare_narrow(const Tensor& actual, const NamedTensor& expected, int32_t declared_type) {
  if (expected.elem_type != declared_type)
    return str_cat("the reference is ", onnx_import::onnx_type_name(expected.elem_type), " but the model declares ",
                   onnx_import::onnx_type_name(declared_type));
  if (onnx_import::is_narrow_integer(declared_type)) return compare(actual, expected.tensor);
  auto decoded = [&](const Tensor& carrier) {
    std::vector<double> values;
    for (int32_t code : carrier.to_vector<int32_t>()) values.push_back(onnx_import::narrow_value(declared_type, code));
    return Tensor::from_vector<double>(values, carrier.shape());
  };
  if (actual.dtype() != expected.tensor.dtype() || actual.shape() != expected.tensor.shape())
    return compare(actual, expected.tensor);
  return compare(decoded(actual), decoded(expected.tensor));
}

// Sequences compare element by element, optionals by presence and then contents.
std::string compare_values(const onnx_import::OnnxValue& actual, const onnx_import::OnnxValue& expected) {
  if (actual.kind() != expected.kind())
    return str_cat("a ", actual.kind_name(), ", expected a ", expected.kind_name());
  switch (expected.kind()) {
    case onnx_import::OnnxValue::Kind::Tensor: return compare(actual.tensor(), expected.tensor());
    case onnx_import::OnnxValue::Kind::Sequence: {
      if (actual.elements().size() != expected.elements().size())
        return str_cat("a sequence of ", actual.elements().size(), " tensors, expected ", expected.elements().size());
      for (size_t i = 0; i < expected.elements().size(); ++i) {
        std::string mismatch = compare(actual.elements()[i], expected.elements()[i]);
        if (!mismatch.empty()) return str_cat("sequence element ", i, ": ", mismatch);
      }
      return {};
    }
    case onnx_import::OnnxValue::Kind::Optional:
      if (actual.has_element() != expected.has_element())
        return actual.has_element() ? "an optional with a value, expected an empty one"
                                    : "an empty optional, expected one with a value";
      return actual.has_element() ? compare_values(actual.element(), expected.element()) : std::string();
  }
  return {};
}

const onnx_import::OnnxValueInfo* find_info(const std::vector<onnx_import::OnnxValueInfo>& infos, const std::string& name) {
  for (const auto& info : infos)
    if (info.name == name) return &info;
  return nullptr;
}

// Reads input file `k` of a data set: the proto's name picks the model input when it names one,
// else its position among the inputs without initializer. The declared type of that input says
// which proto the file holds (TensorProto, SequenceProto, OptionalProto), so a file whose name
// turns out to pick an input of another kind is read again as that kind.
std::optional<NamedValue> read_input_file(
    const onnx_import::OnnxModel& model, const std::vector<std::string>& required_inputs, const fs::path& file,
    size_t k) {
  const onnx_import::OnnxValueInfo* by_position =
      k < required_inputs.size() ? find_info(model.inputs(), required_inputs[k]) : nullptr;
  auto read_as = [&](const onnx_import::OnnxValueInfo* info) {
    return read_value_file(file.string(), info ? info->kind : onnx_import::OnnxValue::Kind::Tensor,
                           info ? info->dtype : std::nullopt);
  };
  NamedValue input = read_as(by_position);
  if (const onnx_import::OnnxValueInfo* by_name = find_info(model.inputs(), input.name)) {
    if (by_name != by_position && by_name->kind != (by_position ? by_position->kind : onnx_import::OnnxValue::Kind::Tensor))
      input = read_as(by_name);
    return input;
  }
  if (by_position == nullptr) return std::nullopt;
  input.name = by_position->name;
  return input;
}

// For --via-plan: each named symbolic dimension (dim_param) of the model's inputs with the smallest
// and largest size the data sets give it, as `kiln compile --shape` specs (SYMBOL=MIN..MAX, or
// SYMBOL=N where every set agrees) -- or none, where no symbol's size varies between the data sets
// (one fixed plan does) or an input has an unnamed dynamic dimension (no range can name it).
std::vector<onnx_import::ShapeSpec> symbol_ranges(const onnx_import::OnnxModel& model,
                                                  const std::vector<std::string>& required_inputs,
                                                  const std::vector<fs::path>& data_sets) {
  for (const auto& info : model.inputs())
    if (info.dims && !info.has_initializer)
      for (const onnx_import::OnnxDim& dim : *info.dims)
        if (!dim.size && dim.symbol.empty()) return {};
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
  for (const auto& data_set : data_sets) {
    const auto input_files = numbered_files(data_set, "input_");
    for (size_t k = 0; k < input_files.size(); ++k) {
      auto input = read_input_file(model, required_inputs, input_files[k], k);
      const onnx_import::OnnxValueInfo* info = input ? find_info(model.inputs(), input->name) : nullptr;
      if (info == nullptr || !info->dims || !input->value.is_tensor()) continue;
      const Shape& shape = input->value.tensor().shape();
      if (shape.size() != info->dims->size()) continue;  // the run reports the mismatch
      for (size_t axis = 0; axis < shape.size(); ++axis) {
        const onnx_import::OnnxDim& dim = (*info->dims)[axis];
        if (dim.size || dim.symbol.empty()) continue;
        auto [range, fresh] = ranges.emplace(dim.symbol, std::make_pair(shape[axis], shape[axis]));
        range->second = {std::min(range->second.first, shape[axis]), std::max(range->second.second, shape[axis])};
      }
    }
  }
  if (std::none_of(ranges.begin(), ranges.end(), [](const auto& range) { return range.second.first != range.second.second; }))
    return {};
  std::vector<onnx_import::ShapeSpec> specs;
  for (const auto& [symbol, range] : ranges)
    specs.push_back(range.first == range.second ? onnx_import::ShapeSpec{symbol, {range.first}}
                                                : onnx_import::ShapeSpec{symbol, {}, range});
  return specs;
}

// One test folder, in the child process.
Result run_test(const fs::path& folder) {
  std::vector<fs::path> data_sets;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0)
      data_sets.push_back(entry.path());
  std::sort(data_sets.begin(), data_sets.end());
  if (data_sets.empty()) return {Outcome::Skip, "no test_data_set_N folder"};

  const auto load_start = std::chrono::steady_clock::now();
  const auto model = onnx_import::OnnxModel::load_file((folder / "model.onnx").string());
  const double load_ms = milliseconds_since(load_start);
  std::string timings;
  // Maps and nested sequences are not supported; say so instead of misreading their .pb files.
  for (const auto* values : {&model.inputs(), &model.outputs()})
    for (const auto& info : *values)
      if (!info.supported_kind)
        return {Outcome::Fail, str_cat(values == &model.inputs() ? "input '" : "output '", info.name,
                                       "' is not a tensor, a sequence of tensors or an optional of either (not supported)")};
  std::vector<std::string> required_inputs;
  for (const auto& info : model.inputs())
    if (!info.has_initializer) required_inputs.push_back(info.name);
  std::optional<ViaPlanRunner> via_plan;
  if (g_via_plan) {
    for (const auto* values : {&model.inputs(), &model.outputs()})
      for (const auto& info : *values)
        if (info.typed && !info.is_tensor)
          return {Outcome::Fail, str_cat("unsupported: --via-plan runs tensor inputs and outputs only; ",
                                         values == &model.inputs() ? "input '" : "output '", info.name, "' is not a tensor")};
    via_plan.emplace((folder / "model.onnx").string(), g_plan_target);
    via_plan->compile_once_over(symbol_ranges(model, required_inputs, data_sets));
  }
  // A model that ran every data set through one symbolic plan says so in its PASS line.
  // A model that needed inputs pinned to their data sets' values says which (--via-plan -v).
  auto passed = [&] {
    std::string pinned, sizes;
    if (via_plan) {
      for (const std::string& name : via_plan->pinned()) pinned += (pinned.empty() ? "" : " ") + name;
      for (const std::string& name : via_plan->read_as_sizes()) sizes += (sizes.empty() ? "" : " ") + name;
    }
    if (!pinned.empty()) pinned = "pinned to the data sets' values: " + pinned;
    if (!sizes.empty()) pinned = "sizes read at run time: " + sizes + (pinned.empty() ? "" : "; " + pinned);
    if (via_plan && via_plan->symbols().empty() && !pinned.empty())
      return Result{Outcome::Pass, str_cat(pinned, timings.empty() ? "" : "; " + timings)};
    if (!via_plan || via_plan->symbols().empty()) return Result{Outcome::Pass, timings};
    std::string over;
    for (const onnx_import::ShapeSpec& spec : via_plan->symbols())
      over += str_cat(over.empty() ? "" : " ", spec.name, "=",
                      spec.range ? str_cat(spec.range->first, "..", spec.range->second) : std::to_string(spec.dims.at(0)));
    return Result{Outcome::Pass, str_cat(via_plan->plans_compiled(), " plan(s) for ", data_sets.size(), " data sets, over ",
                                         over, pinned.empty() ? "" : "; " + pinned, timings.empty() ? "" : "; " + timings)};
  };
  // One run of the model on a data set's inputs: in process, or through a plan.
  auto run_model = [&](const std::vector<std::pair<std::string, onnx_import::OnnxValue>>& inputs) {
    if (!via_plan) return model.run_values(inputs);
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, value] : inputs) {
      if (!value.is_tensor()) throw UserError(str_cat("unsupported: --via-plan input '", name, "' is a ", value.kind_name()));
      tensors.emplace_back(name, value.tensor());
    }
    std::vector<std::pair<std::string, onnx_import::OnnxValue>> outputs;
    for (auto& [name, tensor] : via_plan->run(tensors)) outputs.emplace_back(name, onnx_import::OnnxValue(tensor));
    return outputs;
  };
  for (const auto& data_set : data_sets) {
    const std::string set_name = data_set.filename().string();
    std::vector<std::pair<std::string, onnx_import::OnnxValue>> inputs;
    const auto input_files = numbered_files(data_set, "input_");
    for (size_t k = 0; k < input_files.size(); ++k) {
      auto input = read_input_file(model, required_inputs, input_files[k], k);
      if (!input)
        return {Outcome::Fail, str_cat(set_name, ": ", input_files[k].filename().string(), " has no matching model input")};
      const onnx_import::OnnxValueInfo* info = find_info(model.inputs(), input->name);
      if (info != nullptr && input->value.is_tensor()) {
        NamedTensor tensor = with_legacy_bfloat16({input->name, input->value.tensor(), input->elem_type}, info->elem_type);
        if (onnx_import::is_narrow_type(info->elem_type) && tensor.elem_type != info->elem_type)
          return {Outcome::Fail, str_cat(set_name, ": ", input_files[k].filename().string(), " is ",
                                         onnx_import::onnx_type_name(tensor.elem_type), " but the model's input '",
                                         input->name, "' is ", onnx_import::onnx_type_name(info->elem_type))};
        input->value = onnx_import::OnnxValue(tensor.tensor);
      }
      inputs.emplace_back(input->name, input->value);
    }
    const auto run_start = std::chrono::steady_clock::now();
    const auto outputs = run_model(inputs);
    if (g_measure_timings && timings.empty()) {
      // The second run of the same inputs builds the graph again but finds every kernel loaded
      // (--via-plan: runs the plan the first run compiled and loaded).
      const double first_ms = milliseconds_since(run_start);
      const auto again_start = std::chrono::steady_clock::now();
      run_model(inputs);
      timings = str_cat("load ", static_cast<int64_t>(load_ms), " ms, first run ", static_cast<int64_t>(first_ms),
                        " ms, second run ", static_cast<int64_t>(milliseconds_since(again_start)), " ms");
    }
    const auto output_files = numbered_files(data_set, "output_");
    if (output_files.size() != outputs.size())
      return {Outcome::Fail, str_cat(set_name, ": the model has ", outputs.size(), " outputs but the data set has ",
                                     output_files.size())};
    for (size_t k = 0; k < output_files.size(); ++k) {
      const onnx_import::OnnxValueInfo& info = model.outputs()[k];
      if (outputs[k].first != info.name)
        return {Outcome::Fail, str_cat(set_name, ": output ", k, " is named '", outputs[k].first, "', the model's is '",
                                       info.name, "'")};
      NamedValue expected = read_value_file(output_files[k].string(), info.kind, info.dtype);
      std::string mismatch;
      if (expected.value.is_tensor() && outputs[k].second.is_tensor()) {
        NamedTensor expected_tensor =
            with_legacy_bfloat16({expected.name, expected.value.tensor(), expected.elem_type}, info.elem_type);
        mismatch = onnx_import::is_narrow_type(info.elem_type)
                       ? compare_narrow(outputs[k].second.tensor(), expected_tensor, info.elem_type)
                       : compare(outputs[k].second.tensor(), expected_tensor.tensor);
      } else {
        mismatch = compare_values(outputs[k].second, expected.value);
      }
      if (!mismatch.empty())
        return {Outcome::Fail, str_cat(set_name, ", output '", outputs[k].first, "': ", mismatch)};
    }
  }
  return passed();
}

// Runs one test in a child process; the child writes "P", "S reason" or "F reason" to a pipe.
Result run_isolated(const fs::path& folder, int timeout_seconds) {
  int channel[2];
  if (pipe(channel) != 0) return {Outcome::Fail, str_cat("pipe() failed: ", std::strerror(errno))};
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) {
    close(channel[0]);
    close(channel[1]);
    return {Outcome::Fail, str_cat("fork() failed: ", std::strerror(errno))};
  }
  if (child == 0) {
    close(channel[0]);
    Result result;
    try {
      result = run_test(folder);
    } catch (const std::exception& error) {
      result = {Outcome::Fail, first_line(error.what())};
    } catch (...) {
      result = {Outcome::Fail, "unknown exception"};
    }
    std::string message = (result.outcome == Outcome::Pass ? "P " : result.outcome == Outcome::Skip ? "S " : "F ") +
                          first_line(result.message.empty() ? std::string("-") : result.message);
    size_t written = 0;
    while (written < message.size()) {
      ssize_t n = write(channel[1], message.data() + written, message.size() - written);
      if (n <= 0) break;
      written += static_cast<size_t>(n);
    }
    std::fflush(nullptr);
    _exit(0);  // skip static destructors and atexit handlers shared with the parent's state
  }

  close(channel[1]);
  std::string message;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd descriptor{channel[0], POLLIN, 0};
    int ready = poll(&descriptor, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[4096];
    ssize_t n = read(channel[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of file: the child closed the pipe (finished or died)
    message.append(buffer, static_cast<size_t>(n));
  }
  close(channel[0]);
  if (timed_out) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return {Outcome::Fail, str_cat("timed out after ", timeout_seconds, " s")};
  if (WIFSIGNALED(status))
    return {Outcome::Fail, str_cat("crashed: signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")")};
  if (message.empty())
    return {Outcome::Fail, str_cat("the test process exited with status ", WEXITSTATUS(status), " without a result")};
  if (message[0] == 'P') return {Outcome::Pass, message.size() > 2 && message.substr(2) != "-" ? message.substr(2) : std::string()};
  return {message[0] == 'S' ? Outcome::Skip : Outcome::Fail, message.size() > 2 ? message.substr(2) : std::string()};
}

}  // namespace

int test_onnx_command(const std::vector<std::string>& arguments) {
  int timeout_seconds = kDefaultTimeoutSeconds;
  bool report_only = false, verbose = false;
  std::vector<fs::path> roots;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const std::string& argument = arguments[i];
    if (argument == "-h" || argument == "--help") {
      print_help(std::cout);
      return 0;
    } else if (argument == "--timeout" || argument.rfind("--timeout=", 0) == 0) {
      std::string value;
      if (argument == "--timeout") {
        if (i + 1 >= arguments.size()) {
          std::cerr << "kiln test-onnx: --timeout needs a number of seconds\n";
          return 2;
        }
        value = arguments[++i];
      } else {
        value = argument.substr(std::strlen("--timeout="));
      }
      char* end = nullptr;
      long seconds = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || seconds <= 0 || seconds > 86400) {
        std::cerr << "kiln test-onnx: --timeout wants a whole number of seconds from 1 to 86400, not '" << value << "'\n";
        return 2;
      }
      timeout_seconds = static_cast<int>(seconds);
    } else if (argument == "--rtol" || argument == "--atol") {
      char* end = nullptr;
      double value = i + 1 < arguments.size() ? std::strtod(arguments[i + 1].c_str(), &end) : -1.0;
      if (end == nullptr || *end != '\0' || !(value >= 0.0) || !std::isfinite(value)) {
        std::cerr << "kiln test-onnx: " << argument << " wants a tolerance >= 0\n";
        return 2;
      }
      ++i;
      (argument == "--rtol" ? tolerances.relative : tolerances.absolute) = value;
    } else if (argument == "--report-only") {
      report_only = true;
    } else if (argument == "--via-plan") {
      g_via_plan = true;
    } else if (argument == "--plan-target") {
      if (i + 1 >= arguments.size() ||
          (arguments[i + 1] != "cpu" && arguments[i + 1] != "opencl" && arguments[i + 1] != "cuda")) {
        std::cerr << "kiln test-onnx: --plan-target needs cpu, opencl or cuda (try 'kiln test-onnx --help')\n";
        return 2;
      }
      g_plan_target = arguments[++i];
    } else if (argument == "--timings") {
      g_measure_timings = true;
    } else if (argument == "-v" || argument == "--verbose") {
      verbose = true;
    } else if (!argument.empty() && argument[0] == '-') {
      std::cerr << "kiln test-onnx: unknown option '" << argument << "' (try 'kiln test-onnx --help')\n";
      return 2;
    } else {
      roots.emplace_back(argument);
    }
  }
  if (roots.empty()) {
    std::cerr << "kiln test-onnx: no test folder given (try 'kiln test-onnx --help')\n";
    return 2;
  }

  std::vector<fs::path> tests;
  for (const auto& root : roots) {
    std::error_code error;
    if (!fs::is_directory(root, error)) {
      std::cerr << "kiln test-onnx: '" << root.string() << "' is not a folder\n";
      return 2;
    }
    try {
      find_tests(root, tests);
    } catch (const fs::filesystem_error& failure) {
      std::cerr << "kiln test-onnx: cannot read '" << root.string() << "': " << failure.what() << "\n";
      return 2;
    }
  }
  if (tests.empty()) {
    std::cerr << "kiln test-onnx: no test folders (with a model.onnx) under the given paths\n";
    return 2;
  }

  // Children killed by a signal must not take the runner with them through SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& test : tests) {
    const std::string name = test_name(test);
    Result result = run_isolated(test, timeout_seconds);
    switch (result.outcome) {
      case Outcome::Pass:
        ++passed;
        if (verbose || g_measure_timings)
          std::cout << "PASS " << name << (result.message.empty() ? "" : ": " + result.message) << "\n";
        break;
      case Outcome::Skip:
        ++skipped;
        if (verbose) std::cout << "SKIP " << name << ": " << result.message << "\n";
        break;
      case Outcome::Fail:
        ++failed;
        std::cout << "FAIL " << name << ": " << result.message << "\n";
        break;
    }
    std::cout.flush();
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  return failed == 0 || report_only ? 0 : 1;
}

}  // namespace kiln::tools
