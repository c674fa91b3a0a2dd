// UPat: a pattern over UOps — the left-hand side of a rewrite rule.
//
// A pattern constrains the op (a set), the dtype (a list or a class such as "any integer"), the
// argument, and the sources, and can bind the matched node to a name. Sources are matched in order;
// patterns built with the arithmetic operators for commutative ops (+, *, max, ==, !=, &, |, ^) also
// match with the two sources swapped. A name bound twice must bind the same node, so
// `var("x") - var("x")` matches only a difference of a node with itself.
//
//   UPat x = UPat::var("x");             // anything, bound to "x"
//   UPat c = UPat::cvar("c");            // any CONST, bound to "c"
//   x * 1                                // MUL of x and the constant 1, either order
//   UPat(Ops::RANGE).named("r")          // any RANGE
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/uop.h"
#include "support/function_ref.h"

namespace kiln {

// Which dtypes a pattern accepts: listed types and/or whole classes (checked on the scalar base, so
// a class also accepts vectors of it).
struct DTypeFilter {
  enum Class : uint8_t { None = 0, Ints = 1, Index = 2, Floats = 4, Bools = 8, FixedInts = 16 };
  std::vector<DType> exact;
  uint8_t classes = None;
  bool accepts(DType dtype) const;
  bool unconstrained() const { return exact.empty() && classes == None; }
};

// The names a match bound, in binding order. Small and allocation-free for the usual rule sizes.
// The names are views of the pattern's strings: a Match must not outlive the pattern it matched.
class Match {
 public:
  static constexpr size_t max_bindings = 12;

  // The node bound to `name`; an internal error if the pattern bound no such name.
  UOpPtr operator[](std::string_view name) const;
  const UOp* get(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  // The node the whole pattern matched.
  UOpPtr root() const { return root_->self(); }
  // The context object given to graph_rewrite (null if none).
  template <class Context>
  Context& context() const { return *static_cast<Context*>(context_); }

  size_t size() const { return count_; }
  std::string_view name_at(size_t i) const { return names_[i]; }
  const UOp* node_at(size_t i) const { return nodes_[i]; }

  // Used by the matcher.
  bool bind(std::string_view name, const UOp* node);
  size_t mark() const { return count_; }
  void reset_to(size_t mark) { count_ = mark; }
  void start(const UOp* root, void* context) {
    root_ = root;
    context_ = context;
    count_ = 0;
  }

 private:
  const UOp* const* find(std::string_view name) const;
  const UOp* root_ = nullptr;
  void* context_ = nullptr;
  size_t count_ = 0;
  std::string_view names_[max_bindings];
  const UOp* nodes_[max_bindings] = {};
};

class UPat {
 public:
  // Matches any node.
  UPat();
  // Matches nodes whose op is `op`; sources unconstrained unless given.
  explicit UPat(Ops op);
  UPat(Ops op, std::vector<UPat> sources);
  UPat(OpSet ops, std::vector<UPat> sources);

  static UPat var(std::string name);                  // any node, bound to name
  static UPat cvar(std::string name);                 // any scalar CONST, bound to name
  static UPat constant(int64_t value);                // a CONST equal to value (int 0 also matches 0.0)
  static UPat constant_float(double value);           // a float CONST equal to value (by ==; -0.0 ≠ 0.0)
  static UPat ops(OpSet ops);                         // any of the ops, sources unconstrained

  // Refinements; each returns a new pattern.
  UPat named(std::string name) const;
  UPat dtype(std::initializer_list<DType> dtypes) const;
  UPat ints() const;        // integer types and index
  UPat index() const;       // index only
  UPat fixed_ints() const;  // fixed-width integer types (not index)
  UPat floats() const;
  UPat bools() const;
  UPat arg(Arg value) const;
  // Every source (any number of them) must match `each`.
  UPat all_sources(UPat each) const;
  // Try the two sources in both orders.
  UPat commutative() const;

  // Tries to match `node`, adding bindings to `match`. On failure `match` is left as it was.
  bool matches(const UOp* node, Match& match) const;
  // Backtracking form: calls `accept` for each way the pattern matches (commutative orders give
  // several) until it returns true. Returns whether one was accepted; bindings of rejected
  // matches are undone. Rules use it so that a guard can reject one binding and try the next.
  bool matches(const UOp* node, Match& match, FunctionRef<bool()> accept) const;

  // Introspection for rule indexes, printers and the Z3 verifier.
  struct Node;
  const Node& node() const { return *node_; }
  // The ops this pattern can match at its root (all ops when unconstrained).
  OpSet root_ops() const;
  std::string describe() const;

  struct Node {
    std::optional<OpSet> ops;
    DTypeFilter dtypes;
    std::optional<Arg> arg;
    std::string name;
    enum class Sources : uint8_t { Any, Exact, Each } sources = Sources::Any;
    std::vector<UPat> source_patterns;  // Exact: one per source; Each: a single pattern
    bool commutative = false;
    bool scalar_const_value = false;  // arg is a number to compare numerically with the CONST's value
  };

 private:
  explicit UPat(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  static UPat literal(Arg value);  // a CONST compared numerically with `value`
  UPat modified(void (*change)(Node&)) const;
  std::shared_ptr<const Node> node_;
};

// Pattern arithmetic: `x + 0`, `x * c`, `(x / c1) / c2`, `max(x, y)`. Numbers become UPat::constant.
UPat operator+(const UPat& a, const UPat& b);
UPat operator-(const UPat& a, const UPat& b);
UPat operator*(const UPat& a, const UPat& b);
UPat operator/(const UPat& a, const UPat& b);  // IDIV
UPat operator%(const UPat& a, const UPat& b);
UPat operator&(const UPat& a, const UPat& b);
UPat operator|(const UPat& a, const UPat& b);
UPat operator^(const UPat& a, const UPat& b);
UPat operator-(const UPat& a);  // NEG
#define KILN_UPAT_SCALAR_OPERATOR(symbol)                                                              \
  inline UPat operator symbol(const UPat& a, int64_t b) { return a symbol UPat::constant(b); } \
  inline UPat operator symbol(int64_t a, const UPat& b) { return UPat::constant(a) symbol b; }
KILN_UPAT_SCALAR_OPERATOR(+)
KILN_UPAT_SCALAR_OPERATOR(-)
KILN_UPAT_SCALAR_OPERATOR(*)
KILN_UPAT_SCALAR_OPERATOR(/)
KILN_UPAT_SCALAR_OPERATOR(%)
KILN_UPAT_SCALAR_OPERATOR(&)
KILN_UPAT_SCALAR_OPERATOR(|)
KILN_UPAT_SCALAR_OPERATOR(^)
#undef KILN_UPAT_SCALAR_OPERATOR

UPat lt(const UPat& a, const UPat& b);       // CMPLT
UPat ne(const UPat& a, const UPat& b);       // CMPNE (commutative)
UPat eq(const UPat& a, const UPat& b);       // CMPEQ (commutative)
UPat maximum(const UPat& a, const UPat& b);  // MAX (commutative)
UPat where(const UPat& c, const UPat& a, const UPat& b);
UPat logical_not(const UPat& a);
UPat cast(const UPat& a);
inline UPat lt(const UPat& a, int64_t b) { return lt(a, UPat::constant(b)); }
inline UPat ne(const UPat& a, int64_t b) { return ne(a, UPat::constant(b)); }
inline UPat eq(const UPat& a, int64_t b) { return eq(a, UPat::constant(b)); }

}  // namespace kiln
