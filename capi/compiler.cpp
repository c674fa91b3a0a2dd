// C shims of compiler.h (libkiln-compiler): ONNX model → plan file through compile_onnx_file, the
// driver `kiln compile` uses too. This file checks the C arguments and maps failures to statuses;
// every exception is caught here; messages go to libkiln's per-thread message (error_bridge.h).
#include "kiln/compiler.h"

#include <cstring>
#include <exception>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "compile_onnx_file.h"
#include "error_bridge.h"
#include "onnx_model.h"
#include "support/error.h"

namespace {

using kiln::onnx_import::ShapeSpec;

// A failure with its own status (the compile's argument and I/O errors); UserErrors from the
// importer and the writer are about the model.
struct CompileFailure {
  kiln_status status;
  std::string message;
};

void compile(const char* model_path, const kiln_compile_options& options, const char* plan_path) {
  std::vector<ShapeSpec> specs;
  for (size_t i = 0; i < options.shape_count; ++i) {
    if (options.shapes == nullptr || options.shapes[i] == nullptr)
      throw CompileFailure{KILN_ERROR_INVALID_ARGUMENT,
                           "kiln_compile_onnx_file: options->shapes[" + std::to_string(i) + "] is NULL"};
    try {
      specs.push_back(kiln::onnx_import::parse_shape_spec(options.shapes[i]));
    } catch (const kiln::UserError& error) {
      throw CompileFailure{KILN_ERROR_INVALID_ARGUMENT, std::string("kiln_compile_onnx_file: shape spec '") +
                                                            options.shapes[i] + "': " + error.what()};
    }
  }
  std::vector<kiln::onnx_import::PinnedValueSpec> values;
  for (size_t i = 0; i < options.value_count; ++i) {
    if (options.values == nullptr || options.values[i] == nullptr)
      throw CompileFailure{KILN_ERROR_INVALID_ARGUMENT,
                           "kiln_compile_onnx_file: options->values[" + std::to_string(i) + "] is NULL"};
    try {
      values.push_back(kiln::onnx_import::parse_value_spec(options.values[i]));
    } catch (const kiln::UserError& error) {
      throw CompileFailure{KILN_ERROR_INVALID_ARGUMENT, std::string("kiln_compile_onnx_file: value spec '") +
                                                            options.values[i] + "': " + error.what()};
    }
  }
  {
    std::ifstream probe(model_path, std::ios::binary);
    if (!probe)
      throw CompileFailure{KILN_ERROR_IO, std::string("cannot open ONNX model '") + model_path + "': " +
                                              std::strerror(errno)};
  }
  kiln::onnx_import::OnnxCompileOptions compile_options;
  if (options.precision != nullptr) {
    const std::string precision = options.precision;
    if (precision != "fp32" && precision != "bf16")
      throw CompileFailure{KILN_ERROR_INVALID_ARGUMENT, "kiln_compile_onnx_file: options->precision '" + precision +
                                                            "' is not \"fp32\" or \"bf16\""};
    if (precision == "bf16") compile_options.precision = kiln::MatmulPrecision::kBFloat16;
  }
  compile_options.shapes = std::move(specs);
  compile_options.values = std::move(values);
  if (options.verbose) compile_options.progress = kiln::onnx_import::stderr_compile_progress();
  try {
    kiln::onnx_import::compile_onnx_file(model_path, plan_path, compile_options);
  } catch (const kiln::onnx_import::PlanFileError& error) {
    throw CompileFailure{KILN_ERROR_IO, error.what()};
  }
}

kiln_status fail(kiln_status status, const std::string& message) {
  return kiln_private_set_error_message(status, message.c_str());
}

}  // namespace

extern "C" {

void kiln_compile_options_init(kiln_compile_options* options) {
  if (options == nullptr) return;
  *options = kiln_compile_options{};
  options->size = sizeof(kiln_compile_options);
}

kiln_status kiln_compile_onnx_file(const char* model_path, const kiln_compile_options* given, const char* plan_path) {
  const char* function = "kiln_compile_onnx_file";
  if (model_path == nullptr) return fail(KILN_ERROR_INVALID_ARGUMENT, std::string(function) + ": model_path is NULL");
  if (plan_path == nullptr) return fail(KILN_ERROR_INVALID_ARGUMENT, std::string(function) + ": plan_path is NULL");
  kiln_compile_options options;
  kiln_compile_options_init(&options);
  if (given != nullptr) {
    if (given->size == 0)
      return fail(KILN_ERROR_INVALID_ARGUMENT,
                  std::string(function) + ": options->size is 0 (initialise the options with kiln_compile_options_init)");
    std::memcpy(&options, given, std::min(given->size, sizeof options));
  }
  try {
    kiln_private_set_error_message(KILN_OK, nullptr);
    compile(model_path, options, plan_path);
    return KILN_OK;
  } catch (const CompileFailure& failure) {
    return fail(failure.status, failure.message);
  } catch (const kiln::UserError& error) {
    return fail(KILN_ERROR_INVALID_MODEL, error.what());
  } catch (const std::bad_alloc&) {
    return fail(KILN_ERROR_OUT_OF_MEMORY, std::string(function) + ": out of memory");
  } catch (const kiln::InternalError& error) {
    return fail(KILN_ERROR_INTERNAL, std::string(function) + ": internal error: " + error.what());
  } catch (const std::exception& error) {
    return fail(KILN_ERROR_INTERNAL, std::string(function) + ": internal error: " + error.what());
  } catch (...) {
    return fail(KILN_ERROR_INTERNAL, std::string(function) + ": internal error (unknown exception)");
  }
}

}  // extern "C"
