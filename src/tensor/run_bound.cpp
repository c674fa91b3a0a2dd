// The registry of run-bound variables. Process-wide (as dim.h's table of symbolic expressions)
// because a DEFINE_VAR carries only a name and a range: the graph that uses the variable and the
// plan writer that must find its value meet through the name.
#include "tensor/run_bound.h"

#include <map>
#include <mutex>
#include <algorithm>

#include "support/error.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

std::mutex registry_mutex;
std::map<std::string, RunBoundValue>& registry() {
  static std::map<std::string, RunBoundValue> values;
  return values;
}

thread_local RunTimeCheckRecorder* active_recorder = nullptr;

}  // namespace

Dim run_bound_size(const Tensor& value, const std::string& name, int64_t min, int64_t max, std::string origin) {
  KILN_ASSERT(value.ndim() == 0 && (value.dtype() == ScalarType::Int64 || value.dtype() == ScalarType::Int32),
              "run-bound size '", name, "' needs an int32 or int64 scalar");
  Dim dim = size_variable(name, min, max);
  std::lock_guard lock(registry_mutex);
  registry()[name] = RunBoundValue{value, std::move(origin), std::string(), 0, std::nullopt};
  return dim;
}

Dim run_bound_input_element(const std::string& input, int64_t element, const std::string& name, int64_t min,
                            int64_t max) {
  Dim dim = size_variable(name, min, max);
  std::lock_guard lock(registry_mutex);
  registry()[name] = RunBoundValue{Tensor(), "input '" + input + "'", input, element, std::nullopt};
  return dim;
}

void check_at_run_time(const Tensor& value, const std::string& name, int64_t min, int64_t max, std::string origin) {
  KILN_ASSERT(value.ndim() == 0 && (value.dtype() == ScalarType::Int64 || value.dtype() == ScalarType::Int32),
              "run-time check '", name, "' needs an int32 or int64 scalar");
  size_variable(name, min, max);
  {
    std::lock_guard lock(registry_mutex);
    registry()[name] = RunBoundValue{value, std::move(origin), std::string(), 0, VariableSpec{name, min, max}};
  }
  if (active_recorder != nullptr) active_recorder->add(name);
}

RunTimeCheckRecorder::RunTimeCheckRecorder() : outer_(active_recorder) { active_recorder = this; }
RunTimeCheckRecorder::~RunTimeCheckRecorder() { active_recorder = outer_; }
void RunTimeCheckRecorder::add(const std::string& name) {
  if (std::find(names_.begin(), names_.end(), name) == names_.end()) names_.push_back(name);
}

namespace {

// The int64 tensor of index expression `node`, with run-bound variables read from their values.
std::optional<Tensor> expression_tensor(const UOp* node) {
  auto source = [&](size_t i) { return expression_tensor(node->src(i).get()); };
  auto binary = [&](auto combine) -> std::optional<Tensor> {
    std::optional<Tensor> a = source(0), b = source(1);
    if (!a || !b) return std::nullopt;
    return combine(*a, *b);
  };
  switch (node->op()) {
    case Ops::CONST:
      if (!node->dtype().is_int()) return std::nullopt;
      return Tensor::scalar(static_cast<double>(node->arg_int()), ScalarType::Int64);
    case Ops::DEFINE_VAR: {
      std::optional<RunBoundValue> value = find_run_bound(node->arg_variable().name);
      if (value && value->value.defined() && !value->check) return value->value.cast(ScalarType::Int64);
      return dim_tensor(Dim(node->self()), ScalarType::Int64);
    }
    case Ops::ADD: return binary([](const Tensor& a, const Tensor& b) { return a + b; });
    case Ops::MUL: return binary([](const Tensor& a, const Tensor& b) { return a * b; });
    case Ops::IDIV: return binary([](const Tensor& a, const Tensor& b) { return a.idiv(b); });
    case Ops::MOD: return binary([](const Tensor& a, const Tensor& b) { return a.fmod(b); });
    case Ops::MAX: return binary([](const Tensor& a, const Tensor& b) { return a.maximum(b); });
    case Ops::CMPLT: return binary([](const Tensor& a, const Tensor& b) { return a.lt(b).cast(ScalarType::Int64); });
    case Ops::CMPNE: return binary([](const Tensor& a, const Tensor& b) { return a.ne(b).cast(ScalarType::Int64); });
    case Ops::CMPEQ: return binary([](const Tensor& a, const Tensor& b) { return a.eq(b).cast(ScalarType::Int64); });
    case Ops::NEG: {
      std::optional<Tensor> a = source(0);
      if (!a) return std::nullopt;
      return Tensor::scalar(0, ScalarType::Int64) - *a;
    }
    case Ops::WHERE: {
      std::optional<Tensor> c = source(0), a = source(1), b = source(2);
      if (!c || !a || !b) return std::nullopt;
      return c->ne(Tensor::scalar(0, ScalarType::Int64)).where(*a, *b);
    }
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<Tensor> size_from_run_values(const Dim& size) {
  if (size.is_known()) return std::nullopt;
  bool reads_value = false;
  for (const UOp* node : toposort(size.expression()))
    if (node->op() == Ops::DEFINE_VAR) {
      std::optional<RunBoundValue> value = find_run_bound(node->arg_variable().name);
      reads_value = reads_value || (value && value->value.defined() && !value->check);
    }
  if (!reads_value) return std::nullopt;
  return expression_tensor(size.expression().get());
}

std::optional<RunBoundValue> find_run_bound(const std::string& name) {
  std::lock_guard lock(registry_mutex);
  auto found = registry().find(name);
  if (found == registry().end()) return std::nullopt;
  return found->second;
}

}  // namespace kiln
