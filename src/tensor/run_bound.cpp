// The registry of run-bound variables. Process-wide (as dim.h's table of symbolic expressions)
// because a DEFINE_VAR carries only a name and a range: the graph that uses the variable and the
// plan writer that must find its value meet through the name.
#include "tensor/run_bound.h"

#include <map>
#include <mutex>

#include "support/error.h"

namespace kiln {
namespace {

std::mutex registry_mutex;
std::map<std::string, RunBoundValue>& registry() {
  static std::map<std::string, RunBoundValue> values;
  return values;
}

}  // namespace

Dim run_bound_size(const Tensor& value, const std::string& name, int64_t min, int64_t max, std::string origin) {
  KILN_ASSERT(value.ndim() == 0 && (value.dtype() == ScalarType::Int64 || value.dtype() == ScalarType::Int32),
              "run-bound size '", name, "' needs an int32 or int64 scalar");
  Dim dim = size_variable(name, min, max);
  std::lock_guard lock(registry_mutex);
  registry()[name] = RunBoundValue{value, std::move(origin), std::string(), 0};
  return dim;
}

Dim run_bound_input_element(const std::string& input, int64_t element, const std::string& name, int64_t min,
                            int64_t max) {
  Dim dim = size_variable(name, min, max);
  std::lock_guard lock(registry_mutex);
  registry()[name] = RunBoundValue{Tensor(), "input '" + input + "'", input, element};
  return dim;
}

std::optional<RunBoundValue> find_run_bound(const std::string& name) {
  std::lock_guard lock(registry_mutex);
  auto found = registry().find(name);
  if (found == registry().end()) return std::nullopt;
  return found->second;
}

}  // namespace kiln
