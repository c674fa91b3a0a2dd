// Evaluation and printing of rule guards; see guard.h.
#include "rewrite/guard.h"

#include "support/error.h"

namespace kiln {

using Kind = GuardTerm::Kind;
using Operator = GuardTerm::Operator;

GuardTerm::GuardTerm(int64_t literal) {
  auto node = std::make_shared<Node>();
  node->kind = Kind::Literal;
  node->literal = literal;
  node_ = std::move(node);
}

GuardTerm GuardTerm::make_leaf(Kind kind, std::string name) {
  auto node = std::make_shared<Node>();
  node->kind = kind;
  node->name = std::move(name);
  return GuardTerm(std::move(node));
}

GuardTerm GuardTerm::make(Operator op, const GuardTerm& left, const GuardTerm* right) {
  auto node = std::make_shared<Node>();
  node->kind = right ? Kind::Binary : Kind::Unary;
  node->op = op;
  node->left = left.node_;
  if (right) node->right = right->node_;
  return GuardTerm(std::move(node));
}

GuardTerm val(std::string name) { return GuardTerm::make_leaf(Kind::ConstValue, std::move(name)); }
GuardTerm vmin(std::string name) { return GuardTerm::make_leaf(Kind::RangeMin, std::move(name)); }
GuardTerm vmax(std::string name) { return GuardTerm::make_leaf(Kind::RangeMax, std::move(name)); }

#define KILN_GUARD_BINARY(symbol, op) \
  GuardTerm operator symbol(const GuardTerm& a, const GuardTerm& b) { return GuardTerm::make(Operator::op, a, &b); }
KILN_GUARD_BINARY(+, Add)
KILN_GUARD_BINARY(-, Sub)
KILN_GUARD_BINARY(*, Mul)
KILN_GUARD_BINARY(/, Div)
KILN_GUARD_BINARY(%, Mod)
KILN_GUARD_BINARY(<, Lt)
KILN_GUARD_BINARY(<=, Le)
KILN_GUARD_BINARY(>, Gt)
KILN_GUARD_BINARY(>=, Ge)
KILN_GUARD_BINARY(==, Eq)
KILN_GUARD_BINARY(!=, Ne)
KILN_GUARD_BINARY(&&, And)
KILN_GUARD_BINARY(||, Or)
#undef KILN_GUARD_BINARY
GuardTerm operator!(const GuardTerm& a) { return GuardTerm::make(Operator::Not, a, nullptr); }
GuardTerm operator-(const GuardTerm& a) { return GuardTerm::make(Operator::Neg, a, nullptr); }

namespace {

std::optional<int128> evaluate_node(const GuardTerm::Node& node, const Match& match) {
  switch (node.kind) {
    case Kind::Literal: return node.literal;
    case Kind::ConstValue: {
      const UOp* bound = match.get(node.name);
      if (bound->op() != Ops::CONST || bound->dtype().is_float() || bound->dtype().count() != 1) return std::nullopt;
      return bound->const_int();
    }
    case Kind::RangeMin: return match.get(node.name)->vmin();
    case Kind::RangeMax: return match.get(node.name)->vmax();
    case Kind::Unary: {
      std::optional<int128> value = evaluate_node(*node.left, match);
      if (!value) return std::nullopt;
      return node.op == Operator::Not ? int128{*value == 0} : -*value;
    }
    case Kind::Binary: break;
  }
  std::optional<int128> left = evaluate_node(*node.left, match);
  if (!left) return std::nullopt;
  // && and || short-circuit, so a guard like `c != 0 && x % c == 0` is safe.
  if (node.op == Operator::And && *left == 0) return 0;
  if (node.op == Operator::Or && *left != 0) return 1;
  std::optional<int128> right = evaluate_node(*node.right, match);
  if (!right) return std::nullopt;
  int128 a = *left, b = *right;
  switch (node.op) {
    case Operator::Add: return a + b;
    case Operator::Sub: return a - b;
    case Operator::Mul: return a * b;
    case Operator::Div: return b == 0 ? std::nullopt : std::optional<int128>(a / b);
    case Operator::Mod: return b == 0 ? std::nullopt : std::optional<int128>(a % b);
    case Operator::Lt: return int128{a < b};
    case Operator::Le: return int128{a <= b};
    case Operator::Gt: return int128{a > b};
    case Operator::Ge: return int128{a >= b};
    case Operator::Eq: return int128{a == b};
    case Operator::Ne: return int128{a != b};
    case Operator::And: return int128{b != 0};
    case Operator::Or: return int128{b != 0};
    default: throw_internal_error("malformed guard");
  }
}

const char* symbol(Operator op) {
  static const char* const symbols[] = {"+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "!", "-"};
  return symbols[static_cast<int>(op)];
}

std::string text_of(const GuardTerm::Node& node) {
  switch (node.kind) {
    case Kind::Literal: return to_string(node.literal);
    case Kind::ConstValue: return node.name;
    case Kind::RangeMin: return "vmin(" + node.name + ")";
    case Kind::RangeMax: return "vmax(" + node.name + ")";
    case Kind::Unary: return std::string(symbol(node.op)) + "(" + text_of(*node.left) + ")";
    case Kind::Binary: break;
  }
  return "(" + text_of(*node.left) + " " + symbol(node.op) + " " + text_of(*node.right) + ")";
}

}  // namespace

std::optional<int128> GuardTerm::evaluate(const Match& match) const { return evaluate_node(*node_, match); }

std::string GuardTerm::text() const { return text_of(*node_); }

bool Guard::holds(const Match& match) const {
  if (!condition_) return true;
  std::optional<int128> value = condition_->evaluate(match);
  return value && *value != 0;
}

}  // namespace kiln
