// Helpers shared by the files of src/tensor/: the primitives that composite operations build on,
// beyond the public Tensor methods.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/kiln.hpp"
#include "tensor/tensor_data.h"

namespace kiln {

DType to_dtype(ScalarType type);
std::string shape_string(const Shape& shape);
// `axis` in [-ndim, ndim) as a non-negative axis; a UserError naming `operation` otherwise.
int64_t normalize_axis(int64_t axis, int64_t ndim, std::string_view operation);
// Sorted, distinct, non-negative axes; an empty list means every axis.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t ndim, std::string_view operation);

// A tensor for `node`, keeping `inputs` (and so their buffers) alive.
Tensor make_tensor(UOpPtr node, Shape shape, DType dtype, std::vector<const Tensor*> inputs);
// The same for a shape that may be symbolic (docs/symbolic-shapes.md): known dims make a plain one.
Tensor make_tensor_dims(UOpPtr node, const Dims& dims, DType dtype, std::vector<const Tensor*> inputs);
// The shape as Dims, for symbolic tensors and others alike; whether a dim is symbolic; one axis.
Dims dims_of(const Tensor& t);
bool has_symbolic_shape(const Tensor& t);
Dim dim_of(const Tensor& t, int64_t axis);
// A scalar holding a size (a symbolic one is computed from the run's variables).
Tensor dim_tensor(const Dim& dim, ScalarType type);
// Tensor::arange(count, type) for a count that may be symbolic: 0, 1, …, count - 1.
Tensor arange_dim(const Dim& count, ScalarType type);
// shrink with one (begin, end) per axis, which may be symbolic: a whole axis is (0, its size), and
// a symbolic axis otherwise takes a fixed range within its smallest size.
using DimRanges = std::vector<std::pair<Dim, Dim>>;
Tensor shrink_to(const Tensor& t, const DimRanges& ranges);
// shrink_to for ranges whose caller has shown that each lies within its axis for every value of the
// variables, which shrink_to cannot prove from bounds alone (x[:, :-1] on a symbolic axis: the end
// is the axis' length less a constant). Begins must be known.
Tensor shrink_within(const Tensor& t, const DimRanges& ranges);
// reshape_to for a shape whose caller has shown that it holds t's element count for every value of
// the variables, where the simplifier writes the two products differently (a·8·h·2·w against
// a·8·(h·2)·w: an axis merged with a new one), so reshape_to's structural check cannot see it.
Tensor reshape_within(const Tensor& t, const Dims& shape);
// reshape and expand to shapes that may be symbolic (a -1 is inferred).
Tensor reshape_to(const Tensor& t, const Dims& shape);
Tensor expand_to(const Tensor& t, const Dims& shape);
// A tensor viewing `buffer` with the given shape (numel must match).
Tensor wrap_buffer(std::shared_ptr<HostBuffer> buffer, Shape shape);
// A placeholder for graph input `name` of a plan: a BUFFER node with no data. Building on it is
// lazy as usual; realizing anything that reads it throws a UserError naming the input.
Tensor graph_input(std::string name, Shape shape, ScalarType type);
// A placeholder whose shape may have size variables (dim.h, size_variable): the plan's inputs then
// decide the variables' values when it runs.
Tensor symbolic_graph_input(std::string name, const Dims& dims, ScalarType type);
// Whether computing `t` reads a graph_input placeholder (its value is then known only when the plan
// runs). Importers use it to choose run-time forms of ops whose structure depends on a value.
bool reads_graph_input(const Tensor& t);
// numpy broadcasting of two shapes. A symbolic dim broadcasts against 1 and against the same
// expression; against anything else it is a UserError naming `operation` (decision 1 of
// docs/symbolic-shapes.md), as are two known sizes that differ and are not 1.
Dims broadcast_shapes(const Dims& a, const Dims& b, std::string_view operation);
// numpy broadcast_to: prepends size-1 axes, then expands.
Tensor broadcast_to(const Tensor& t, const Shape& shape);
Tensor broadcast_to(const Tensor& t, const Dims& shape);
// One REDUCE_AXIS node (op ADD, MUL or MAX) in t's own dtype, without accumulation-type changes.
Tensor reduce(const Tensor& t, Ops op, const std::vector<int64_t>& axes, bool keepdim, std::string_view operation);
// Zero padding: (before, after) pairs for the first axes; every pad must be >= 0. A pad may be a
// symbolic size (a concatenation after a KV cache of any length).
Tensor pad_zero(const Tensor& t, const std::vector<int64_t>& pads);
Tensor pad_zero_dims(const Tensor& t, const Dims& pads);
// Compile-time constant folding (fold_constants.cpp): `outputs` with every weight-only value that
// run-time values read computed now and replaced by a buffer of its result. The run-time values
// are the graph_input placeholders and the buffers of `runtime_inputs` (tensors with data that
// stand for inputs, for running a folded graph in process exactly as its plan would); every other
// buffer with data is a constant. The plan writer stores the folded buffers as weights.
struct ConstantFoldReport {
  int values = 0;       // values folded
  int64_t bytes = 0;    // bytes of their results
};
// Folded values kept between folds of graphs over the same weights (a model run many times in
// process): a value whose node was folded before is reused, not computed again. Thread-safe.
struct ConstantFoldCache {
  std::mutex mutex;
  std::unordered_map<UOpPtr, Tensor, UOpPtrHash> values;
};
// With `keep_narrow_weights` (device plans), a weight-only value that is f16 or bf16 widened by a
// cast is folded narrow and widened in the kernels that read it (fold_constants.cpp).
std::vector<Tensor> fold_constants(const std::vector<Tensor>& outputs, const std::vector<Tensor>& runtime_inputs = {},
                                   ConstantFoldReport* report = nullptr, ConstantFoldCache* cache = nullptr,
                                   bool keep_narrow_weights = false);
// Realizes several tensors with one schedule (Tensor::realize and realize_all call this).
void realize_tensors(const std::vector<Tensor*>& tensors);
// Runs the kernels of `schedule` in order on the default thread pool, with the buffer of schedule
// buffer b at buffer_pointers[b] (KILN_DEBUG=2 times each kernel).
// A schedule with size variables (docs/symbolic-shapes.md) runs with their values: each kernel
// gets its variables' values after its buffers and runs its parallel extent for them.
struct Schedule;
using KernelFunction = void (*)(void* const* buffers, int64_t begin, int64_t end);
using SizeVariableValues = std::map<std::string, int64_t>;
void run_schedule(const Schedule& schedule, const std::vector<KernelFunction>& functions,
                  const std::vector<void*>& buffer_pointers, const SizeVariableValues* variables = nullptr);
// The value of `spec` among `variables`; a UserError when it is missing or out of its range.
int64_t size_variable_value(const SizeVariableValues& variables, const VariableSpec& spec);
// A size for these values (a known one is itself); a UserError when it cannot be evaluated.
int64_t evaluate_size(const Dim& size, const SizeVariableValues& variables);
// shrink() arguments that keep every axis whole, for editing one axis; and a shrink of one axis.
using Ranges = std::vector<std::pair<int64_t, int64_t>>;
Ranges full_ranges(const Tensor& t);
Tensor shrink_axis(const Tensor& t, int64_t axis, int64_t begin, int64_t end);
// Forces t into its own buffer when realized (a fusion barrier).
// Whether a value holds fewer stored elements than it has: it broadcasts something smaller (the
// weight-stripped test models' weights are one value expanded). A conv keeps such a weight as it is
// (no panels, no Winograd transform): its direct conv then has filter rows that load nothing of
// their own and are computed once (docs/optimisation.md). A weight scaled by a broadcast
// per-channel factor (a BatchNormalization folded in) reads at least its own size and counts as
// stored.
bool is_broadcast_value(const Tensor& t);

Tensor contiguous(const Tensor& t);
// contiguous(bits) that may stand in for the value the bits round (kRoundedStandIn in ir/ops.h):
// bits = bf16 bits of a permutation to channels-last of a computed value.
Tensor rounded_stand_in(const Tensor& bits);
// Whether `node` widens an 8-bit integer to a larger integer (an integer matmul's operands): such
// values are stored and folded in their 8 bits (fold_constants.cpp, Tensor::matmul).
bool widens_8bit_integer(const UOp* node);

}  // namespace kiln
