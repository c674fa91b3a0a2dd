// Rangeify and kernel split, checked on the kernel ASTs themselves (no code is generated here):
// views become index expressions, fusion gives the expected kernel counts, and the memory plan
// never overlaps two live buffers.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>

#include "ir/printer.h"
#include "kiln/kiln.hpp"
#include "schedule/schedule.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

Schedule schedule_of(const std::vector<Tensor>& tensors) {
  std::vector<UOpPtr> outputs;
  for (const Tensor& t : tensors) outputs.push_back(t.data().node);
  return create_schedule(outputs);
}

int count_ops(const UOpPtr& ast, Ops op) {
  auto nodes = toposort(ast);
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(), [&](const UOp* n) { return n->op() == op; }));
}

Tensor input(Shape shape) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)), 1.0f);
  return Tensor::from_vector(values, shape);
}

// Checks `values`, a (N, H + top + bottom, W + 1 + 1) zero-padded copy of f(source) for a source
// of shape (N, H, W), element by element.
void check_padded(const std::vector<float>& values, const std::vector<float>& source, int64_t batches, int64_t rows,
                  int64_t columns, int64_t top, int64_t bottom, const std::function<float(float)>& f) {
  int64_t padded_rows = rows + top + bottom, padded_columns = columns + 2;
  REQUIRE(values.size() == static_cast<size_t>(batches * padded_rows * padded_columns));
  for (int64_t n = 0; n < batches; ++n)
    for (int64_t h = 0; h < padded_rows; ++h)
      for (int64_t w = 0; w < padded_columns; ++w) {
        bool inside = h >= top && h < top + rows && w >= 1 && w <= columns;
        float expected = inside ? f(source[static_cast<size_t>((n * rows + h - top) * columns + w - 1)]) : 0.0f;
        CHECK(values[static_cast<size_t>((n * padded_rows + h) * padded_columns + w)] == expected);
      }
}

TEST_SUITE("schedule") {

TEST_CASE("an elementwise chain is one kernel with one load per input") {
  Tensor a = input({4, 8}), b = input({4, 8}), c = input({8});
  Tensor out = (a * b + c).maximum(Tensor::scalar(0));
  Schedule schedule = schedule_of({out});
  REQUIRE(schedule.kernels.size() == 1);
  const UOpPtr& ast = schedule.kernels[0].ast;
  CHECK(count_ops(ast, Ops::LOAD) == 3);
  CHECK(count_ops(ast, Ops::STORE) == 1);
  CHECK(count_ops(ast, Ops::RANGE) == 2);
  CHECK(schedule.kernels[0].parallel_extent == 4);
  CHECK(schedule.kernels[0].buffers.size() == 4);  // output + three inputs
}

TEST_CASE("a reduction fuses with the elementwise work before and after it") {
  Tensor a = input({16, 32}), b = input({16, 32});
  Schedule schedule = schedule_of({((a * b).sum({1}) * 2.0).sqrt()});
  REQUIRE(schedule.kernels.size() == 1);
  CHECK(count_ops(schedule.kernels[0].ast, Ops::REDUCE) == 1);
  CHECK(schedule.kernels[0].name().rfind("r_16_", 0) == 0);
}

TEST_CASE("a broadcast reduction is materialised: softmax-like graphs take three kernels") {
  Tensor x = input({8, 64});
  Tensor shifted = x - x.max({1}, true);
  Tensor e = shifted.exp2();
  Tensor out = e / e.sum({1}, true);
  Schedule schedule = schedule_of({out});
  CHECK(schedule.kernels.size() == 3);
  // The two reductions' results are intermediates and may share the arena.
  CHECK(schedule.arena_bytes <= schedule.intermediate_bytes);
}

TEST_CASE("movement ops leave no trace but index arithmetic") {
  Tensor a = input({6, 4});
  Tensor view = a.permute({1, 0}).shrink({{1, 3}, {0, 6}}).flip({1}).reshape({12});
  Schedule schedule = schedule_of({view});
  REQUIRE(schedule.kernels.size() == 1);
  for (const UOp* node : toposort(schedule.kernels[0].ast))
    CHECK(op_group(node->op()) != OpGroup::Movement);
}

TEST_CASE("a channel shuffle's output axis is split into two loops; a blocked read is not") {
  // (8, 3) as 2 groups of 4 rows, transposed: output row c reads row (c % 2)·4 + c / 2.
  std::vector<float> counting(24);
  for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<float>(i);
  Tensor x = Tensor::from_vector(counting, {8, 3});
  Tensor shuffled = x.reshape({2, 4, 3}).permute({1, 0, 2}).reshape({8, 3}) + 1.0;
  Schedule schedule = schedule_of({shuffled});
  REQUIRE(schedule.kernels.size() == 1);
  const UOpPtr& ast = schedule.kernels[0].ast;
  CHECK(count_ops(ast, Ops::IDIV) == 0);
  CHECK(count_ops(ast, Ops::MOD) == 0);
  CHECK(count_ops(ast, Ops::RANGE) == 3);  // 4 × 2 rows and 3 columns
  std::vector<float> values = shuffled.to_vector<float>();
  for (int64_t c = 0; c < 8; ++c)
    for (int64_t k = 0; k < 3; ++k)
      CHECK(values[static_cast<size_t>(c * 3 + k)] == static_cast<float>(((c % 2) * 4 + c / 2) * 3 + k + 1));

  // Stored as (2, 3, 4) panels and read as (8, 3): row c, column k at (c / 4)·12 + k·4 + c % 4.
  // The order within a panel is kept, so the split is left to the optimisation layer's vector.
  Tensor panels = Tensor::from_vector(counting, {2, 3, 4});
  Tensor blocked = panels.permute({0, 2, 1}).reshape({8, 3}) + 1.0;
  Schedule blocked_schedule = schedule_of({blocked});
  REQUIRE(blocked_schedule.kernels.size() == 1);
  CHECK(count_ops(blocked_schedule.kernels[0].ast, Ops::RANGE) == 2);
  CHECK(count_ops(blocked_schedule.kernels[0].ast, Ops::MOD) == 1);
}

TEST_CASE("a padded copy of a computed value stores it into the padded buffer, with border kernels") {
  // As Tensor::conv pads an activation: realised, then copied with a zero border.
  std::vector<float> counting(2 * 3 * 16);
  for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<float>(i) - 40.0f;
  Tensor x = Tensor::from_vector(counting, {2, 3, 16});
  Tensor padded = contiguous(contiguous((x * 2.0).maximum(Tensor::scalar(0))).pad({0, 0, 1, 2, 1, 1}));
  Tensor out = padded * 1.0;  // (the copy is an intermediate, as for a conv)
  Schedule schedule = schedule_of({out});
  // The interior (16 floats a row: one 64-byte line), one kernel of zeros per padded axis, and the
  // reader; no kernel stores the activation on its own.
  REQUIRE(schedule.kernels.size() == 4);
  int masked_stores = 0;
  for (const ScheduledKernel& kernel : schedule.kernels)
    for (const UOp* node : toposort(kernel.ast))
      if (node->op() == Ops::STORE && node->src(0)->src_count() > 2) ++masked_stores;
  CHECK(masked_stores == 0);
  check_padded(out.to_vector<float>(), counting, 2, 3, 16, 1, 2, [](float v) { return std::max(0.0f, 2.0f * v); });

  // Rows of 5 floats are not whole lines: the activation is stored, then copied with its border.
  Tensor narrow = Tensor::from_vector(std::vector<float>(counting.begin(), counting.begin() + 30), {2, 3, 5});
  // (The reader, `* 1.0`, is a plain copy of the padded buffer into the output, which copy elision
  // removes: the padded copy writes the output itself.)
  Tensor narrow_out = contiguous(contiguous(narrow * 2.0).pad({0, 0, 1, 1, 1, 1})) * 1.0;
  CHECK(schedule_of({narrow_out}).kernels.size() == 2);
}

TEST_CASE("a transposed padded copy of a computed value is stored in the buffer's order, with border kernels") {
  // As Tensor::conv pads a large input channels-last: CONTIGUOUS(PERMUTE(PAD(S))), read back
  // through the inverse permute. (C, H, W) = (16, 3, 4) padded by 1 on H and W and stored (H, W, C).
  std::vector<float> counting(16 * 3 * 4);
  for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<float>(i) - 50.0f;
  Tensor x = Tensor::from_vector(counting, {16, 3, 4});
  Tensor activation = contiguous((x * 2.0).maximum(Tensor::scalar(0)));
  Tensor padded = contiguous(activation.pad({0, 0, 1, 1, 1, 1}).permute({1, 2, 0}));  // (5, 6, 16)
  Tensor out = padded * 1.0;
  Schedule schedule = schedule_of({out});
  // The interior (its loops in (H, W, C) order: a 16-float row of channels), a kernel of zeros per
  // padded axis, and the reader; no transposing copy and no kernel of the activation alone.
  REQUIRE(schedule.kernels.size() == 4);
  CHECK(schedule.kernels[2].name().rfind("E_3_4_16_", 0) == 0);
  std::vector<float> values = out.to_vector<float>();
  REQUIRE(values.size() == 5 * 6 * 16);
  for (int64_t h = 0; h < 5; ++h)
    for (int64_t w = 0; w < 6; ++w)
      for (int64_t c = 0; c < 16; ++c) {
        bool inside = h >= 1 && h < 4 && w >= 1 && w < 5;
        float expected =
            inside ? std::max(0.0f, 2.0f * counting[static_cast<size_t>((c * 3 + h - 1) * 4 + w - 1)]) : 0.0f;
        CHECK(values[static_cast<size_t>((h * 6 + w) * 16 + c)] == expected);
      }
}

TEST_CASE("zero-sized outputs need no kernel; size-1 axes need no loop") {
  Tensor empty = input({0, 5});
  CHECK(schedule_of({empty + 1.0}).kernels.empty());
  Tensor column = input({7, 1});
  Schedule schedule = schedule_of({column * 3.0});
  REQUIRE(schedule.kernels.size() == 1);
  CHECK(count_ops(schedule.kernels[0].ast, Ops::RANGE) == 1);
}

TEST_CASE("two outputs sharing work are scheduled together, the shared node once") {
  Tensor a = input({32}), b = input({32});
  Tensor shared = (a + b).sum({0}, true);
  Tensor first = shared * 2.0, second = shared + 1.0;
  Schedule schedule = schedule_of({first, second});
  // The shared reduction has two consumers, so it is materialised once and loaded twice.
  CHECK(schedule.kernels.size() == 3);
  CHECK(schedule.outputs.size() == 2);
}

TEST_CASE("the memory plan keeps live intermediates apart and reuses dead ones") {
  Tensor x = input({64, 64});
  Tensor y = x;
  // A chain of materialised steps: each intermediate dies once the next kernel has read it.
  for (int i = 0; i < 6; ++i) y = contiguous(y * 2.0 + 1.0);
  Schedule schedule = schedule_of({y});
  REQUIRE(schedule.kernels.size() == 6);
  CHECK(schedule.intermediate_bytes == 5 * 64 * 64 * 4);
  CHECK(schedule.arena_bytes == 2 * 64 * 64 * 4);  // ping-pong between two slots
  // No two buffers used by one kernel overlap in the arena.
  for (const ScheduledKernel& kernel : schedule.kernels) {
    for (int a : kernel.buffers)
      for (int b : kernel.buffers) {
        const ScheduledBuffer &ba = schedule.buffers[static_cast<size_t>(a)], &bb = schedule.buffers[static_cast<size_t>(b)];
        if (a == b || ba.arena_offset < 0 || bb.arena_offset < 0) continue;
        bool disjoint = ba.arena_offset + ba.bytes() <= bb.arena_offset || bb.arena_offset + bb.bytes() <= ba.arena_offset;
        CHECK(disjoint);
      }
  }
}

TEST_CASE("a padded input loads under a mask and never out of bounds") {
  Tensor a = input({5});
  Schedule schedule = schedule_of({pad_zero(a, {2, 3}) + 1.0});
  REQUIRE(schedule.kernels.size() == 1);
  int masked_loads = 0;
  for (const UOp* node : toposort(schedule.kernels[0].ast))
    if (node->op() == Ops::INDEX && node->src_count() == 3 && node->src(0)->arg_int() != 0 && !node->src(2)->is_const())
      ++masked_loads;
  CHECK(masked_loads == 1);
}

TEST_CASE("a reduction under padding is its own kernel (WHERE evaluates both arms)") {
  // pad(sum(a[r0, k] * b[k]), 4 after): fused, the padded elements r0 >= 4 would run the whole
  // reduction loop for a value the WHERE discards (in a concatenation: for every element of every
  // other input). The reduction is materialised; the pad kernel loads it under the `r0 < 4` mask,
  // which must stay because that load would leave the 4-element buffer.
  Tensor a = input({4, 8}), b = input({8, 1});
  Tensor out = pad_zero((a.cast(ScalarType::Float32) * b.reshape({1, 8})).sum({1}), {0, 4});
  Schedule schedule = schedule_of({out});
  REQUIRE(schedule.kernels.size() == 2);
  int reduce_loads = 0, pad_masked_loads = 0;
  for (const UOp* node : toposort(schedule.kernels[0].ast))
    if (node->op() == Ops::INDEX && node->src(0)->arg_int() != 0) {
      CHECK(node->src_count() == 2);  // the reduction reads a and b unpadded: no masks
      ++reduce_loads;
    }
  for (const UOp* node : toposort(schedule.kernels[1].ast))
    if (node->op() == Ops::INDEX && node->src(0)->arg_int() != 0) {
      REQUIRE(node->src_count() == 3);
      CHECK_FALSE(node->src(2)->is_const());
      CHECK(node->src(0)->dtype().pointer_size() == 4);
      ++pad_masked_loads;
    }
  CHECK(reduce_loads == 2);
  CHECK(pad_masked_loads == 1);
}

TEST_CASE("a reduction one kernel reads at two indices is materialised once") {
  // r = sum(a, axis 1); out[i] = r[i] + r[i + 1]. Fused, the output kernel would run the reduction
  // loop twice per element (LRN's window sum over a conv's output did this five times). Rangeify
  // notices the second index, materialises r and rebuilds the kernel: two kernels, and the output
  // kernel has no reduction of its own.
  Tensor a = input({8, 16});
  Tensor r = a.cast(ScalarType::Float32).sum({1});
  Tensor out = shrink_axis(r, 0, 0, 7) + shrink_axis(r, 0, 1, 8);
  Schedule schedule = schedule_of({out});
  REQUIRE(schedule.kernels.size() == 2);
  int reduces_in_output_kernel = 0;
  for (const UOp* node : toposort(schedule.kernels[1].ast))
    if (node->op() == Ops::REDUCE) ++reduces_in_output_kernel;
  CHECK(reduces_in_output_kernel == 0);
  int reduces_in_first = 0;
  for (const UOp* node : toposort(schedule.kernels[0].ast))
    if (node->op() == Ops::REDUCE) ++reduces_in_first;
  CHECK(reduces_in_first == 1);
}

// Reduce RANGEs (axis ids from 1000, docs/kernel-ast.md) of extent `extent` in every kernel of the
// schedule: with a contraction length used by no other reduction in a graph, the number of loops
// that run that contraction.
int ranges_of_extent(const Schedule& schedule, int64_t extent) {
  int count = 0;
  for (const ScheduledKernel& kernel : schedule.kernels)
    for (const UOp* node : toposort(kernel.ast))
      if (node->op() == Ops::RANGE && node->arg_int() >= 1000 && node->src(0)->is_const() &&
          node->src(0)->const_int() == extent)
        ++count;
  return count;
}

TEST_CASE("a gather on a 30k-row table reads one row per index: no loop over the table") {
  constexpr int64_t rows = 30522, width = 16;
  Tensor table = input({rows, width});
  Tensor ids = Tensor::from_vector<int64_t>({101, 7592, 2088, -1, 30521, 0}, {1, 6});
  Schedule schedule = schedule_of({table.take(ids, 0)});
  REQUIRE(schedule.kernels.size() == 1);
  const UOpPtr& ast = schedule.kernels[0].ast;
  CHECK(count_ops(ast, Ops::REDUCE) == 0);
  CHECK(ranges_of_extent(schedule, rows) == 0);
  CHECK(count_ops(ast, Ops::LOAD) == 2);  // the index, then the row element at it
}

TEST_CASE("gather, GatherElements-style gather and one-hot selects collapse; other reductions do not") {
  Tensor data = input({50, 40});
  Tensor index = Tensor::from_vector<int64_t>({3, 1, 49, 0}, {2, 2});
  Schedule gathered = schedule_of({data.gather(0, index)});
  REQUIRE(gathered.kernels.size() == 1);
  CHECK(count_ops(gathered.kernels[0].ast, Ops::REDUCE) == 0);
  // A masked sum that keeps more than one element per output is a real reduction.
  Tensor positions = Tensor::arange(50, ScalarType::Int64).reshape({50, 1});
  Tensor kept = positions.lt(Tensor::scalar(10.0, ScalarType::Int64)).where(data, Tensor::scalar(0.0f)).sum({0});
  Schedule masked = schedule_of({kept});
  REQUIRE(masked.kernels.size() == 1);
  CHECK(count_ops(masked.kernels[0].ast, Ops::REDUCE) == 1);
}

TEST_CASE("a factor that does not change along a sum's loop multiplies the sum, not each term") {
  // Σ_k (q·s)·w over k with s a one-element tensor (a stored attention scale): s leaves the REDUCE
  // and multiplies its result (reduce_factors.h). A factor that moves with k stays inside.
  Tensor q = input({8, 32}), w = input({32, 16});
  Tensor scale = Tensor::from_vector<float>({0.125f}, {1});
  Schedule scaled = schedule_of({(q * scale).matmul(w)});
  REQUIRE(scaled.kernels.size() == 1);
  const UOpPtr& ast = scaled.kernels[0].ast;
  const UOp* reduce = nullptr;
  for (const UOp* node : toposort(ast))
    if (node->op() == Ops::REDUCE) reduce = node;
  REQUIRE(reduce != nullptr);
  int loads_in_sum = count_ops(reduce->src(0), Ops::LOAD);
  CHECK(loads_in_sum == 2);               // q and w; the scale is read after the sum
  CHECK(count_ops(ast, Ops::LOAD) == 3);
  std::vector<float> values = ((q * scale).matmul(w)).to_vector<float>();
  for (float value : values) CHECK(value == doctest::Approx(32 * 0.125f));
  // A per-k factor is no invariant: it stays in the sum.
  Tensor per_k = input({32}).reshape({1, 32});
  Schedule varying = schedule_of({(q * per_k).matmul(w)});
  for (const UOp* node : toposort(varying.kernels[0].ast))
    if (node->op() == Ops::REDUCE) CHECK(count_ops(node->src(0), Ops::LOAD) == 3);
}

TEST_CASE("LayerNorm after a matmul runs the matmul once") {
  // (32, 48) @ (48, 64) + bias + residual, then LayerNorm over 64: the mean, the variance and the
  // normalised output all read the matmul. The contraction length 48 appears nowhere else, so the
  // loops of extent 48 are exactly the matmul's.
  Tensor x = input({32, 48}), w = input({48, 64}), bias = input({64}), residual = input({32, 64});
  Tensor y = x.matmul(w) + bias + residual;
  Tensor out = y.layer_norm(input({64}), input({64}));
  Schedule schedule = schedule_of({out});
  CHECK(ranges_of_extent(schedule, 48) == 1);
}

TEST_CASE("softmax after a matmul runs the matmul once") {
  Tensor q = input({12, 32, 40}), k = input({12, 40, 32});
  Tensor scores = q.matmul(k) * 0.125f;
  Schedule schedule = schedule_of({scores.softmax(-1)});
  CHECK(ranges_of_extent(schedule, 40) == 1);
}

// The kernel that runs the reduction of the given contraction length.
const ScheduledKernel* reduction_kernel(const Schedule& schedule, int64_t extent) {
  for (const ScheduledKernel& kernel : schedule.kernels)
    for (const UOp* node : toposort(kernel.ast))
      if (node->op() == Ops::RANGE && node->arg_int() >= 1000 && node->src(0)->const_int() == extent) return &kernel;
  return nullptr;
}

TEST_CASE("a short elementwise chain read inside a reduction loop is materialised, not redone per output") {
  // ((a + b).relu() + c).relu() is 4 ops; as a matmul's left operand it is broadcast over the 64
  // output columns, so recomputing it would repeat it 64 times per element.
  Tensor a = input({32, 48}), b = input({32, 48}), c = input({32, 48}), w = input({64, 48});
  Tensor x = ((a + b).relu() + c).relu();
  Schedule schedule = schedule_of({x.matmul(w.transpose())});
  const ScheduledKernel* matmul = reduction_kernel(schedule, 48);
  REQUIRE(matmul != nullptr);
  CHECK(count_ops(matmul->ast, Ops::MAX) == 0);
  CHECK(count_ops(matmul->ast, Ops::LOAD) == 2);
}

TEST_CASE("an expensive epilogue after a reduction gets a kernel of its own") {
  // exp2 is a ~20-op polynomial: in the matmul kernel it would run in the scalar tail per output,
  // in its own elementwise kernel it vectorises.
  Tensor x = input({32, 48}), w = input({48, 64});
  Tensor y = (x.matmul(w) * 0.5f).exp2();
  Schedule schedule = schedule_of({y});
  const ScheduledKernel* matmul = reduction_kernel(schedule, 48);
  REQUIRE(matmul != nullptr);
  CHECK(count_ops(matmul->ast, Ops::EXP2) == 0);
  CHECK(schedule.kernels.size() == 2);
}

TEST_CASE("a matmul's bias and relu, read by the next matmul, are stored by the first matmul's kernel") {
  // The second matmul reads y once per output column (a broadcast): y is stored, and the first
  // contraction runs in y's kernel, not in a kernel of its own followed by a bias + relu kernel.
  // (A contraction of 96: from 64 on, one that flows into a reduction without a broadcast, as
  // under a global pool, is stored bare.)
  Tensor x = input({32, 96}), w1 = input({96, 64}), bias = input({64}), w2 = input({64, 40});
  Tensor y = (x.matmul(w1) + bias).relu();
  Schedule schedule = schedule_of({y.matmul(w2)});
  CHECK(schedule.kernels.size() == 2);
  const ScheduledKernel* first = reduction_kernel(schedule, 96);
  REQUIRE(first != nullptr);
  CHECK(count_ops(first->ast, Ops::LOAD) == 3);  // x, w1 and the bias
}

// A buffer of f16 ones.
Tensor half_input(Shape shape) {
  std::vector<uint16_t> ones(static_cast<size_t>(shape_numel(shape)), 0x3c00);
  return Tensor::from_data(ones.data(), shape, ScalarType::Float16);
}

// The intermediate buffers of `schedule`.
std::vector<const ScheduledBuffer*> intermediates(const Schedule& schedule) {
  std::vector<const ScheduledBuffer*> found;
  for (const ScheduledBuffer& buffer : schedule.buffers)
    if (buffer.kind == ScheduledBuffer::Kind::Intermediate) found.push_back(&buffer);
  return found;
}

TEST_CASE("an f32 value stored for an f16 matmul is stored rounded to f16, not wide and rounded by each reader") {
  // f32 work (an exp and a sum over the 32 rows: stored by the cost rule) cast to f16 for the next
  // matmul (a contraction of 96).
  Tensor x = input({32, 96}), w2 = half_input({96, 40});
  Tensor normalised = x.exp() / x.exp().sum({0}, true);
  Schedule schedule = schedule_of({normalised.cast(ScalarType::Float16).matmul(w2)});
  const ScheduledKernel* matmul = reduction_kernel(schedule, 96);
  REQUIRE(matmul != nullptr);
  bool rounds_in_loop = false;
  for (const UOp* node : toposort(matmul->ast))
    rounds_in_loop = rounds_in_loop || (node->op() == Ops::CAST && node->dtype() == dtypes::f16 &&
                                        node->src(0)->op() == Ops::LOAD);
  CHECK_FALSE(rounds_in_loop);  // the rounding ran once, in the kernel that stored the value
  bool stored_narrow = false;
  for (const ScheduledBuffer* buffer : intermediates(schedule)) stored_narrow = stored_narrow || buffer->dtype == dtypes::f16;
  CHECK(stored_narrow);
}

TEST_CASE("a copy of a stored value in its own order is elided: the producer writes the copy's buffer") {
  auto intermediates = [](const Schedule& schedule) {
    return std::count_if(schedule.buffers.begin(), schedule.buffers.end(), [](const ScheduledBuffer& b) {
      return b.kind == ScheduledBuffer::Kind::Intermediate;
    });
  };
  // An activation stored, copied with a zero border (one kernel, rows too short for border
  // kernels), and that padded buffer copied as it is into the output (`* 1.0`): the padded copy
  // writes the output's buffer, and the plain copy is gone.
  std::vector<float> counting(30);
  for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<float>(i) - 12.0f;
  Tensor x = Tensor::from_vector(counting, {2, 3, 5});
  Tensor out = contiguous(contiguous(x * 2.0).pad({0, 0, 1, 1, 1, 1})) * 1.0;
  Schedule schedule = schedule_of({out});
  CHECK(schedule.kernels.size() == 2);
  CHECK(intermediates(schedule) == 1);  // the activation; the padded buffer is the output
  check_padded(out.to_vector<float>(), counting, 2, 3, 5, 1, 1, [](float v) { return 2.0f * v; });
  // Not elided: a copy of an input (the caller's buffer stays the caller's).
  Schedule of_input = schedule_of({contiguous(input({16, 24}).reshape({24, 16}))});
  CHECK(of_input.kernels.size() == 1);
}

TEST_CASE("a matmul operand computed in f16 or bf16 (a projection's bias add) is stored once, not rounded in the loop") {
  // The query of an attention head: a projection (stored by the cost rule), rounded to the narrow
  // dtype and a bias added, then multiplied by the keys. Counted as one op per element (a cast
  // counted nothing), the rounding and the add were recomputed inside the scores' loop for every
  // key tile: BERT-base bf16's scores kernel ran at 37 GFLOP/s, 266 with the query stored. Each op
  // on f16 or bf16 values, and each cast to them, now counts its rounding. (In f32 the add is
  // stored with the projection, as its epilogue.)
  for (ScalarType type : {ScalarType::Float16, ScalarType::BFloat16}) {
    INFO(DType(type).name());
    Tensor x = input({32, 96}), w = input({96, 64});
    Tensor projected = x.matmul(w);  // f32, as the narrow models' matmuls store their sums
    Tensor bias = input({64}).cast(type), keys = input({64, 48}).cast(type);
    Tensor query = projected.cast(type) + bias;
    Schedule schedule = schedule_of({query.matmul(keys)});
    const ScheduledKernel* scores = reduction_kernel(schedule, 64);
    REQUIRE(scores != nullptr);
    bool adds_in_loop = false;
    for (const UOp* node : toposort(scores->ast)) adds_in_loop = adds_in_loop || (node->op() == Ops::ADD && node->dtype().scalar() == type);
    CHECK_FALSE(adds_in_loop);
  }
}

TEST_CASE("intermediate f16 buffers: narrow by default, f32 where the target stores them wide, read without a conversion") {
  // y = relu(x·w1 + bias) in f16, read by the next matmul once per output column: stored.
  Tensor x = half_input({32, 96}), w1 = half_input({96, 64}), bias = half_input({64}), w2 = half_input({64, 40});
  Tensor out = (x.matmul(w1) + bias).relu().matmul(w2);
  std::vector<UOpPtr> outputs{out.data().node};
  Schedule narrow = create_schedule(outputs);
  REQUIRE(intermediates(narrow).size() == 1);
  CHECK(intermediates(narrow)[0]->dtype == dtypes::f16);
  CHECK(narrow.buffers[static_cast<size_t>(narrow.outputs[0])].dtype == dtypes::f16);

  Schedule wide = create_schedule(outputs, ScheduleOptions{true, {}});
  REQUIRE(intermediates(wide).size() == 1);
  CHECK(intermediates(wide)[0]->dtype == dtypes::f32);
  CHECK(wide.buffers[static_cast<size_t>(wide.outputs[0])].dtype == dtypes::f16);  // outputs keep their type
  CHECK(wide.arena_bytes >= 2 * narrow.arena_bytes);
  REQUIRE(wide.kernels.size() == 2);
  // The first kernel rounds y to f16 and stores it widened; the second loads it as f32 and uses
  // the load as it is (only w2's f16 loads are widened there).
  const UOpPtr& stored = wide.kernels[0].ast->src(0)->src(1);
  REQUIRE(stored->op() == Ops::CAST);
  CHECK(stored->dtype() == dtypes::f32);
  CHECK(stored->src(0)->dtype() == dtypes::f16);
  int f32_loads = 0, widened_loads = 0, narrowed_loads = 0;
  for (const UOp* node : toposort(wide.kernels[1].ast)) {
    f32_loads += node->op() == Ops::LOAD && node->dtype() == dtypes::f32;
    bool cast_of_load = node->op() == Ops::CAST && node->src(0)->op() == Ops::LOAD;
    widened_loads += cast_of_load && node->dtype() == dtypes::f32;
    narrowed_loads += cast_of_load && node->dtype() == dtypes::f16;
  }
  CHECK(f32_loads == 1);
  CHECK(widened_loads == 1);  // w2
  CHECK(narrowed_loads == 0);  // y is not rounded again and widened back
}

TEST_CASE("a residual chain of convs keeps every residual add in its conv's kernel") {
  // ResNet's identity blocks, one 1x1 conv each: h = relu(conv(h) + b + h). At 14×14 the conv
  // reads a channels-last copy of h, so h is stored and the next add reads it from there. Counted
  // through those stored values, the chain of adds looked like an expensive epilogue from the
  // fourth block on, and the conv stored its bare sums with the add in a kernel of its own.
  // In f16 too (stored narrow or wide): the copy holds h itself, widened where the conv reads
  // it, so the next add reads h from the copy; a copy of h's widened value was not h's, and each
  // block's copy recomputed the residual chain from its start (ResNet-50 fp16's adds).
  constexpr int kBlocks = 6;
  for (int variant = 0; variant < 3; ++variant) {
  CAPTURE(variant);
  auto make = [&](Shape shape) { return variant == 0 ? input(shape) : half_input(shape); };
  Tensor h = make({1, 64, 14, 14});
  for (int block = 0; block < kBlocks; ++block)
    h = (h.conv(make({64, 64, 1, 1}), make({64})) + h).relu();
  std::vector<UOpPtr> outputs{h.data().node};
  Schedule schedule = create_schedule(outputs, ScheduleOptions{variant == 2, {}});
  int convs = 0;
  for (const ScheduledKernel& kernel : schedule.kernels) {
    CAPTURE(kernel.name());
    auto nodes = toposort(kernel.ast);
    bool reduces = std::any_of(nodes.begin(), nodes.end(), [](const UOp* n) {
      return n->op() == Ops::RANGE && n->arg_int() >= 1000;
    });
    int float_adds = static_cast<int>(std::count_if(nodes.begin(), nodes.end(), [](const UOp* n) {
      return n->op() == Ops::ADD && n->dtype().is_float();
    }));
    if (reduces) {
      ++convs;
      CHECK(float_adds == 2);  // the bias and the residual (the sum itself is the REDUCE)
    } else {
      // the channels-last copies (and weight panels): loads and stores only, no arithmetic
      CHECK(count_ops(kernel.ast, Ops::MAX) + count_ops(kernel.ast, Ops::WHERE) == 0);
      CHECK(float_adds == 0);
    }
  }
  CHECK(convs == kBlocks);
  }
}

TEST_CASE("a value copied both as it is and channels-last is computed into the plain copy") {
  // ResNet's last 14×14 block output: layer 4's first 1x1 conv reads a channels-last copy, its
  // strided downsample an NCHW one. Computing the value into the NCHW copy leaves the transposing
  // copy a read of NCHW rows; the other way round it read every element 4 KB from the last.
  for (int64_t channels : {64, 96, 128, 256}) {
    CAPTURE(channels);
    Tensor x = input({1, 32, 14, 14}), w = input({channels, 32, 1, 1});
    Tensor h = x.conv(w, Tensor(), ConvOptions()).relu();
    Tensor plain = contiguous(h), last = contiguous(h.permute({0, 2, 3, 1}));
    Schedule schedule = schedule_of({plain * 2.0, last * 3.0});
    const ScheduledKernel* conv = reduction_kernel(schedule, 32);
    REQUIRE(conv != nullptr);
    CHECK(conv->name().rfind("r_" + std::to_string(channels) + "_14_14_", 0) == 0);  // stored NCHW
  }
}

TEST_CASE("two contractions added in one epilogue are stored apart") {
  // A ResNet downsample block: conv + shortcut conv, then relu. In one kernel no register tile
  // fits both contractions.
  Tensor x = input({32, 48}), w1 = input({48, 64}), z = input({32, 40}), w2 = input({40, 64});
  Tensor y = (x.matmul(w1) + z.matmul(w2)).relu();
  Schedule schedule = schedule_of({y});
  const ScheduledKernel* first = reduction_kernel(schedule, 48);
  const ScheduledKernel* second = reduction_kernel(schedule, 40);
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  CHECK(first != second);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kiln
