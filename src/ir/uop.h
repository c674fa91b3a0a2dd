// UOp: the immutable, hash-consed node of kiln's IR, `(op, dtype, srcs, arg)`.
//
// Two UOps with equal structure are the same object (interning), so common-subexpression elimination
// is free and "did a rewrite change anything?" is a pointer compare. Nodes are reference counted
// through UOpPtr and leave the intern table when the last reference goes; creating and releasing
// nodes is safe from many threads at once. Integer and bool nodes carry their value range
// (vmin/vmax), computed once when the node is created.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <variant>
#include <vector>

#include "ir/dtype.h"
#include "ir/ops.h"
#include "support/int128.h"

namespace kiln {

// The argument of a DEFINE_VAR: a named integer known to lie in [min, max].
struct VariableSpec {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  friend bool operator==(const VariableSpec&, const VariableSpec&) = default;
};

// What an op carries besides its sources. CONST holds int64 (integers, index; u64 as its bit
// pattern), double (floats) or bool; movement ops hold int64 lists; REDUCE holds the reduction Ops.
using Arg = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>,
                         Ops, VariableSpec>;

// Where a node came from: the C++ call site that built it, and a model-level tag such as
// "node 'conv1' (Conv, opset 13)". Provenance is not part of a node's identity: when two builders
// create the same node, the first one's provenance is kept.
struct Provenance {
  std::source_location location;
  std::shared_ptr<const std::string> tag;
};

// Sets the model-level tag recorded on every node this thread creates while the scope lives.
class ProvenanceScope {
 public:
  explicit ProvenanceScope(std::string tag);
  explicit ProvenanceScope(std::shared_ptr<const std::string> tag);
  ~ProvenanceScope();
  ProvenanceScope(const ProvenanceScope&) = delete;
  ProvenanceScope& operator=(const ProvenanceScope&) = delete;

 private:
  std::shared_ptr<const std::string> previous_;
};

class UOp;

// A counted reference to an interned UOp. Comparing two UOpPtrs compares identity, which for
// interned nodes is structural equality.
class UOpPtr {
 public:
  UOpPtr() = default;
  UOpPtr(std::nullptr_t) {}
  // A literal 0 would otherwise convert silently to a null node; builders take numbers explicitly.
  UOpPtr(int) = delete;
  UOpPtr(const UOpPtr& other);
  UOpPtr(UOpPtr&& other) noexcept : node_(other.node_) { other.node_ = nullptr; }
  UOpPtr& operator=(UOpPtr other) noexcept {
    std::swap(node_, other.node_);
    return *this;
  }
  ~UOpPtr();

  const UOp* get() const { return node_; }
  const UOp* operator->() const { return node_; }
  const UOp& operator*() const { return *node_; }
  explicit operator bool() const { return node_ != nullptr; }
  friend bool operator==(const UOpPtr& a, const UOpPtr& b) { return a.node_ == b.node_; }
  friend bool operator==(const UOpPtr& a, std::nullptr_t) { return a.node_ == nullptr; }

  // Takes a reference the caller already owns (used by the intern table).
  static UOpPtr adopt(const UOp* node) {
    UOpPtr ptr;
    ptr.node_ = node;
    return ptr;
  }

 private:
  const UOp* node_ = nullptr;
};

class UOp {
 public:
  // The one way to obtain a node: returns the interned node with this structure, creating it if
  // needed. Checks the source count against ops.def.
  static UOpPtr make(Ops op, DType dtype, std::vector<UOpPtr> srcs = {}, Arg arg = {},
                     std::source_location location = std::source_location::current());

  Ops op() const { return op_; }
  DType dtype() const { return dtype_; }
  const std::vector<UOpPtr>& srcs() const { return srcs_; }
  const UOpPtr& src(size_t i) const { return srcs_[i]; }
  size_t src_count() const { return srcs_.size(); }
  const Arg& arg() const { return arg_; }
  // Structural hash: the same in every process for the same structure.
  uint64_t hash() const { return hash_; }
  const Provenance& provenance() const { return provenance_; }

  // Typed views of the argument (an internal error if the argument has another type).
  int64_t arg_int() const;
  double arg_float() const;
  bool arg_bool() const;
  const std::string& arg_string() const;
  const std::vector<int64_t>& arg_list() const;
  Ops arg_op() const;
  const VariableSpec& arg_variable() const;

  bool is_const() const { return op_ == Ops::CONST; }
  // The value of an integer or bool CONST, as a wide integer (u64 values are not sign-extended).
  int128 const_int() const;

  // Range of the value for integer, index and bool dtypes: every value this node can take at run
  // time lies in [vmin, vmax]. For other dtypes the range is the whole int128 range.
  int128 vmin() const { return vmin_; }
  int128 vmax() const { return vmax_; }

  // The same node with other sources (the same pointer when they are unchanged).
  UOpPtr with_srcs(std::vector<UOpPtr> srcs) const;
  UOpPtr self() const;

  // Number of live nodes in the intern table (for tests of freeing and for benchmarks).
  static size_t live_count();

  UOp(const UOp&) = delete;
  UOp& operator=(const UOp&) = delete;

 private:
  friend class UOpPtr;
  friend class InternTable;
  UOp(Ops op, DType dtype, std::vector<UOpPtr> srcs, Arg arg, uint64_t hash);
  ~UOp() = default;

  Ops op_;
  DType dtype_;
  mutable std::atomic<uint32_t> references_{1};
  uint64_t hash_;
  std::vector<UOpPtr> srcs_;
  Arg arg_;
  int128 vmin_;
  int128 vmax_;
  Provenance provenance_;
};

// Hash functor for containers keyed by UOpPtr (identity hash: cheap and exact for interned nodes).
struct UOpPtrHash {
  size_t operator()(const UOpPtr& node) const { return node->hash(); }
};

// The nodes reachable from `root`, each after all of its sources (iterative; deep graphs are fine).
std::vector<const UOp*> toposort(const UOpPtr& root);

// Structural order used for canonical forms: compares op, arg, dtype, then sources. It does not
// depend on pointers, so canonical forms are the same in every run.
int structural_compare(const UOp* a, const UOp* b);

}  // namespace kiln
