// Symbolic shapes in the compiler (docs/symbolic-shapes.md, stage 2): a Tensor graph whose input has
// a size variable is scheduled and compiled once, then run at several values of the variable; each
// run must equal the same graph built at that fixed size and realized as usual, bit for bit (the
// kernels differ only in where their loops end). Also: what is refused, and how.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "driver/compile_kernels.h"
#include "ir/build.h"
#include "opt/optimize_schedule.h"
#include "runtime/host_buffer.h"
#include "schedule/schedule.h"
#include "support/error.h"
#include "tensor/tensor_internal.h"

using namespace kiln;

namespace {

using Graph = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Deterministic float data, different per input, small enough that sums stay exact-ish.
std::vector<float> input_values(size_t count, int input) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>((static_cast<int>(i) * 7 + input * 3) % 23 - 11) / 8.0f;
  return values;
}

// One input of a test graph: a shape whose entries are sizes or -1 for the variable `n`.
struct InputSpec {
  Shape shape;  // -1 = n
};

Dims symbolic_dims(const InputSpec& spec, const Dim& n) {
  Dims dims;
  for (int64_t size : spec.shape) dims.push_back(size == -1 ? n : Dim(size));
  return dims;
}

Shape concrete_shape(const InputSpec& spec, int64_t n) {
  Shape shape = spec.shape;
  for (int64_t& size : shape)
    if (size == -1) size = n;
  return shape;
}

// The graph compiled once over a variable n in [1, max_n].
class SymbolicProgram {
 public:
  SymbolicProgram(const Graph& graph, const std::vector<InputSpec>& inputs, int64_t max_n, int64_t min_n = 1) {
    Dim n = size_variable("n", min_n, max_n);
    std::vector<Tensor> placeholders;
    for (size_t i = 0; i < inputs.size(); ++i)
      placeholders.push_back(symbolic_graph_input("x" + std::to_string(i), symbolic_dims(inputs[i], n), ScalarType::Float32));
    for (const Tensor& placeholder : placeholders) input_ids_.push_back(placeholder.data().buffer_id);
    outputs_ = graph(placeholders);
    // The weights: buffers with data that the graph reads.
    std::vector<const detail::TensorData*> stack;
    for (const Tensor& output : outputs_) stack.push_back(&output.data());
    while (!stack.empty()) {
      const detail::TensorData* data = stack.back();
      stack.pop_back();
      if (data->buffer) weights_.emplace(data->buffer_id, data->buffer);
      for (const auto& input : data->inputs) stack.push_back(input.get());
    }
    std::vector<UOpPtr> nodes;
    for (const Tensor& output : outputs_) nodes.push_back(output.data().node);
    schedule_ = create_schedule(nodes);
    optimize_schedule(schedule_, host_cpu_caps());
    for (const KernelBuild& build : compile_schedule_kernels(schedule_)) functions_.push_back(build.function);
  }

  const Schedule& schedule() const { return schedule_; }
  const std::vector<Tensor>& outputs() const { return outputs_; }

  // Runs at n with the given input data; returns each output's elements.
  std::vector<std::vector<float>> run(int64_t n, const std::vector<std::vector<float>>& inputs) const {
    SizeVariableValues values{{"n", n}};
    std::vector<std::shared_ptr<HostBuffer>> memory;
    std::vector<void*> pointers;
    for (const ScheduledBuffer& buffer : schedule_.buffers) {
      // Every buffer gets its size at the variable's maximum (`count`), as a plan's arena does.
      memory.push_back(std::make_shared<HostBuffer>(buffer.dtype, buffer.count, HostBuffer::Fill::Zero));
      pointers.push_back(memory.back()->data());
      if (buffer.kind != ScheduledBuffer::Kind::Input) continue;
      if (auto weight = weights_.find(buffer.input_id); weight != weights_.end())
        std::memcpy(memory.back()->data(), weight->second->data(), weight->second->bytes());
      for (size_t i = 0; i < input_ids_.size(); ++i) {
        if (input_ids_[i] != buffer.input_id) continue;
        REQUIRE(static_cast<int64_t>(inputs[i].size()) == evaluate_size(buffer.elements, values));
        std::memcpy(memory.back()->data(), inputs[i].data(), inputs[i].size() * sizeof(float));
      }
    }
    run_schedule(schedule_, functions_, pointers, &values);
    std::vector<std::vector<float>> results;
    for (int output : schedule_.outputs) {
      const ScheduledBuffer& buffer = schedule_.buffers[static_cast<size_t>(output)];
      REQUIRE(buffer.dtype == dtypes::f32);
      const auto* data = static_cast<const float*>(memory[static_cast<size_t>(output)]->data());
      results.emplace_back(data, data + evaluate_size(buffer.elements, values));
    }
    return results;
  }

 private:
  std::vector<int64_t> input_ids_;
  std::map<int64_t, std::shared_ptr<HostBuffer>> weights_;
  std::vector<Tensor> outputs_;
  Schedule schedule_;
  std::vector<KernelFunction> functions_;
};

// The graph at a fixed n, realized the usual way.
std::vector<std::vector<float>> run_concrete(const Graph& graph, const std::vector<InputSpec>& inputs, int64_t n,
                                             const std::vector<std::vector<float>>& data) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < inputs.size(); ++i) tensors.push_back(Tensor::from_vector<float>(data[i], concrete_shape(inputs[i], n)));
  std::vector<std::vector<float>> results;
  for (Tensor& output : graph(tensors)) results.push_back(output.to_vector<float>());
  return results;
}

// Compiles `graph` once with n symbolic and checks it against the fixed-size graph at each n.
// The kernels that zero a padded store's border: they store a constant and load nothing.
int border_kernels(const Schedule& schedule) {
  int count = 0;
  for (const ScheduledKernel& kernel : schedule.kernels) {
    std::vector<const UOp*> nodes = toposort(kernel.ast);
    bool loads = std::ranges::any_of(nodes, [](const UOp* node) { return node->op() == Ops::LOAD; });
    bool stores_constant = std::ranges::any_of(
        nodes, [](const UOp* node) { return node->op() == Ops::STORE && node->src(1)->op() == Ops::CONST; });
    count += !loads && stores_constant ? 1 : 0;
  }
  return count;
}

void check_at_sizes(const Graph& graph, const std::vector<InputSpec>& inputs, const std::vector<int64_t>& sizes,
                    int64_t max_n = 64, int64_t min_n = 1) {
  SymbolicProgram program(graph, inputs, max_n, min_n);
  for (int64_t n : sizes) {
    CAPTURE(n);
    std::vector<std::vector<float>> data;
    for (size_t i = 0; i < inputs.size(); ++i)
      data.push_back(input_values(static_cast<size_t>(shape_numel(concrete_shape(inputs[i], n))), static_cast<int>(i)));
    std::vector<std::vector<float>> symbolic = program.run(n, data), expected = run_concrete(graph, inputs, n, data);
    REQUIRE(symbolic.size() == expected.size());
    for (size_t o = 0; o < expected.size(); ++o) {
      CAPTURE(o);
      REQUIRE(symbolic[o].size() == expected[o].size());
      for (size_t i = 0; i < expected[o].size(); ++i) {
        CAPTURE(i);
        // The same operations in the same order, except where a fixed-size kernel was vectorised or
        // tiled (reassociated sums): a few ulp.
        CHECK(symbolic[o][i] == doctest::Approx(expected[o][i]).epsilon(1e-5));
      }
    }
  }
}

// The conditions an INDEX's mask is the conjunction of (none when it has no mask).
std::vector<UOpPtr> mask_conditions(const UOp* index) {
  std::vector<UOpPtr> conditions;
  if (index->src_count() == 3) collect_conjuncts(index->src(2), conditions);
  return conditions;
}

Tensor weight(Shape shape, float scale) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i) % 7 - 3) * scale;
  return Tensor::from_vector<float>(values, shape);
}

}  // namespace

TEST_SUITE("symbolic") {

TEST_CASE("elementwise work with broadcasting over a symbolic axis") {
  Tensor w = weight({8}, 0.5f);
  check_at_sizes([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{(x[0] * w + 1.0f).relu(), x[0].exp() - x[1]}; },
                 {{{-1, 8}}, {{-1, 1}}}, {1, 5, 37});
}

TEST_CASE("reductions along and across a symbolic axis, and a mean that divides by it") {
  check_at_sizes(
      [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{x[0].sum({0}), x[0].max({1}), x[0].mean({0}, true), x[0].sum()};
      },
      {{{-1, 6}}}, {1, 3, 64});
}

TEST_CASE("views: permute, reshape with an inferred size, unsqueeze, expand, flip") {
  check_at_sizes(
      [](const std::vector<Tensor>& x) {
        Tensor y = x[0].reshape({-1, 2, 3}).permute({2, 0, 1}).reshape({3, -1});
        return std::vector<Tensor>{y, y.sum({1}), x[0].transpose(0, 1).flip({1}), x[0].unsqueeze(0).expand({2, -1, -1}) * 2.0f,
                                   x[0].shrink({{0, 1}, {2, 5}}) + x[0].sum({0}, true).shrink({{0, 1}, {1, 4}})};
      },
      {{{-1, 6}}}, {1, 4, 9});
}

TEST_CASE("reductions along a symbolic contiguous axis in vector blocks: the padded lanes add nothing") {
  // Each row of n values is reduced in padded vector blocks (symbolic_tiles.cpp,
  // symbolic_reduce_vector_opts): the padded lanes load 0, which the sum's computed value (ReLU(0.5·0
  // + 1) = 1) and the max of values below 0 would take in, unless the reduction adds its identity
  // there. n = 1, 5, 16, 17 and 40 end the rows inside and at the end of a block.
  Graph graph = [](const std::vector<Tensor>& x) {
    Tensor shifted = x[0] * 0.5f + 1.0f;
    return std::vector<Tensor>{shifted.relu().sum({1}), (x[0] + (-3.0f)).max({1}), shifted.relu().mean({1}),
                               x[0].softmax(-1)};
  };
  std::vector<InputSpec> inputs{{{6, -1}}};
  check_at_sizes(graph, inputs, {1, 5, 16, 17, 40});
  SymbolicProgram program(graph, inputs, 64);
  int padded_reductions = 0;
  for (const ScheduledKernel& kernel : program.schedule().kernels)
    padded_reductions += std::ranges::any_of(kernel.opts, [](const Opt& opt) {
      return opt.op == OptOp::Padto && axis_kind(opt.axis) == AxisKind::Reduce;
    }) ? 1 : 0;
  CHECK(padded_reductions >= 3);
}

TEST_CASE("a masked softmax over n×n scores reduces each row along its keys, beside the narrower mask") {
  // Attention scores over a symbolic sequence, masked by a stored bool per key (one byte beside the
  // f32 scores, as BERT's attention mask). The row maximum takes its vector along the keys
  // (symbolic_tiles.cpp, symbolic_reduce_vector_opts), as wide as an f32 vector: the mask's values do
  // not widen it; no reduction takes its vector across rows, which lie n apart
  // (gathers_at_symbolic_stride).
  Graph graph = [](const std::vector<Tensor>& x) {
    Tensor keep = contiguous(x[1].gt(Tensor::scalar(0.0, ScalarType::Float32)));
    Tensor masked = keep.where(x[0], Tensor::scalar(-1e4, ScalarType::Float32));
    return std::vector<Tensor>{masked.max({1}), masked.softmax(-1)};
  };
  std::vector<InputSpec> inputs{{{-1, -1}}, {{1, -1}}};
  check_at_sizes(graph, inputs, {1, 5, 16, 17, 40});
  SymbolicProgram program(graph, inputs, 64);
  const int64_t lanes = host_cpu_caps().vector_lanes(dtypes::f32);
  int along_keys = 0;
  for (const ScheduledKernel& kernel : program.schedule().kernels) {
    bool maximum = std::ranges::any_of(toposort(kernel.ast), [](const UOp* node) {
      return node->op() == Ops::REDUCE && node->arg_op() == Ops::MAX;
    });
    for (const Opt& opt : kernel.opts) {
      if (opt.op != OptOp::Upcast) continue;
      CHECK(axis_kind(opt.axis) == AxisKind::Reduce);  // never the rows' block
      if (maximum && opt.amount == lanes) along_keys += 1;
    }
  }
  CHECK(along_keys >= 1);
}

TEST_CASE("attention over a symbolic sequence: matmuls, softmax, layer norm, mean pooling") {
  const int64_t d = 8;
  Tensor wq = weight({d, d}, 0.25f), wk = weight({d, d}, -0.125f), wv = weight({d, d}, 0.375f);
  Tensor gamma = weight({d}, 0.5f) + 1.0f, beta = weight({d}, 0.125f);
  check_at_sizes(
      [&](const std::vector<Tensor>& x) {
        Tensor q = x[0].matmul(wq), k = x[0].matmul(wk), v = x[0].matmul(wv);
        Tensor scores = q.matmul(k.transpose(0, 1)) * (1.0f / 8.0f);
        Tensor attended = scores.softmax(-1).matmul(v);
        Tensor normed = (attended + x[0]).layer_norm(gamma, beta, 1, 1e-5);
        return std::vector<Tensor>{normed, normed.mean({0})};
      },
      {{{-1, d}}}, {1, 2, 17, 40});
}

TEST_CASE("attention scores over n keys: K copied with its keys contiguous, 8 query rows per tile") {
  // Q·Kᵀ with the keys symbolic: K goes through a transposing copy (tensor_matmul.cpp,
  // symbolic_columns_in_rows) so that the keys are the vector, in blocks PADTO'd to whole vectors,
  // and 8 query rows of a symbolic loop are the tile's rows, by two blocks of keys (symbolic_tiles.cpp,
  // with_symbolic_row_block). n = 1, 5 and 17 leave a row block and a key block partly past the end. Two heads; K is a
  // projection's output, stored in its own order and then copied transposed by a kernel of its own
  // (transposed_block_opts: the keys the vector, the head dimension unrolled).
  Tensor wk = weight({64, 64}, 0.0625f);
  Graph graph = [&](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].matmul(x[1].matmul(wk).transpose(1, 2))};
  };
  std::vector<InputSpec> inputs{{{2, -1, 64}}, {{2, -1, 64}}};
  check_at_sizes(graph, inputs, {1, 5, 16, 17, 40});
  SymbolicProgram program(graph, inputs, 64);
  int tiled = 0, transposing_copies = 0;
  for (const ScheduledKernel& kernel : program.schedule().kernels) {
    bool reduces = std::ranges::any_of(toposort(kernel.ast), [](const UOp* node) { return node->op() == Ops::REDUCE; });
    bool pads = std::ranges::any_of(kernel.opts, [](const Opt& opt) { return opt.op == OptOp::Padto; });
    bool row_blocks = std::ranges::any_of(kernel.opts, [](const Opt& opt) { return opt.op == OptOp::Split && opt.amount == 8; });
    // (8 rows a tile with 32 vector registers, 4 with AVX2's 16.)
    bool row_tile = std::ranges::any_of(kernel.opts, [](const Opt& opt) {
      return opt.op == OptOp::Unroll && axis_kind(opt.axis) == AxisKind::Loop && opt.amount >= 4;
    });
    bool upcast = std::ranges::any_of(kernel.opts, [](const Opt& opt) { return opt.op == OptOp::Upcast; });
    // Two key blocks a tile (1, 1, 2 and 3 blocks at these n: an odd count pads the pair).
    bool key_pairs = std::ranges::any_of(kernel.opts, [](const Opt& opt) {
      return opt.op == OptOp::Unroll && axis_kind(opt.axis) == AxisKind::Loop && opt.amount == 2;
    });
    tiled += reduces && pads && row_blocks && row_tile && key_pairs ? 1 : 0;
    transposing_copies += !reduces && pads && upcast && row_tile ? 1 : 0;
  }
  CHECK(tiled == 1);
  CHECK(transposing_copies == 1);
}

TEST_CASE("a matmul large enough to be vectorised and tiled along its constant axes") {
  Tensor w = weight({64, 48}, 0.125f), bias = weight({48}, 0.5f);
  check_at_sizes([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{(x[0].matmul(w) + bias).relu()}; },
                 {{{-1, 64}}}, {1, 7, 64, 100}, 128);
}

TEST_CASE("symbolic rows in blocks of 8: the full blocks in one kernel, the rows left in a remainder kernel after it") {
  // opt/row_remainders.h: the matmul's rows SPLIT in blocks of 8 that 8 may not divide become a
  // main kernel over 8·⌊n / 8⌋ rows (the SPLIT exact, no store masks) and a tail kernel over n mod
  // 8 rows with no row blocks. n = 1..7 run the tail alone, 8 and 16 the main kernel alone (the
  // tail has no rows), 9, 17 and 63 both. 128 columns: the tail's threads split its columns
  // (with_rows_off_thread_axis), where 48 would all be one tile's and the kernel stay whole.
  Tensor w = weight({64, 128}, 0.125f), bias = weight({128}, 0.5f);
  Graph graph = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{(x[0].matmul(w) + bias).relu()}; };
  std::vector<InputSpec> inputs{{{-1, 64}}};
  check_at_sizes(graph, inputs, {1, 5, 7, 8, 9, 16, 17, 63}, 64);
  SymbolicProgram program(graph, inputs, 64);
  const std::vector<ScheduledKernel>& kernels = program.schedule().kernels;
  auto splits_rows = [](const ScheduledKernel& kernel) {
    return std::ranges::any_of(kernel.opts, [](const Opt& opt) { return opt.op == OptOp::Split && opt.amount == 8; });
  };
  int tails = 0;
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (!kernels[k].finishes_previous) continue;
    ++tails;
    REQUIRE(k > 0);
    CHECK(splits_rows(kernels[k - 1]));
    CHECK_FALSE(splits_rows(kernels[k]));
    CHECK(kernels[k].buffers == kernels[k - 1].buffers);
    // The main kernel's stores are unmasked: its SPLIT divides its rows.
    for (const UOp* node : toposort(kernels[k - 1].ast))
      if (node->op() == Ops::STORE) CHECK(mask_conditions(node->src(0).get()).empty());
  }
  CHECK(tails == 1);
}

TEST_CASE("symbolic rows in blocks (padded, the extra rows stored nowhere), a symbolic reduction, merged symbolic axes") {
  // P·V of attention: an (n, n) · (n, 16) matmul reduces over n and tiles its rows in blocks of 8
  // (SPLIT), so n = 1, 9 and 20 leave a block partly past the end; the elementwise kernel over
  // (n, n, 8) runs its two symbolic axes as one (order_output_axes).
  Tensor w = weight({8}, 0.25f);
  check_at_sizes(
      [&](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{x[0].matmul(x[1]), (x[2] * w + 1.0f).relu(), x[0].softmax(-1).matmul(x[1]) + 1.0f};
      },
      {{{-1, -1}}, {{-1, 16}}, {{-1, -1, 8}}}, {1, 9, 20, 32}, 32);
}

TEST_CASE("an elementwise kernel over symbolic rows of a constant width keeps the width its own loop, as the vector") {
  // As a transformer's GELU over [sequence, 1024] with a batch of one: merged with the rows into one
  // symbolic loop (order_output_axes), the kernel had no constant loop to vectorise and ran scalar,
  // 11x slower than its fixed twin. Rows n = 1, 7 and 100, of at most 128 (more than a small batch,
  // which order_output_axes never merges).
  Tensor b = weight({64}, 0.5f);
  Graph graph = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{(x[0] + b).erf() * x[0]}; };
  std::vector<InputSpec> inputs{{{-1, 64}}};
  check_at_sizes(graph, inputs, {1, 7, 100}, 128);
  SymbolicProgram program(graph, inputs, 128);
  REQUIRE(program.schedule().kernels.size() == 1);
  const std::vector<Opt>& opts = program.schedule().kernels[0].opts;
  CHECK(std::ranges::any_of(opts, [](const Opt& opt) { return opt.op == OptOp::Upcast; }));
}

TEST_CASE("convs and pools over a symbolic image width and signal length (windows at the largest length, cut)") {
  // The image's width is n: each window op pads it to its largest length, windows it there and
  // keeps the windows of length n; the conv's pixels along n are vectorised in padded blocks
  // (PADTO, SPLIT), so n = 5, 18 and 39 end inside a block (18: a ceil_mode tail). A strided, dilated 1-D conv over a
  // signal of length n (padded by 4 each side) covers uneven window counts; the pads let n be 1.
  Tensor w2 = weight({8, 3, 3, 3}, 0.25f), b2 = weight({8}, 0.5f);
  Tensor w1 = weight({4, 2, 5}, 0.125f);
  ConvOptions padded;
  padded.padding = {1, 1, 1, 1};
  ConvOptions strided;
  strided.stride = {2};
  strided.dilation = {2};
  strided.padding = {4, 4};
  PoolOptions pool;
  pool.kernel = {2, 3};
  pool.stride = {2, 2};
  pool.padding = {0, 1, 0, 1};
  check_at_sizes(
      [&](const std::vector<Tensor>& x) {
        Tensor features = x[0].conv(w2, b2, padded).relu();
        // Average pools that count per window (padding left out; a ceil_mode tail) and one that
        // counts the padding; a ceil_mode max pool.
        PoolOptions ceil_pool = pool, counted = pool;
        ceil_pool.ceil_mode = true;
        counted.count_include_pad = true;
        return std::vector<Tensor>{features, features.max_pool(pool), features.max_pool(ceil_pool),
                                   features.avg_pool(pool), features.avg_pool(ceil_pool), features.avg_pool(counted),
                                   x[1].conv(w1, Tensor(), strided)};
      },
      {{{1, 3, 6, -1}}, {{1, 2, -1}}}, {5, 18, 39}, 40);
}

TEST_CASE("a symbolic batch: a computed conv input stored into its padded buffer, a concatenation part by part") {
  // As in a CNN exported with a dynamic batch: the activation before a padded conv is stored
  // straight into the padded buffer by its producer, with kernels that zero the border (rangeify's
  // padded stores, 16-float rows), and the two branches of a channel concatenation store into
  // their slices; as the fixed plan does, at any batch.
  Tensor w = weight({16, 16, 3, 3}, 0.125f), b = weight({16}, 0.5f), w2 = weight({16, 16, 1, 1}, 0.25f);
  ConvOptions same;
  same.padding = {1, 1, 1, 1};
  Graph graph = [&](const std::vector<Tensor>& x) {
    Tensor activation = (x[0] * 2.0).relu();
    Tensor left = activation.conv(w, b, same).relu(), right = x[0].conv(w2).relu();
    return std::vector<Tensor>{Tensor::concat({left, right}, 1)};
  };
  std::vector<InputSpec> inputs{{{-1, 16, 5, 16}}};
  check_at_sizes(graph, inputs, {1, 3, 8}, 8);
  // The border kernels store a constant and load nothing; each branch stores into the output (a
  // kernel's slot 0 is the buffer it stores), where one kernel would select between them.
  SymbolicProgram program(graph, inputs, 8);
  REQUIRE(program.schedule().outputs.size() == 1);
  int output_kernels = 0;
  for (const ScheduledKernel& kernel : program.schedule().kernels)
    output_kernels += kernel.buffers.at(0) == program.schedule().outputs[0] ? 1 : 0;
  CHECK(border_kernels(program.schedule()) == 2);
  CHECK(output_kernels == 2);
}

TEST_CASE("a symbolic image width: a conv input stored into its padded buffer where even its shortest row is long") {
  // As DeepLabV3 over images of any width: the activation before a padded conv is stored straight
  // into the padded buffer where its rows are at least 96 floats (6 lines) at the smallest width,
  // so that the part vector ending each row is a small share of it; narrower rows keep the padded
  // copy (padded_stores.cpp, padded_store_of). Widths 96, 97 and 130 end the rows at different points
  // of a vector.
  Tensor w = weight({8, 8, 3, 3}, 0.125f), b = weight({8}, 0.5f);
  ConvOptions same;
  same.padding = {1, 1, 1, 1};
  Graph graph = [&](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{(x[0] * 2.0).relu().conv(w, b, same).relu()};
  };
  std::vector<InputSpec> inputs{{{1, 8, 3, -1}}};
  check_at_sizes(graph, inputs, {96, 97, 130}, 160, 96);
  CHECK(border_kernels(SymbolicProgram(graph, inputs, 160, 96).schedule()) == 2);
  CHECK(border_kernels(SymbolicProgram(graph, inputs, 160, 95).schedule()) == 0);
  check_at_sizes(graph, inputs, {1, 17, 95}, 160, 1);
}

TEST_CASE("a strided conv over a symbolic signal: its padded windows read without a mask, at every length") {
  // As wav2vec2's feature extractor: 32 filters (the vector) by a block of windows (the tile's
  // rows), the last block padded past the windows of length n. The padded rows read what the
  // block's first row reads (src/opt/padded_loads.h), so no load of the input keeps the stores'
  // mask; n = 1, 2, 17 and 120 end the windows at different points of a block.
  // (32 channels × 3 taps: a reduction long enough for the filters' scattered stores, tile_opts.cpp.)
  Tensor w = weight({32, 32, 3}, 0.125f), b = weight({32}, 0.5f);
  ConvOptions strided;
  strided.stride = {2};
  strided.padding = {1, 1};
  Graph graph = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0].conv(w, b, strided).relu()}; };
  std::vector<InputSpec> inputs{{{1, 32, -1}}};
  check_at_sizes(graph, inputs, {1, 2, 17, 120}, 128);
  SymbolicProgram program(graph, inputs, 128);
  int unmasked_convs = 0;
  for (const ScheduledKernel& kernel : program.schedule().kernels) {
    std::vector<const UOp*> nodes = toposort(kernel.ast);
    if (std::ranges::none_of(nodes, [](const UOp* node) { return node->op() == Ops::REDUCE; })) continue;
    const UOp* stored = nullptr;
    for (const UOp* node : nodes)
      if (node->op() == Ops::STORE) stored = node->src(0).get();
    REQUIRE(stored != nullptr);
    std::vector<UOpPtr> padding = mask_conditions(stored);
    REQUIRE(!padding.empty());  // the padded windows are not stored
    for (const UOp* node : nodes) {
      if (node->op() != Ops::LOAD) continue;
      for (const UOpPtr& condition : mask_conditions(node->src(0).get()))
        CHECK(std::ranges::find(padding, condition) == padding.end());
    }
    unmasked_convs += 1;
  }
  CHECK(unmasked_convs == 1);
}

TEST_CASE("a strided conv over a long symbolic signal: threads split its windows into a constant number of blocks") {
  // wav2vec2's feature extractor over a recording of 256 to 1024 samples: the filter tiles were axis
  // 0, so each thread read the whole signal. BLOCKS cuts the windows (in blocks of a vector, a
  // symbolic count) into a constant number of blocks, merged with the filter tiles as axis 0
  // (thread_blocks.cpp, with_row_blocks); the last block is padded where the count does not divide,
  // at n = 257, 300 and 1000 (and not at 256, 1024: 128, 512 windows).
  Tensor w = weight({64, 32, 3}, 0.125f), b = weight({64}, 0.5f);
  ConvOptions strided;
  strided.stride = {2};
  strided.padding = {1, 1};
  Graph graph = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0].conv(w, b, strided).relu()}; };
  std::vector<InputSpec> inputs{{{1, 32, -1}}};
  check_at_sizes(graph, inputs, {256, 257, 300, 1000, 1024}, 1024, 256);
  SymbolicProgram program(graph, inputs, 1024, 256);
  int blocked_convs = 0;
  for (const ScheduledKernel& kernel : program.schedule().kernels) {
    if (std::ranges::none_of(kernel.opts, [](const Opt& opt) { return opt.op == OptOp::Blocks; })) continue;
    // Axis 0 is constant (blocks × filter tiles): the runner needs no size to split it.
    CHECK(kernel.parallel_extent.is_known());
    CHECK(kernel.parallel_extent.value() >= 2);
    blocked_convs += 1;
  }
  CHECK(blocked_convs == 1);
}

TEST_CASE("an elementwise kernel over an n×n image runs its rows and columns as one loop, with no division left") {
  // DeepLabV3's squeeze-excite scaling: a per-channel scale times a HardSwish of the image. Its rows
  // and columns are one MERGE (symbolic_tiles.cpp, symbolic_rows_merged), whose m / n and m % n every
  // index folds back to m; n = 1, 5, 14 and 17 (odd, under a vector, over one).
  Tensor bias = weight({8, 1, 1}, 0.5f);
  Graph graph = [&](const std::vector<Tensor>& x) {
    Tensor shifted = x[0] + bias;
    return std::vector<Tensor>{x[1] * (shifted * ((shifted + 3.0f).relu() - (shifted - 3.0f).relu()))};
  };
  std::vector<InputSpec> inputs{{{1, 8, -1, -1}}, {{1, 8, 1, 1}}};
  check_at_sizes(graph, inputs, {1, 5, 14, 17}, 32);
  SymbolicProgram program(graph, inputs, 32);
  int merged = 0;
  for (const ScheduledKernel& kernel : program.schedule().kernels) {
    if (std::ranges::none_of(kernel.opts, [](const Opt& opt) { return opt.op == OptOp::Merge; })) continue;
    for (const UOp* node : toposort(kernel.ast))
      CHECK_FALSE(((node->op() == Ops::IDIV || node->op() == Ops::MOD) && !node->src(1)->is_const()));
    merged += 1;
  }
  CHECK(merged == 1);
}

TEST_CASE("a dilated conv whose outer taps reach few image rows: one conv per tap, over the rows it reaches") {
  // Dilation 5, pads 5 over n×n: the outer taps read nothing at n <= 5, one row at n = 6, and at
  // most 3/4 of the rows a padded conv computes up to n = 12, so the conv is one conv per tap over
  // the rows that tap reaches, zero-padded back and summed (tensor_conv.cpp, conv_by_tap_regions),
  // in a symbolic plan for 2..12 and at each fixed n. The reference is the same conv with its
  // dilation written into an 11×11 kernel of zeros between the taps (dilation 1, pads 5), which
  // stays one padded conv.
  Tensor w = weight({6, 4, 3, 3}, 0.125f), b = weight({6}, 0.5f);
  std::vector<float> spread(6 * 4 * 11 * 11, 0.0f);
  std::vector<float> taps = w.to_vector<float>();
  for (int f = 0; f < 6 * 4; ++f)
    for (int ky = 0; ky < 3; ++ky)
      for (int kx = 0; kx < 3; ++kx) spread[static_cast<size_t>((f * 11 + 5 * ky) * 11 + 5 * kx)] = taps[static_cast<size_t>((f * 3 + ky) * 3 + kx)];
  Tensor w_spread = Tensor::from_vector<float>(spread, {6, 4, 11, 11});
  ConvOptions dilated;
  dilated.padding = {5, 5, 5, 5};
  dilated.dilation = {5, 5};
  ConvOptions plain;
  plain.padding = {5, 5, 5, 5};
  for (int64_t n : {2, 5, 6, 7, 10, 12}) {
    CAPTURE(n);
    Tensor x = Tensor::from_vector<float>(input_values(static_cast<size_t>(4 * n * n), 0), {1, 4, n, n});
    std::vector<float> by_taps = x.conv(w, b, dilated).relu().to_vector<float>();
    std::vector<float> reference = x.conv(w_spread, b, plain).relu().to_vector<float>();
    REQUIRE(by_taps.size() == reference.size());
    for (size_t i = 0; i < reference.size(); ++i) CHECK(by_taps[i] == doctest::Approx(reference[i]).epsilon(1e-5));
  }
  Graph graph = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0].conv(w, b, dilated).relu()}; };
  std::vector<InputSpec> inputs{{{1, 4, -1, -1}}};
  check_at_sizes(graph, inputs, {2, 5, 6, 7, 12}, 12, 2);
  SymbolicProgram program(graph, inputs, 12, 2);
  CHECK(program.schedule().kernels.size() >= 9);  // a conv per tap
}

TEST_CASE("a 1x1 conv over an n×n image merges its pixels and takes two vector blocks as its tile's columns") {
  // The rows and columns are one loop of n² pixels (MERGE), in blocks of one vector, the last one
  // masked; the block is the tile's vector and the filters its rows; the blocks are SPLIT in pairs
  // (on AVX2, in the symbolic row loop's blocks of 8), unrolled as a second column (symbolic_tiles.cpp,
  // merged_pixel_block_opts and with_row_pairs). An odd block count pads the last pair (its second
  // block recomputed, stored nowhere). With n at least 6 there are at least 2 blocks of 16 at every
  // size.
  Tensor w = weight({32, 24, 1, 1}, 0.125f), b = weight({32}, 0.5f);
  Graph graph = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0].conv(w, b).relu()}; };
  std::vector<InputSpec> inputs{{{1, 24, -1, -1}}};
  check_at_sizes(graph, inputs, {6, 7, 14, 17, 32}, 32, 6);
  SymbolicProgram program(graph, inputs, 32, 6);
  int paired = 0;
  for (const ScheduledKernel& kernel : program.schedule().kernels) {
    bool merges = std::ranges::any_of(kernel.opts, [](const Opt& opt) { return opt.op == OptOp::Merge; });
    bool unrolls_pairs = std::ranges::any_of(kernel.opts, [](const Opt& opt) {
      return opt.op == OptOp::Unroll && axis_kind(opt.axis) == AxisKind::Loop && opt.amount == 2;
    });
    paired += merges && unrolls_pairs ? 1 : 0;
  }
  CHECK(paired == 1);
}

TEST_CASE("a (3, n) tensor stored flat as (1, 3·n) and read back divides by nothing at run time") {
  // (torch's dynamo export gathers BERT's mask from its flattened batch·sequence form.) The read
  // of the flat buffer as (3, n) needs no remainder by 3·n, which the simplifier cannot drop.
  Graph graph = [](const std::vector<Tensor>& x) {
    Dims dims = dims_of(x[0]);
    Tensor flat = contiguous(reshape_to(x[0] * 2.0f, {1, dims_numel(dims)}));
    return std::vector<Tensor>{reshape_to(flat, dims) + x[0]};
  };
  check_at_sizes(graph, {{{3, -1}}}, {1, 5, 17});
  SymbolicProgram program(graph, {{{3, -1}}}, 64);
  for (const ScheduledKernel& kernel : program.schedule().kernels)
    for (const UOp* node : toposort(kernel.ast)) {
      CHECK(node->op() != Ops::IDIV);
      CHECK(node->op() != Ops::MOD);
    }
}

TEST_CASE("an embedding lookup of a symbolic number of token ids, pooled") {
  Tensor table = weight({5, 4}, 0.75f);
  check_at_sizes(
      [&](const std::vector<Tensor>& x) {
        Tensor ids = (x[0] * 2.0f).cast(ScalarType::Int64);  // -2..2: negative ids count from the end
        Tensor embedded = table.take(ids, 0);                 // (n, 3, 4)
        return std::vector<Tensor>{embedded, embedded.mean({0, 1})};
      },
      {{{-1, 3}}}, {1, 6, 33});
}

TEST_CASE("a symbolic schedule: kernels list their variables, buffers their counts at the maximum") {
  SymbolicProgram program([](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0].sum({1}) * 2.0f}; },
                          {{{-1, 5}}}, 40);
  const Schedule& schedule = program.schedule();
  REQUIRE(!schedule.kernels.empty());
  for (const ScheduledKernel& kernel : schedule.kernels) {
    REQUIRE(kernel.variables.size() == 1);
    CHECK(kernel.variables[0] == VariableSpec{"n", 1, 40});
  }
  for (const ScheduledBuffer& buffer : schedule.buffers) {
    CHECK(!buffer.elements.is_known());
    CHECK(buffer.count == buffer.elements.max());
  }
  CHECK(program.outputs()[0].ndim() == 1);
  CHECK_THROWS_WITH_AS(program.outputs()[0].shape(), doctest::Contains("symbolic shape (n,)"), UserError);
  CHECK_THROWS_WITH_AS(program.run(41, {std::vector<float>(205)}), doctest::Contains("'n' is 41; its range is 1..40"),
                       UserError);
}

TEST_CASE("what needs fixed sizes says so, naming the symbolic dimension") {
  Dim n = size_variable("n", 1, 16);
  Tensor x = symbolic_graph_input("x", {n, 4}, ScalarType::Float32);
  CHECK_THROWS_WITH_AS(x.numel(), doctest::Contains("symbolic shape (n, 4)"), UserError);
  CHECK(x.dim(1) == 4);
  CHECK_THROWS_WITH_AS(x.dim(0), doctest::Contains("the symbolic dimension n"), UserError);
  CHECK_THROWS_WITH_AS(x.shrink({{0, 2}}), doctest::Contains("of symbolic size n, which may be as small as 1"), UserError);
  CHECK(x.shrink({{0, 1}}).shape() == Shape{1, 4});  // a fixed range within every allowed size
  // Broadcasting a symbolic size against a different fixed one is refused, not guessed.
  Tensor y = Tensor::from_vector<float>(std::vector<float>(12), {3, 4});
  CHECK_THROWS_WITH_AS(x + y, doctest::Contains("do not broadcast"), UserError);
  CHECK_THROWS_WITH_AS(x.reshape({3, -1}), doctest::Contains("reshape"), UserError);
  CHECK_THROWS_WITH_AS(size_variable("m", 5, 2), doctest::Contains("'m': the range 5..2"), UserError);
  // Realizing it in process needs the input's values, as for any graph input.
  CHECK_THROWS_WITH_AS((x * 2.0f).realize(), doctest::Contains("graph input 'x'"), UserError);
}

}  // TEST_SUITE
