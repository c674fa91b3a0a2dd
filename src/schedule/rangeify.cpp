// Rangeify and kernel split: tensor-level graph → kernel ASTs (docs/kernel-ast.md).
//
// Each value that must exist in memory (an output, a CONTIGUOUS, or a value the cost rule of
// fusion_policy.cpp materialises) gets a buffer and a kernel. A kernel is built by walking its
// value top-down with one index expression per axis: movement ops rewrite the index expressions
// (this is where views disappear), elementwise ops pass them to their sources, a reduction opens
// new RANGEs for its reduced axes, and a buffer or materialised value becomes a LOAD. So
// elementwise chains fuse into one kernel, a reduction fuses with the elementwise work before it,
// and the elementwise work after a reduction (its epilogue) fuses into the reduction's kernel.
//
// Which values get buffers of their own is the cost rule (fusion_policy.cpp); padded copies and
// concatenations store their parts straight into their buffers (padded_stores.cpp). The state they
// share is the Rangeifier (rangeifier.h).
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
#include "schedule/order_run_bound_kernels.h"
#include "schedule/reduce_collapse.h"
#include "schedule/reduce_factors.h"
#include "schedule/schedule.h"
#include "schedule/split_reduce_ranges.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/hash.h"
#include "tensor/tensor_data.h"

namespace kiln::rangeify {

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

bool varies_with_reduce_loop(const Index& index) {
  for (const UOpPtr& component : index)
    for (const UOp* node : toposort(component))
      if (node->op() == Ops::RANGE && node->arg_int() >= kFirstReduceAxis) return true;
  return false;
}

Rangeifier::Rangeifier(const std::vector<UOpPtr>& outputs, const ScheduleOptions& options) : options_(options) {
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

const UOp* Rangeifier::contiguous_copy_of(const UOp* node) {
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
    // A rounded stand-in (kRoundedStandIn): PERMUTE to channels-last, CAST to bf16, BITCAST to its
    // bits, CONTIGUOUS; the other readers read the bits widened back (lower_uncached).
    if (consumer->op() == Ops::PERMUTE && consumer->arg_list() == kChannelsLastOrder && op_is_alu(node->op()) &&
        consumers_[consumer].size() == 1) {
      const UOp* cast = *consumers_[consumer].begin();
      const bool to_bf16 = cast->op() == Ops::CAST && cast->dtype().scalar() == ScalarType::BFloat16;
      const UOp* bits = to_bf16 && consumers_[cast].size() == 1 ? *consumers_[cast].begin() : nullptr;
      const UOp* candidate =
          bits != nullptr && bits->op() == Ops::BITCAST && consumers_[bits].size() == 1 ? *consumers_[bits].begin()
                                                                                       : nullptr;
      if (candidate != nullptr && candidate->op() == Ops::CONTIGUOUS &&
          std::holds_alternative<std::string>(candidate->arg()) && candidate->arg_string() == kRoundedStandIn &&
          (permuted_copy == nullptr || candidate->hash() < permuted_copy->hash()))
        permuted_copy = candidate;
    }
  }
  // A plain copy first: with both, the permuted one is then made from the plain one by a
  // transposing copy that reads NCHW rows; the other way round, that copy read every element
  // 4 KB from the last (ResNet-50 fp16's 14×14×1024 block output for layer 4's strided
  // downsample: 0.96 ms at 1.7 GB/s, against 0.05 ms).
  return copy != nullptr ? copy : permuted_copy;
}

bool Rangeifier::rounded_stand_in_of(const UOp* node) {
  const UOp* copy = contiguous_copy_of(node);
  return copy != nullptr && copy->dtype() != node->dtype();
}

// `index` of `node`, as an index of its copy (contiguous_copy_of): permuted like the copy when
// the copy is of a PERMUTE of node (not when node is itself a PERMUTE that the copy stores).
Index Rangeifier::index_in_copy(const UOp* node, const UOp* copy, const Index& index) {
  const UOp* source = copy->src(0).get();
  if (source == node) return index;
  while (source->op() == Ops::BITCAST || source->op() == Ops::CAST) source = source->src(0).get();
  Index permuted;
  for (int64_t axis : source->arg_list()) permuted.push_back(index[static_cast<size_t>(axis)]);
  return permuted;
}

void Rangeifier::count_consumers(const UOpPtr& root) {
  for (const UOp* node : toposort(root)) {
    if (node->op() == Ops::SPECIAL || node->op() == Ops::BUFFER) continue;
    for (const UOpPtr& src : node->srcs()) consumers_[src.get()].insert(node);
  }
}

int Rangeifier::add_buffer(ScheduledBuffer::Kind kind, DType dtype, const Dim& count) {
  ScheduledBuffer buffer;
  buffer.kind = kind;
  buffer.dtype = dtype;
  buffer.count = count.max();
  buffer.elements = count;
  schedule_.buffers.push_back(buffer);
  return static_cast<int>(schedule_.buffers.size() - 1);
}

// The buffer holding `node`'s value, building its kernel first if needed.
int Rangeifier::materialize(const UOp* node) {
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

void Rangeifier::build_kernel(const UOp* node, int output_buffer) {
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

// The state of a new kernel that stores `node`'s value into `output_buffer` (slot 0).
Rangeifier::KernelState Rangeifier::start_kernel(const UOp* node, int output_buffer) {
  KernelState kernel;
  kernel.output = node;
  kernel.slots.push_back(output_buffer);
  return kernel;
}

UOpPtr Rangeifier::zero_of(DType type) {
  return type.is_float() ? const_float(type, 0.0) : type.is_bool() ? const_bool(false) : const_int(type, 0);
}

// One loop per axis of `shape` (none for a size-1 axis), and the kernel name's sizes.
Index Rangeifier::output_ranges(const Dims& shape, std::string& name) {
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

void Rangeifier::build_kernel_once(const UOp* node, int output_buffer) {
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

// Names, orders and records a kernel whose single STORE is `store`.
void Rangeifier::add_kernel(KernelState& kernel, const UOp* node, const UOpPtr& store, const std::string& name) {
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
UOpPtr Rangeifier::store_into(const KernelState& kernel, int buffer, const UOpPtr& at, const UOpPtr& value) {
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
UOpPtr Rangeifier::wide_load_below(const UOpPtr& value, const KernelState& kernel) const {
  if (value->op() != Ops::CAST || !value->dtype().is_narrow_float()) return nullptr;
  const UOpPtr& loaded = value->src(0);
  if (loaded->op() != Ops::LOAD || loaded->dtype() != dtypes::f32) return nullptr;
  const UOp* global = loaded->src(0)->src(0).get();
  if (global->op() != Ops::DEFINE_GLOBAL) return nullptr;
  auto slot = static_cast<size_t>(global->arg_int());
  return slot < kernel.slots.size() && wide_buffers_.contains(kernel.slots[slot]) ? loaded : nullptr;
}

UOpPtr Rangeifier::define_global(int buffer, int slot) {
  const ScheduledBuffer& info = schedule_.buffers[static_cast<size_t>(buffer)];
  return UOp::make(Ops::DEFINE_GLOBAL, info.dtype.ptr(AddrSpace::Global, info.count), {}, int64_t{slot});
}

UOpPtr Rangeifier::load(const UOp* node, const Index& index, const UOpPtr& valid, KernelState& kernel) {
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

// The value of `node` at `index` (one index expression per axis of its shape), under `valid`.
UOpPtr Rangeifier::lower(const UOp* node, const Index& index, const UOpPtr& valid, bool through_expand, KernelState& kernel) {
  std::vector<const UOp*> key{node, valid.get(), through_expand ? node : nullptr};
  for (const UOpPtr& i : index) key.push_back(i.get());
  if (auto found = kernel.memo.find(key); found != kernel.memo.end()) return found->second;
  UOpPtr value = lower_uncached(node, index, valid, through_expand, kernel);
  kernel.memo.emplace(std::move(key), value);
  kernel.memo_keys_alive.insert(kernel.memo_keys_alive.end(), index.begin(), index.end());
  if (valid) kernel.memo_keys_alive.push_back(valid);
  return value;
}

UOpPtr Rangeifier::lower_uncached(const UOp* node, const Index& index, const UOpPtr& valid, bool through_expand,
                      KernelState& kernel) {
  if (must_materialize(node, through_expand, index)) return load(node, index, valid, kernel);
  if (stores_narrowed(node, through_expand, index)) {
    force_store(node);
    return load(node, index, valid, kernel);
  }
  if (const UOp* copy = contiguous_copy_of(node); copy != nullptr && copy != kernel.output) {
    UOpPtr loaded = load(copy, index_in_copy(node, copy, index), valid, kernel);
    if (loaded->dtype() == node->dtype()) return loaded;
    // (a rounded stand-in's bits, widened back)
    return UOp::make(Ops::CAST, node->dtype(), {UOp::make(Ops::BITCAST, DType(ScalarType::BFloat16), {loaded})});
  }
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
void Rangeifier::force_store(const UOp* node) {
  forced_.insert(node);
  keep_alive_.push_back(node->self());
}

// The value of `node` computed in this kernel (not loaded): the kernel's root, and every node
// that rangeify fuses.
UOpPtr Rangeifier::compute(const UOp* node, const Index& index, const UOpPtr& valid, bool through_expand, KernelState& kernel) {
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
void Rangeifier::note_source(const UOp* node, KernelState& kernel) {
  const std::shared_ptr<const std::string>& tag = node->provenance().tag;
  bool computes = op_is_alu(node->op()) || op_group(node->op()) == OpGroup::Cast || node->op() == Ops::REDUCE_AXIS;
  std::pair<const std::string*, bool> source{tag.get(), node->op() == Ops::REDUCE_AXIS};
  if (tag && computes && (kernel.sources.empty() || kernel.sources.back() != source)) kernel.sources.push_back(source);
}

// The tags noted while the kernel was built, distinct, at most kMaxKernelSources: those of
// reductions first (the bulk of the work: a conv, a matmul, a pool), then the rest, each group
// producers first (the notes are root first, top-down, so reversed).
std::vector<std::string> Rangeifier::kernel_sources(const KernelState& kernel, const UOp* root) {
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
void Rangeifier::estimate_cost(ScheduledKernel& kernel) {
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

}  // namespace kiln::rangeify

namespace kiln {

Schedule create_schedule(const std::vector<UOpPtr>& outputs, const ScheduleOptions& options) {
  rangeify::Rangeifier rangeifier(outputs, options);
  Schedule schedule = rangeifier.take();
  order_run_bound_kernels(schedule, options.run_bound_outputs);
  elide_copies(schedule);
  plan_memory(schedule);
  return schedule;
}

}  // namespace kiln
