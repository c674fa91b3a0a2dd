// The Tensor handle and its primitive operations: every method here adds one tensor-level node
// (tensor_data.h) after checking its arguments. Composite operations, built only from these, live
// in the other files of this folder.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_set>

#include "ir/build.h"
#include "support/error.h"
#include "tensor/run_bound.h"
#include "tensor/tensor_internal.h"

namespace kiln {

using detail::TensorData;

// ---- helpers shared by the tensor files (tensor_internal.h) ----

DType to_dtype(ScalarType type) {
  if (type == ScalarType::Void || type == ScalarType::Index)
    throw UserError("tensors cannot have the compiler-internal types void or index");
  return DType(type);
}

std::string shape_string(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

int64_t normalize_axis(int64_t axis, int64_t ndim, std::string_view operation) {
  int64_t normalized = axis < 0 ? axis + ndim : axis;
  if (normalized < 0 || normalized >= ndim)
    throw UserError(str_cat(operation, ": axis ", axis, " is out of range for a tensor with ", ndim, " dimensions"));
  return normalized;
}

Tensor make_tensor(UOpPtr node, Shape shape, DType dtype, std::vector<const Tensor*> inputs) {
  auto data = std::make_shared<TensorData>();
  data->node = std::move(node);
  data->shape = std::move(shape);
  data->dtype = dtype;
  for (const Tensor* input : inputs) data->inputs.push_back(input->data_pointer());
  return Tensor(std::move(data));
}

Tensor make_tensor_dims(UOpPtr node, const Dims& dims, DType dtype, std::vector<const Tensor*> inputs) {
  if (all_known(dims)) return make_tensor(std::move(node), known_sizes(dims), dtype, std::move(inputs));
  auto data = std::make_shared<TensorData>();
  data->node = std::move(node);
  data->dims = dims;
  data->dtype = dtype;
  for (const Tensor* input : inputs) data->inputs.push_back(input->data_pointer());
  return Tensor(std::move(data));
}

Dims dims_of(const Tensor& t) {
  const TensorData& data = t.data();
  return data.dims.empty() ? to_dims(data.shape) : data.dims;
}

bool has_symbolic_shape(const Tensor& t) { return t.defined() && !t.data().dims.empty(); }

Dim dim_of(const Tensor& t, int64_t axis) {
  const TensorData& data = t.data();
  auto a = static_cast<size_t>(normalize_axis(axis, t.ndim(), "dim"));
  return data.dims.empty() ? Dim(data.shape[a]) : data.dims[a];
}

Tensor dim_tensor(const Dim& dim, ScalarType type) {
  if (dim.is_known()) return Tensor::scalar(static_cast<double>(dim.value()), type);
  // A size the run decides is computed from its value's tensor, which orders it after that value's
  // kernel (a variable read alone would not: run_bound.h).
  if (std::optional<Tensor> computed = size_from_run_values(dim)) return computed->cast(type);
  // The size's index expression, used as a scalar value: rangeify computes it from the kernel's
  // variables (a DEFINE_VAR is a value there, as a CONST is).
  Tensor size = make_tensor(dim.expression(), {}, dtypes::index, {});
  DType target = to_dtype(type);
  return make_tensor(UOp::make(Ops::CAST, target, {dim.expression()}), {}, target, {&size});
}

namespace {

void require_defined(const Tensor& tensor) {
  if (!tensor.defined()) throw UserError("operation on an empty (default-constructed) Tensor");
}

std::atomic<int64_t> next_buffer_id{1};

UOpPtr movement(Ops op, const UOpPtr& source, std::vector<int64_t> arg) {
  return UOp::make(op, source->dtype(), {source}, std::move(arg));
}

bool is_integral(double value) { return std::isfinite(value) && std::floor(value) == value; }

// Applies one ALU op to tensors of one shape and dtype.
Tensor elementwise(Ops op, DType result, std::vector<Tensor> sources) {
  std::vector<UOpPtr> nodes;
  std::vector<const Tensor*> inputs;
  for (const Tensor& source : sources) {
    nodes.push_back(source.data().node);
    inputs.push_back(&source);
  }
  return make_tensor_dims(UOp::make(op, result, std::move(nodes)), dims_of(sources[0]), result, inputs);
}

// Broadcasts both operands to one shape and promotes them to one dtype.
std::pair<Tensor, Tensor> align(const Tensor& a, const Tensor& b, std::string_view operation) {
  require_defined(a);
  require_defined(b);
  DType type = promote_types(a.data().dtype, b.data().dtype);
  Dims shape = broadcast_shapes(dims_of(a), dims_of(b), operation);
  auto fit = [&](const Tensor& t) { return broadcast_to(t.cast(type.scalar()), shape); };
  return {fit(a), fit(b)};
}

Tensor binary(Ops op, const Tensor& a, const Tensor& b, std::string_view operation) {
  auto [x, y] = align(a, b, operation);
  DType result = (op == Ops::CMPLT || op == Ops::CMPNE || op == Ops::CMPEQ) ? dtypes::bool_ : x.data().dtype;
  return elementwise(op, result, {x, y});
}

// A float view of `t` for float-only math: integers and bool become f32.
Tensor as_float(const Tensor& t) {
  return t.data().dtype.is_float() ? t : t.cast(ScalarType::Float32);
}

Tensor float_unary(Ops op, const Tensor& t) {
  require_defined(t);
  Tensor x = as_float(t);
  return elementwise(op, x.data().dtype, {x});
}

void require_integer_or_bool(const Tensor& t, std::string_view operation) {
  DType type = t.data().dtype;
  if (type.is_float())
    throw UserError(str_cat(operation, ": needs integer or bool tensors, got ", type.name()));
}

}  // namespace

// numpy broadcasting. A symbolic dim broadcasts against 1 and against the same expression; against
// anything else it is refused, though the sizes might agree at run time (decision 1).
Dims broadcast_shapes(const Dims& a, const Dims& b, std::string_view operation) {
  size_t rank = std::max(a.size(), b.size());
  Dims out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    Dim da = i < rank - a.size() ? Dim(1) : a[i - (rank - a.size())];
    Dim db = i < rank - b.size() ? Dim(1) : b[i - (rank - b.size())];
    if (!(da == db) && !da.is(1) && !db.is(1))
      throw UserError(str_cat(operation, ": shapes ", dims_string(a), " and ", dims_string(b), " do not broadcast"));
    out[i] = da.is(1) ? db : da;
  }
  return out;
}

Tensor broadcast_to(const Tensor& t, const Shape& shape) { return broadcast_to(t, to_dims(shape)); }

Tensor broadcast_to(const Tensor& t, const Dims& shape) {
  Dims dims = dims_of(t);
  if (dims == shape) return t;
  if (dims.size() > shape.size())
    throw UserError(str_cat("expand: cannot broadcast ", dims_string(dims), " to ", dims_string(shape)));
  Dims padded(shape.size() - dims.size(), 1);
  padded.insert(padded.end(), dims.begin(), dims.end());
  return expand_to(reshape_to(t, padded), shape);
}

// ---- Tensor: construction and properties ----

Tensor::Tensor() = default;

const TensorData& Tensor::data() const {
  require_defined(*this);
  return *data_;
}

const Shape& Tensor::shape() const {
  const TensorData& d = data();
  if (!d.dims.empty())
    throw UserError(str_cat("unsupported: an operation that needs fixed sizes, on a tensor of symbolic shape ",
                            dims_string(d.dims)));
  return d.shape;
}
int64_t Tensor::ndim() const {
  const TensorData& d = data();
  return static_cast<int64_t>(d.dims.empty() ? d.shape.size() : d.dims.size());
}
// A known axis of a symbolic tensor has its size; a symbolic one is a UserError naming it.
int64_t Tensor::dim(int64_t axis) const { return dim_of(*this, axis).value("an operation that reads this axis' size"); }
int64_t Tensor::numel() const { return shape_numel(shape()); }
ScalarType Tensor::dtype() const { return data().dtype.scalar(); }

Tensor Tensor::from_data(const void* source, Shape shape, ScalarType type) {
  DType dtype = to_dtype(type);
  for (int64_t size : shape)
    if (size < 0) throw UserError(str_cat("from_data: negative dimension in shape ", shape_string(shape)));
  int64_t count = shape_numel(shape);
  if (source == nullptr && count > 0) throw UserError("from_data: data is NULL");
  auto buffer = std::make_shared<HostBuffer>(dtype, count);
  if (count > 0) std::memcpy(buffer->data(), source, buffer->bytes());
  return wrap_buffer(std::move(buffer), std::move(shape));
}

Tensor wrap_buffer(std::shared_ptr<HostBuffer> buffer, Shape shape) {
  int64_t id = next_buffer_id.fetch_add(1);
  DType dtype = buffer->dtype();
  UOpPtr node = UOp::make(Ops::BUFFER, dtype, {}, std::vector<int64_t>{id, buffer->count()});
  if (shape != Shape{buffer->count()}) node = movement(Ops::RESHAPE, node, shape);
  auto data = std::make_shared<TensorData>();
  data->node = node;
  data->shape = std::move(shape);
  data->dtype = dtype;
  data->buffer = std::move(buffer);
  data->buffer_id = id;
  return Tensor(std::move(data));
}

Tensor graph_input(std::string name, Shape shape, ScalarType type) {
  if (name.empty()) throw UserError("graph_input: an empty name");
  DType dtype = to_dtype(type);
  for (int64_t size : shape)
    if (size < 0) throw UserError(str_cat("graph input '", name, "': negative dimension in shape ", shape_string(shape)));
  int64_t count = shape_numel(shape);
  int64_t id = next_buffer_id.fetch_add(1);
  UOpPtr node = UOp::make(Ops::BUFFER, dtype, {}, std::vector<int64_t>{id, count});
  if (shape != Shape{count}) node = movement(Ops::RESHAPE, node, shape);
  auto data = std::make_shared<TensorData>();
  data->node = node;
  data->shape = std::move(shape);
  data->dtype = dtype;
  data->buffer_id = id;
  data->graph_input_name = std::move(name);
  return Tensor(std::move(data));
}

Tensor symbolic_graph_input(std::string name, const Dims& dims, ScalarType type) {
  if (all_known(dims)) return graph_input(std::move(name), known_sizes(dims), type);
  if (name.empty()) throw UserError("graph_input: an empty name");
  for (const Dim& dim : dims)
    if (dim.min() < 0)
      throw UserError(str_cat("graph input '", name, "': dimension ", dim.text(), " of ", dims_string(dims), " may be negative"));
  DType dtype = to_dtype(type);
  Dim count = dims_numel(dims);
  int64_t id = next_buffer_id.fetch_add(1);
  UOpPtr node = UOp::make(Ops::BUFFER, dtype, {}, std::vector<int64_t>{id, encode_dim(count)});
  if (!(dims.size() == 1 && dims[0] == count)) node = movement(Ops::RESHAPE, node, encode_dims(dims));
  auto data = std::make_shared<TensorData>();
  data->node = node;
  data->dims = dims;
  data->dtype = dtype;
  data->buffer_id = id;
  data->graph_input_name = std::move(name);
  return Tensor(std::move(data));
}

bool reads_graph_input(const Tensor& t) {
  if (!t.defined()) return false;
  std::unordered_set<const TensorData*> seen;
  std::vector<const TensorData*> stack{&t.data()};
  while (!stack.empty()) {
    const TensorData* data = stack.back();
    stack.pop_back();
    if (!seen.insert(data).second) continue;
    if (!data->graph_input_name.empty()) return true;
    for (const auto& input : data->inputs) stack.push_back(input.get());
  }
  return false;
}

Tensor Tensor::scalar(double value, ScalarType type) {
  DType dtype = to_dtype(type);
  UOpPtr node;
  if (dtype.is_float()) node = const_float(dtype, value);
  else if (dtype.is_bool()) node = const_bool(value != 0.0);
  else if (dtype.is_unsigned() && value >= 9223372036854775808.0)
    node = const_int(dtype, static_cast<int64_t>(static_cast<uint64_t>(value)));
  else node = const_int(dtype, static_cast<int64_t>(value));
  return make_tensor(node, {}, dtype, {});
}

Tensor scalar_like(const Tensor& like, double value) {
  DType type = like.data().dtype;
  if (type.is_float()) return Tensor::scalar(value, type.scalar());
  if (is_integral(value)) return Tensor::scalar(value, type.is_bool() ? ScalarType::Int32 : type.scalar());
  return Tensor::scalar(value, ScalarType::Float32);
}

Tensor Tensor::full(Shape shape, double value, ScalarType type) {
  return broadcast_to(scalar(value, type), shape);
}
Tensor Tensor::zeros(Shape shape, ScalarType type) { return full(std::move(shape), 0.0, type); }
Tensor Tensor::ones(Shape shape, ScalarType type) { return full(std::move(shape), 1.0, type); }

Tensor Tensor::arange(int64_t stop, ScalarType type) {
  if (stop < 0) throw UserError(str_cat("arange: negative length ", stop));
  UOpPtr node = UOp::make(Ops::SPECIAL, dtypes::index, {const_int(dtypes::index, stop)}, std::string("arange"));
  Tensor indices = make_tensor(node, {stop}, dtypes::index, {});
  // The index node has the compiler type `index`; a cast gives it a data type (rangeify turns the
  // pair into a cast of the loop variable).
  return make_tensor(UOp::make(Ops::CAST, to_dtype(type), {node}), {stop}, to_dtype(type), {&indices});
}

Tensor arange_dim(const Dim& count, ScalarType type) {
  if (count.is_known()) return Tensor::arange(count.value(), type);
  UOpPtr node = UOp::make(Ops::SPECIAL, dtypes::index, {const_int(dtypes::index, encode_dim(count))}, std::string("arange"));
  Tensor indices = make_tensor_dims(node, {count}, dtypes::index, {});
  return make_tensor_dims(UOp::make(Ops::CAST, to_dtype(type), {node}), {count}, to_dtype(type), {&indices});
}

// ---- elementwise primitives ----

Tensor Tensor::cast(ScalarType type) const {
  DType target = to_dtype(type);
  if (data().dtype == target) return *this;
  return elementwise(Ops::CAST, target, {*this});
}

Tensor Tensor::bitcast(ScalarType type) const {
  DType target = to_dtype(type);
  if (target.scalar_bytes() != data().dtype.scalar_bytes() || target.is_bool() || data().dtype.is_bool())
    throw UserError(str_cat("bitcast: ", data().dtype.name(), " and ", target.name(), " differ in size"));
  if (data().dtype == target) return *this;
  return elementwise(Ops::BITCAST, target, {*this});
}

Tensor Tensor::neg() const {
  require_defined(*this);
  if (data().dtype.is_bool()) return logical_not();
  return elementwise(Ops::NEG, data().dtype, {*this});
}
Tensor Tensor::reciprocal() const { return float_unary(Ops::RECIPROCAL, *this); }
Tensor Tensor::sqrt() const { return float_unary(Ops::SQRT, *this); }
Tensor Tensor::exp2() const { return float_unary(Ops::EXP2, *this); }
Tensor Tensor::log2() const { return float_unary(Ops::LOG2, *this); }
Tensor Tensor::sin() const { return float_unary(Ops::SIN, *this); }
Tensor Tensor::trunc() const {
  require_defined(*this);
  if (!data().dtype.is_float()) return *this;
  return elementwise(Ops::TRUNC, data().dtype, {*this});
}
// Halves to even, as numpy and ONNX Round: one instruction on every target (roundps, rint).
Tensor Tensor::round() const {
  require_defined(*this);
  if (!data().dtype.is_float()) return *this;
  return elementwise(Ops::ROUND_EVEN, data().dtype, {*this});
}
Tensor Tensor::logical_not() const {
  require_defined(*this);
  Tensor x = cast(ScalarType::Bool);
  return elementwise(Ops::NOT, dtypes::bool_, {x});
}
Tensor Tensor::bitwise_not() const {
  require_integer_or_bool(*this, "bitwise_not");
  return elementwise(Ops::NOT, data().dtype, {*this});
}

Tensor Tensor::add(const Tensor& other) const {
  auto [x, y] = align(*this, other, "add");
  if (x.data().dtype.is_bool()) return elementwise(Ops::OR, dtypes::bool_, {x, y});
  return elementwise(Ops::ADD, x.data().dtype, {x, y});
}
Tensor Tensor::sub(const Tensor& other) const {
  auto [x, y] = align(*this, other, "sub");
  if (x.data().dtype.is_bool()) throw UserError("sub: bool tensors cannot be subtracted (use logical_xor)");
  return elementwise(Ops::SUB, x.data().dtype, {x, y});
}
Tensor Tensor::mul(const Tensor& other) const {
  auto [x, y] = align(*this, other, "mul");
  if (x.data().dtype.is_bool()) return elementwise(Ops::AND, dtypes::bool_, {x, y});
  return elementwise(Ops::MUL, x.data().dtype, {x, y});
}
Tensor Tensor::div(const Tensor& other) const {
  auto [x, y] = align(*this, other, "div");
  return elementwise(Ops::FDIV, as_float(x).data().dtype, {as_float(x), as_float(y)});
}
Tensor Tensor::idiv(const Tensor& other) const {
  auto [x, y] = align(*this, other, "idiv");
  if (x.data().dtype.is_float()) return x.div(y).trunc();
  if (x.data().dtype.is_bool()) throw UserError("idiv: bool tensors cannot be divided");
  return elementwise(Ops::IDIV, x.data().dtype, {x, y});
}
Tensor Tensor::maximum(const Tensor& other) const {
  auto [x, y] = align(*this, other, "maximum");
  if (x.data().dtype.is_bool()) return elementwise(Ops::OR, dtypes::bool_, {x, y});
  return elementwise(Ops::MAX, x.data().dtype, {x, y});
}
Tensor Tensor::bitwise_and(const Tensor& other) const {
  auto [x, y] = align(*this, other, "bitwise_and");
  require_integer_or_bool(x, "bitwise_and");
  return elementwise(Ops::AND, x.data().dtype, {x, y});
}
Tensor Tensor::bitwise_or(const Tensor& other) const {
  auto [x, y] = align(*this, other, "bitwise_or");
  require_integer_or_bool(x, "bitwise_or");
  return elementwise(Ops::OR, x.data().dtype, {x, y});
}
Tensor Tensor::bitwise_xor(const Tensor& other) const {
  auto [x, y] = align(*this, other, "bitwise_xor");
  require_integer_or_bool(x, "bitwise_xor");
  return elementwise(Ops::XOR, x.data().dtype, {x, y});
}
Tensor Tensor::shift_left(const Tensor& other) const {
  auto [x, y] = align(*this, other, "shift_left");
  require_integer_or_bool(x, "shift_left");
  return elementwise(Ops::SHL, x.data().dtype, {x, y});
}
Tensor Tensor::shift_right(const Tensor& other) const {
  auto [x, y] = align(*this, other, "shift_right");
  require_integer_or_bool(x, "shift_right");
  return elementwise(Ops::SHR, x.data().dtype, {x, y});
}
Tensor Tensor::lt(const Tensor& other) const { return binary(Ops::CMPLT, *this, other, "lt"); }
Tensor Tensor::eq(const Tensor& other) const { return binary(Ops::CMPEQ, *this, other, "eq"); }
Tensor Tensor::ne(const Tensor& other) const { return binary(Ops::CMPNE, *this, other, "ne"); }

Tensor Tensor::where(const Tensor& if_true, const Tensor& if_false) const {
  require_defined(*this);
  auto [x, y] = align(if_true, if_false, "where");
  Dims shape = broadcast_shapes(dims_of(x), dims_of(*this), "where");
  Tensor condition = broadcast_to(cast(ScalarType::Bool), shape);
  Tensor a = broadcast_to(x, shape), b = broadcast_to(y, shape);
  return elementwise(Ops::WHERE, a.data().dtype, {condition, a, b});
}

Tensor Tensor::mul_add(const Tensor& factor, const Tensor& addend) const {
  require_defined(*this);
  require_defined(factor);
  require_defined(addend);
  DType type = promote_types(promote_types(data().dtype, factor.data().dtype), addend.data().dtype);
  if (!type.is_float()) return *this * factor + addend;
  Dims shape = broadcast_shapes(broadcast_shapes(dims_of(*this), dims_of(factor), "mul_add"), dims_of(addend), "mul_add");
  auto fit = [&](const Tensor& t) { return broadcast_to(t.cast(type.scalar()), shape); };
  return elementwise(Ops::MULACC, type, {fit(*this), fit(factor), fit(addend)});
}

// ---- reductions ----

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t ndim, std::string_view operation) {
  std::vector<int64_t> result;
  if (axes.empty()) {
    result.resize(static_cast<size_t>(ndim));
    std::iota(result.begin(), result.end(), 0);
    return result;
  }
  for (int64_t axis : axes) {
    int64_t a = normalize_axis(axis, ndim, operation);
    if (std::find(result.begin(), result.end(), a) != result.end())
      throw UserError(str_cat(operation, ": axis ", axis, " is listed twice"));
    result.push_back(a);
  }
  std::sort(result.begin(), result.end());
  return result;
}

namespace {
// A maximum of a whole tensor of known size, at least this many elements, runs in two steps.
constexpr int64_t kSplitWholeMaximum = int64_t{1} << 16;

// max over every element of `t` (numel ≥ kSplitWholeMaximum) as the max of the maxima of P equal
// parts: the parts are P outputs that threads share, where one output was a loop on one thread
// (DynamicQuantizeLinear's range of an activation). A maximum is exact in any order. Undefined
// where no P of 64, 32, 16 or 8 divides the count.
Tensor whole_maximum_in_parts(const Tensor& t) {
  const int64_t count = t.numel();
  for (int64_t parts : {64, 32, 16, 8}) {
    if (count % parts != 0) continue;
    Tensor rows = t.reshape({parts, count / parts});
    return reduce(reduce(rows, Ops::MAX, {1}, false, "max"), Ops::MAX, {0}, false, "max");
  }
  return Tensor();
}
}  // namespace

Tensor reduce(const Tensor& t, Ops op, const std::vector<int64_t>& axes, bool keepdim, std::string_view operation) {
  require_defined(t);
  std::vector<int64_t> reduced = normalize_axes(axes, t.ndim(), operation);
  if (op == Ops::MAX && reduced.size() == static_cast<size_t>(t.ndim()) && t.ndim() >= 1 && !has_symbolic_shape(t) &&
      t.numel() >= kSplitWholeMaximum)
    if (Tensor parts = whole_maximum_in_parts(t); parts.defined()) {
      if (!keepdim) return parts;
      return parts.reshape(Shape(static_cast<size_t>(t.ndim()), 1));
    }
  Dims kept = dims_of(t);
  for (int64_t axis : reduced) kept[static_cast<size_t>(axis)] = 1;
  Tensor result;
  if (reduced.empty()) {
    result = t;
  } else {
    std::vector<int64_t> arg{static_cast<int64_t>(op)};
    arg.insert(arg.end(), reduced.begin(), reduced.end());
    UOpPtr node = UOp::make(Ops::REDUCE_AXIS, t.data().dtype, {t.data().node}, arg);
    result = make_tensor_dims(node, kept, t.data().dtype, {&t});
  }
  if (keepdim) return result;
  Dims squeezed;
  for (size_t i = 0; i < kept.size(); ++i)
    if (std::find(reduced.begin(), reduced.end(), static_cast<int64_t>(i)) == reduced.end()) squeezed.push_back(kept[i]);
  return reshape_to(result, squeezed);
}

namespace {
// Accumulation type of sum and prod: half floats accumulate in f32 (rounded once at the end), bool
// counts as i64 like numpy; other types keep their own.
DType accumulation_type(DType type) {
  if (type.is_narrow_float()) return dtypes::f32;
  if (type.is_bool()) return dtypes::i64;
  return type;
}
}  // namespace

Tensor Tensor::sum(std::vector<int64_t> axes, bool keepdim) const {
  DType type = data().dtype, acc = accumulation_type(type);
  Tensor result = reduce(cast(acc.scalar()), Ops::ADD, axes, keepdim, "sum");
  return type.is_bool() ? result : result.cast(type.scalar());
}
Tensor Tensor::prod(std::vector<int64_t> axes, bool keepdim) const {
  DType type = data().dtype, acc = accumulation_type(type);
  Tensor result = reduce(cast(acc.scalar()), Ops::MUL, axes, keepdim, "prod");
  return type.is_bool() ? result : result.cast(type.scalar());
}
Tensor Tensor::max(std::vector<int64_t> axes, bool keepdim) const {
  if (data().dtype.is_bool()) return cast(ScalarType::UInt8).max(axes, keepdim).cast(ScalarType::Bool);
  return reduce(*this, Ops::MAX, axes, keepdim, "max");
}
Tensor Tensor::min(std::vector<int64_t> axes, bool keepdim) const {
  DType type = data().dtype;
  // min(x) = -max(-x) for floats; for integers ~max(~x), which is exact for every value.
  if (type.is_float()) return reduce(neg(), Ops::MAX, axes, keepdim, "min").neg();
  if (type.is_bool()) return logical_not().max(axes, keepdim).logical_not();
  return reduce(bitwise_not(), Ops::MAX, axes, keepdim, "min").bitwise_not();
}
Tensor Tensor::mean(std::vector<int64_t> axes, bool keepdim) const {
  std::vector<int64_t> reduced = normalize_axes(axes, ndim(), "mean");
  Dim count = 1;
  for (int64_t axis : reduced) count = count * dim_of(*this, axis);
  Tensor x = as_float(*this);
  Tensor total = x.sum(reduced, keepdim);
  // An empty reduction gives NaN, like numpy (0/0).
  if (!count.is_known()) return total.div(dim_tensor(count, total.dtype()));
  return total.div(scalar_like(total, static_cast<double>(count.value())));
}

// ---- movement primitives ----

Tensor Tensor::reshape(Shape new_shape) const {
  require_defined(*this);
  if (has_symbolic_shape(*this)) return reshape_to(*this, to_dims(new_shape));
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < new_shape.size(); ++i) {
    if (new_shape[i] == -1) {
      if (inferred >= 0) throw UserError(str_cat("reshape: more than one -1 in ", shape_string(new_shape)));
      inferred = static_cast<int64_t>(i);
    } else if (new_shape[i] < 0) {
      throw UserError(str_cat("reshape: negative dimension in ", shape_string(new_shape)));
    } else if (__builtin_mul_overflow(known, new_shape[i], &known)) {
      // Checked: a wrapped product could match numel() and let a shape of 2^66 elements through.
      throw UserError(str_cat("reshape: ", shape_string(new_shape), " has more elements than fit in 64 bits"));
    }
  }
  if (inferred >= 0) {
    if (known == 0 || numel() % known != 0)
      throw UserError(str_cat("reshape: cannot infer -1 reshaping ", shape_string(shape()), " to ", shape_string(new_shape)));
    new_shape[static_cast<size_t>(inferred)] = numel() / known;
  }
  if (shape_numel(new_shape) != numel())
    throw UserError(str_cat("reshape: ", shape_string(shape()), " has ", numel(), " elements, ", shape_string(new_shape),
                            " has ", shape_numel(new_shape)));
  if (new_shape == shape()) return *this;
  return make_tensor(movement(Ops::RESHAPE, data().node, new_shape), new_shape, data().dtype, {this});
}

namespace {

// The size a -1 at `position` of `shape` stands for when reshaping `dims`: the element count over
// the other sizes, with equal symbolic factors cancelled first ((batch, sequence, 2, 8) to (batch,
// sequence, -1) gives 16, where batch·sequence·16 / (batch·sequence) does not simplify).
Dim inferred_dim(const Dims& dims, const Dims& shape, std::ptrdiff_t position) {
  Dims numerator = dims, denominator;
  for (size_t i = 0; i < shape.size(); ++i)
    if (static_cast<std::ptrdiff_t>(i) != position) denominator.push_back(shape[i]);
  for (auto factor = denominator.begin(); factor != denominator.end();) {
    auto match = factor->is_known() ? numerator.end() : std::find(numerator.begin(), numerator.end(), *factor);
    if (match == numerator.end()) {
      ++factor;
      continue;
    }
    numerator.erase(match);
    factor = denominator.erase(factor);
  }
  return dims_numel(numerator) / dims_numel(denominator);
}

}  // namespace

Tensor reshape_to(const Tensor& t, const Dims& shape) {
  require_defined(t);
  if (!has_symbolic_shape(t) && all_known(shape)) return t.reshape(known_sizes(shape));
  Dims dims = dims_of(t);
  // A -1 takes what the other sizes leave of the element count (which may be symbolic).
  auto inferred = std::find_if(shape.begin(), shape.end(), [](const Dim& size) { return size.is(-1); });
  if (inferred != shape.end()) {
    Dim known = 1;
    for (auto size = shape.begin(); size != shape.end(); ++size)
      if (size != inferred) known = known * *size;
    if (known.is(0) || std::count_if(shape.begin(), shape.end(), [](const Dim& size) { return size.is(-1); }) > 1)
      throw UserError(str_cat("reshape: cannot infer -1 reshaping ", dims_string(dims), " to ", dims_string(shape)));
    Dims resolved = shape;
    resolved[static_cast<size_t>(inferred - shape.begin())] = inferred_dim(dims, shape, inferred - shape.begin());
    return reshape_to(t, resolved);
  }
  for (const Dim& size : shape)
    if (size.min() < 0) throw UserError(str_cat("reshape: negative dimension in ", dims_string(shape)));
  // Equal counts must simplify to one expression: (batch·seq, 8) → (batch, seq·8) does, sizes that
  // agree only for some values of the variables do not and are refused.
  if (!(dims_numel(dims) == dims_numel(shape)))
    throw UserError(str_cat("reshape: ", dims_string(dims), " has ", dims_numel(dims).text(), " elements, ",
                            dims_string(shape), " has ", dims_numel(shape).text()));
  if (dims == shape) return t;
  return make_tensor_dims(movement(Ops::RESHAPE, t.data().node, encode_dims(shape)), shape, t.data().dtype, {&t});
}

Tensor Tensor::permute(std::vector<int64_t> order) const {
  require_defined(*this);
  if (static_cast<int64_t>(order.size()) != ndim())
    throw UserError(str_cat("permute: order has ", order.size(), " axes, tensor has ", ndim()));
  std::vector<bool> seen(order.size());
  Dims out;
  for (int64_t& axis : order) {
    axis = normalize_axis(axis, ndim(), "permute");
    if (seen[static_cast<size_t>(axis)]) throw UserError(str_cat("permute: axis ", axis, " appears twice"));
    seen[static_cast<size_t>(axis)] = true;
    out.push_back(dim_of(*this, axis));
  }
  // A permute of a permute is one permute (and none when they cancel), so x.T.T is x itself.
  UOpPtr source = data().node;
  if (source->op() == Ops::PERMUTE) {
    const auto& inner = source->arg_list();
    for (int64_t& axis : order) axis = inner[static_cast<size_t>(axis)];
    source = source->src(0);
  }
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == static_cast<int64_t>(i);
  if (identity) return make_tensor_dims(source, out, data().dtype, {this});
  return make_tensor_dims(movement(Ops::PERMUTE, source, order), out, data().dtype, {this});
}

Tensor Tensor::expand(Shape new_shape) const {
  require_defined(*this);
  if (has_symbolic_shape(*this)) {
    Dims dims = dims_of(*this), target = to_dims(new_shape);
    size_t offset = target.size() >= dims.size() ? target.size() - dims.size() : 0;
    for (size_t i = offset; i < target.size(); ++i)
      if (new_shape[i] == -1) target[i] = dims[i - offset];
    return expand_to(*this, target);
  }
  if (new_shape.size() > shape().size()) {
    Shape padded(new_shape.size() - shape().size(), 1);
    padded.insert(padded.end(), shape().begin(), shape().end());
    return reshape(padded).expand(new_shape);
  }
  if (new_shape.size() != shape().size())
    throw UserError(str_cat("expand: cannot broadcast ", shape_string(shape()), " to ", shape_string(new_shape)));
  for (size_t i = 0; i < new_shape.size(); ++i) {
    if (new_shape[i] == -1) new_shape[i] = shape()[i];
    if (shape()[i] != new_shape[i] && shape()[i] != 1)
      throw UserError(str_cat("expand: cannot broadcast ", shape_string(shape()), " to ", shape_string(new_shape)));
  }
  if (new_shape == shape()) return *this;
  return make_tensor(movement(Ops::EXPAND, data().node, new_shape), new_shape, data().dtype, {this});
}

Tensor expand_to(const Tensor& t, const Dims& shape) {
  require_defined(t);
  if (!has_symbolic_shape(t) && all_known(shape)) return t.expand(known_sizes(shape));
  Dims dims = dims_of(t);
  if (shape.size() > dims.size()) {
    Dims padded(shape.size() - dims.size(), 1);
    padded.insert(padded.end(), dims.begin(), dims.end());
    return expand_to(reshape_to(t, padded), shape);
  }
  if (shape.size() != dims.size())
    throw UserError(str_cat("expand: cannot broadcast ", dims_string(dims), " to ", dims_string(shape)));
  for (size_t i = 0; i < shape.size(); ++i)
    if (!(dims[i] == shape[i]) && !dims[i].is(1))
      throw UserError(str_cat("expand: cannot broadcast ", dims_string(dims), " to ", dims_string(shape)));
  if (dims == shape) return t;
  return make_tensor_dims(movement(Ops::EXPAND, t.data().node, encode_dims(shape)), shape, t.data().dtype, {&t});
}

// Zero padding, the primitive behind pad(): negative pads are not allowed here.
Tensor pad_zero(const Tensor& t, const std::vector<int64_t>& pads) { return pad_zero_dims(t, to_dims(pads)); }

Tensor pad_zero_dims(const Tensor& t, const Dims& pads) {
  Dims full(2 * static_cast<size_t>(t.ndim()), 0);
  for (size_t i = 0; i < pads.size(); ++i) {
    if (pads[i].min() < 0) throw InternalError("pad_zero: negative pad", std::source_location::current());
    full[i] = pads[i];
  }
  if (std::all_of(full.begin(), full.end(), [](const Dim& p) { return p.is(0); })) return t;
  Dims out = dims_of(t);
  for (size_t i = 0; i < out.size(); ++i) out[i] = out[i] + full[2 * i] + full[2 * i + 1];
  return make_tensor_dims(movement(Ops::PAD, t.data().node, encode_dims(full)), out, t.data().dtype, {&t});
}

Tensor Tensor::shrink(std::vector<std::pair<int64_t, int64_t>> ranges) const {
  require_defined(*this);
  if (static_cast<int64_t>(ranges.size()) > ndim())
    throw UserError(str_cat("shrink: ", ranges.size(), " ranges for a tensor with ", ndim(), " dimensions"));
  Dims dims = dims_of(*this);
  DimRanges full;
  for (size_t i = 0; i < dims.size(); ++i)
    full.emplace_back(i < ranges.size() ? std::pair<Dim, Dim>{ranges[i].first, ranges[i].second} : std::pair<Dim, Dim>{0, dims[i]});
  return shrink_to(*this, full);
}

Tensor reshape_within(const Tensor& t, const Dims& shape) {
  require_defined(t);
  if (!has_symbolic_shape(t) && all_known(shape)) return t.reshape(known_sizes(shape));
  return make_tensor_dims(movement(Ops::RESHAPE, t.data().node, encode_dims(shape)), shape, t.data().dtype, {&t});
}

Tensor shrink_within(const Tensor& t, const DimRanges& ranges) {
  require_defined(t);
  Dims out = dims_of(t);
  KILN_ASSERT(ranges.size() == out.size(), "shrink_within: one range per axis");
  std::vector<int64_t> arg;
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& [begin, end] = ranges[i];
    KILN_ASSERT(begin.is_known() && begin.value() >= 0 && end.min() >= begin.value(), "shrink_within: range [", begin,
                ", ", end, ") of axis ", i);
    arg.push_back(begin.value());
    arg.push_back(encode_dim(end));
    out[i] = end - begin;
  }
  return make_tensor_dims(movement(Ops::SHRINK, t.data().node, arg), out, t.data().dtype, {&t});
}

Tensor shrink_to(const Tensor& t, const DimRanges& ranges) {
  require_defined(t);
  Dims out = dims_of(t);
  KILN_ASSERT(ranges.size() == out.size(), "shrink_to: one range per axis");
  std::vector<int64_t> arg;
  bool identity = true;
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& [begin, end] = ranges[i];
    const Dim& size = out[i];
    if (begin.is(0) && end == size) {  // the whole axis, symbolic or not
      arg.push_back(0);
      arg.push_back(encode_dim(size));
      continue;
    }
    // A known axis may end at a symbolic size that it always holds: the first `sequence` rows of
    // a table of positions. Its begin stays known, so the view's index is still a constant shift.
    if (size.is_known() && begin.is_known() && !end.is_known()) {
      int64_t first = begin.value();
      if (first < 0 || end.min() < first || end.max() > size.value())
        throw UserError(str_cat("unsupported: shrink range [", first, ", ", end, ") of axis ", i, " of size ", size,
                                ": the end must lie in [", first, ", ", size, "] for every value of the variables"));
      arg.push_back(first);
      arg.push_back(encode_dim(end));
      identity = false;
      out[i] = end - first;
      continue;
    }
    // A symbolic axis takes a fixed range that fits its smallest size (the first token of every
    // sentence); a range that depends on its size would need symbolic bounds.
    if (!begin.is_known() || !end.is_known())
      throw UserError(str_cat("unsupported: shrink range [", begin, ", ", end, ") of axis ", i, " of size ", size,
                              " (a symbolic range)"));
    int64_t first = begin.value(), last = end.value();
    if (!size.is_known() && (first < 0 || last < first || last > size.min()))
      throw UserError(str_cat("unsupported: shrink range [", first, ", ", last, ") of axis ", i, " of symbolic size ", size,
                              ", which may be as small as ", size.min()));
    if (size.is_known() && (first < 0 || last < first || last > size.value()))
      throw UserError(str_cat("shrink: range [", first, ", ", last, ") does not fit axis ", i, " of size ", size));
    arg.push_back(first);
    arg.push_back(last);
    identity = identity && first == 0 && size.is(last);
    out[i] = last - first;
  }
  if (identity) return t;
  return make_tensor_dims(movement(Ops::SHRINK, t.data().node, arg), out, t.data().dtype, {&t});
}

Tensor Tensor::flip(std::vector<int64_t> axes) const {
  require_defined(*this);
  std::vector<int64_t> normalized = normalize_axes(axes.empty() ? std::vector<int64_t>{} : axes, ndim(), "flip");
  if (axes.empty()) return *this;
  return make_tensor_dims(movement(Ops::FLIP, data().node, normalized), dims_of(*this), data().dtype, {this});
}

Tensor contiguous(const Tensor& t) {
  return make_tensor_dims(UOp::make(Ops::CONTIGUOUS, t.data().dtype, {t.data().node}), dims_of(t), t.data().dtype, {&t});
}

Tensor rounded_stand_in(const Tensor& bits) {
  return make_tensor_dims(UOp::make(Ops::CONTIGUOUS, bits.data().dtype, {bits.data().node}, std::string(kRoundedStandIn)),
                          dims_of(bits), bits.data().dtype, {&bits});
}

// ---- operators ----

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator-(const Tensor& a) { return a.neg(); }
Tensor operator+(const Tensor& a, double b) { return a.add(scalar_like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return a.sub(scalar_like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return a.mul(scalar_like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return a.div(scalar_like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return scalar_like(b, a).add(b); }
Tensor operator-(double a, const Tensor& b) { return scalar_like(b, a).sub(b); }
Tensor operator*(double a, const Tensor& b) { return scalar_like(b, a).mul(b); }
Tensor operator/(double a, const Tensor& b) { return scalar_like(b, a).div(b); }

std::string scalar_type_name(ScalarType type) { return DType(type).name(); }
int scalar_type_size(ScalarType type) { return DType(type).scalar_bytes(); }

}  // namespace kiln
