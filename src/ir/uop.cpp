// Interning, reference counting and the basic queries of UOp.
//
// The intern table is split into shards, each a mutex and a hash multimap from structural hash to
// node, so that threads building different graphs rarely contend. A node's reference count reaching
// zero removes it from its shard; a lookup never revives a node whose count is already zero (it
// creates a fresh one instead), which makes the race between "last release" and "lookup" benign.
#include "ir/uop.h"

#include <array>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "ir/bounds.h"
#include "support/error.h"
#include "support/hash.h"
#include "support/pointer_map.h"

namespace kiln {
namespace {

thread_local std::shared_ptr<const std::string> current_provenance_tag;

uint64_t hash_arg(const Arg& arg) {
  uint64_t h = arg.index();
  std::visit(
      [&](const auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
        } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int64_t>) {
          h = hash_mix(h, static_cast<uint64_t>(value));
        } else if constexpr (std::is_same_v<T, double>) {
          h = hash_mix(h, hash_double(value));
        } else if constexpr (std::is_same_v<T, std::string>) {
          h = hash_mix(h, hash_bytes(value));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t item : value) h = hash_mix(h, static_cast<uint64_t>(item));
          h = hash_mix(h, value.size());
        } else if constexpr (std::is_same_v<T, Ops>) {
          h = hash_mix(h, static_cast<uint64_t>(value));
        } else if constexpr (std::is_same_v<T, VariableSpec>) {
          h = hash_mix(hash_mix(hash_mix(h, hash_bytes(value.name)), static_cast<uint64_t>(value.min)),
                       static_cast<uint64_t>(value.max));
        }
      },
      arg);
  return h;
}

// Argument equality for interning: doubles compare by bits, so 0.0 and -0.0 are different
// constants and a NaN constant equals itself.
bool same_arg(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a)) {
    double y = std::get<double>(b);
    return std::memcmp(x, &y, sizeof y) == 0;
  }
  return a == b;
}

uint64_t hash_dtype(DType dtype) {
  uint64_t h = hash_mix(static_cast<uint64_t>(dtype.scalar()), static_cast<uint64_t>(dtype.count()));
  return hash_mix(hash_mix(h, static_cast<uint64_t>(dtype.addrspace())),
                  static_cast<uint64_t>(dtype.pointer_size()));
}

uint64_t structural_hash(Ops op, DType dtype, const std::vector<UOpPtr>& srcs, const Arg& arg) {
  uint64_t h = hash_mix(static_cast<uint64_t>(op), hash_dtype(dtype));
  h = hash_mix(h, hash_arg(arg));
  for (const UOpPtr& source : srcs) h = hash_mix(h, source->hash());
  return hash_mix(h, srcs.size());
}

}  // namespace

// One shard's set of nodes: open addressing with linear probing over (hash, node) slots, so a
// lookup touches one or two cache lines instead of chasing list nodes. Deletion shifts the
// following entries back (no tombstones), which keeps probe sequences short under churn.
class NodeSet {
 public:
  template <class Same>
  const UOp* find(uint64_t hash, Same&& same) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = hash & mask(); slots_[i].node != nullptr; i = (i + 1) & mask())
      if (slots_[i].hash == hash && same(slots_[i].node)) return slots_[i].node;
    return nullptr;
  }

  void insert(uint64_t hash, const UOp* node) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(hash, node);
    ++size_;
  }

  size_t size() const { return size_; }

  bool erase(uint64_t hash, const UOp* node) {
    if (slots_.empty()) return false;
    size_t i = hash & mask();
    while (slots_[i].node != node) {
      if (slots_[i].node == nullptr) return false;
      i = (i + 1) & mask();
    }
    // Backward-shift: move later entries of the probe run into the hole when that brings them no
    // further from their home slot than they were.
    for (size_t j = (i + 1) & mask(); slots_[j].node != nullptr; j = (j + 1) & mask()) {
      size_t home = slots_[j].hash & mask();
      bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
    return true;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    const UOp* node = nullptr;
  };
  size_t mask() const { return slots_.size() - 1; }
  void place(uint64_t hash, const UOp* node) {
    size_t i = hash & mask();
    while (slots_[i].node != nullptr) i = (i + 1) & mask();
    slots_[i] = Slot{hash, node};
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 256 : old.size() * 2, Slot{});
    for (const Slot& slot : old)
      if (slot.node != nullptr) place(slot.hash, slot.node);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

class InternTable {
 public:
  static InternTable& instance() {
    // Never destroyed: nodes may be released by static destructors of other translation units.
    static InternTable* table = new InternTable;
    return *table;
  }

  UOpPtr intern(Ops op, DType dtype, std::vector<UOpPtr>&& srcs, Arg&& arg,
                const std::source_location& location) {
    uint64_t hash = structural_hash(op, dtype, srcs, arg);
    Shard& shard = shard_for(hash);
    std::lock_guard lock(shard.mutex);
    const UOp* existing = shard.nodes.find(hash, [&](const UOp* node) {
      // A node whose count already reached zero is being destroyed: it is skipped, not revived.
      return node->op_ == op && node->dtype_ == dtype && node->srcs_ == srcs && same_arg(node->arg_, arg) &&
             try_acquire(node);
    });
    if (existing != nullptr) return UOpPtr::adopt(existing);
    // Built under the shard's lock: the constructor only reads the sources (for the bounds), and
    // building here saves a second lookup. Other shards are not held up.
    UOp* node = new UOp(op, dtype, std::move(srcs), std::move(arg), hash);
    node->provenance_ = {location, current_provenance_tag};
    shard.nodes.insert(hash, node);
    return UOpPtr::adopt(node);
  }

  // Called when a node's count reached zero: unpublish it, then delete it. Deleting releases its
  // sources; a thread-local worklist turns that cascade into a loop so long chains cannot overflow
  // the stack.
  void release_dead(const UOp* node) {
    thread_local std::vector<const UOp*> pending;
    thread_local bool draining = false;
    pending.push_back(node);
    if (draining) return;
    draining = true;
    while (!pending.empty()) {
      const UOp* dead = pending.back();
      pending.pop_back();
      unpublish(dead);
      delete dead;
    }
    draining = false;
  }

  // Summed over the shards under their locks: a diagnostic, so it may cost; a global counter updated
  // by every make and release would bounce one cache line between all threads that build graphs.
  size_t live_count() {
    size_t total = 0;
    for (Shard& shard : shards_) {
      std::lock_guard lock(shard.mutex);
      total += shard.nodes.size();
    }
    return total;
  }

 private:
  struct Shard {
    std::mutex mutex;
    NodeSet nodes;
  };
  static constexpr size_t shard_count = 64;

  // The top bits pick the shard; NodeSet probes with the low bits, so the two are independent.
  Shard& shard_for(uint64_t hash) { return shards_[(hash >> 58) % shard_count]; }

  // Takes a reference unless the count is already zero (the node is being destroyed).
  static bool try_acquire(const UOp* node) {
    uint32_t count = node->references_.load(std::memory_order_relaxed);
    while (count != 0)
      if (node->references_.compare_exchange_weak(count, count + 1, std::memory_order_acq_rel))
        return true;
    return false;
  }

  void unpublish(const UOp* node) {
    Shard& shard = shard_for(node->hash_);
    std::lock_guard lock(shard.mutex);
    if (!shard.nodes.erase(node->hash_, node))
      throw_internal_error("a released UOp was missing from the intern table");
  }

  std::array<Shard, shard_count> shards_;
};

UOpPtr::UOpPtr(const UOpPtr& other) : node_(other.node_) {
  if (node_ != nullptr) node_->references_.fetch_add(1, std::memory_order_relaxed);
}

UOpPtr::~UOpPtr() {
  if (node_ != nullptr && node_->references_.fetch_sub(1, std::memory_order_acq_rel) == 1)
    InternTable::instance().release_dead(node_);
}

ProvenanceScope::ProvenanceScope(std::string tag) : previous_(current_provenance_tag) {
  current_provenance_tag = std::make_shared<const std::string>(std::move(tag));
}

ProvenanceScope::ProvenanceScope(std::shared_ptr<const std::string> tag) : previous_(current_provenance_tag) {
  current_provenance_tag = std::move(tag);
}

ProvenanceScope::~ProvenanceScope() { current_provenance_tag = previous_; }

UOp::UOp(Ops op, DType dtype, std::vector<UOpPtr> srcs, Arg arg, uint64_t hash)
    : op_(op), dtype_(dtype), hash_(hash), srcs_(std::move(srcs)), arg_(std::move(arg)) {
  Interval range = compute_bounds(op_, dtype_, srcs_, arg_);
  vmin_ = range.min;
  vmax_ = range.max;
}

UOpPtr UOp::make(Ops op, DType dtype, std::vector<UOpPtr> srcs, Arg arg, std::source_location location) {
  int arity = op_arity(op);
  KILN_ASSERT(arity < 0 || static_cast<size_t>(arity) == srcs.size(), op_name(op), " takes ", arity,
              " sources, got ", srcs.size());
  for (const UOpPtr& source : srcs) KILN_ASSERT(source != nullptr, "null source for ", op_name(op));
  return InternTable::instance().intern(op, dtype, std::move(srcs), std::move(arg), location);
}

UOpPtr UOp::self() const {
  references_.fetch_add(1, std::memory_order_relaxed);
  return UOpPtr::adopt(this);
}

UOpPtr UOp::with_srcs(std::vector<UOpPtr> srcs) const {
  if (srcs == srcs_) return self();
  // The rebuilt node stands for the same model node: it keeps the model-level tag as well as the
  // call site (rewrites rebuild every ancestor of a changed node, which would otherwise lose it).
  std::optional<ProvenanceScope> scope;
  if (provenance_.tag) scope.emplace(provenance_.tag);
  return make(op_, dtype_, std::move(srcs), arg_, provenance_.location);
}

size_t UOp::live_count() { return InternTable::instance().live_count(); }

namespace {
template <class T>
const T& arg_as(const UOp& node, const char* what) {
  const T* value = std::get_if<T>(&node.arg());
  if (value == nullptr)
    throw_internal_error(str_cat(op_name(node.op()), " has no ", what, " argument"));
  return *value;
}
}  // namespace

int64_t UOp::arg_int() const { return arg_as<int64_t>(*this, "integer"); }
double UOp::arg_float() const { return arg_as<double>(*this, "float"); }
bool UOp::arg_bool() const { return arg_as<bool>(*this, "bool"); }
const std::string& UOp::arg_string() const { return arg_as<std::string>(*this, "string"); }
const std::vector<int64_t>& UOp::arg_list() const { return arg_as<std::vector<int64_t>>(*this, "list"); }
Ops UOp::arg_op() const { return arg_as<Ops>(*this, "op"); }
const VariableSpec& UOp::arg_variable() const { return arg_as<VariableSpec>(*this, "variable"); }

int128 UOp::const_int() const {
  KILN_ASSERT(op_ == Ops::CONST, "const_int of ", op_name(op_));
  if (const bool* flag = std::get_if<bool>(&arg_)) return *flag ? 1 : 0;
  int64_t value = arg_int();
  if (dtype_.is_unsigned() && dtype_.scalar_bytes() == 8) return static_cast<int128>(static_cast<uint64_t>(value));
  return value;
}

std::vector<const UOp*> toposort(const UOpPtr& root) {
  std::vector<const UOp*> order;
  if (!root) return order;
  PointerMap<UOp, bool> seen;  // every node pushed once; the stack holds each node's next source
  std::vector<std::pair<const UOp*, size_t>> stack{{root.get(), 0}};
  seen.insert(root.get(), true);
  while (!stack.empty()) {
    auto& [node, next_source] = stack.back();
    if (next_source < node->src_count()) {
      const UOp* source = node->src(next_source++).get();
      if (seen.insert(source, true).second) stack.push_back({source, 0});
      continue;
    }
    order.push_back(node);
    stack.pop_back();
  }
  return order;
}

namespace {
int compare_args(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return a.index() < b.index() ? -1 : 1;
  if (same_arg(a, b)) return 0;
  return std::visit(
      [&](const auto& x) -> int {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, VariableSpec>) {
          if (x.name != y.name) return x.name < y.name ? -1 : 1;
          if (x.min != y.min) return x.min < y.min ? -1 : 1;
          return x.max < y.max ? -1 : 1;
        } else if constexpr (std::is_same_v<T, std::monostate>) {
          return 0;
        } else if constexpr (std::is_same_v<T, double>) {
          // A total order consistent with same_arg (bitwise identity): numbers by value, -0.0
          // before 0.0, NaNs after every number and among themselves by their bits. (The raw
          // `<` is no order here: NaN compares false both ways, and -0.0 == 0.0.)
          bool x_nan = std::isnan(x), y_nan = std::isnan(y);
          if (x_nan != y_nan) return x_nan ? 1 : -1;
          if (!x_nan && x != y) return x < y ? -1 : 1;
          if (!x_nan && std::signbit(x) != std::signbit(y)) return std::signbit(x) ? -1 : 1;
          uint64_t xb, yb;
          std::memcpy(&xb, &x, sizeof xb);
          std::memcpy(&yb, &y, sizeof yb);
          return xb < yb ? -1 : (xb > yb ? 1 : 0);
        } else {
          return x < y ? -1 : (y < x ? 1 : 0);
        }
      },
      a);
}
}  // namespace

int structural_compare(const UOp* a, const UOp* b) {
  if (a == b) return 0;
  if (a->op() != b->op()) return a->op() < b->op() ? -1 : 1;
  if (int by_arg = compare_args(a->arg(), b->arg()); by_arg != 0) return by_arg;
  if (a->dtype() != b->dtype()) return a->dtype().name() < b->dtype().name() ? -1 : 1;
  if (a->src_count() != b->src_count()) return a->src_count() < b->src_count() ? -1 : 1;
  for (size_t i = 0; i < a->src_count(); ++i)
    if (int by_source = structural_compare(a->src(i).get(), b->src(i).get()); by_source != 0)
      return by_source;
  return 0;
}

}  // namespace kiln
