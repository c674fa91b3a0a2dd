// Compile-time constant folding (fold_constants in tensor_internal.h).
//
// A value is constant when every buffer it reads has data at compile time (a weight, not a graph
// input placeholder). The values worth computing once are the constant ones that a run-time value
// reads (the "frontier"): a weight transposed for a matmul, BatchNorm's scale 1/sqrt(var+eps)·γ,
// a weight-only subgraph. Each is realized here, with the same kernels a run would use, and
// replaced by a buffer holding its result; the plan then stores that buffer as a weight.
//
// What is not folded:
//  - views of one buffer (reshape, permute, expand …, no arithmetic): a kernel reads them in place;
//  - the movement ops above a folded value (a bias reshaped and broadcast over an activation): the
//    value below them is folded, the broadcast stays a view, so nothing grows;
//  - values much larger than the buffers they read (an outer product of two weight vectors): a
//    kernel recomputes them cheaper than it loads them; except an explicit copy (CONTIGUOUS), a
//    weight reordered for the kernel that reads it, up to 1 GiB;
//  - arithmetic on constants alone with no buffer (arange, iota masks): index math, cheaper inline;
//  - a one-hot comparison of constant indices with an arange (see the loop below);
//  - a widening cast of an 8-bit integer: the value below it is folded (see the loop below);
//  - in device plans (`keep_narrow_weights`), a widening float cast (f16 or bf16 weights cast to
//    f32 for a conv or matmul): the value below the cast is folded instead (the weight reordered
//    into panels, still f16) and the cast stays in the kernels that read it, so the plan keeps the
//    weights' own size and a GPU kernel sees f16 operands it can give to tensor cores
//    (opt/gpu_tensor_cores.h); a bare cast of a weight is not folded at all. CPU plans fold the
//    f32 value: measured with f16 vectorised, ResNet-50 fp16 ran 35 ms with f32 weights against 43
//    with f16 ones (its convs convert each weight on every load). BERT-base fp16 seemed to prefer
//    f16 weights (240 against 203 ms), but only because its folded f32 weights had lost their
//    panel order (the cast was above the copy); with the panels kept it runs 106 ms
//    (bench/README.md).
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "ir/build.h"
#include "ir/substitute.h"
#include "support/error.h"
#include "tensor/tensor_data.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

// Whether a node's value or shape depends on a size variable (docs/symbolic-shapes.md): a
// DEFINE_VAR (a symbolic size used as a value), or a movement or arange whose sizes name a symbolic
// dim. Such values are known only when a plan runs, so they are never folded.
bool depends_on_size_variable(const UOp* node) {
  if (node->op() == Ops::DEFINE_VAR) return true;
  if (node->op() == Ops::SPECIAL) return node->src_count() == 1 && node->src(0)->is_const() &&
                                         node->src(0)->const_int() < kFirstDimMarker;
  if (op_group(node->op()) != OpGroup::Movement) return false;
  const std::vector<int64_t>& args = node->arg_list();
  return std::any_of(args.begin(), args.end(), [](int64_t arg) { return arg < kFirstDimMarker; });
}

using detail::TensorData;

struct NodeFacts {
  bool constant = false;     // every buffer below has data at compile time
  bool reads_data = false;   // some buffer below has data
  bool has_work = false;     // some ALU, cast, reduction or CONTIGUOUS below (not a pure view)
};

bool is_movement(Ops op) { return op_group(op) == OpGroup::Movement; }

// `node` with a widening float cast below its movement ops and copies moved above them: the same
// chain of movements and copies over the narrow value (whose folded result the cast then widens);
// nullptr when there is no such cast.
UOpPtr narrow_below_widening_cast(const UOp* node) {
  std::vector<const UOp*> chain;
  const UOp* at = node;
  while (is_movement(at->op()) || at->op() == Ops::CONTIGUOUS) {
    chain.push_back(at);
    at = at->src(0).get();
  }
  if (at->op() != Ops::CAST || !at->src(0)->dtype().is_narrow_float() || !at->dtype().is_float() ||
      at->dtype().scalar_bytes() <= at->src(0)->dtype().scalar_bytes())
    return nullptr;
  UOpPtr value = at->src(0);
  for (auto above = chain.rbegin(); above != chain.rend(); ++above)
    value = UOp::make((*above)->op(), value->dtype(), {value}, (*above)->arg());
  return value;
}

// The buffer ids the handles below `roots` hold; with `all_data`, every one, otherwise only those
// without data (graph_input placeholders).
void collect_buffer_ids(const std::vector<Tensor>& roots, bool all_data, std::unordered_set<int64_t>& ids) {
  std::unordered_set<const TensorData*> seen;
  std::vector<const TensorData*> stack;
  for (const Tensor& root : roots)
    if (root.defined()) stack.push_back(&root.data());
  while (!stack.empty()) {
    const TensorData* data = stack.back();
    stack.pop_back();
    if (!seen.insert(data).second) continue;
    if (data->buffer_id >= 0 && (all_data || !data->buffer)) ids.insert(data->buffer_id);
    for (const auto& input : data->inputs) stack.push_back(input.get());
  }
}

// Buffer ids whose values exist only when the plan runs: placeholders, and every buffer a run-time
// input reads (an input may be a lazy expression over buffers of its own).
std::unordered_set<int64_t> runtime_buffer_ids(const std::vector<Tensor>& outputs,
                                               const std::vector<Tensor>& runtime_inputs) {
  std::unordered_set<int64_t> ids;
  collect_buffer_ids(runtime_inputs, true, ids);
  collect_buffer_ids(outputs, false, ids);
  return ids;
}

// CAST(f32, BITCAST(bf16, 16-bit integer)): a bf16 value read from its bits.
bool widens_bf16_bits(const UOp* node) {
  if (node->op() != Ops::CAST || node->dtype() != dtypes::f32) return false;
  const UOp* bits = node->src(0).get();
  return bits->op() == Ops::BITCAST && bits->dtype() == dtypes::bf16 && bits->src(0)->dtype().is_int();
}

}  // namespace

bool widens_8bit_integer(const UOp* node) {
  if (node->op() != Ops::CAST || !node->dtype().is_int() || node->dtype().scalar_bytes() <= 1) return false;
  DType source = node->src(0)->dtype();
  return source.is_int() && source != dtypes::bool_ && source.scalar_bytes() == 1;
}

std::vector<Tensor> fold_constants(const std::vector<Tensor>& outputs, const std::vector<Tensor>& runtime_inputs,
                                   ConstantFoldReport* report, ConstantFoldCache* cache, bool keep_narrow_weights) {
  if (report != nullptr) *report = {};
  std::unordered_set<int64_t> runtime = runtime_buffer_ids(outputs, runtime_inputs);
  std::vector<UOpPtr> roots;
  for (const Tensor& output : outputs) roots.push_back(output.data().node);
  UOpPtr graph = sink(roots);
  std::vector<const UOp*> order = toposort(graph);

  std::unordered_map<const UOp*, NodeFacts> facts;
  std::unordered_map<const UOp*, std::unordered_set<int64_t>> buffers_below;  // only for constant nodes
  for (const UOp* node : order) {
    if (node == graph.get()) continue;
    NodeFacts& fact = facts[node];
    if (node->op() == Ops::BUFFER) {
      int64_t id = node->arg_list().at(0);
      fact.constant = !runtime.contains(id);
      fact.reads_data = fact.constant;
      if (fact.constant) buffers_below[node] = {id};
      continue;
    }
    fact.constant = !depends_on_size_variable(node);
    fact.has_work = !is_movement(node->op()) && node->op() != Ops::CONST && node->op() != Ops::SPECIAL;
    std::unordered_set<int64_t> below;
    for (const UOpPtr& src : node->srcs()) {
      const NodeFacts& source = facts.at(src.get());
      fact.constant = fact.constant && source.constant;
      fact.reads_data = fact.reads_data || source.reads_data;
      fact.has_work = fact.has_work || source.has_work;
    }
    if (!fact.constant || !fact.reads_data) continue;
    for (const UOpPtr& src : node->srcs()) {
      auto found = buffers_below.find(src.get());
      if (found != buffers_below.end()) below.insert(found->second.begin(), found->second.end());
    }
    buffers_below[node] = std::move(below);
  }
  // Bytes of each constant buffer, by id, for the size rule.
  std::unordered_map<int64_t, int64_t> buffer_bytes;
  for (const UOp* node : order)
    if (node->op() == Ops::BUFFER) buffer_bytes[node->arg_list().at(0)] = node->arg_list().at(1) * node->dtype().scalar_bytes();

  // The frontier: constant values read by run-time values (or that are outputs themselves).
  std::vector<const UOp*> frontier;
  std::unordered_set<const UOp*> in_frontier;
  auto add_frontier = [&](const UOp* node) {
    if (!facts.at(node).constant) return;
    if (in_frontier.insert(node).second) frontier.push_back(node);
  };
  for (const UOp* node : order) {
    if (node == graph.get() || facts.at(node).constant) continue;
    for (const UOpPtr& src : node->srcs()) add_frontier(src.get());
  }
  // A constant output is left to its kernel: an output that is a bare buffer would have no kernel
  // to write it (rangeify builds kernels for computed values only).
  std::unordered_set<const UOp*> root_nodes;
  for (const UOpPtr& root : roots) root_nodes.insert(root.get());

  ShapeMap shapes;
  std::vector<const UOp*> targets;
  std::unordered_set<const UOp*> is_target;
  std::unordered_map<const UOp*, UOpPtr> narrow;  // target → the value folded in its place, then widened
  for (const UOp* node : frontier) {
    while (is_movement(node->op()) && facts.at(node->src(0).get()).constant) node = node->src(0).get();
    // An 8-bit integer widened (an integer matmul's weight, tensor_matmul.cpp) is folded below the cast
    // and its views, and widened where it is read: exact, a quarter of the bytes of i32, the copy's
    // own layout (matmul panels) kept, and the operand 8-bit dot-product instructions take.
    if (widens_8bit_integer(node)) {
      node = node->src(0).get();
      while (is_movement(node->op())) node = node->src(0).get();
    }
    // So is a bf16 weight held as its bits (--precision bf16: tensor/matmul_precision.h), below the
    // widening cast and the bitcast: half the bytes of f32, in the pair panels AMX tiles load.
    if (widens_bf16_bits(node)) {
      node = node->src(0)->src(0).get();
      while (is_movement(node->op())) node = node->src(0).get();
    }
    const NodeFacts& fact = facts.at(node);
    if (!fact.reads_data || !fact.has_work || node->op() == Ops::BUFFER || root_nodes.contains(node)) continue;
    // A one-hot comparison (constant indices compared with an arange: take, a Resize's taps)
    // stays in the kernel: rangeify collapses the reduction it selects into one load at the index
    // (schedule/reduce_collapse.h), which a folded mask hides. Folded, DeepLabV3's bilinear
    // upsampling summed 14 masked columns per tap (0.49 ms of 6.7 at 224²).
    if (node->op() == Ops::CMPEQ &&
        (!facts.at(node->src(0).get()).reads_data || !facts.at(node->src(1).get()).reads_data))
      continue;
    if (UOpPtr narrowed = keep_narrow_weights ? narrow_below_widening_cast(node) : nullptr) {
      // Only a copy or real work below the cast is worth a folded buffer.
      const UOp* below = narrowed.get();
      while (is_movement(below->op())) below = below->src(0).get();
      if (below->op() == Ops::BUFFER) continue;
      narrow.emplace(node, narrowed);
    }
    int64_t source_bytes = 0;
    for (int64_t id : buffers_below.at(node)) source_bytes += buffer_bytes.at(id);
    int64_t bytes = dims_numel(shapes.of(node)).max() * node->dtype().scalar_bytes();
    constexpr int64_t kSmallValue = 1 << 16;
    // An explicit copy (CONTIGUOUS) asks for the value laid out in memory: a weight reordered into
    // the panels a kernel reads (conv filters, matmul columns). It is folded even when it is much
    // larger than what it reads (a weight that broadcasts one value, as in the weight-stripped test
    // models), up to kLargestCopy: recomputed, it would be a kernel that writes the whole weight on
    // every run, and without the copy the conv keeps a slower layout.
    constexpr int64_t kLargestCopy = int64_t{1} << 30;
    bool explicit_copy = node->op() == Ops::CONTIGUOUS && bytes <= kLargestCopy;
    if (!explicit_copy && bytes > 2 * source_bytes + kSmallValue) continue;
    if (is_target.insert(node).second) targets.push_back(node);
  }
  if (targets.empty()) return outputs;

  // Realize every target not in the cache in one schedule. Each tensor keeps the outputs alive,
  // and with them every buffer the graph reads.
  std::vector<Tensor> folded;
  std::vector<const Tensor*> keep;
  for (const Tensor& output : outputs) keep.push_back(&output);
  std::unique_lock<std::mutex> lock;
  if (cache != nullptr) lock = std::unique_lock<std::mutex>(cache->mutex);
  std::vector<Tensor*> pending;
  std::vector<size_t> computed;
  for (const UOp* target : targets) {
    if (cache != nullptr) {
      auto found = cache->values.find(target->self());
      if (found != cache->values.end()) {
        folded.push_back(found->second);
        continue;
      }
    }
    auto narrowed = narrow.find(target);
    UOpPtr value = narrowed != narrow.end() ? narrowed->second : target->self();
    folded.push_back(make_tensor_dims(value, shapes.of(target), value->dtype(), keep));
    computed.push_back(folded.size() - 1);
  }
  for (size_t i : computed) pending.push_back(&folded[i]);
  if (!pending.empty()) realize_tensors(pending);
  // The cache keeps a realized value (its buffer, not the graph it came from) under its node.
  if (cache != nullptr)
    for (size_t i : computed) cache->values.emplace(targets[i]->self(), folded[i]);

  std::unordered_map<const UOp*, UOpPtr> replacements;
  int64_t folded_bytes = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    // A value folded narrow (now, or by an earlier fold into the cache) is widened where it is read.
    UOpPtr value = folded[i].data().node;
    if (folded[i].data().dtype != targets[i]->dtype()) value = UOp::make(Ops::CAST, targets[i]->dtype(), {value});
    replacements.emplace(targets[i], value);
    folded_bytes += folded[i].numel() * folded[i].data().dtype.scalar_bytes();
  }
  UOpPtr rewritten = substitute(graph, replacements);
  std::vector<const Tensor*> inputs = keep;
  for (const Tensor& tensor : folded) inputs.push_back(&tensor);
  std::vector<Tensor> result;
  for (size_t i = 0; i < outputs.size(); ++i) {
    // An output that became a folded buffer itself (a reshape of one collapses into the buffer)
    // needs a kernel that copies it into the output: rangeify builds kernels for computed values.
    UOpPtr root = rewritten->src(i);
    if (root.get() == roots[i].get()) {  // untouched: keep the handle (it may be a realized buffer)
      result.push_back(outputs[i]);
      continue;
    }
    if (root->op() == Ops::BUFFER) root = UOp::make(Ops::CONTIGUOUS, root->dtype(), {root});
    result.push_back(make_tensor_dims(root, dims_of(outputs[i]), outputs[i].data().dtype, inputs));
  }
  if (report != nullptr) {
    report->values = static_cast<int>(targets.size());
    report->bytes = folded_bytes;
  }
  return result;
}

}  // namespace kiln
