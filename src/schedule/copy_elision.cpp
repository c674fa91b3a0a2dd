// Copy elision; see copy_elision.h.
#include "schedule/copy_elision.h"

#include <optional>
#include <vector>

namespace kiln {

namespace {

struct PlainCopy {
  int source_slot, destination_slot;
};

// The slots of a kernel AST that is exactly STORE(out[i], LOAD(in[i])): one store, one unmasked
// load, the same index node, the same element dtype.
std::optional<PlainCopy> plain_copy(const UOpPtr& ast) {
  if (ast->op() != Ops::SINK || ast->src_count() != 1) return std::nullopt;
  const UOpPtr& store = ast->src(0);
  if (store->op() != Ops::STORE || store->src_count() != 2) return std::nullopt;
  const UOpPtr& out = store->src(0);
  const UOpPtr& load = store->src(1);
  if (load->op() != Ops::LOAD || load->src_count() != 1) return std::nullopt;
  const UOpPtr& in = load->src(0);
  for (const UOpPtr& index : {out, in})
    if (index->op() != Ops::INDEX || index->src_count() != 2 || index->src(0)->op() != Ops::DEFINE_GLOBAL)
      return std::nullopt;
  if (out->src(1) != in->src(1) || out->src(0) == in->src(0) || out->src(0)->dtype() != in->src(0)->dtype())
    return std::nullopt;
  return PlainCopy{static_cast<int>(in->src(0)->arg_int()), static_cast<int>(out->src(0)->arg_int())};
}

// The DEFINE_GLOBAL slots a kernel stores into.
std::vector<int> stored_slots(const UOpPtr& ast) {
  std::vector<int> slots;
  for (const UOp* node : toposort(ast))
    if (node->op() == Ops::STORE && node->src(0)->op() == Ops::INDEX && node->src(0)->src(0)->op() == Ops::DEFINE_GLOBAL)
      slots.push_back(static_cast<int>(node->src(0)->src(0)->arg_int()));
  return slots;
}

bool uses(const ScheduledKernel& kernel, int buffer) {
  for (int b : kernel.buffers)
    if (b == buffer) return true;
  return false;
}

bool writes(const ScheduledKernel& kernel, int buffer) {
  for (int slot : stored_slots(kernel.ast))
    if (kernel.buffers[static_cast<size_t>(slot)] == buffer) return true;
  return false;
}

// Drops buffers no kernel and no output refers to, renumbering the rest.
void drop_unused_buffers(Schedule& schedule) {
  std::vector<bool> used(schedule.buffers.size(), false);
  for (const ScheduledKernel& kernel : schedule.kernels)
    for (int b : kernel.buffers) used[static_cast<size_t>(b)] = true;
  for (int b : schedule.outputs) used[static_cast<size_t>(b)] = true;
  std::vector<int> renumbered(schedule.buffers.size(), -1);
  std::vector<ScheduledBuffer> kept;
  for (size_t b = 0; b < schedule.buffers.size(); ++b) {
    // Only intermediates are dropped: inputs keep their places (a plan lists every input).
    if (!used[b] && schedule.buffers[b].kind == ScheduledBuffer::Kind::Intermediate) continue;
    renumbered[b] = static_cast<int>(kept.size());
    kept.push_back(schedule.buffers[b]);
  }
  schedule.buffers = std::move(kept);
  for (ScheduledKernel& kernel : schedule.kernels)
    for (int& b : kernel.buffers) b = renumbered[static_cast<size_t>(b)];
  for (int& b : schedule.outputs) b = renumbered[static_cast<size_t>(b)];
}

}  // namespace

int elide_copies(Schedule& schedule) {
  int removed = 0;
  for (size_t k = 0; k < schedule.kernels.size();) {
    const ScheduledKernel& copy = schedule.kernels[k];
    std::optional<PlainCopy> slots = plain_copy(copy.ast);
    if (!slots) {
      ++k;
      continue;
    }
    int source = copy.buffers[static_cast<size_t>(slots->source_slot)];
    int destination = copy.buffers[static_cast<size_t>(slots->destination_slot)];
    const ScheduledBuffer& from = schedule.buffers[static_cast<size_t>(source)];
    const ScheduledBuffer& to = schedule.buffers[static_cast<size_t>(destination)];
    bool eligible = from.kind == ScheduledBuffer::Kind::Intermediate && to.kind != ScheduledBuffer::Kind::Input &&
                    from.dtype == to.dtype && from.count == to.count && from.elements == to.elements;
    for (int output : schedule.outputs) eligible = eligible && output != source;
    // The source: written by exactly one earlier kernel, read by the copy alone. The destination:
    // written by the copy alone, and used by no kernel before it.
    int writer = -1;
    for (size_t other = 0; other < schedule.kernels.size() && eligible; ++other) {
      if (other == k) continue;
      const ScheduledKernel& kernel = schedule.kernels[other];
      if (uses(kernel, source)) {
        eligible = other < k && writer < 0 && writes(kernel, source);
        writer = static_cast<int>(other);
      }
      if (uses(kernel, destination)) eligible = eligible && other > k && !writes(kernel, destination);
    }
    if (!eligible || writer < 0) {
      ++k;
      continue;
    }
    for (int& b : schedule.kernels[static_cast<size_t>(writer)].buffers)
      if (b == source) b = destination;
    schedule.kernels.erase(schedule.kernels.begin() + static_cast<std::ptrdiff_t>(k));
    ++removed;
  }
  if (removed > 0) drop_unused_buffers(schedule);
  return removed;
}

}  // namespace kiln
