// A hash map keyed by pointers, with open addressing and linear probing. The passes keep per-node
// side tables (memoised results, visited marks) that are probed once or twice per node; a flat
// table does that in one or two cache lines, where std::unordered_map chases list nodes.
// Insert and lookup only: entries are never erased (a pass builds its table and drops it whole).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {

template <class Key, class Value>
class PointerMap {
 public:
  explicit PointerMap(size_t expected = 0) {
    size_t capacity = 16;
    while (capacity < expected * 2) capacity *= 2;
    slots_.resize(capacity);
  }

  Value* find(const Key* key) {
    for (size_t i = home(key);; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == nullptr) return nullptr;
    }
  }
  const Value* find(const Key* key) const { return const_cast<PointerMap*>(this)->find(key); }
  bool contains(const Key* key) const { return find(key) != nullptr; }

  // The value for `key`, default-constructed if it was absent.
  Value& operator[](const Key* key) { return *insert(key, Value{}).first; }

  // Inserts `value` unless `key` is present; returns the stored value and whether it was inserted.
  std::pair<Value*, bool> insert(const Key* key, Value value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = home(key);
    for (; slots_[i].key != nullptr; i = (i + 1) & mask())
      if (slots_[i].key == key) return {&slots_[i].value, false};
    slots_[i].key = key;
    slots_[i].value = std::move(value);
    ++size_;
    return {&slots_[i].value, true};
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    const Key* key = nullptr;
    Value value{};
  };
  size_t mask() const { return slots_.size() - 1; }
  size_t home(const Key* key) const {
    // Pointers are aligned and clustered; a multiplicative mix spreads them over the table.
    uint64_t bits = reinterpret_cast<uintptr_t>(key) * 0x9e3779b97f4a7c15ULL;
    return static_cast<size_t>(bits >> 20) & mask();
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.clear();
    slots_.resize(old.size() * 2);
    size_ = 0;
    for (Slot& slot : old)
      if (slot.key != nullptr) insert(slot.key, std::move(slot.value));
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace kiln
