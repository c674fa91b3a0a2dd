// load_plan (plan_source.h): find the model file, compile an ONNX model once, load the plan.
#include "plan_source.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <system_error>

#include "kiln/compiler.h"
#include "triton_status.h"

namespace kiln::serving {
namespace {

namespace fs = std::filesystem;

// The log callback of every plan the backend loads: kiln's lines go to the server's log.
void plan_log(void*, kiln_log_level level, const char* message) {
  TRITONSERVER_LogLevel triton_level = level >= KILN_LOG_ERROR     ? TRITONSERVER_LOG_ERROR
                                       : level == KILN_LOG_WARNING ? TRITONSERVER_LOG_WARN
                                       : level == KILN_LOG_INFO    ? TRITONSERVER_LOG_INFO
                                                                   : TRITONSERVER_LOG_VERBOSE;
  log(triton_level, std::string("kiln: ") + message);
}

TRITONSERVER_Error* load_plan_file(const std::string& path, kiln_plan** out_plan) {
  kiln_plan_options options;
  kiln_plan_options_init(&options);
  options.log = plan_log;
  options.log_level = KILN_LOG_WARNING;
  if (kiln_status status = kiln_plan_load_file_v2(path.c_str(), &options, out_plan))
    return kiln_error(status, "cannot load plan " + path);
  return nullptr;
}

// libkiln-compiler's two entry points, found once per process.
struct Compiler {
  decltype(&kiln_compile_options_init) options_init = nullptr;
  decltype(&kiln_compile_onnx_file) compile = nullptr;
  std::string error;  // why it could not be opened
};

// Opens libkiln-compiler: KILN_COMPILER_LIBRARY if set, else the one beside the libkiln this
// process uses (an install puts both in one libdir), else the dynamic loader's search path.
const Compiler& compiler() {
  static Compiler result;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* path = std::getenv("KILN_COMPILER_LIBRARY"); path && *path) candidates.push_back(path);
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&kiln_version), &info) && info.dli_fname)
      candidates.push_back((fs::path(info.dli_fname).parent_path() / "libkiln-compiler.so.0").string());
    candidates.push_back("libkiln-compiler.so.0");
    for (const std::string& candidate : candidates) {
      void* library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept for the process's life
      if (!library) {
        const char* why = dlerror();
        result.error += (result.error.empty() ? "" : "; ") + std::string(why ? why : candidate);
        continue;
      }
      result.options_init = reinterpret_cast<decltype(result.options_init)>(dlsym(library, "kiln_compile_options_init"));
      result.compile = reinterpret_cast<decltype(result.compile)>(dlsym(library, "kiln_compile_onnx_file"));
      if (result.options_init && result.compile) return;
      result.error += "; " + candidate + " lacks kiln_compile_onnx_file";
    }
  });
  return result;
}

// FNV-1a, 64 bits: a cache key, not a security boundary (the plan itself is hash-checked at load).
uint64_t fnv1a(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

TRITONSERVER_Error* cache_key(const std::string& model_path, const std::vector<std::string>& shapes,
                              std::string* out_key) {
  std::ifstream file(model_path, std::ios::binary);
  if (!file) return error(TRITONSERVER_ERROR_NOT_FOUND, "cannot read " + model_path);
  uint64_t hash = 0xcbf29ce484222325ull;
  std::vector<char> chunk(1 << 20);
  while (file.read(chunk.data(), std::streamsize(chunk.size())) || file.gcount() > 0)
    hash = fnv1a(hash, chunk.data(), size_t(file.gcount()));
  for (const std::string& shape : shapes) hash = fnv1a(hash, shape.c_str(), shape.size() + 1);
  const char* version = kiln_version();
  hash = fnv1a(hash, version, std::char_traits<char>::length(version));
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  *out_key = text;
  return nullptr;
}

TRITONSERVER_Error* compile_onnx(const PlanRequest& request, const std::string& model_path,
                                 const std::string& plan_path) {
  const Compiler& found = compiler();
  if (!found.compile)
    return error(TRITONSERVER_ERROR_UNSUPPORTED,
                 "model '" + request.model_name + "': " + model_path +
                     " needs libkiln-compiler to compile it, which could not be opened (" + found.error +
                     "); compile it with `kiln compile` and serve model.kiln, or set KILN_COMPILER_LIBRARY");
  std::vector<const char*> specs;
  for (const std::string& shape : request.shapes) specs.push_back(shape.c_str());
  kiln_compile_options options;
  found.options_init(&options);
  options.shapes = specs.data();
  options.shape_count = specs.size();
  if (kiln_status status = found.compile(model_path.c_str(), &options, plan_path.c_str()))
    return kiln_error(status, "model '" + request.model_name + "': cannot compile " + model_path);
  return nullptr;
}

TRITONSERVER_Error* load_onnx(const PlanRequest& request, const std::string& model_path, kiln_plan** out_plan,
                              std::string* out_description) {
  std::string key;
  KILN_TRITON_TRY(cache_key(model_path, request.shapes, &key));
  std::string cached = model_path + "." + key + ".kiln";
  std::error_code ignored;
  if (fs::exists(cached, ignored)) {
    if (TRITONSERVER_Error* failure = load_plan_file(cached, out_plan)) {
      // A damaged cache entry is rebuilt, not served.
      log(TRITONSERVER_LOG_WARN, std::string("recompiling: ") + TRITONSERVER_ErrorMessage(failure));
      TRITONSERVER_ErrorDelete(failure);
    } else {
      *out_description = model_path + " (compiled plan cached in " + cached + ")";
      return nullptr;
    }
  }
  if (access(fs::path(model_path).parent_path().c_str(), W_OK) == 0) {
    KILN_TRITON_TRY(compile_onnx(request, model_path, cached));
    KILN_TRITON_TRY(load_plan_file(cached, out_plan));
    *out_description = model_path + " (compiled to " + cached + ")";
    return nullptr;
  }
  // A read-only model folder: compile into a temporary file at every load and remove it once
  // loaded (the plan keeps its own mapping of the file).
  char temporary[] = "/tmp/kiln-triton-XXXXXX";
  int descriptor = mkstemp(temporary);
  if (descriptor < 0) return error(TRITONSERVER_ERROR_INTERNAL, "cannot create a temporary file in /tmp");
  close(descriptor);
  TRITONSERVER_Error* failure = compile_onnx(request, model_path, temporary);
  if (!failure) failure = load_plan_file(temporary, out_plan);
  fs::remove(temporary, ignored);
  if (failure) return failure;
  *out_description = model_path + " (compiled into a temporary file: its folder is read-only)";
  return nullptr;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TRITONSERVER_Error* load_plan(const PlanRequest& request, kiln_plan** out_plan, std::string* out_description) {
  std::error_code ignored;
  const fs::path folder(request.version_directory);
  std::vector<std::string> names;
  if (!request.default_model_filename.empty())
    names = {request.default_model_filename};
  else
    names = {"model.kiln", "model.onnx"};
  for (const std::string& name : names) {
    const std::string path = (folder / name).string();
    if (!fs::exists(path, ignored)) continue;
    if (ends_with(name, ".onnx")) return load_onnx(request, path, out_plan, out_description);
    KILN_TRITON_TRY(load_plan_file(path, out_plan));
    *out_description = path;
    return nullptr;
  }
  std::string tried;
  for (const std::string& name : names) tried += (tried.empty() ? "" : ", ") + (folder / name).string();
  return error(TRITONSERVER_ERROR_NOT_FOUND, "model '" + request.model_name + "': no model file: none of " + tried +
                                                 " exists (a plan made by `kiln compile`, or an ONNX model)");
}

}  // namespace kiln::serving
