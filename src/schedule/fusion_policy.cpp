// Which values of the tensor graph get buffers of their own: the cost rule of rangeify.
//
// The cost rule. A value is recomputed wherever it is used unless:
//  - it is a reduction used by more than one node, or reached through an EXPAND (a broadcast):
//    recomputing it per broadcast element would repeat the whole reduction loop (softmax's max and
//    sum, a norm's mean); or
//  - it is a reduction whose value flows, through elementwise and movement ops, into more than one
//    reduction or output: each of those kernels would run its loop again (a matmul before a
//    LayerNorm feeds the mean, the variance and the normalised output), or into elementwise work
//    of at least kExpensiveOps (its epilogue would run scalar, once per output, in the reduction
//    kernel's tail instead of in a vectorised elementwise kernel); or
//  - it is elementwise work of at least kExpensiveOps ALU ops reached through an EXPAND: each
//    broadcast element would redo it, where a load is one memory access. Inside a reduction loop
//    the bar is kExpensiveOpsInLoop: the loop body runs for every filter a conv's input meets, so
//    a residual chain or a normalisation before a matmul is materialised once instead.
//  - it is a reduction, or elementwise work of at least kExpensiveOps, that one kernel needs at two
//    different indices (shifted views of one value, as in LRN's window sum over a conv's output):
//    each index would redo it. Found while the kernel is built; the kernel is then built again.
//  - it is expensive elementwise work that fans out into a reduction to one element and into some
//    other kernel (DynamicQuantizeLinear's min, max and quantization of a GELU): each would redo
//    it, and the single-output reductions run on one thread (feeds_whole_reduction_and_more).
//  - it is a reduction or expensive elementwise work under padding (a conv output, or its sigmoid,
//    that is one input of a concatenation): WHERE evaluates every arm, so it would run for the
//    padded elements too.
// A PAD counts as 2 ops in that cost (bounds compares, a select, a masked load), so a
// concatenation of many inputs read through a broadcast (a 1x1 conv over DenseNet's concatenated
// features) is materialised once instead of re-selecting its inputs per output channel.
// Cheap elementwise work (a cast, a relu, padding) is recomputed: memory traffic costs more. An op
// on f16 or bf16 values counts twice, and a cast to them once: each rounds its result (an f16 or
// bf16 bias add before a matmul is then stored once, not rounded in the matmul's loop). But a
// value that this rule stores and that only a narrowing float cast reads (an f32 LayerNorm cast to
// f16 for an f16 matmul) is stored as the cast's value: fewer bytes, and rounded once
// (stores_narrowed).
// A value that a CONTIGUOUS copies as it is is never recomputed by its other consumers: they read
// the copy's buffer (contiguous_copy_of). Elementwise work on a single reduction that nothing else
// reads (a conv's BatchNorm), reached inside another reduction's loop, is stored in the
// reduction's place (epilogue_of_stored_reduction): same bytes, computed once.
#include "schedule/rangeifier.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/build.h"
#include "passes/symbolic.h"
#include "schedule/copy_elision.h"
#include "schedule/order_output_axes.h"
#include "schedule/reduce_collapse.h"
#include "schedule/reduce_factors.h"
#include "schedule/schedule.h"
#include "schedule/split_reduce_ranges.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/hash.h"
#include "tensor/tensor_data.h"

namespace kiln::rangeify {

int recompute_cost(const UOp* root, int limit, int pad_cost, bool count_selects,
                   const std::function<bool(const UOp*)>& stored) {
  int cost = 0;
  std::vector<const UOp*> stack{root};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty() && cost < limit) {
    const UOp* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    OpGroup group = op_group(node->op());
    if (node->op() == Ops::REDUCE_AXIS || node->op() == Ops::CONTIGUOUS || node->op() == Ops::BUFFER) continue;
    if (node != root && stored && stored(node)) continue;
    bool select = node->op() == Ops::WHERE || node->dtype().is_bool();
    // An op on f16 or bf16 values is computed in f32 and rounded back (two conversions, or a
    // dozen integer ops for bf16), and so is a cast that narrows to them: each rounding counts one
    // more. (BERT-base bf16's attention scores recomputed the query's bias add and its roundings
    // for every key tile, at 37 GFLOP/s.)
    bool narrow = node->dtype().is_narrow_float();
    if ((group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary) && (count_selects || !select))
      cost += (node->op() == Ops::EXP2 || node->op() == Ops::LOG2 || node->op() == Ops::SIN) ? 20 : (narrow ? 2 : 1);
    if (node->op() == Ops::CAST && narrow && !node->src(0)->dtype().is_narrow_float()) cost += 1;
    // A PAD lowers to bounds compares, a select and a masked load: a concatenation of k inputs is
    // k of them plus k - 1 selects, work that a broadcast (a 1x1 conv over the concatenation)
    // would repeat for every output channel.
    if (node->op() == Ops::PAD) cost += pad_cost;
    for (const UOpPtr& src : node->srcs()) stack.push_back(src.get());
  }
  return cost;
}

int arithmetic_cost(const UOp* root) { return recompute_cost(root, kExpensiveOps, 0, false); }

bool reads_arange(const UOp* root) {
  std::vector<const UOp*> stack{root};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty() && seen.size() < 64) {
    const UOp* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (node->op() == Ops::SPECIAL) return true;
    if (node->op() == Ops::REDUCE_AXIS || node->op() == Ops::CONTIGUOUS || node->op() == Ops::BUFFER) continue;
    for (const UOpPtr& src : node->srcs()) stack.push_back(src.get());
  }
  return false;
}

int64_t Rangeifier::reduced_elements(const UOp* reduction) {
  // (at the variables' maxima: this only picks kernel boundaries)
  int64_t out = dims_numel(shapes_.of(reduction)).max();
  return out == 0 ? 0 : dims_numel(shapes_.of(reduction->src(0).get())).max() / out;
}

// Whether `reduction` sums products of two values widened from bf16 (`--precision bf16`'s matmuls
// and convs, tensor/matmul_precision.h), which AMX tiles compute: their epilogue is a loop over
// the tile's rows, where one more read of a stored value costs no change to the product. So where
// two of them meet in one epilogue (a ResNet downsample block adds its shortcut conv to its last
// conv), one is stored and the other's kernel takes the sum; storing both and adding them in a
// third kernel moved each block output's f32 bytes three more times (ResNet-50 bf16 layer1: 4.0 ->
// 3.1 ms at one thread). f32 convs keep storing both: the register-tiled kernel that takes the sum
// orders its output for the shortcut's read (ResNet-50 fp32's downsample blocks ran slower).
bool Rangeifier::bf16_product(const UOp* reduction) {
  const UOp* product = reduction->src(0).get();
  if (product->op() != Ops::MUL) return false;
  auto widened_from_bf16 = [](const UOp* operand) {
    while (op_group(operand->op()) == OpGroup::Movement) operand = operand->src(0).get();
    return operand->op() == Ops::CAST && operand->src(0)->dtype().scalar() == ScalarType::BFloat16;
  };
  return widened_from_bf16(product->src(0).get()) && widened_from_bf16(product->src(1).get());
}

// Whether `node` computes a reduction other than `reduction` that is not stored yet, through
// elementwise and movement ops.
bool Rangeifier::reaches_other_unstored_reduction(const UOp* node, const UOp* reduction) {
  std::vector<const UOp*> stack{node};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty()) {
    const UOp* current = stack.back();
    stack.pop_back();
    // (a value with a contiguous copy is read from the copy)
    if (!seen.insert(current).second || buffer_of_.contains(current) || contiguous_copy_of(current)) continue;
    // Of two bf16 products meeting in one epilogue, the first given a kernel of its own is stored
    // and the second's kernel reads it (see bf16_product).
    if (current->op() == Ops::REDUCE_AXIS && forced_.contains(current) && bf16_product(current) &&
        bf16_product(reduction))
      continue;
    if (current->op() == Ops::REDUCE_AXIS) {
      if (current != reduction) return true;
      continue;
    }
    if (current->op() == Ops::BUFFER || current->op() == Ops::CONTIGUOUS) continue;
    for (const UOpPtr& src : current->srcs()) stack.push_back(src.get());
  }
  return false;
}

bool Rangeifier::reduction_needs_own_kernel(const UOp* reduction) {
  std::unordered_set<const UOp*> boundaries, seen;
  // (node, whether the path from the reduction to it crossed a broadcast)
  std::vector<std::pair<const UOp*, bool>> stack{{reduction, false}};
  while (!stack.empty()) {
    auto [node, broadcast] = stack.back();
    stack.pop_back();
    // A value with a contiguous copy is read from the copy by all its other consumers
    // (contiguous_copy_of): the block output of a ResNet stage, realised for the next conv's
    // channels-last copy, is one place, not also the next block's residual add.
    std::unordered_set<const UOp*> copy_only;
    if (const UOp* copy = contiguous_copy_of(node)) copy_only.insert(copy);
    for (const UOp* consumer : copy_only.empty() ? consumers_[node] : copy_only) {
      if (!seen.insert(consumer).second) continue;
      // A concatenation stored one input at a time computes this reduction in its input's own
      // kernel, stored at its offset: the other inputs are not in that kernel, so the select
      // joins nothing. The concatenation's buffer is the one place it flows into.
      if (auto root = concat_root_of_.find(consumer); root != concat_root_of_.end()) {
        boundaries.insert(root->second);
        if (boundaries.size() > 1) return true;
        continue;
      }
      bool boundary = consumer->op() == Ops::REDUCE_AXIS || consumer->op() == Ops::CONTIGUOUS ||
                      output_nodes_.contains(consumer);
      // An expensive epilogue (GELU's erf after the FFN matmul) would run once per output in the
      // reduction kernel's scalar tail; in a kernel of its own it is a plain elementwise loop
      // that vectorises.
      OpGroup group = op_group(consumer->op());
      bool alu = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary;
      // (A value with a contiguous copy is stored, and read from there: a ResNet block's output,
      // which the next block's residual add reads. Counted through, the chain of residual adds
      // made the fourth block of a stage "expensive", and its conv stored its bare sums.)
      auto copied = [&](const UOp* value) { return contiguous_copy_of(value) != nullptr; };
      if (alu && recompute_cost(consumer, kExpensiveOps, 2, true, copied) >= kExpensiveOps) return true;
      // Two contractions meeting in one epilogue (a ResNet downsample block adds its shortcut
      // conv to its last conv) would share one kernel, whose register tile fits neither: each
      // is stored on its own (ResNet-50's four such blocks ran at 68-113 GFLOP/s fused).
      if (alu) {
        for (const UOpPtr& other : consumer->srcs())
          if (other.get() != node && reaches_other_unstored_reduction(other.get(), reduction)) return true;
      }
      if (boundary) {
        boundaries.insert(consumer);
        if (boundaries.size() > 1) return true;
        // Inside another reduction's loop (a conv under a global average pool) the contraction
        // runs once per step of the outer reduction, nested where its output axes cannot be
        // vectorised; stored first, it is a plain conv kernel with a register tile (MobileNetV2's
        // last conv + pool: 5.7 GFLOP/s fused). Reached through a broadcast (the next conv reads
        // this conv's output once per filter), its epilogue is stored instead, with the
        // contraction in that kernel (epilogue_of_stored_reduction): storing the bare sums cost
        // ResNet-50 a separate bias + ReLU kernel after every conv but the last.
        if (consumer->op() == Ops::REDUCE_AXIS && reduced_elements(reduction) >= kNestedContraction && !broadcast)
          return true;
      } else {
        stack.push_back({consumer, broadcast || consumer->op() == Ops::EXPAND});
      }
    }
  }
  return false;
}

// Whether `node` is elementwise work on exactly one reduction (a conv's BatchNorm, with its
// per-channel constants) that nothing else reads: the reduction is stored anyway when a
// broadcast reaches it, so storing `node` instead costs the same bytes and runs the epilogue once
// per element in the reduction's kernel, not once per read inside the consumer's loop (the
// BatchNorm after MobileNetV2's linear-bottleneck 1x1 convs was recomputed by the next conv for
// each of its filter rows).
bool Rangeifier::epilogue_of_stored_reduction(const UOp* node) {
  int reductions = 0;
  std::vector<const UOp*> stack{node};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty()) {
    const UOp* current = stack.back();
    stack.pop_back();
    if (!seen.insert(current).second) continue;
    for (const UOpPtr& src_pointer : current->srcs()) {
      const UOp* src = src_pointer.get();
      OpGroup group = op_group(src->op());
      bool alu = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary;
      if (src->op() == Ops::REDUCE_AXIS) {
        // Same element count, or storing `node` would cost more than the reduction (x - mean
        // reads a small mean and writes a full-size tensor).
        if (consumers_[src].size() != 1 || buffer_of_.contains(src) ||
            !(dims_numel(shapes_.of(src)) == dims_numel(shapes_.of(node))))
          return false;
        ++reductions;
      } else if (alu || (src->op() == Ops::RESHAPE && !computes_nothing(src))) {
        // (a conv's sum is reshaped to (N, F, H, W) before its bias and BatchNorm)
        if (consumers_[src].size() != 1) return false;
        stack.push_back(src);
      } else if (computes_nothing(src)) {
        continue;  // a constant or a view of a buffer (the BatchNorm's scale and shift)
      } else {
        return false;
      }
    }
  }
  return reductions == 1;
}

// Whether `node` only places stored values and constants (movement ops over buffers and consts).
bool Rangeifier::computes_nothing(const UOp* node) {
  std::vector<const UOp*> stack{node};
  while (!stack.empty()) {  // stops at the first computed node, so it stays short
    const UOp* inner = stack.back();
    stack.pop_back();
    OpGroup group = op_group(inner->op());
    if (group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary ||
        inner->op() == Ops::REDUCE_AXIS || inner->op() == Ops::CONTIGUOUS)
      return false;
    for (const UOpPtr& src : inner->srcs()) stack.push_back(src.get());
  }
  return true;
}

// Whether `node` flows, through elementwise and movement ops, into a reduction to one element
// (a whole tensor's min or max) and into some other kernel besides, and fans out itself: a
// reader of it is such a kernel, or its readers reach different kernels. DynamicQuantizeLinear
// reads its input three times, a min, a max and the quantization: a BERT FFN's GELU recomputed
// in each of those kernels, two of them single-output loops that no second thread can share,
// took 45 % of the int8 model's run. Only that fan-out is stored: the GELU's inner values (erf's
// polynomial terms), whose readers all meet again in the GELU, stay inline (each stored, the
// GELU took 4 kernels and 9 buffers of its size: 0.9 of the int8 BERT's 4.3 ms at 128 tokens).
// Softmax's exp, read by per-row sums, stays recomputed.
bool Rangeifier::feeds_whole_reduction_and_more(const UOp* node) {
  if (auto found = feeds_whole_reduction_.find(node); found != feeds_whole_reduction_.end()) return found->second;
  bool whole = false;
  std::unordered_set<const UOp*> all = kernels_reached(node, whole);
  bool result = false;
  if (whole && all.size() > 1) {
    std::optional<std::unordered_set<const UOp*>> first;
    for (const UOp* consumer : consumers_[node]) {
      if (!passes_through(consumer)) {
        result = true;  // a reader is itself another kernel
        break;
      }
      bool ignored = false;
      std::unordered_set<const UOp*> reached = kernels_reached(consumer, ignored);
      if (!first) first = std::move(reached);
      else if (reached != *first) {
        result = true;
        break;
      }
    }
  }
  feeds_whole_reduction_.emplace(node, result);
  return result;
}

// Whether a reader of a value computes in the same kernel as it (elementwise and movement ops).
bool Rangeifier::passes_through(const UOp* consumer) const {
  OpGroup group = op_group(consumer->op());
  bool elementwise = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary ||
                     group == OpGroup::Movement || consumer->op() == Ops::CAST || consumer->op() == Ops::BITCAST;
  return elementwise && !output_nodes_.contains(consumer);
}

// Whether a reduction gives one value, or a few whose only readers (through movement ops) reduce
// them to one: a whole tensor's maximum taken in parts (Tensor's reduce).
bool Rangeifier::reduces_to_one(const UOp* reduce) {
  int64_t values = dims_numel(shapes_.of(reduce)).max();
  if (values == 1) return true;
  if (values > 64) return false;
  std::vector<const UOp*> stack{reduce};
  while (!stack.empty()) {
    const UOp* current = stack.back();
    stack.pop_back();
    for (const UOp* consumer : consumers_[current]) {
      if (op_group(consumer->op()) == OpGroup::Movement) stack.push_back(consumer);
      else if (consumer->op() != Ops::REDUCE_AXIS || dims_numel(shapes_.of(consumer)).max() != 1) return false;
    }
  }
  return true;
}

// The readers where the values computed from `node` by elementwise and movement ops leave their
// kernel (reductions, outputs, anything else); `whole`: one of them reduces to one value
// (possibly in parts: reduces_to_one).
std::unordered_set<const UOp*> Rangeifier::kernels_reached(const UOp* node, bool& whole) {
  std::unordered_set<const UOp*> boundaries, seen;
  std::vector<const UOp*> stack{node};
  while (!stack.empty()) {
    const UOp* current = stack.back();
    stack.pop_back();
    for (const UOp* consumer : consumers_[current]) {
      if (!seen.insert(consumer).second) continue;
      if (passes_through(consumer)) {
        stack.push_back(consumer);
        continue;
      }
      boundaries.insert(consumer);
      if (consumer->op() == Ops::REDUCE_AXIS && reduces_to_one(consumer)) whole = true;
    }
  }
  return boundaries;
}

bool Rangeifier::must_materialize(const UOp* node, bool through_expand, const Index& index) {
  if (buffer_of_.contains(node) || node->op() == Ops::BUFFER || node->op() == Ops::CONTIGUOUS) return true;
  if (forced_.contains(node)) return true;
  if (node->op() == Ops::REDUCE_AXIS) return through_expand || consumers_[node].size() > 1;
  OpGroup group = op_group(node->op());
  bool alu = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary;
  // (At the value that fans out, not at each expensive part of it: those have one reader.)
  if (alu && consumers_[node].size() > 1 && recompute_cost(node) >= kExpensiveOps &&
      feeds_whole_reduction_and_more(node))
    return true;
  // A value copied in another type (its bf16 bits for a matmul: tensor/matmul_precision.h) whose
  // other readers are other kernels, and which re-reads two or more full-size tensors, is stored:
  // the copy's buffer holds other values, so each reader would recompute it, and a chain of such
  // values (a transformer's residual stream: each LayerNorm's output copied for the next matmuls
  // and added to the next sublayer's) grows one more tensor per layer. BERT-base bf16's last
  // LayerNorm re-read 24 matmul outputs: 25 of its 75 ms.
  // (Not where a rounded stand-in of the value is stored: its readers read that.)
  if (alu && consumers_[node].size() > 1 && has_converted_copy(node) && full_size_reads(node) >= 2 &&
      !rounded_stand_in_of(node))
    return true;
  if (!alu || !through_expand) return false;
  // The lower bar applies where the value changes with the reduction loop (a conv's input
  // varies with its window and channel loops; a gather's index does not, and is hoisted). Pads do
  // not count there (a pool over a padded input stays one kernel), and comparisons with arange
  // stay inline: they are a gather's one-hot mask, which the collapse turns into a load
  // (reduce_collapse.h).
  if (reduce_depth_ > 0 && varies_with_reduce_loop(index) && !reads_arange(node) &&
      (recompute_cost(node, kExpensiveOpsInLoop, 0) >= kExpensiveOpsInLoop || epilogue_of_stored_reduction(node)))
    return true;
  return recompute_cost(node) >= kExpensiveOps;
}

// Whether a CONTIGUOUS copies `node` converted: through a cast or bitcast, and movement ops (a
// copy of `node` as it is, contiguous_copy_of, is read in its place instead).
bool Rangeifier::has_converted_copy(const UOp* node) {
  std::vector<std::pair<const UOp*, bool>> stack{{node, false}};  // (value, converted on the way)
  while (!stack.empty()) {
    auto [current, converted] = stack.back();
    stack.pop_back();
    for (const UOp* consumer : consumers_[current]) {
      if (consumer->op() == Ops::CONTIGUOUS && converted) return true;
      bool conversion = consumer->op() == Ops::CAST || consumer->op() == Ops::BITCAST;
      if (conversion || op_group(consumer->op()) == OpGroup::Movement) stack.push_back({consumer, converted || conversion});
    }
  }
  return false;
}

// How many values as large as `node` its fused expression reads from memory (buffers, copies,
// stored values and reductions, each once), up to 2.
int Rangeifier::full_size_reads(const UOp* node) {
  const Dim size = dims_numel(shapes_.of(node));
  int reads = 0;
  std::vector<const UOp*> stack{node};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty() && reads < 2 && seen.size() < 4096) {
    const UOp* current = stack.back();
    stack.pop_back();
    if (!seen.insert(current).second) continue;
    bool read = current != node && (current->op() == Ops::REDUCE_AXIS || current->op() == Ops::CONTIGUOUS ||
                                    current->op() == Ops::BUFFER || buffer_of_.contains(current));
    if (read) {
      if (dims_numel(shapes_.of(current)) == size) ++reads;
      continue;
    }
    for (const UOpPtr& src : current->srcs()) stack.push_back(src.get());
  }
  return reads;
}

// Whether `node` narrows a float (an f32 LayerNorm cast to f16 for an f16 matmul) whose source
// the cost rule stores and nothing else reads: the narrow value is stored instead, so the buffer
// is half the size and the rounding runs once, not in every consumer's loop (BERT-base fp16's
// matmuls rounded their f32 input to f16 once per column tile: 41 against 150 GFLOP/s).
bool Rangeifier::stores_narrowed(const UOp* node, bool through_expand, const Index& index) {
  if (node->op() != Ops::CAST || !node->dtype().is_float()) return false;
  const UOp* source = node->src(0).get();
  if (!source->dtype().is_float() || node->dtype().scalar_bytes() >= source->dtype().scalar_bytes()) return false;
  if (buffer_of_.contains(source) || consumers_[source].size() != 1) return false;
  OpGroup group = op_group(source->op());
  bool computed = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary ||
                  source->op() == Ops::REDUCE_AXIS;
  return computed && must_materialize(source, through_expand, index);
}

bool Rangeifier::recomputing_would_repeat_work(const UOp* node) {
  if (node->op() == Ops::REDUCE_AXIS) return true;
  OpGroup group = op_group(node->op());
  bool alu = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary;
  return alu && recompute_cost(node) >= kExpensiveOps;
}

}  // namespace kiln::rangeify
