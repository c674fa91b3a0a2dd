// Rangeify and kernel split: tensor-level graph → kernel ASTs (docs/kernel-ast.md).
//
// Each value that must exist in memory (an output, a CONTIGUOUS, or a value the cost rule below
// materialises) gets a buffer and a kernel. A kernel is built by walking its value top-down with
// one index expression per axis: movement ops rewrite the index expressions (this is where views
// disappear), elementwise ops pass them to their sources, a reduction opens new RANGEs for its
// reduced axes, and a buffer or materialised value becomes a LOAD. So elementwise chains fuse into
// one kernel, a reduction fuses with the elementwise work before it, and the elementwise work after
// a reduction (its epilogue) fuses into the reduction's kernel.
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

namespace kiln {
namespace {

constexpr int kExpensiveOps = 16;
// A cache line, and the widest vector of any target (16 float32 lanes).
constexpr int64_t kLineBytes = 64;
// The shortest symbolic row, in lines, that a padded store takes (Rangeifier::padded_store_of).
constexpr int64_t kSymbolicPaddedRowLines = 6;
// Inside a reduction loop, a broadcast value is recomputed once per iteration of the loop for every
// output it is broadcast over (a conv's input, once per filter and window tap): there even a short
// chain (a residual add and relu, a LayerNorm's normalise) costs more than a load.
constexpr int kExpensiveOpsInLoop = 3;

using Index = std::vector<UOpPtr>;

// Shapes here are Dims: a size may be an expression over size variables (docs/symbolic-shapes.md),
// and then so are the strides, loop ends and index math built from it.
std::vector<Dim> strides_of(const Dims& shape) {
  std::vector<Dim> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

UOpPtr index_const(int64_t value) { return const_int(dtypes::index, value); }

UOpPtr flatten_index(const Index& index, const Dims& shape) {
  std::vector<Dim> strides = strides_of(shape);
  UOpPtr flat = index_const(0);
  for (size_t i = 0; i < index.size(); ++i)
    if (!shape[i].is(1)) flat = flat + (strides[i].is(1) ? index[i] : index[i] * strides[i].expression());
  return flat;
}

UOpPtr and_valid(const UOpPtr& valid, const UOpPtr& condition) {
  if (!valid) return condition;
  return valid & condition;
}

// The cost of recomputing a value: ALU ops down to buffers and reductions (transcendentals count
// as the ~20 ops their approximations take). Capped, so the walk stays small. Without
// `count_selects`, WHERE and ops on bool (masks, comparisons) are free: only arithmetic counts.
// Nodes for which `stored` says yes are read from a buffer, like reductions.
int recompute_cost(const UOp* root, int limit = kExpensiveOps, int pad_cost = 2, bool count_selects = true,
                   const std::function<bool(const UOp*)>& stored = nullptr) {
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

// The arithmetic in a value, without what selects and places values (WHERE, bool masks, PAD): a
// concatenation's chain of selects costs nothing here, a sigmoid its polynomial.
int arithmetic_cost(const UOp* root) { return recompute_cost(root, kExpensiveOps, 0, false); }

// Whether `root` computes from an arange (SPECIAL) with no buffer, CONTIGUOUS or reduction in
// between. The walk is capped: a value too large to tell is treated as not reading one.
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

// Whether an index expression uses a reduce loop variable (axis ids from kFirstReduceAxis).
bool varies_with_reduce_loop(const Index& index) {
  for (const UOpPtr& component : index)
    for (const UOp* node : toposort(component))
      if (node->op() == Ops::RANGE && node->arg_int() >= kFirstReduceAxis) return true;
  return false;
}

class Rangeifier {
 public:
  Rangeifier(const std::vector<UOpPtr>& outputs, const ScheduleOptions& options) : options_(options) {
    for (const UOpPtr& output : outputs) count_consumers(output);
    for (const UOpPtr& output : outputs) output_nodes_.insert(output.get());
    // The SINK is named so that it outlives the loop: toposort returns raw pointers, the SINK's
    // among them, and a temporary SINK would be freed before the loop reads it (a range-for keeps
    // only the vector alive; found by tests/fuzz onnx).
    UOpPtr root = sink(outputs);
    // Concatenations stored one input at a time (concat_stores_of) where they are certainly stored:
    // copies (CONTIGUOUS) and outputs.
    for (const UOp* node : toposort(root))
      if (node->op() == Ops::CONTIGUOUS || output_nodes_.contains(node))
        if (concat_stores_of(node))
          for (const UOp* where = node->op() == Ops::CONTIGUOUS ? node->src(0).get() : node; where->op() == Ops::WHERE;
               where = where->src(2).get())
            concat_root_of_[where] = node;
    for (const UOp* node : toposort(root))
      if (node->op() == Ops::REDUCE_AXIS && reduction_needs_own_kernel(node)) forced_.insert(node);
    for (const UOpPtr& output : outputs) {
      auto found = buffer_of_.find(output.get());
      if (found == buffer_of_.end()) {
        int index = add_buffer(ScheduledBuffer::Kind::Output, output->dtype(), dims_numel(shapes_.of(output.get())));
        schedule_.buffers[index].output_index = static_cast<int>(schedule_.outputs.size());
        buffer_of_[output.get()] = index;
        pending_.insert(output.get());
      }
      schedule_.outputs.push_back(buffer_of_[output.get()]);
      keep_alive_.push_back(output);
    }
    for (const UOpPtr& output : outputs) materialize(output.get());
  }

  Schedule take() { return std::move(schedule_); }

 private:
  struct NodeListHash {
    size_t operator()(const std::vector<const UOp*>& nodes) const {
      uint64_t h = nodes.size();
      for (const UOp* node : nodes) h = hash_mix(h, node ? node->hash() : 0);
      return h;
    }
  };
  struct KernelState {
    std::vector<int> slots;  // schedule buffer per DEFINE_GLOBAL slot
    int64_t next_reduce_axis = kFirstReduceAxis;
    // (node, index, valid, through_expand) → value: shared subgraphs are lowered once per index.
    std::unordered_map<std::vector<const UOp*>, UOpPtr, NodeListHash> memo;
    std::vector<UOpPtr> memo_keys_alive;  // the memo's keys are raw pointers: keep their nodes alive
    // The first (index, valid) each recomputed reduction or expensive value was lowered at.
    std::unordered_map<const UOp*, std::vector<const UOp*>> first_use;
    // The provenance tags of the values computed here, root first, and whether the value is a
    // reduction (see note_source).
    std::vector<std::pair<const std::string*, bool>> sources;
    const UOp* output = nullptr;  // the value this kernel stores
  };

  // The CONTIGUOUS that copies `node` as it is, if any (a plain copy before a channels-last one,
  // then the one with the smallest hash, so the choice does not depend on set order). Its buffer
  // holds node's value, so node's other consumers read it there: a conv that reads an activation
  // through a copy in another layout realises the activation first, and the residual add that
  // also reads it must not compute it again, from the start of the residual chain each time
  // (ResNet-50's stage 3 took six recomputing kernels).
  // A copy is CONTIGUOUS(node), or CONTIGUOUS(PERMUTE(node)) where node is computed (an ALU op),
  // the PERMUTE is the channels-last order (N, C, H, W) -> (N, H, W, C) and nothing else reads it:
  // a conv's channels-last copy of a 14×14 block output (Tensor::conv), which the next residual
  // add then reads through the permutation instead of a second, NCHW buffer. (Other orders and
  // view nodes might work the same way; only this case has been measured and tested.)
  static inline const std::vector<int64_t> kChannelsLastOrder{0, 2, 3, 1};
  const UOp* contiguous_copy_of(const UOp* node) {
    if (node->op() == Ops::BUFFER || node->op() == Ops::CONTIGUOUS) return nullptr;
    auto found = consumers_.find(node);
    if (found == consumers_.end() || found->second.size() < 2) return nullptr;
    const UOp* copy = nullptr;
    const UOp* permuted_copy = nullptr;
    for (const UOp* consumer : found->second) {
      if (consumer->op() == Ops::CONTIGUOUS && (copy == nullptr || consumer->hash() < copy->hash())) copy = consumer;
      if (consumer->op() == Ops::PERMUTE && consumer->arg_list() == kChannelsLastOrder && op_is_alu(node->op()) &&
          consumers_[consumer].size() == 1 && (*consumers_[consumer].begin())->op() == Ops::CONTIGUOUS) {
        const UOp* candidate = *consumers_[consumer].begin();
        if (permuted_copy == nullptr || candidate->hash() < permuted_copy->hash()) permuted_copy = candidate;
      }
    }
    // A plain copy first: with both, the permuted one is then made from the plain one by a
    // transposing copy that reads NCHW rows; the other way round, that copy read every element
    // 4 KB from the last (ResNet-50 fp16's 14×14×1024 block output for layer 4's strided
    // downsample: 0.96 ms at 1.7 GB/s, against 0.05 ms).
    return copy != nullptr ? copy : permuted_copy;
  }

  // `index` of `node`, as an index of its copy (contiguous_copy_of): permuted like the copy when
  // the copy is of a PERMUTE of node (not when node is itself a PERMUTE that the copy stores).
  static Index index_in_copy(const UOp* node, const UOp* copy, const Index& index) {
    const UOp* source = copy->src(0).get();
    if (source == node) return index;
    Index permuted;
    for (int64_t axis : source->arg_list()) permuted.push_back(index[static_cast<size_t>(axis)]);
    return permuted;
  }

  // Thrown while a kernel is built when a value must be materialised after all (see lower_uncached);
  // build_kernel starts that kernel again.
  struct RebuildKernel {};

  void count_consumers(const UOpPtr& root) {
    for (const UOp* node : toposort(root)) {
      if (node->op() == Ops::SPECIAL || node->op() == Ops::BUFFER) continue;
      for (const UOpPtr& src : node->srcs()) consumers_[src.get()].insert(node);
    }
  }

  // Whether `reduction` is materialised before any kernel is built: when its value flows, through
  // elementwise and movement ops only, into more than one place that would compute it (other
  // reductions, each a loop of its own kernel or loop nest, and outputs) — LayerNorm's mean,
  // variance and normalise each read the matmul before them, softmax's max, sum and normalise the
  // scores — or into expensive elementwise work (an epilogue that would run scalar in its tail).
  static constexpr int64_t kNestedContraction = 64;
  int64_t reduced_elements(const UOp* reduction) {
    // (at the variables' maxima: this only picks kernel boundaries)
    int64_t out = dims_numel(shapes_.of(reduction)).max();
    return out == 0 ? 0 : dims_numel(shapes_.of(reduction->src(0).get())).max() / out;
  }

  // Whether `node` computes a reduction other than `reduction` that is not stored yet, through
  // elementwise and movement ops.
  bool reaches_other_unstored_reduction(const UOp* node, const UOp* reduction) {
    std::vector<const UOp*> stack{node};
    std::unordered_set<const UOp*> seen;
    while (!stack.empty()) {
      const UOp* current = stack.back();
      stack.pop_back();
      // (a value with a contiguous copy is read from the copy)
      if (!seen.insert(current).second || buffer_of_.contains(current) || contiguous_copy_of(current)) continue;
      if (current->op() == Ops::REDUCE_AXIS) {
        if (current != reduction) return true;
        continue;
      }
      if (current->op() == Ops::BUFFER || current->op() == Ops::CONTIGUOUS) continue;
      for (const UOpPtr& src : current->srcs()) stack.push_back(src.get());
    }
    return false;
  }

  bool reduction_needs_own_kernel(const UOp* reduction) {
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

  int add_buffer(ScheduledBuffer::Kind kind, DType dtype, const Dim& count) {
    ScheduledBuffer buffer;
    buffer.kind = kind;
    buffer.dtype = dtype;
    buffer.count = count.max();
    buffer.elements = count;
    schedule_.buffers.push_back(buffer);
    return static_cast<int>(schedule_.buffers.size() - 1);
  }

  // The buffer holding `node`'s value, building its kernel first if needed.
  int materialize(const UOp* node) {
    // A buffer is read in place, unless it is itself an output (a plan output that folded to a
    // weight, such as an ONNX Shape): then a kernel copies it into the output's buffer below.
    if (node->op() == Ops::BUFFER && !pending_.contains(node)) {
      int64_t id = node->arg_list().at(0);
      auto found = input_buffers_.find(id);
      if (found != input_buffers_.end()) return found->second;
      int index = add_buffer(ScheduledBuffer::Kind::Input, node->dtype(), decode_dim(node->arg_list().at(1)));
      schedule_.buffers[index].input_id = id;
      input_buffers_[id] = index;
      return index;
    }
    auto found = buffer_of_.find(node);
    if (found != buffer_of_.end() && !pending_.contains(node)) return found->second;
    int index;
    if (found != buffer_of_.end()) {
      index = found->second;
      pending_.erase(node);
    } else {
      bool wide = options_.narrow_floats_stored_wide && node->dtype().is_narrow_float();
      index = add_buffer(ScheduledBuffer::Kind::Intermediate, wide ? DType(dtypes::f32) : node->dtype(),
                         dims_numel(shapes_.of(node)));
      if (wide) wide_buffers_.insert(index);
      buffer_of_[node] = index;
    }
    build_kernel(node, index);
    return index;
  }

  void build_kernel(const UOp* node, int output_buffer) {
    // A kernel materialised while another is being built starts outside any reduction loop.
    struct SavedDepth {
      int& depth;
      int saved;
      ~SavedDepth() { depth = saved; }
    } saved{reduce_depth_, reduce_depth_};
    if (std::optional<std::vector<PaddedStore>> parts = concat_stores_of(node)) {
      // Each input of the concatenation is stored into its slice by a kernel of its own.
      for (const PaddedStore& part : *parts) build_until_done([&] { build_padded_interior(node, part, output_buffer); });
      return;
    }
    std::optional<PaddedStore> padded = padded_store_of(node);
    if (padded) build_padded_border(node, *padded, output_buffer);
    build_until_done([&] {
      if (padded)
        build_padded_interior(node, *padded, output_buffer);
      else
        build_kernel_once(node, output_buffer);
    });
  }

  // Runs `build` (which adds one kernel) until it completes: a value that turns out to be needed at
  // several indices is materialised, and the kernel is built again (RebuildKernel).
  template <class Build>
  void build_until_done(Build build) {
    while (true) {
      reduce_depth_ = 0;
      try {
        build();
        return;
      } catch (const RebuildKernel&) {
      }
    }
  }

  // The state of a new kernel that stores `node`'s value into `output_buffer` (slot 0).
  static KernelState start_kernel(const UOp* node, int output_buffer) {
    KernelState kernel;
    kernel.output = node;
    kernel.slots.push_back(output_buffer);
    return kernel;
  }

  static UOpPtr zero_of(DType type) {
    return type.is_float() ? const_float(type, 0.0) : type.is_bool() ? const_bool(false) : const_int(type, 0);
  }

  // One loop per axis of `shape` (none for a size-1 axis), and the kernel name's sizes.
  static Index output_ranges(const Dims& shape, std::string& name) {
    Index index;
    int64_t axis = 0;
    for (const Dim& size : shape) {
      if (size.is(1)) {
        index.push_back(index_const(0));
      } else {
        index.push_back(range(size.expression(), axis++));
        // (a symbolic size is "v": the name must stay a C identifier)
        name += "_" + (size.is_known() ? std::to_string(size.value()) : std::string("v"));
      }
    }
    return index;
  }

  void build_kernel_once(const UOp* node, int output_buffer) {
    const Dims& shape = shapes_.of(node);
    if (dims_numel(shape).max() == 0) return;  // nothing to compute
    KernelState kernel = start_kernel(node, output_buffer);
    std::string name;
    Index index = output_ranges(shape, name);
    // CONTIGUOUS marks a buffer; its value is its source's (computed, or loaded when it is a buffer).
    // An output that is a buffer itself is copied from it (materialize).
    UOpPtr value = node->op() == Ops::CONTIGUOUS ? lower(node->src(0).get(), index, nullptr, false, kernel)
                   : node->op() == Ops::BUFFER   ? lower(node, index, nullptr, false, kernel)
                                                 : compute(node, index, nullptr, false, kernel);
    add_kernel(kernel, node, store_into(kernel, output_buffer, flatten_index(index, shape), value), name);
  }

  // A padded store: the PAD, the value computed into its interior, and the order of the buffer's
  // axes (`order[i]` is the PAD's axis that the buffer's axis i holds; the identity without a
  // PERMUTE).
  struct PaddedStore {
    const UOp* pad;
    const UOp* value;
    std::vector<int64_t> order;
  };

  // A padded copy of a computed value, CONTIGUOUS(PAD(S)) where S (or the value S copies, when S is
  // itself a CONTIGUOUS) is computed and read by nothing else: its PaddedStore, or none when
  // the copy is an ordinary kernel. Such a copy is built as two kernels that store into the padded
  // buffer, the value into its interior and zeros into its border (build_padded_interior and
  // build_padded_border), so S never gets a buffer of its own and the interior's stores carry no
  // padding masks. A conv's padded input is the common case (Tensor::conv): the activation before
  // it was stored by one kernel and copied with its border by a second, a pass over memory as
  // long as the depthwise conv that reads it (MobileNetV2's 96-channel 112x112 stage: 0.46 ms of
  // copy for a 0.49 ms conv).
  //
  // The copy may also transpose: CONTIGUOUS(PERMUTE(PAD(S))), a conv's channels-last padded input
  // (Tensor::conv). S is then computed in the buffer's order, so a conv that produces it stores
  // its filters contiguously instead of one NCHW plane per lane, and the transposing copy (3 GB/s,
  // scattered stores) goes away.
  std::optional<PaddedStore> padded_store_of(const UOp* node) {
    if (node->op() != Ops::CONTIGUOUS || output_nodes_.contains(node)) return std::nullopt;
    const UOp* pad = node->src(0).get();
    std::vector<int64_t> order;
    if (pad->op() == Ops::PERMUTE && consumers_[pad].size() == 1) {
      order = pad->arg_list();
      pad = pad->src(0).get();
    }
    if (pad->op() != Ops::PAD || consumers_[pad].size() != 1) return std::nullopt;
    // Outer sizes may be symbolic (a CNN's batch, an image's height); the pads are known, and so is
    // the row (below).
    for (int64_t bound : pad->arg_list())
      if (!decode_dim(bound).is_known()) return std::nullopt;
    const UOp* value = pad->src(0).get();
    if (consumers_[value].size() != 1 || buffer_of_.contains(value) || output_nodes_.contains(value)) return std::nullopt;
    if (value->op() == Ops::CONTIGUOUS) {
      value = value->src(0).get();
      if (consumers_[value].size() != 1 || buffer_of_.contains(value) || output_nodes_.contains(value)) return std::nullopt;
    }
    if (value->op() == Ops::BUFFER || computes_nothing(value)) return std::nullopt;  // a plain copy: nothing to save
    const Dims& interior = shapes_.of(pad->src(0).get());
    if (interior.empty()) return std::nullopt;
    if (order.empty()) {
      order.resize(interior.size());
      std::iota(order.begin(), order.end(), int64_t{0});
    }
    // Rows of whole 64-byte lines only. Stored at a padded row pitch, the value's rows can no longer
    // merge into one long vector axis; a row of 56 or 14 floats then ends in a part vector, and the
    // producer lost what the copy cost (MobileNetV2's 1x1 convs at 56x56 and 14x14 took 30-50 %
    // longer, while its 112-wide stage, 7 vectors a row, ran as fast as before). A row of symbolic
    // length (an image of any width) is a whole number of lines at few of its sizes; it takes the
    // padded stores where even its shortest row is long (kSymbolicPaddedRowLines), so that the part
    // vector at its end is a small share of it. DeepLabV3 over images of 224 to 512, one thread,
    // its 112-to-256-wide stage stored padded: at 224 the copy's 0.23 ms went for 0.02 more in
    // its producer (the plan 1.16 -> 1.08x its fixed twin), at 512 2.3 ms for 0.5 (1.02 -> 0.98x);
    // its 56-wide stages stored padded as well gave back half of the gain at 224 in their producers.
    const Dim& row = interior[static_cast<size_t>(order.back())];
    int64_t row_bytes = (row.is_known() ? row.value() : row.min()) * node->dtype().scalar_bytes();
    if (row.is_known() ? row_bytes % kLineBytes != 0 : row_bytes < kSymbolicPaddedRowLines * kLineBytes)
      return std::nullopt;
    return PaddedStore{pad, value, std::move(order)};
  }

  // Whether `node` is true everywhere: a true constant seen through reshapes and broadcasts (the
  // masks Tensor::concat selects its inputs with are PADs of such a value).
  static bool true_everywhere(const UOp* node) {
    while (node->op() == Ops::RESHAPE || node->op() == Ops::EXPAND || node->op() == Ops::PERMUTE) node = node->src(0).get();
    if (node->op() != Ops::CONST || !node->dtype().is_bool()) return false;
    const bool* value = std::get_if<bool>(&node->arg());  // (a constant folded elsewhere may hold an integer)
    return value != nullptr && *value;
  }

  // A concatenation stored by one kernel per input: Tensor::concat builds
  // WHERE(PAD(true, p0), PAD(S0, p0), WHERE(PAD(true, p1), PAD(S1, p1), … PAD(Sn, pn))), and its
  // kernel evaluated every arm at every element (both loads masked, then a select: YOLOX's
  // concatenations ran at 15-18 GB/s where its plain copies run at 35-60). Instead each Si is
  // computed over its own shape and stored at its offset (build_padded_interior, no border: the
  // inputs tile the result), so an input that is computed and read by nothing else (YOLOX's SiLU
  // after each branch's conv) is stored straight into the concatenation and never gets a buffer of
  // its own. The parts, or none: when `node` (or the value it copies, for a CONTIGUOUS) is not such
  // a chain, when the concatenated axis or an axis after it is symbolic (a batch before it may be),
  // when the inputs do not tile the concatenated axis, or
  // when a part's rows (the elements after that axis) are shorter than kConcatRow: a concatenation
  // along the innermost axis would become narrow strided stores.
  static constexpr int64_t kConcatRow = 16;
  // The WHERE nodes of the concatenations stored one input at a time, and the node each one's
  // buffer belongs to (its CONTIGUOUS, or the output).
  std::unordered_map<const UOp*, const UOp*> concat_root_of_;
  std::optional<std::vector<PaddedStore>> concat_stores_of(const UOp* node) {
    if (env_integer("KILN_CONCAT_STORES", 1) == 0) return std::nullopt;
    const UOp* chain = node->op() == Ops::CONTIGUOUS ? node->src(0).get() : node;
    if (chain->op() != Ops::WHERE || (chain != node && consumers_[chain].size() != 1)) return std::nullopt;
    // Axes before the concatenated one may be symbolic (a CNN's batch); that axis and the rest of
    // each row are known (checked below).
    const Dims& shape = shapes_.of(node);
    std::vector<PaddedStore> parts;
    std::vector<int64_t> identity(shape.size());
    std::iota(identity.begin(), identity.end(), int64_t{0});
    auto add_part = [&](const UOp* pad) {
      if (pad->op() != Ops::PAD || consumers_[pad].size() != 1 || pad->arg_list().size() != 2 * shape.size()) return false;
      for (int64_t bound : pad->arg_list())
        if (!decode_dim(bound).is_known()) return false;
      parts.push_back(PaddedStore{pad, pad->src(0).get(), identity});
      return true;
    };
    const UOp* rest = chain;
    while (rest->op() == Ops::WHERE) {
      if (rest != chain && consumers_[rest].size() != 1) return std::nullopt;
      const UOp* mask = rest->src(0).get();
      const UOp* chosen = rest->src(1).get();
      if (mask->op() != Ops::PAD || chosen->op() != Ops::PAD || mask->arg_list() != chosen->arg_list() ||
          !true_everywhere(mask->src(0).get()) || !add_part(chosen))
        return std::nullopt;
      rest = rest->src(2).get();
    }
    if (!add_part(rest) || parts.size() < 2) return std::nullopt;
    // One padded axis, the same for every part, whose intervals tile it in order of the chain.
    std::optional<size_t> axis;
    std::vector<std::pair<int64_t, int64_t>> spans;  // [begin, end) along the axis
    for (const PaddedStore& part : parts) {
      const auto& pads = part.pad->arg_list();
      for (size_t a = 0; a < shape.size(); ++a) {
        int64_t before = decode_dim(pads[2 * a]).value(), after = decode_dim(pads[2 * a + 1]).value();
        if (before == 0 && after == 0) continue;
        if (before < 0 || after < 0 || (axis && *axis != a) || !shape[a].is_known()) return std::nullopt;
        axis = a;
        spans.emplace_back(before, shape[a].value() - after);
      }
    }
    if (!axis || spans.size() != parts.size()) return std::nullopt;
    std::sort(spans.begin(), spans.end());
    int64_t next = 0;
    for (auto [begin, end] : spans) {
      if (begin != next || end <= begin) return std::nullopt;
      next = end;
    }
    if (next != shape[*axis].value()) return std::nullopt;
    int64_t row = 1;
    for (size_t a = *axis + 1; a < shape.size(); ++a) {
      if (!shape[a].is_known()) return std::nullopt;
      row *= shape[a].value();
    }
    if (row < kConcatRow) return std::nullopt;
    return parts;
  }

  // The zeros around a padded store's interior, one kernel per padded axis: it loops over that
  // axis's pad positions only (before and after the interior) and over every other axis in full,
  // so it stores nothing twice per axis, loads nothing and needs no mask. Run every time (the arena
  // bytes under the border belong to other buffers between runs). One kernel over the whole padded
  // shape with a masked store ran scalar: 3-4x the copy it replaced on 16x16 images.
  void build_padded_border(const UOp* node, const PaddedStore& padded, int output_buffer) {
    const Dims& shape = shapes_.of(node);
    const Dims& interior = shapes_.of(padded.pad->src(0).get());
    const auto& pads = padded.pad->arg_list();
    DType type = node->dtype();
    UOpPtr zero = zero_of(type);
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      auto source_axis = static_cast<size_t>(padded.order[axis]);
      int64_t before = decode_dim(pads[2 * source_axis]).value(), after = decode_dim(pads[2 * source_axis + 1]).value();
      if (before + after == 0) continue;
      Dims faces = shape;
      faces[axis] = Dim(before + after);
      if (dims_numel(faces).max() == 0) continue;
      KernelState kernel = start_kernel(node, output_buffer);
      std::string name;
      Index index = output_ranges(faces, name);
      // Position p of the faces: p before the interior, or past it.
      UOpPtr position = index[axis];
      UOpPtr length = interior[source_axis].expression();  // (a CONST when known)
      if (before == 0) {
        index[axis] = position + length;
      } else if (after != 0) {
        index[axis] = where(lt(position, before), position, position + length);
      }
      add_kernel(kernel, node, store_into(kernel, output_buffer, flatten_index(index, shape), zero), name);
    }
  }

  // The padded store's interior: the value computed over its own shape (loops in the buffer's
  // order), stored at the pad's offsets.
  void build_padded_interior(const UOp* node, const PaddedStore& padded, int output_buffer) {
    const Dims& shape = shapes_.of(node);
    const Dims& interior = shapes_.of(padded.pad->src(0).get());
    if (dims_numel(interior).max() == 0) return;
    KernelState kernel = start_kernel(node, output_buffer);
    Dims stored_interior;
    for (int64_t source_axis : padded.order) stored_interior.push_back(interior[static_cast<size_t>(source_axis)]);
    std::string name;
    Index index = output_ranges(stored_interior, name);
    Index shifted, source_index(index.size());
    const auto& pads = padded.pad->arg_list();
    for (size_t i = 0; i < index.size(); ++i) {
      auto source_axis = static_cast<size_t>(padded.order[i]);
      Dim before = decode_dim(pads[2 * source_axis]);
      shifted.push_back(before.is(0) ? index[i] : index[i] + before.expression());
      source_index[source_axis] = index[i];
    }
    UOpPtr result = lower(padded.value, source_index, nullptr, false, kernel);
    // (PAD and CONTIGUOUS keep their source's dtype)
    KILN_ASSERT(result->dtype() == node->dtype(), "rangeify: a padded store's value has another dtype than its buffer");
    add_kernel(kernel, node, store_into(kernel, output_buffer, flatten_index(shifted, shape), result), name);
  }

  // Names, orders and records a kernel whose single STORE is `store`.
  void add_kernel(KernelState& kernel, const UOp* node, const UOpPtr& store, const std::string& name) {
    OrderedKernel ordered = order_output_axes(split_output_ranges(split_reduce_ranges(simplify(sink({store})))));
    const UOpPtr& body = ordered.ast;
    bool reduces = kernel.next_reduce_axis != kFirstReduceAxis;
    // The name is readable (kind and output sizes) and unique per AST (a hash of its body), so it
    // can be a symbol in a process that runs many kernels.
    char suffix[20];
    std::snprintf(suffix, sizeof(suffix), "_%08llx", static_cast<unsigned long long>(body->hash() & 0xffffffffu));
    std::string full_name = (reduces ? "r" : "E") + (name.empty() ? std::string("_1") : name) + suffix;
    std::vector<UOpPtr> stores(body->srcs().begin(), body->srcs().end());
    ScheduledKernel scheduled;
    scheduled.ast = UOp::make(Ops::SINK, dtypes::void_, std::move(stores), full_name);
    scheduled.buffers = kernel.slots;
    scheduled.parallel_extent = ordered.parallel_extent;
    scheduled.variables = kernel_variables(scheduled.ast);
    estimate_cost(scheduled);
    scheduled.sources = kernel_sources(kernel, node);
    schedule_.kernels.push_back(std::move(scheduled));
  }

  // The STORE of `value` at flat position `at` of `buffer` (slot 0 of `kernel`), widened where the
  // buffer holds a narrow float as f32 (ScheduleOptions); a value loaded from such a buffer (a
  // copy of one) is stored as it was loaded.
  UOpPtr store_into(const KernelState& kernel, int buffer, const UOpPtr& at, const UOpPtr& value) {
    UOpPtr global = define_global(buffer, 0);
    DType stored = schedule_.buffers[static_cast<size_t>(buffer)].dtype;
    UOpPtr written = value;
    if (value->dtype() != stored) {
      UOpPtr wide = stored == dtypes::f32 ? wide_load_below(value, kernel) : nullptr;
      written = wide ? wide : UOp::make(Ops::CAST, stored, {value});
    }
    return UOp::make(Ops::STORE, dtypes::void_, {UOp::make(Ops::INDEX, global->dtype(), {global, at}), written});
  }

  // `value` = CAST(LOAD of a buffer that holds a narrow float as f32 → the narrow type): the f32
  // LOAD; nullptr otherwise. The cast is exact, so a widening of it is the load itself.
  UOpPtr wide_load_below(const UOpPtr& value, const KernelState& kernel) const {
    if (value->op() != Ops::CAST || !value->dtype().is_narrow_float()) return nullptr;
    const UOpPtr& loaded = value->src(0);
    if (loaded->op() != Ops::LOAD || loaded->dtype() != dtypes::f32) return nullptr;
    const UOp* global = loaded->src(0)->src(0).get();
    if (global->op() != Ops::DEFINE_GLOBAL) return nullptr;
    auto slot = static_cast<size_t>(global->arg_int());
    return slot < kernel.slots.size() && wide_buffers_.contains(kernel.slots[slot]) ? loaded : nullptr;
  }

  UOpPtr define_global(int buffer, int slot) {
    const ScheduledBuffer& info = schedule_.buffers[static_cast<size_t>(buffer)];
    return UOp::make(Ops::DEFINE_GLOBAL, info.dtype.ptr(AddrSpace::Global, info.count), {}, int64_t{slot});
  }

  UOpPtr load(const UOp* node, const Index& index, const UOpPtr& valid, KernelState& kernel) {
    int buffer = materialize(node);
    auto slot_it = std::find(kernel.slots.begin(), kernel.slots.end(), buffer);
    int slot = static_cast<int>(slot_it - kernel.slots.begin());
    if (slot_it == kernel.slots.end()) kernel.slots.push_back(buffer);
    UOpPtr global = define_global(buffer, slot);
    UOpPtr flat = flatten_index(index, shapes_.of(node));
    // A load inside padding is masked so it never reads out of bounds. When its index is in bounds
    // over every value of the kernel's ranges, the mask is dropped: each PAD wraps its value in
    // where(inside, value, 0), so the masked-off value is never used, and an unmasked load that
    // depends only on the outer loops can be hoisted out of the inner ones (a conv's per-channel
    // scale and shift after a padded input).
    // (Only for a buffer of known size: a symbolic one's count at the maximum bounds nothing.)
    const ScheduledBuffer& info = schedule_.buffers[static_cast<size_t>(buffer)];
    // A narrow float held as f32 is loaded as f32 and narrowed (exactly) to the node's type.
    auto as_node_type = [&](const UOpPtr& loaded) {
      return loaded->dtype() == node->dtype() ? loaded : UOp::make(Ops::CAST, node->dtype(), {loaded});
    };
    if (valid && info.elements.is_known()) {
      UOpPtr simplified = simplify(flat);
      if (simplified->vmin() >= 0 && simplified->vmax() < info.count)
        return as_node_type(
            UOp::make(Ops::LOAD, info.dtype, {UOp::make(Ops::INDEX, global->dtype(), {global, simplified})}));
    }
    if (!valid)
      return as_node_type(UOp::make(Ops::LOAD, info.dtype, {UOp::make(Ops::INDEX, global->dtype(), {global, flat})}));
    return as_node_type(UOp::make(Ops::LOAD, info.dtype,
                                  {UOp::make(Ops::INDEX, global->dtype(), {global, flat, valid}), zero_of(info.dtype)}));
  }

  // Whether `node` is elementwise work on exactly one reduction (a conv's BatchNorm, with its
  // per-channel constants) that nothing else reads: the reduction is stored anyway when a
  // broadcast reaches it, so storing `node` instead costs the same bytes and runs the epilogue once
  // per element in the reduction's kernel, not once per read inside the consumer's loop (the
  // BatchNorm after MobileNetV2's linear-bottleneck 1x1 convs was recomputed by the next conv for
  // each of its filter rows).
  bool epilogue_of_stored_reduction(const UOp* node) {
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
  static bool computes_nothing(const UOp* node) {
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
  bool feeds_whole_reduction_and_more(const UOp* node) {
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
  bool passes_through(const UOp* consumer) const {
    OpGroup group = op_group(consumer->op());
    bool elementwise = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary ||
                       group == OpGroup::Movement || consumer->op() == Ops::CAST || consumer->op() == Ops::BITCAST;
    return elementwise && !output_nodes_.contains(consumer);
  }

  // Whether a reduction gives one value, or a few whose only readers (through movement ops) reduce
  // them to one: a whole tensor's maximum taken in parts (Tensor's reduce).
  bool reduces_to_one(const UOp* reduce) {
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
  std::unordered_set<const UOp*> kernels_reached(const UOp* node, bool& whole) {
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

  bool must_materialize(const UOp* node, bool through_expand, const Index& index) {
    if (buffer_of_.contains(node) || node->op() == Ops::BUFFER || node->op() == Ops::CONTIGUOUS) return true;
    if (forced_.contains(node)) return true;
    if (node->op() == Ops::REDUCE_AXIS) return through_expand || consumers_[node].size() > 1;
    OpGroup group = op_group(node->op());
    bool alu = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary;
    // (At the value that fans out, not at each expensive part of it: those have one reader.)
    if (alu && consumers_[node].size() > 1 && recompute_cost(node) >= kExpensiveOps &&
        feeds_whole_reduction_and_more(node))
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

  // The value of `node` at `index` (one index expression per axis of its shape), under `valid`.
  UOpPtr lower(const UOp* node, const Index& index, const UOpPtr& valid, bool through_expand, KernelState& kernel) {
    std::vector<const UOp*> key{node, valid.get(), through_expand ? node : nullptr};
    for (const UOpPtr& i : index) key.push_back(i.get());
    if (auto found = kernel.memo.find(key); found != kernel.memo.end()) return found->second;
    UOpPtr value = lower_uncached(node, index, valid, through_expand, kernel);
    kernel.memo.emplace(std::move(key), value);
    kernel.memo_keys_alive.insert(kernel.memo_keys_alive.end(), index.begin(), index.end());
    if (valid) kernel.memo_keys_alive.push_back(valid);
    return value;
  }

  UOpPtr lower_uncached(const UOp* node, const Index& index, const UOpPtr& valid, bool through_expand,
                        KernelState& kernel) {
    if (must_materialize(node, through_expand, index)) return load(node, index, valid, kernel);
    if (stores_narrowed(node, through_expand, index)) {
      force_store(node);
      return load(node, index, valid, kernel);
    }
    if (const UOp* copy = contiguous_copy_of(node); copy != nullptr && copy != kernel.output)
      return load(copy, index_in_copy(node, copy, index), valid, kernel);
    // A reduction under padding would run its loop for the padding too (WHERE evaluates both arms):
    // in a concatenation, for every element of every other input (DenseNet's concat of a growing
    // feature map with one new conv output ran that conv for all 1024 channels).
    // Expensive elementwise work there (the sigmoids that YOLOX's head concatenates) is the same:
    // every arm of the concatenation would compute it (6 sigmoids per output element, 10 ms).
    if (valid && (node->op() == Ops::REDUCE_AXIS || arithmetic_cost(node) >= kExpensiveOps)) {
      force_store(node);
      return load(node, index, valid, kernel);
    }
    // A reduction (or expensive elementwise work) that one kernel needs at two different indices
    // would be computed twice per output element: a window sum over shifted views of a conv's
    // output (LRN) would redo the whole conv for every shift. It is materialised instead.
    if (recomputing_would_repeat_work(node)) {
      std::vector<const UOp*> use{valid.get()};
      for (const UOpPtr& i : index) use.push_back(i.get());
      auto [first, inserted] = kernel.first_use.try_emplace(node, use);
      if (inserted) {  // the recorded pointers must stay unique while the kernel is built
        kernel.memo_keys_alive.insert(kernel.memo_keys_alive.end(), index.begin(), index.end());
        if (valid) kernel.memo_keys_alive.push_back(valid);
      }
      if (!inserted && first->second != use) {
        force_store(node);
        throw RebuildKernel{};
      }
    }
    return compute(node, index, valid, through_expand, kernel);
  }

  // Marks `node` to be stored by a kernel of its own whenever it is read (must_materialize), and
  // keeps it alive: forced_ holds raw pointers.
  void force_store(const UOp* node) {
    forced_.insert(node);
    keep_alive_.push_back(node->self());
  }

  // Whether `node` narrows a float (an f32 LayerNorm cast to f16 for an f16 matmul) whose source
  // the cost rule stores and nothing else reads: the narrow value is stored instead, so the buffer
  // is half the size and the rounding runs once, not in every consumer's loop (BERT-base fp16's
  // matmuls rounded their f32 input to f16 once per column tile: 41 against 150 GFLOP/s).
  bool stores_narrowed(const UOp* node, bool through_expand, const Index& index) {
    if (node->op() != Ops::CAST || !node->dtype().is_float()) return false;
    const UOp* source = node->src(0).get();
    if (!source->dtype().is_float() || node->dtype().scalar_bytes() >= source->dtype().scalar_bytes()) return false;
    if (buffer_of_.contains(source) || consumers_[source].size() != 1) return false;
    OpGroup group = op_group(source->op());
    bool computed = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary ||
                    source->op() == Ops::REDUCE_AXIS;
    return computed && must_materialize(source, through_expand, index);
  }

  static bool recomputing_would_repeat_work(const UOp* node) {
    if (node->op() == Ops::REDUCE_AXIS) return true;
    OpGroup group = op_group(node->op());
    bool alu = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary;
    return alu && recompute_cost(node) >= kExpensiveOps;
  }

  // The value of `node` computed in this kernel (not loaded): the kernel's root, and every node
  // that rangeify fuses.
  UOpPtr compute(const UOp* node, const Index& index, const UOpPtr& valid, bool through_expand, KernelState& kernel) {
    note_source(node, kernel);
    const Dims& shape = shapes_.of(node);
    switch (node->op()) {
      case Ops::CONST: return node->self();
      case Ops::DEFINE_VAR: return node->self();  // a size variable's value (dim_tensor)
      case Ops::SPECIAL: return index.at(0);
      case Ops::RESHAPE: {
        const UOp* source = node->src(0).get();
        const Dims& source_shape = shapes_.of(source);
        // With symbolic sizes, axes equal at the front and at the back map one to one, and only the
        // middle is flattened and split again: (batch, seq, 768) → (batch, seq, 12, 64) must not
        // divide by batch·seq·768 at run time (the simplifier cannot see that seq's index stays
        // below seq). Fixed shapes keep the plain form (their divisions by constants simplify).
        size_t front = 0, back = 0;
        if (!all_known(shape) || !all_known(source_shape)) {
          while (front < shape.size() && front < source_shape.size() && shape[front] == source_shape[front]) ++front;
          while (back < shape.size() - front && back < source_shape.size() - front &&
                 shape[shape.size() - 1 - back] == source_shape[source_shape.size() - 1 - back])
            ++back;
        }
        Index middle(index.begin() + static_cast<std::ptrdiff_t>(front), index.end() - static_cast<std::ptrdiff_t>(back));
        UOpPtr flat = flatten_index(middle, Dims(shape.begin() + static_cast<std::ptrdiff_t>(front),
                                                 shape.end() - static_cast<std::ptrdiff_t>(back)));
        Dims source_middle(source_shape.begin() + static_cast<std::ptrdiff_t>(front),
                           source_shape.end() - static_cast<std::ptrdiff_t>(back));
        std::vector<Dim> strides = strides_of(source_middle);
        Index source_index(index.begin(), index.begin() + static_cast<std::ptrdiff_t>(front));
        // With symbolic sizes the first axis longer than 1 takes the whole quotient: flat is below
        // the element count, so a remainder by its size would change nothing, but by a symbolic
        // size the simplifier cannot tell ((1, batch·seq) read as (batch, seq) divided by
        // batch·seq at run time). Fixed shapes keep a remainder after axis 0 (their plans as before).
        bool symbolic = !all_known(shape) || !all_known(source_shape);
        bool outer_axis = false;
        for (size_t i = 0; i < source_middle.size(); ++i) {
          if (source_middle[i].is(1)) {
            source_index.push_back(index_const(0));
            continue;
          }
          UOpPtr component = strides[i].is(1) ? flat : flat / strides[i].expression();
          if (symbolic ? outer_axis : i > 0) component = component % source_middle[i].expression();
          outer_axis = true;
          source_index.push_back(simplify(component));
        }
        source_index.insert(source_index.end(), index.end() - static_cast<std::ptrdiff_t>(back), index.end());
        return lower(source, source_index, valid, through_expand, kernel);
      }
      case Ops::PERMUTE: {
        const auto& order = node->arg_list();
        Index source_index(index.size());
        for (size_t i = 0; i < order.size(); ++i) source_index[static_cast<size_t>(order[i])] = index[i];
        return lower(node->src(0).get(), source_index, valid, through_expand, kernel);
      }
      case Ops::EXPAND: {
        const Dims& source_shape = shapes_.of(node->src(0).get());
        Index source_index;
        bool broadcasts = false;
        for (size_t i = 0; i < source_shape.size(); ++i) {
          bool broadcast = source_shape[i].is(1) && !shape[i].is(1);
          broadcasts = broadcasts || broadcast;
          source_index.push_back(source_shape[i].is(1) ? index_const(0) : index[i]);
        }
        return lower(node->src(0).get(), source_index, valid, through_expand || broadcasts, kernel);
      }
      case Ops::SHRINK: {
        const auto& bounds = node->arg_list();
        Index source_index;
        for (size_t i = 0; i < index.size(); ++i) {
          Dim begin = decode_dim(bounds[2 * i]);
          source_index.push_back(begin.is(0) ? index[i] : index[i] + begin.expression());
        }
        return lower(node->src(0).get(), source_index, valid, through_expand, kernel);
      }
      case Ops::FLIP: {
        const auto& axes = node->arg_list();
        Index source_index = index;
        for (int64_t axis : axes) {
          auto a = static_cast<size_t>(axis);
          source_index[a] = (shape[a] - 1).expression() - index[a];
        }
        return lower(node->src(0).get(), source_index, valid, through_expand, kernel);
      }
      case Ops::PAD: {
        const auto& pads = node->arg_list();
        const Dims& source_shape = shapes_.of(node->src(0).get());
        Index source_index;
        UOpPtr inside;
        for (size_t i = 0; i < index.size(); ++i) {
          Dim before = decode_dim(pads[2 * i]), after = decode_dim(pads[2 * i + 1]);
          source_index.push_back(before.is(0) ? index[i] : index[i] - before.expression());
          if (!before.is(0)) inside = and_valid(inside, logical_not(lt(index[i], before.expression())));
          if (!after.is(0)) inside = and_valid(inside, lt(index[i], (before + source_shape[i]).expression()));
        }
        if (!inside) return lower(node->src(0).get(), source_index, valid, through_expand, kernel);
        UOpPtr guard = and_valid(valid, inside);
        UOpPtr value = lower(node->src(0).get(), source_index, guard, through_expand, kernel);
        DType type = node->dtype();
        UOpPtr zero = zero_of(type);
        // The select tests the same conjunction as the loads' masks (the enclosing pads' conditions
        // change nothing, their own selects give 0 where they fail): one mask, computed once, and
        // the simplifier narrows this pad's clauses under the outer ones (`valid & x`).
        return where(guard, value, zero);
      }
      case Ops::REDUCE_AXIS: {
        const auto& arg = node->arg_list();
        const UOp* source = node->src(0).get();
        const Dims& source_shape = shapes_.of(source);
        Index source_index = index;
        std::vector<UOpPtr> ranges;
        for (size_t i = 1; i < arg.size(); ++i)
          if (source_shape[static_cast<size_t>(arg[i])].is(0)) return reduction_identity(static_cast<Ops>(arg[0]), node->dtype());
        for (size_t i = 1; i < arg.size(); ++i) {
          auto axis = static_cast<size_t>(arg[i]);
          if (source_shape[axis].is(1)) {
            source_index[axis] = index_const(0);
            continue;
          }
          UOpPtr r = range(source_shape[axis].expression(), kernel.next_reduce_axis++);
          source_index[axis] = r;
          ranges.push_back(r);
        }
        ++reduce_depth_;
        UOpPtr body;
        try {
          body = lower(source, source_index, valid, through_expand, kernel);
        } catch (...) {
          --reduce_depth_;
          throw;
        }
        --reduce_depth_;
        if (ranges.empty()) return body;
        // A gather written as "compare with arange, select, sum" is a load (reduce_collapse.h).
        auto reduce_op = static_cast<Ops>(arg.at(0));
        if (UOpPtr collapsed = collapse_one_hot_reduce(reduce_op, node->dtype(), body, ranges)) return collapsed;
        if (reduce_op == Ops::ADD)
          if (UOpPtr factored = sum_with_invariant_factors_out(node->dtype(), body, ranges)) return factored;
        std::vector<UOpPtr> sources{body};
        sources.insert(sources.end(), ranges.begin(), ranges.end());
        return UOp::make(Ops::REDUCE, node->dtype(), std::move(sources), static_cast<Ops>(arg.at(0)));
      }
      default: break;
    }
    OpGroup group = op_group(node->op());
    bool elementwise = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary ||
                       group == OpGroup::Cast;
    if (!elementwise)
      throw InternalError(str_cat("rangeify: unexpected ", op_name(node->op()), " in a tensor graph"),
                          std::source_location::current());
    std::vector<UOpPtr> sources;
    for (const UOpPtr& src : node->srcs()) sources.push_back(lower(src.get(), index, valid, through_expand, kernel));
    // Widening a narrow float that a buffer holds as f32: the load is the value.
    if (node->op() == Ops::CAST && node->dtype() == dtypes::f32)
      if (UOpPtr wide = wide_load_below(sources.front(), kernel)) return wide;
    return UOp::make(node->op(), node->dtype(), std::move(sources), node->arg());
  }

  // ScheduledKernel::sources. Only nodes that compute (ALU, casts, reductions) name a source: a
  // broadcast constant or a view is shared by every model node that builds the same one, and keeps
  // the first one's tag. A kernel that only moves data (a copy, a transpose) names its root's.
  static void note_source(const UOp* node, KernelState& kernel) {
    const std::shared_ptr<const std::string>& tag = node->provenance().tag;
    bool computes = op_is_alu(node->op()) || op_group(node->op()) == OpGroup::Cast || node->op() == Ops::REDUCE_AXIS;
    std::pair<const std::string*, bool> source{tag.get(), node->op() == Ops::REDUCE_AXIS};
    if (tag && computes && (kernel.sources.empty() || kernel.sources.back() != source)) kernel.sources.push_back(source);
  }

  // The tags noted while the kernel was built, distinct, at most kMaxKernelSources: those of
  // reductions first (the bulk of the work: a conv, a matmul, a pool), then the rest, each group
  // producers first (the notes are root first, top-down, so reversed).
  static std::vector<std::string> kernel_sources(const KernelState& kernel, const UOp* root) {
    std::vector<std::string> sources;
    for (bool reductions : {true, false})
      for (auto it = kernel.sources.rbegin(); it != kernel.sources.rend() && sources.size() < kMaxKernelSources; ++it)
        if (it->second == reductions && std::find(sources.begin(), sources.end(), *it->first) == sources.end())
          sources.push_back(*it->first);
    if (sources.empty() && root->provenance().tag) sources.push_back(*root->provenance().tag);
    return sources;
  }

  // Rough work estimates for KILN_DEBUG=2: each ALU op counts once per iteration of the loops it
  // depends on; bytes are the sizes of the buffers the kernel touches.
  static void estimate_cost(ScheduledKernel& kernel) {
    double flops = 0, bytes = 0;
    std::unordered_map<const UOp*, std::vector<const UOp*>> ranges_of;
    for (const UOp* node : toposort(kernel.ast)) {
      std::vector<const UOp*> ranges;
      if (node->op() == Ops::RANGE) ranges.push_back(node);
      size_t sources = node->op() == Ops::REDUCE ? 1 : node->src_count();
      for (size_t i = 0; i < sources; ++i)
        for (const UOp* r : ranges_of[node->src(i).get()])
          if (std::find(ranges.begin(), ranges.end(), r) == ranges.end()) ranges.push_back(r);
      auto trips = [](const std::vector<const UOp*>& set) {
        double product = 1;
        for (const UOp* r : set) product *= static_cast<double>(r->src(0)->vmax());  // (symbolic: its maximum)
        return product;
      };
      OpGroup group = op_group(node->op());
      bool alu = group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary;
      if (alu && !node->dtype().is_index() && !node->dtype().is_bool()) flops += trips(ranges);
      if (node->op() == Ops::REDUCE) {
        flops += trips(ranges);  // the accumulate, once per iteration of the reduce loops
        std::erase_if(ranges, [&](const UOp* r) {
          return std::any_of(node->srcs().begin() + 1, node->srcs().end(), [&](const UOpPtr& own) { return own.get() == r; });
        });
      }
      if (node->op() == Ops::DEFINE_GLOBAL)
        bytes += static_cast<double>(node->dtype().pointer_size() * node->dtype().scalar_bytes());
      ranges_of[node] = std::move(ranges);
    }
    kernel.estimated_flops = flops;
    kernel.estimated_bytes = bytes;
  }

  ScheduleOptions options_;
  ShapeMap shapes_;
  Schedule schedule_;
  std::unordered_map<const UOp*, std::unordered_set<const UOp*>> consumers_;
  std::unordered_map<const UOp*, int> buffer_of_;
  std::unordered_set<int> wide_buffers_;  // intermediate buffers holding narrow floats as f32
  std::unordered_set<const UOp*> pending_;  // outputs whose kernel is not built yet
  std::unordered_map<int64_t, int> input_buffers_;
  std::vector<UOpPtr> keep_alive_;
  // Values materialised because one kernel needed them at two indices, or several kernels need them.
  std::unordered_set<const UOp*> forced_;
  std::unordered_set<const UOp*> output_nodes_;
  std::unordered_map<const UOp*, bool> feeds_whole_reduction_;  // memo of feeds_whole_reduction_and_more
  int reduce_depth_ = 0;  // REDUCE_AXIS sources being lowered around the current node
};

}  // namespace

Schedule create_schedule(const std::vector<UOpPtr>& outputs, const ScheduleOptions& options) {
  Rangeifier rangeifier(outputs, options);
  Schedule schedule = rangeifier.take();
  elide_copies(schedule);
  plan_memory(schedule);
  return schedule;
}

}  // namespace kiln
