// Turns a rule's pattern into the concrete graphs it can match, for the Z3 verifier; see
// rule_instances.h. Types are inferred from the pattern's shape (unification of the positions that
// must share a dtype), then every admitted dtype is tried.
#include "z3/rule_instances.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "ir/build.h"
#include "ir/evaluate.h"
#include "ir/printer.h"
#include "ir/substitute.h"
#include "ir/verifier.h"
#include "support/error.h"
#include "z3/z3_semantics.h"

namespace kiln::z3check {

bool PatternInstance::is_constant(std::string_view name) const {
  for (const std::string& constant : constant_names)
    if (constant == name) return true;
  return false;
}

void PatternInstance::fill(Match& match) const {
  match.start(root.get(), nullptr);
  for (const auto& [name, node] : bindings) KILN_ASSERT(match.bind(name, node.get()), "inconsistent binding ", name);
}

std::string invalid_node(const UOpPtr& root) {
  // Each input leaf is replaced by a constant of its dtype, which the spec accepts for every scalar
  // type; the ops above keep their dtypes, so they are checked as they are.
  std::unordered_map<const UOp*, UOpPtr> stand_ins;
  for (const UOp* node : toposort(root))
    if (node->op() == Ops::DEFINE_VAR && node->dtype().count() == 1 && !node->dtype().is_pointer())
      stand_ins[node] = const_int(node->dtype(), 0);
  UOpPtr checked = substitute(root, stand_ins);
  const UOp* invalid = ir_spec().first_invalid(checked);
  if (invalid == nullptr) return "";
  std::string operands;
  for (const UOpPtr& source : invalid->srcs()) operands += (operands.empty() ? "" : ", ") + source->dtype().name();
  return str_cat(op_name(invalid->op()), "(", operands, ") -> ", invalid->dtype().name());
}

const std::vector<DType>& verified_dtypes() {
  static const std::vector<DType> all = {dtypes::index, dtypes::i8,  dtypes::i16,  dtypes::i32, dtypes::i64,
                                         dtypes::u8,    dtypes::u16, dtypes::u32,  dtypes::u64, dtypes::bool_,
                                         dtypes::f16,   dtypes::bf16, dtypes::f32, dtypes::f64};
  return all;
}

namespace {

enum class Kind { Variable, SymbolicConstant, Literal, Operation };

struct Position {
  const UPat* pattern;
  Kind kind;
  std::vector<Ops> ops;  // Operation: the ops the pattern allows here
  std::vector<int> children;
};

[[noreturn]] void untranslatable(std::string reason) { throw Untranslatable{std::move(reason)}; }

int flatten(const UPat& pattern, std::vector<Position>& positions) {
  const UPat::Node& node = pattern.node();
  if (node.sources == UPat::Node::Sources::Each)
    untranslatable("the pattern matches any number of sources alike (all_sources)");
  if (node.arg && !node.scalar_const_value) untranslatable("the pattern constrains an op argument");
  int index = static_cast<int>(positions.size());
  positions.push_back({&pattern, Kind::Variable, {}, {}});
  bool exact = node.sources == UPat::Node::Sources::Exact;
  if (node.scalar_const_value) {
    positions[index].kind = Kind::Literal;
  } else if (!node.ops) {
    if (exact) untranslatable("the pattern constrains the sources of any op");
  } else if (!exact) {
    if (node.ops->size() != 1 || !node.ops->contains(Ops::CONST))
      untranslatable(str_cat("the pattern matches ", pattern.describe(), " with any sources"));
    positions[index].kind = Kind::SymbolicConstant;
  } else {
    positions[index].kind = Kind::Operation;
    size_t count = node.source_patterns.size();
    node.ops->for_each([&](Ops op) {
      if (op_arity(op) < 0 || static_cast<size_t>(op_arity(op)) == count) positions[index].ops.push_back(op);
    });
    if (positions[index].ops.empty()) untranslatable(str_cat(pattern.describe(), ": no op takes ", count, " sources"));
    for (const UPat& source : node.source_patterns) {
      int child = flatten(source, positions);
      positions[index].children.push_back(child);
    }
  }
  return index;
}

// Union-find over positions: positions in one class share a dtype; a class may be fixed to bool.
struct Typing {
  std::vector<int> parent;
  std::vector<bool> boolean;
  explicit Typing(size_t count) : parent(count), boolean(count, false) {
    for (size_t i = 0; i < count; ++i) parent[i] = static_cast<int>(i);
  }
  int find(int i) { return parent[i] == i ? i : parent[i] = find(parent[i]); }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    parent[b] = a;
    boolean[a] = boolean[a] || boolean[b];
  }
  void make_bool(int i) { boolean[find(i)] = true; }
};

bool is_comparison(Ops op) { return op == Ops::CMPLT || op == Ops::CMPNE || op == Ops::CMPEQ; }

void add_constraints(const std::vector<Position>& positions, const std::vector<Ops>& chosen, Typing& typing) {
  for (size_t i = 0; i < positions.size(); ++i) {
    const Position& position = positions[i];
    if (position.kind != Kind::Operation) continue;
    Ops op = chosen[i];
    const std::vector<int>& kids = position.children;
    int self = static_cast<int>(i);
    if (is_comparison(op)) {
      typing.make_bool(self);
      for (int kid : kids) typing.unite(kids[0], kid);
    } else if (op == Ops::WHERE) {
      typing.make_bool(kids[0]);
      typing.unite(self, kids[1]);
      typing.unite(self, kids[2]);
    } else if (op == Ops::CAST || op == Ops::BITCAST) {
      // Source and result dtypes are independent; both default to the instance's dtype.
    } else if (op == Ops::SHL || op == Ops::SHR) {
      typing.unite(self, kids[0]);
    } else {
      for (int kid : kids) typing.unite(self, kid);
    }
  }
}

// What the swapped order of a commutative node computes is the same term in our Z3 semantics for
// these ops, so only the written order is instantiated; float MAX is backend-defined on NaN and
// signed zeros (z3_semantics.cpp) and is instantiated both ways.
bool order_is_irrelevant(Ops op, DType operand) {
  switch (op) {
    case Ops::ADD: case Ops::MUL: case Ops::AND: case Ops::OR: case Ops::XOR: case Ops::CMPNE: case Ops::CMPEQ:
      return true;
    case Ops::MAX: return !operand.is_float();
    default: return false;
  }
}

UOpPtr leaf(const std::string& name, DType dtype, bool narrow) {
  int64_t low = 0, high = 0;
  if (narrow && (dtype.is_int() || dtype.is_bool())) {
    low = high = 1;
  } else if (dtype.is_int() || dtype.is_bool()) {
    DType range_type = dtype.is_index() ? dtypes::i64 : dtype;
    low = static_cast<int64_t>(std::max<int128>(min_value(range_type), INT64_MIN));
    high = static_cast<int64_t>(std::min<int128>(max_value(range_type), INT64_MAX));
  }
  return UOp::make(Ops::DEFINE_VAR, dtype, {}, VariableSpec{name, low, high});
}

// The CONSTs of `dtype` that the literal pattern accepts, asked of the real matcher so that the
// instances follow exactly what a table would match (int 0 and 0.0 also match -0.0, for example).
std::vector<UOpPtr> literal_candidates(const UPat& literal, DType dtype) {
  const Arg& value = *literal.node().arg;
  std::vector<UOpPtr> candidates;
  if (dtype.is_float()) {
    double number = std::holds_alternative<int64_t>(value) ? static_cast<double>(std::get<int64_t>(value))
                                                           : std::get<double>(value);
    candidates = {const_float(dtype, number), const_float(dtype, -number)};
  } else if (dtype.is_bool()) {
    candidates = {const_bool(false), const_bool(true)};
  } else if (dtype.is_int() && std::holds_alternative<int64_t>(value)) {
    int128 wrapped = wrap_integer(std::get<int64_t>(value), dtype);
    candidates = {UOp::make(Ops::CONST, dtype, {}, static_cast<int64_t>(static_cast<uint64_t>(wrapped)))};
  }
  std::vector<UOpPtr> accepted;
  for (const UOpPtr& candidate : candidates) {
    Match scratch;
    scratch.start(candidate.get(), nullptr);
    bool duplicate = std::find(accepted.begin(), accepted.end(), candidate) != accepted.end();
    if (!duplicate && literal.matches(candidate.get(), scratch)) accepted.push_back(candidate);
  }
  return accepted;
}

std::string render_constant(const UOpPtr& node) {
  if (node->dtype().is_float()) {
    double value = node->arg_float();
    if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
    return str_cat(value);
  }
  return to_string(node->const_int());
}

struct Builder {
  const std::vector<Position>& positions;
  const std::vector<Ops>& chosen;
  const std::vector<DType>& dtypes;
  const std::map<int, UOpPtr>& literals;
  const std::set<int>& swapped;
  bool narrow_leaves;
  std::map<std::string, UOpPtr> named_leaves;
  std::vector<UOpPtr> built;

  UOpPtr build(int index) {
    const Position& position = positions[index];
    const std::string& name = position.pattern->node().name;
    UOpPtr node;
    switch (position.kind) {
      case Kind::Variable:
      case Kind::SymbolicConstant: {
        std::string leaf_name = name.empty() ? str_cat("_any", index) : name;
        auto found = named_leaves.find(leaf_name);
        node = found != named_leaves.end() ? found->second : leaf(leaf_name, dtypes[index], narrow_leaves);
        named_leaves[leaf_name] = node;
        break;
      }
      case Kind::Literal: node = literals.at(index); break;
      case Kind::Operation: {
        std::vector<UOpPtr> sources;
        for (int child : position.children) sources.push_back(build(child));
        if (swapped.count(index) != 0) std::swap(sources[0], sources[1]);
        node = UOp::make(chosen[index], dtypes[index], std::move(sources));
        break;
      }
    }
    built[index] = node;
    return node;
  }
};

}  // namespace

InstanceSet instantiate(const UPat& pattern, bool narrow_leaves) {
  InstanceSet result;
  std::vector<Position> positions;
  try {
    flatten(pattern, positions);
  } catch (const Untranslatable& error) {
    result.untranslatable = error.reason;
    return result;
  }

  // A name used twice binds one node; only leaves can be shared that way here.
  std::map<std::string, int> first_use;
  Typing base(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {
    const std::string& name = positions[i].pattern->node().name;
    if (name.empty()) continue;
    auto [found, inserted] = first_use.emplace(name, static_cast<int>(i));
    if (inserted) continue;
    const Position& first = positions[found->second];
    bool leaves = (first.kind == Kind::Variable || first.kind == Kind::SymbolicConstant) &&
                  first.kind == positions[i].kind;
    if (!leaves) {
      result.untranslatable = str_cat("the name '", name, "' is bound at two positions that are not both leaves");
      return result;
    }
    base.unite(found->second, static_cast<int>(i));
  }

  // Every combination of the ops allowed at op-set positions.
  std::vector<std::vector<Ops>> op_choices{{}};
  for (const Position& position : positions) {
    std::vector<std::vector<Ops>> next;
    for (const auto& prefix : op_choices) {
      if (position.kind != Kind::Operation) {
        next.push_back(prefix);
        next.back().push_back(Ops::NOOP);
        continue;
      }
      for (Ops op : position.ops) {
        next.push_back(prefix);
        next.back().push_back(op);
      }
    }
    op_choices = std::move(next);
  }

  std::set<std::string> seen;
  for (const std::vector<Ops>& chosen : op_choices) {
    Typing typing = base;
    add_constraints(positions, chosen, typing);
    std::string op_label;
    for (size_t i = 0; i < positions.size(); ++i)
      if (positions[i].kind == Kind::Operation && positions[i].ops.size() > 1)
        op_label += str_cat(" [", op_name(chosen[i]), "]");

    for (DType value_dtype : verified_dtypes()) {
      std::vector<DType> dtypes(positions.size());
      bool admitted = true;
      bool uses_value_dtype = false;
      std::string signature = op_label;
      for (size_t i = 0; i < positions.size() && admitted; ++i) {
        bool boolean = typing.boolean[typing.find(static_cast<int>(i))];
        dtypes[i] = boolean ? dtypes::bool_ : value_dtype;
        uses_value_dtype = uses_value_dtype || !boolean;
        admitted = positions[i].pattern->node().dtypes.accepts(dtypes[i]);
        signature += dtypes[i].name() + ";";
      }
      if (!admitted || !seen.insert(signature).second) continue;
      std::string label = (uses_value_dtype ? value_dtype.name() : std::string("bool")) + op_label;

      // Literal choices (usually one literal with one or two matching CONSTs).
      std::vector<std::map<int, UOpPtr>> literal_choices{{}};
      bool literal_missing = false;
      for (size_t i = 0; i < positions.size() && !literal_missing; ++i) {
        if (positions[i].kind != Kind::Literal) continue;
        std::vector<UOpPtr> candidates = literal_candidates(*positions[i].pattern, dtypes[i]);
        if (candidates.empty()) {
          result.skipped.push_back(str_cat(label, ": the literal ", render_arg(*positions[i].pattern->node().arg),
                                           " matches no ", dtypes[i].name(), " constant"));
          literal_missing = true;
        }
        std::vector<std::map<int, UOpPtr>> next;
        for (const auto& prefix : literal_choices)
          for (const UOpPtr& candidate : candidates) {
            next.push_back(prefix);
            next.back()[static_cast<int>(i)] = candidate;
          }
        literal_choices = std::move(next);
      }
      if (literal_missing) continue;

      for (const std::map<int, UOpPtr>& literals : literal_choices) {
        std::string literal_label;
        for (const auto& [index, node] : literals)
          if (literal_candidates(*positions[index].pattern, dtypes[index]).size() > 1)
            literal_label += " [literal " + render_constant(node) + "]";
        // Commutative nodes whose order matters in our semantics are instantiated both ways.
        std::vector<int> order_sensitive;
        for (size_t i = 0; i < positions.size(); ++i) {
          const Position& position = positions[i];
          if (position.kind == Kind::Operation && position.pattern->node().commutative &&
              position.children.size() == 2 &&
              !order_is_irrelevant(chosen[i], dtypes[position.children[0]]))
            order_sensitive.push_back(static_cast<int>(i));
        }
        std::set<const UOp*> roots;  // a swapped x∘x is the same graph as the written one
        for (size_t mask = 0; mask < (size_t{1} << order_sensitive.size()); ++mask) {
          std::set<int> swapped;
          for (size_t bit = 0; bit < order_sensitive.size(); ++bit)
            if (mask & (size_t{1} << bit)) swapped.insert(order_sensitive[bit]);
          Builder builder{positions, chosen,        dtypes, literals, swapped, narrow_leaves,
                          {},        std::vector<UOpPtr>(positions.size())};
          PatternInstance instance;
          instance.root = builder.build(0);
          if (!roots.insert(instance.root.get()).second) continue;
          instance.label = label + literal_label + (swapped.empty() ? "" : " [sources swapped]");
          if (std::string invalid = invalid_node(instance.root); !invalid.empty()) {
            result.skipped.push_back(str_cat(instance.label, ": ", invalid, " is not valid IR"));
            continue;
          }
          // Bindings in the matcher's order: a node's name before its sources'.
          std::function<void(int)> bind = [&](int index) {
            const Position& position = positions[index];
            const std::string& name = position.pattern->node().name;
            if (!name.empty()) {
              bool bound = false;
              for (const auto& binding : instance.bindings) bound = bound || binding.first == name;
              if (!bound) instance.bindings.emplace_back(name, builder.built[index]);
              if (!bound && (position.kind == Kind::SymbolicConstant || position.kind == Kind::Literal))
                instance.constant_names.push_back(name);
            }
            for (int child : position.children) bind(child);
          };
          bind(0);
          result.instances.push_back(std::move(instance));
        }
      }
    }
  }
  return result;
}

}  // namespace kiln::z3check
