// Guards: the side conditions of rewrite rules, written as data rather than code.
//
// A guard is a small integer/boolean expression over a match's bindings: the value of a bound
// constant (`val("c")`), the range of a bound node (`vmin("x")`, `vmax("x")`), literals, arithmetic
// and comparisons. Keeping guards as data lets the matcher evaluate them cheaply and lets the Z3
// verifier (tests/z3) turn them into assumptions, so every guarded rule can be proven.
//
//   when(vmin("x") >= 0 && vmax("x") < val("c"))      // 0 <= x < c
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "rewrite/upat.h"
#include "support/int128.h"

namespace kiln {

class GuardTerm {
 public:
  enum class Kind : uint8_t { Literal, ConstValue, RangeMin, RangeMax, Unary, Binary };
  // Binary: + - * / (truncating) % < <= > >= == != && || ; Unary: ! and unary -.
  enum class Operator : uint8_t { Add, Sub, Mul, Div, Mod, Lt, Le, Gt, Ge, Eq, Ne, And, Or, Not, Neg };

  GuardTerm(int64_t literal);  // NOLINT: implicit so that `vmax("x") < 4` reads naturally

  struct Node {
    Kind kind;
    Operator op = Operator::Add;
    int128 literal = 0;
    std::string name;
    std::shared_ptr<const Node> left, right;
  };
  const Node& node() const { return *node_; }

  // The value under a match; nothing when undefined (division by zero, a non-constant `val`).
  std::optional<int128> evaluate(const Match& match) const;
  std::string text() const;

  static GuardTerm make_leaf(Kind kind, std::string name);
  static GuardTerm make(Operator op, const GuardTerm& left, const GuardTerm* right);

 private:
  explicit GuardTerm(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  std::shared_ptr<const Node> node_;
};

GuardTerm val(std::string name);   // the integer value of the CONST bound to name
GuardTerm vmin(std::string name);  // the lower end of the bound node's range
GuardTerm vmax(std::string name);  // the upper end of the bound node's range

GuardTerm operator+(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator-(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator*(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator/(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator%(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator<(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator<=(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator>(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator>=(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator==(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator!=(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator&&(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator||(const GuardTerm& a, const GuardTerm& b);
GuardTerm operator!(const GuardTerm& a);
GuardTerm operator-(const GuardTerm& a);

// A rule's side condition. The default guard always holds.
class Guard {
 public:
  Guard() = default;
  explicit Guard(GuardTerm condition) : condition_(std::move(condition)) {}
  bool holds(const Match& match) const;
  bool always() const { return !condition_; }
  const std::optional<GuardTerm>& condition() const { return condition_; }
  std::string text() const { return condition_ ? condition_->text() : "true"; }

 private:
  std::optional<GuardTerm> condition_;
};

inline Guard when(GuardTerm condition) { return Guard(std::move(condition)); }

}  // namespace kiln
