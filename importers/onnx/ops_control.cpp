// ONNX control flow and the values it passes around: If, Loop and Scan (their bodies are built
// through OnnxNode::run_graph with the outer values in scope), sequences (Sequence*,
// SplitToSequence, ConcatFromSequence, SequenceMap), optionals (Optional*) and Identity on them.
//
// Decision: control flow is resolved while the model is built. kiln's Tensors are lazy but always
// computable (run() binds concrete inputs), so an If's condition, a Loop's trip count and its
// per-iteration condition are realized like any shape input (OnnxNode::input_ints does the same):
// If builds only the branch taken; Loop and Scan unroll their bodies, realizing each iteration's
// results (see realize_iteration). This costs one small realization per decision or iteration
// (capped, see kMaxIterations), and it keeps every value a plain Tensor: no device-side control
// flow is needed. A value that cannot be computed at build time is an error naming what had to be
// known.
#include <algorithm>

#include "onnx/onnx_pb.h"
#include "op_helpers.h"
#include "op_registry.h"
#include "run_time_if.h"
#include "support/error.h"
#include "support/limits.h"
#include "tensor/tensor_internal.h"

namespace kiln::onnx_import {
namespace {

using Values = std::vector<OnnxValue>;

// Loops are unrolled into the graph, at most limits::kMaxLoopIterations times.
constexpr int64_t kMaxIterations = limits::kMaxLoopIterations;

// Realizes a one-element tensor whose value steers the build (a condition, a count).
double build_time_scalar(const OnnxNode& node, const Tensor& value, const std::string& what) {
  if (value.numel() != 1)
    node.fail(str_cat(what, " must hold exactly one value, it has ", value.numel()));
  try {
    return value.item();
  } catch (const Error& error) {
    node.fail(str_cat(what, " decides how the graph is built, so it must be computable at build time: ", error.what()));
  }
}

bool build_time_bool(const OnnxNode& node, const Tensor& value, const std::string& what) {
  return build_time_scalar(node, value.cast(ScalarType::Bool), what) != 0.0;
}

int64_t build_time_int(const OnnxNode& node, const Tensor& value, const std::string& what) {
  if (is_floating(value.dtype())) node.fail(str_cat(what, " must be an integer tensor, not ", scalar_type_name(value.dtype())));
  if (value.numel() != 1) node.fail(str_cat(what, " must hold exactly one value, it has ", value.numel()));
  try {
    return value.to_vector<int64_t>().front();
  } catch (const Error& error) {
    node.fail(str_cat(what, " decides how the graph is built, so it must be computable at build time: ", error.what()));
  }
}

std::string shape_string(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += str_cat(i ? ", " : "", shape[i]);
  return text + ")";
}

Tensor int64_scalar(int64_t value) { return Tensor::from_vector<int64_t>({value}, {}); }
Tensor bool_scalar(bool value) { return Tensor::full({}, value ? 1.0 : 0.0, ScalarType::Bool); }

const Tensor& tensor_output(const OnnxNode& node, const OnnxValue& value, const std::string& what) {
  if (!value.is_tensor()) node.fail(str_cat(what, " must be a tensor, not a ", value.kind_name()));
  return value.tensor();
}

// Concatenates many parts as a tree of small concatenations: Tensor::concat of n parts is an n-deep
// chain of pads, which costs quadratic time to schedule and compile for the hundreds of slices a
// long loop leaves; a tree keeps every part log(n) pads deep.
Tensor concat_tree(std::vector<Tensor> parts, int64_t axis) {
  constexpr size_t kFanIn = 8;
  while (parts.size() > kFanIn) {
    std::vector<Tensor> groups;
    for (size_t begin = 0; begin < parts.size(); begin += kFanIn) {
      const size_t end = std::min(parts.size(), begin + kFanIn);
      groups.push_back(Tensor::concat({parts.begin() + static_cast<std::ptrdiff_t>(begin),
                                       parts.begin() + static_cast<std::ptrdiff_t>(end)},
                                      axis));
    }
    parts = std::move(groups);
  }
  return Tensor::concat(parts, axis);
}

// Per-iteration tensors stacked along a new axis `axis`. With no iterations there is nothing to
// stack; the body's declared output type then gives the dtype and the other dimensions.
Tensor stack_iterations(const OnnxNode& node, const std::vector<Tensor>& slices, int64_t axis,
                        const onnx::ValueInfoProto& declared) {
  if (!slices.empty()) {
    const int64_t new_axis = normalize_axis(node, axis, slices.front().ndim() + 1);
    std::vector<Tensor> parts;
    for (const Tensor& slice : slices) {
      if (slice.shape() != slices.front().shape())
        node.fail(str_cat("the iterations' scan outputs differ in shape (", shape_string(slice.shape()), " and ",
                          shape_string(slices.front().shape()), "); they cannot be stacked"));
      parts.push_back(slice.unsqueeze(new_axis));
    }
    return concat_tree(std::move(parts), new_axis);
  }
  const auto& type = declared.type().tensor_type();
  if (!declared.type().has_tensor_type() || type.elem_type() == onnx::TensorProto_DataType_UNDEFINED ||
      !type.has_shape())
    node.fail(str_cat("the body ran no iteration and its output '", declared.name(),
                      "' declares no dtype and shape, so the empty scan output's type is unknown"));
  Shape shape;
  for (const auto& dim : type.shape().dim()) {
    if (!dim.has_dim_value())
      node.fail(str_cat("the body ran no iteration and its output '", declared.name(),
                        "' has a symbolic dimension, so the empty scan output's shape is unknown"));
    shape.push_back(dim.dim_value());
  }
  shape.insert(shape.begin() + normalize_axis(node, axis, static_cast<int64_t>(shape.size()) + 1), 0);
  return Tensor::zeros(shape, scalar_type_from_onnx(type.elem_type()));
}

// Realizes what one iteration hands to the next (loop-carried values, scan slices). Left lazy,
// iteration k's values would be expressions k iterations deep, and every scan output would inline
// its own copy of that chain when stacked (quadratic work); realized, each iteration is one small
// schedule whose kernels the kernel cache reuses from the second iteration on.
void realize_iteration(Values& carried, std::vector<std::vector<Tensor>>& collected) {
  std::vector<Tensor*> tensors;
  for (OnnxValue& value : carried) value.collect_tensors(tensors);
  for (auto& slices : collected)
    if (!slices.empty()) tensors.push_back(&slices.back());
  Tensor::realize_all(tensors);
}

// ---- If ----

Values if_op(const OnnxNode& node) {
  // A condition that reads a plan's input or sizes the run decides selects at run time.
  if (decided_when_plan_runs(node.input(0))) return run_time_if(node, node.input(0));
  const bool condition = build_time_bool(node, node.input(0), "the condition");
  const onnx::GraphProto& branch = node.attr_graph(condition ? "then_branch" : "else_branch");
  Values outputs = node.run_graph(branch, {});
  if (outputs.size() != node.output_count())
    node.fail(str_cat("the ", condition ? "then" : "else", " branch has ", outputs.size(), " outputs but the node has ",
                      node.output_count()));
  return outputs;
}

// ---- Loop ----

// Loop's inputs (M, cond, v_initial...) drive `for (i = 0; i < M && cond; ++i)`; either bound may
// be left out. The body maps (i, cond, v...) to (cond, v..., scan outputs...); scan outputs are
// stacked along a new first axis.
Values loop_op(const OnnxNode& node) {
  const onnx::GraphProto& body = node.attr_graph("body");
  std::optional<int64_t> trip_count;
  if (node.has_input(0)) trip_count = build_time_int(node, node.input(0), "the trip count M");
  const bool has_condition = node.has_input(1);
  bool keep_going = !has_condition || build_time_bool(node, node.input(1), "the loop condition");
  if (!trip_count && !has_condition)
    node.fail("a Loop with neither a trip count nor a condition never ends");

  Values carried;
  for (size_t i = 2; i < node.input_count(); ++i) carried.push_back(node.input_value(i));
  const size_t carried_count = carried.size();
  const size_t body_outputs = static_cast<size_t>(body.output_size());
  if (body_outputs < 1 + carried_count)
    node.fail(str_cat("the body has ", body_outputs, " outputs; it needs the condition and the ", carried_count,
                      " loop-carried values"));
  const size_t scan_count = body_outputs - 1 - carried_count;
  std::vector<std::vector<Tensor>> scans(scan_count);

  for (int64_t iteration = 0; keep_going && (!trip_count || iteration < *trip_count); ++iteration) {
    if (iteration >= kMaxIterations)
      node.fail(str_cat("the loop runs more than ", kMaxIterations,
                        " iterations; kiln unrolls loops when it builds the model and stops there (docs/limits.md)"));
    Values body_inputs{int64_scalar(iteration), bool_scalar(keep_going)};
    body_inputs.insert(body_inputs.end(), carried.begin(), carried.end());
    Values outputs = node.run_graph(body, body_inputs);
    // Without a condition input the body's condition output is ignored (a plain for loop).
    if (has_condition)
      keep_going = build_time_bool(node, tensor_output(node, outputs[0], "the body's condition"), "the body's condition");
    std::copy(outputs.begin() + 1, outputs.begin() + 1 + static_cast<std::ptrdiff_t>(carried_count), carried.begin());
    for (size_t s = 0; s < scan_count; ++s)
      scans[s].push_back(tensor_output(node, outputs[1 + carried_count + s], "a scan output"));
    realize_iteration(carried, scans);
  }

  Values results = carried;
  for (size_t s = 0; s < scan_count; ++s)
    results.emplace_back(stack_iterations(node, scans[s], 0, body.output(static_cast<int>(1 + carried_count + s))));
  return results;
}

// ---- Scan ----

// How a Scan walks its scan inputs and lays out its scan outputs (opset 9's attributes; opset 8
// is expressed with them per batch element).
struct ScanLayout {
  std::vector<int64_t> input_axes, input_reversed, output_axes, output_reversed;
};

// One scan: the body maps (states..., one slice of each scan input) to (states..., scan output
// slices...), over the scan axis of the inputs.
Values scan_once(const OnnxNode& node, const onnx::GraphProto& body, Values states, const std::vector<Tensor>& inputs,
                 const ScanLayout& layout) {
  const size_t state_count = states.size();
  if (static_cast<size_t>(body.output_size()) < state_count)
    node.fail(str_cat("the body has ", body.output_size(), " outputs but the scan has ", state_count, " states"));
  const size_t output_count = static_cast<size_t>(body.output_size()) - state_count;

  std::vector<int64_t> axes;
  int64_t length = -1;
  for (size_t j = 0; j < inputs.size(); ++j) {
    axes.push_back(normalize_axis(node, layout.input_axes[j], inputs[j].ndim()));
    const int64_t size = inputs[j].dim(axes[j]);
    if (length >= 0 && size != length)
      node.fail(str_cat("scan input ", j, " has ", size, " steps along its scan axis but scan input 0 has ", length));
    length = size;
  }
  if (length < 0) node.fail("Scan needs at least one scan input (num_scan_inputs >= 1)");

  std::vector<std::vector<Tensor>> collected(output_count);
  for (int64_t step = 0; step < length; ++step) {
    Values body_inputs = states;
    for (size_t j = 0; j < inputs.size(); ++j) {
      const int64_t index = layout.input_reversed[j] ? length - 1 - step : step;
      body_inputs.emplace_back(inputs[j].slice(axes[j], index, index + 1).squeeze({axes[j]}));
    }
    Values outputs = node.run_graph(body, body_inputs);
    std::copy(outputs.begin(), outputs.begin() + static_cast<std::ptrdiff_t>(state_count), states.begin());
    for (size_t k = 0; k < output_count; ++k)
      collected[k].push_back(tensor_output(node, outputs[state_count + k], "a scan output"));
    realize_iteration(states, collected);
  }

  Values results = states;
  for (size_t k = 0; k < output_count; ++k) {
    // A reversed scan output holds the last iteration's value first.
    if (layout.output_reversed[k]) std::reverse(collected[k].begin(), collected[k].end());
    results.emplace_back(stack_iterations(node, collected[k], layout.output_axes[k],
                                          body.output(static_cast<int>(state_count + k))));
  }
  return results;
}

// An int-list attribute with one entry per scan input or output, all zero when left out.
std::vector<int64_t> per_value_ints(const OnnxNode& node, const std::string& name, size_t count) {
  std::vector<int64_t> values = node.attr_ints(name, std::vector<int64_t>(count, 0));
  if (values.size() != count)
    node.fail(str_cat("attribute '", name, "' has ", values.size(), " entries, expected ", count));
  return values;
}

// Opset 9+: no batch axis; scan axes and directions per input and output.
Values scan9_op(const OnnxNode& node) {
  const onnx::GraphProto& body = node.attr_graph("body");
  const int64_t scan_inputs = node.attr_int("num_scan_inputs");
  if (scan_inputs < 1 || static_cast<size_t>(scan_inputs) > node.input_count())
    node.fail(str_cat("num_scan_inputs is ", scan_inputs, " but the node has ", node.input_count(), " inputs"));
  const size_t state_count = node.input_count() - static_cast<size_t>(scan_inputs);
  Values states;
  for (size_t i = 0; i < state_count; ++i) states.push_back(node.input_value(i));
  std::vector<Tensor> inputs;
  for (size_t i = state_count; i < node.input_count(); ++i) inputs.push_back(node.input(i));
  const size_t output_count = static_cast<size_t>(std::max<int64_t>(0, body.output_size() - static_cast<int64_t>(state_count)));

  ScanLayout layout;
  layout.input_axes = per_value_ints(node, "scan_input_axes", inputs.size());
  layout.input_reversed = per_value_ints(node, "scan_input_directions", inputs.size());
  layout.output_axes = per_value_ints(node, "scan_output_axes", output_count);
  layout.output_reversed = per_value_ints(node, "scan_output_directions", output_count);
  return scan_once(node, body, std::move(states), inputs, layout);
}

// Opset 8: every state and scan input has a batch axis first (scan inputs then their scan axis);
// each batch element is scanned on its own and the results are stacked back.
Values scan8_op(const OnnxNode& node) {
  const onnx::GraphProto& body = node.attr_graph("body");
  const int64_t scan_inputs = node.attr_int("num_scan_inputs");
  if (scan_inputs < 1 || static_cast<size_t>(scan_inputs) + 1 > node.input_count())
    node.fail(str_cat("num_scan_inputs is ", scan_inputs, " but the node has ", node.input_count(), " inputs"));
  const size_t first_scan = node.input_count() - static_cast<size_t>(scan_inputs);
  std::vector<Tensor> batched;  // states, then scan inputs
  for (size_t i = 1; i < node.input_count(); ++i) batched.push_back(node.input(i));
  const size_t state_count = first_scan - 1;
  for (const Tensor& value : batched)
    if (value.ndim() < 1) node.fail("opset 8 Scan needs a batch axis on every state and scan input");
  const int64_t batch = batched.front().dim(0);
  for (const Tensor& value : batched)
    if (value.dim(0) != batch) node.fail(str_cat("batch sizes differ: ", value.dim(0), " and ", batch));
  for (size_t i = state_count; i < batched.size(); ++i)
    if (batched[i].ndim() < 2) node.fail("opset 8 Scan needs a batch and a sequence axis on every scan input");
  if (node.has_input(0)) {
    // Shorter sequences would need padded scan outputs; only the full length is supported.
    const int64_t length = batched[state_count].dim(1);
    for (int64_t value : node.input_ints(0))
      if (value != length)
        node.fail(str_cat("unsupported: sequence_lens ", value, " shorter than the sequence axis (", length, ")"));
  }
  const size_t output_count = static_cast<size_t>(std::max<int64_t>(0, body.output_size() - static_cast<int64_t>(state_count)));
  ScanLayout layout;
  layout.input_axes.assign(static_cast<size_t>(scan_inputs), 0);
  layout.input_reversed = per_value_ints(node, "directions", static_cast<size_t>(scan_inputs));
  layout.output_axes.assign(output_count, 0);
  layout.output_reversed.assign(output_count, 0);

  std::vector<std::vector<Tensor>> per_batch(state_count + output_count);
  for (int64_t b = 0; b < batch; ++b) {
    Values states;
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < batched.size(); ++i) {
      Tensor element = batched[i].slice(0, b, b + 1).squeeze({0});
      if (i < state_count) states.emplace_back(element);
      else inputs.push_back(element);
    }
    Values results = scan_once(node, body, std::move(states), inputs, layout);
    for (size_t k = 0; k < results.size(); ++k) per_batch[k].push_back(tensor_output(node, results[k], "a Scan result"));
  }
  Values outputs;
  for (size_t k = 0; k < per_batch.size(); ++k)
    outputs.emplace_back(stack_iterations(node, per_batch[k], 0, body.output(static_cast<int>(k))));
  return outputs;
}

// ---- sequences ----

const OnnxValue& sequence_input(const OnnxNode& node, size_t i) {
  const OnnxValue& value = node.input_value(i);
  if (!value.is_sequence()) node.fail(str_cat("input ", i, " must be a sequence, not a ", value.kind_name()));
  return value;
}

// A position input in [-size, size - 1] (or up to `size` when inserting) → [0, size].
int64_t sequence_position(const OnnxNode& node, size_t input, int64_t size, bool may_be_end) {
  const int64_t position = build_time_int(node, node.input(input), "the position");
  const int64_t high = may_be_end ? size : size - 1;
  if (position < -size || position > high)
    node.fail(str_cat("position ", position, " is out of range for a sequence of ", size, " tensors"));
  return position < 0 ? position + size : position;
}

void check_element_type(const OnnxNode& node, const OnnxValue& sequence, const Tensor& tensor) {
  if (sequence.element_type() && *sequence.element_type() != tensor.dtype())
    node.fail(str_cat("a ", scalar_type_name(tensor.dtype()), " tensor cannot join a sequence of ",
                      scalar_type_name(*sequence.element_type()), " tensors"));
}

Values sequence_construct(const OnnxNode& node) {
  std::vector<Tensor> elements;
  for (size_t i = 0; i < node.input_count(); ++i) {
    elements.push_back(node.input(i));
    if (elements.back().dtype() != elements.front().dtype())
      node.fail(str_cat("input ", i, " is ", scalar_type_name(elements.back().dtype()), " but input 0 is ",
                        scalar_type_name(elements.front().dtype()), "; a sequence holds one dtype"));
  }
  if (elements.empty()) node.fail("SequenceConstruct needs at least one input");
  return {OnnxValue::sequence(std::move(elements))};
}

Values sequence_empty(const OnnxNode& node) {
  const ScalarType type = scalar_type_from_onnx(static_cast<int32_t>(node.attr_int("dtype", onnx::TensorProto_DataType_FLOAT)));
  return {OnnxValue::sequence({}, type)};
}

Values sequence_insert(const OnnxNode& node) {
  const OnnxValue& sequence = sequence_input(node, 0);
  const Tensor& tensor = node.input(1);
  check_element_type(node, sequence, tensor);
  std::vector<Tensor> elements = sequence.elements();
  const int64_t size = static_cast<int64_t>(elements.size());
  const int64_t position = node.has_input(2) ? sequence_position(node, 2, size, true) : size;
  elements.insert(elements.begin() + position, tensor);
  return {OnnxValue::sequence(std::move(elements), tensor.dtype())};
}

Values sequence_at(const OnnxNode& node) {
  const OnnxValue& sequence = sequence_input(node, 0);
  const int64_t position = sequence_position(node, 1, static_cast<int64_t>(sequence.elements().size()), false);
  return {sequence.elements()[static_cast<size_t>(position)]};
}

Values sequence_erase(const OnnxNode& node) {
  const OnnxValue& sequence = sequence_input(node, 0);
  std::vector<Tensor> elements = sequence.elements();
  const int64_t size = static_cast<int64_t>(elements.size());
  if (size == 0) node.fail("cannot erase from an empty sequence");
  const int64_t position = node.has_input(1) ? sequence_position(node, 1, size, false) : size - 1;
  elements.erase(elements.begin() + position);
  return {OnnxValue::sequence(std::move(elements), sequence.element_type())};
}

Values sequence_length(const OnnxNode& node) {
  return {int64_scalar(static_cast<int64_t>(sequence_input(node, 0).elements().size()))};
}

// Splits along `axis` into pieces of the given sizes (a list), of one size (a scalar: the last
// piece may be shorter), or of size 1 (no split input; keepdims=0 then drops the axis).
Values split_to_sequence(const OnnxNode& node) {
  const Tensor& input = node.input(0);
  const int64_t axis = normalize_axis(node, node.attr_int("axis", 0), input.ndim());
  const int64_t extent = input.dim(axis);
  std::vector<int64_t> sizes;
  if (!node.has_input(1)) {
    sizes.assign(static_cast<size_t>(extent), 1);
  } else if (node.input(1).ndim() == 0) {
    const int64_t piece = node.input_ints(1).front();
    if (piece <= 0) node.fail(str_cat("split size ", piece, " must be positive"));
    for (int64_t begin = 0; begin < extent; begin += piece) sizes.push_back(std::min(piece, extent - begin));
  } else {
    sizes = node.input_ints(1);
    int64_t total = 0;
    for (int64_t size : sizes) {
      if (size < 0) node.fail(str_cat("split size ", size, " is negative"));
      total += size;
    }
    if (total != extent)
      node.fail(str_cat("split sizes add up to ", total, " but axis ", axis, " has ", extent, " elements"));
  }
  std::vector<Tensor> pieces = sizes.empty() ? std::vector<Tensor>{} : input.split(sizes, axis);
  if (!node.has_input(1) && node.attr_int("keepdims", 1) == 0)
    for (Tensor& piece : pieces) piece = piece.squeeze({axis});
  return {OnnxValue::sequence(std::move(pieces), input.dtype())};
}

Values concat_from_sequence(const OnnxNode& node) {
  const OnnxValue& sequence = sequence_input(node, 0);
  const std::vector<Tensor>& elements = sequence.elements();
  if (elements.empty()) node.fail("cannot concatenate an empty sequence");
  const bool new_axis = node.attr_int("new_axis", 0) != 0;
  const int64_t rank = elements.front().ndim() + (new_axis ? 1 : 0);
  const int64_t axis = normalize_axis(node, node.attr_int("axis"), rank);
  std::vector<Tensor> parts;
  for (const Tensor& element : elements) {
    if (element.ndim() != elements.front().ndim())
      node.fail(str_cat("the sequence's tensors differ in rank (", shape_string(element.shape()), " and ",
                        shape_string(elements.front().shape()), ")"));
    parts.push_back(new_axis ? element.unsqueeze(axis) : element);
  }
  return {concat_tree(std::move(parts), axis)};
}

// Runs the body once per position of the input sequence; sequence inputs give it their element at
// that position, tensor inputs are passed whole. Each body output becomes a sequence.
Values sequence_map(const OnnxNode& node) {
  const onnx::GraphProto& body = node.attr_graph("body");
  const size_t length = sequence_input(node, 0).elements().size();
  for (size_t i = 1; i < node.input_count(); ++i) {
    const OnnxValue& value = node.input_value(i);
    if (value.is_sequence() && value.elements().size() != length)
      node.fail(str_cat("input ", i, " is a sequence of ", value.elements().size(), " tensors but input 0 has ", length));
    if (value.is_optional()) node.fail(str_cat("input ", i, " is an optional; SequenceMap takes tensors and sequences"));
  }
  std::vector<std::vector<Tensor>> collected(static_cast<size_t>(body.output_size()));
  for (size_t position = 0; position < length; ++position) {
    Values body_inputs;
    for (size_t i = 0; i < node.input_count(); ++i) {
      const OnnxValue& value = node.input_value(i);
      body_inputs.emplace_back(value.is_sequence() ? OnnxValue(value.elements()[position]) : value);
    }
    Values outputs = node.run_graph(body, body_inputs);
    for (size_t k = 0; k < outputs.size(); ++k) collected[k].push_back(tensor_output(node, outputs[k], "a body output"));
  }
  Values results;
  for (size_t k = 0; k < collected.size(); ++k) {
    // An empty result still knows its dtype when the body declares it.
    std::optional<ScalarType> type;
    const auto& declared = body.output(static_cast<int>(k)).type();
    if (declared.has_tensor_type() && declared.tensor_type().elem_type() != onnx::TensorProto_DataType_UNDEFINED)
      type = scalar_type_from_onnx(declared.tensor_type().elem_type());
    if (!collected[k].empty()) type = collected[k].front().dtype();
    results.push_back(OnnxValue::sequence(std::move(collected[k]), type));
  }
  return results;
}

// ---- optionals ----

Values optional_op(const OnnxNode& node) {
  if (node.has_input(0)) return {OnnxValue::optional(node.input_value(0))};
  // An empty optional must say what it would hold.
  const onnx::TypeProto& type = node.attr_type("type");
  if (!type.has_tensor_type() && !type.has_sequence_type())
    node.fail("unsupported: an empty optional of a type other than a tensor or a sequence");
  return {OnnxValue::optional(std::nullopt)};
}

// Opset 18 also takes a plain tensor or sequence (which has an element) or no input at all (which
// has none). Plain values are accepted at opset 15-17 too: a loop-carried optional becomes a plain
// sequence after the first iteration when the body returns one (ONNX's own test_loop16_seq_none
// does), and treating it as present is the only meaning it can have.
Values optional_has_element(const OnnxNode& node) {
  if (!node.has_input(0)) {
    if (node.opset() < 18) node.fail("input 0 is required before opset 18");
    return {bool_scalar(false)};
  }
  const OnnxValue& value = node.input_value(0);
  return {bool_scalar(!value.is_optional() || value.has_element())};
}

Values optional_get_element(const OnnxNode& node) {
  const OnnxValue& value = node.input_value(0);
  if (!value.is_optional()) return {value};
  if (!value.has_element()) node.fail("the optional input is empty");
  return {value.element()};
}

// Identity passes any value through (sequences since opset 14, optionals since 16; earlier opsets
// keep the tensor-only Identity of the elementwise family).
Values identity(const OnnxNode& node) { return {node.input_value(0)}; }

}  // namespace

void register_control_ops(OpRegistry& registry) {
  registry.add_value_op("If", if_op);
  registry.add_value_op("Loop", loop_op);
  registry.add_value_op("Scan", scan8_op, 8);
  registry.add_value_op("Scan", scan9_op, 9);
  registry.add_value_op("SequenceConstruct", sequence_construct, 11);
  registry.add_value_op("SequenceEmpty", sequence_empty, 11);
  registry.add_value_op("SequenceInsert", sequence_insert, 11);
  registry.add_value_op("SequenceAt", sequence_at, 11);
  registry.add_value_op("SequenceErase", sequence_erase, 11);
  registry.add_value_op("SequenceLength", sequence_length, 11);
  registry.add_value_op("SplitToSequence", split_to_sequence, 11);
  registry.add_value_op("ConcatFromSequence", concat_from_sequence, 11);
  registry.add_value_op("SequenceMap", sequence_map, 17);
  registry.add_value_op("Optional", optional_op, 15);
  registry.add_value_op("OptionalHasElement", optional_has_element, 15);
  registry.add_value_op("OptionalGetElement", optional_get_element, 15);
  registry.add_value_op("Identity", identity, 14);
}

}  // namespace kiln::onnx_import
