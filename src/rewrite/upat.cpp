// Matching of UPat patterns against UOps; see upat.h.
#include "rewrite/upat.h"

#include <cmath>

#include "ir/printer.h"
#include "support/error.h"

namespace kiln {

bool DTypeFilter::accepts(DType dtype) const {
  if (unconstrained()) return true;
  for (DType allowed : exact)
    if (allowed == dtype) return true;
  if (dtype.is_pointer()) return false;
  DType base = dtype.base();
  return ((classes & Ints) && base.is_int()) || ((classes & Index) && base.is_index()) ||
         ((classes & Floats) && base.is_float()) || ((classes & Bools) && base.is_bool()) ||
         ((classes & FixedInts) && base.is_int() && !base.is_index());
}

const UOp* const* Match::find(std::string_view name) const {
  for (size_t i = 0; i < count_; ++i)
    if (names_[i] == name) return &nodes_[i];
  return nullptr;
}

const UOp* Match::get(std::string_view name) const {
  const UOp* const* found = find(name);
  if (found == nullptr) throw_internal_error(str_cat("rule uses unbound pattern name '", name, "'"));
  return *found;
}

UOpPtr Match::operator[](std::string_view name) const { return get(name)->self(); }

bool Match::bind(std::string_view name, const UOp* node) {
  if (const UOp* const* existing = find(name)) return *existing == node;
  KILN_ASSERT(count_ < max_bindings, "pattern binds more than ", max_bindings, " names");
  names_[count_] = name;
  nodes_[count_] = node;
  ++count_;
  return true;
}

UPat::UPat() : node_(std::make_shared<Node>()) {}

UPat::UPat(Ops op) : UPat(OpSet{op}, {}) { }

UPat::UPat(Ops op, std::vector<UPat> sources) : UPat(OpSet{op}, std::move(sources)) {}

UPat::UPat(OpSet ops, std::vector<UPat> sources) {
  auto node = std::make_shared<Node>();
  node->ops = ops;
  if (!sources.empty()) {
    node->sources = Node::Sources::Exact;
    node->source_patterns = std::move(sources);
  }
  node_ = std::move(node);
}

UPat UPat::modified(void (*change)(Node&)) const {
  auto copy = std::make_shared<Node>(*node_);
  change(*copy);
  return UPat(std::move(copy));
}

UPat UPat::var(std::string name) { return UPat().named(std::move(name)); }

UPat UPat::cvar(std::string name) {
  UPat pattern(Ops::CONST);
  return pattern.named(std::move(name));
}

UPat UPat::literal(Arg value) {
  auto node = std::make_shared<Node>();
  node->ops = OpSet{Ops::CONST};
  node->arg = std::move(value);
  node->scalar_const_value = true;
  return UPat(std::move(node));
}

UPat UPat::constant(int64_t value) { return literal(value); }
UPat UPat::constant_float(double value) { return literal(value); }

UPat UPat::ops(OpSet ops) { return UPat(ops, {}); }

UPat UPat::named(std::string name) const {
  auto copy = std::make_shared<Node>(*node_);
  copy->name = std::move(name);
  return UPat(std::move(copy));
}

UPat UPat::dtype(std::initializer_list<DType> dtypes) const {
  auto copy = std::make_shared<Node>(*node_);
  copy->dtypes.exact.assign(dtypes.begin(), dtypes.end());
  return UPat(std::move(copy));
}

UPat UPat::ints() const { return modified([](Node& n) { n.dtypes.classes |= DTypeFilter::Ints; }); }
UPat UPat::index() const { return modified([](Node& n) { n.dtypes.classes |= DTypeFilter::Index; }); }
UPat UPat::fixed_ints() const { return modified([](Node& n) { n.dtypes.classes |= DTypeFilter::FixedInts; }); }
UPat UPat::floats() const { return modified([](Node& n) { n.dtypes.classes |= DTypeFilter::Floats; }); }
UPat UPat::bools() const { return modified([](Node& n) { n.dtypes.classes |= DTypeFilter::Bools; }); }
UPat UPat::commutative() const { return modified([](Node& n) { n.commutative = true; }); }

UPat UPat::arg(Arg value) const {
  auto copy = std::make_shared<Node>(*node_);
  copy->arg = std::move(value);
  return UPat(std::move(copy));
}

UPat UPat::all_sources(UPat each) const {
  auto copy = std::make_shared<Node>(*node_);
  copy->sources = Node::Sources::Each;
  copy->source_patterns = {std::move(each)};
  return UPat(std::move(copy));
}

OpSet UPat::root_ops() const { return node_->ops ? *node_->ops : OpSet::all(); }

namespace {

// Numeric comparison of a pattern literal with a scalar CONST: int patterns match ints, bools and
// floats of the same value; float patterns match floats that are == and have the same sign.
bool constant_equals(const Arg& pattern_value, const UOp& node) {
  if (node.dtype().count() != 1) return false;
  const Arg& value = node.arg();
  if (const int64_t* want = std::get_if<int64_t>(&pattern_value)) {
    if (const int64_t* have = std::get_if<int64_t>(&value))
      return node.dtype().is_unsigned() && node.dtype().scalar_bytes() == 8 && *want < 0 ? false : *have == *want;
    if (const double* have = std::get_if<double>(&value)) return *have == static_cast<double>(*want);
    if (const bool* have = std::get_if<bool>(&value)) return (*have ? 1 : 0) == *want;
    return false;
  }
  // Float literals compare with ==, except that the sign of a zero counts: x+(-0.0) → x is exact
  // but x+0.0 → x is not (-0.0 + 0.0 is +0.0), so constant_float(-0.0) must not match +0.0.
  if (const double* want = std::get_if<double>(&pattern_value))
    if (const double* have = std::get_if<double>(&value))
      return *have == *want && std::signbit(*have) == std::signbit(*want);
  return false;
}

// Matches patterns[i..] against nodes[i..] in sequence, then asks `accept`.
bool match_sequence(const UPat* patterns, const UOp* const* nodes, size_t count, Match& match,
                    FunctionRef<bool()> accept) {
  if (count == 0) return accept();
  return patterns[0].matches(nodes[0], match, [&] {
    return match_sequence(patterns + 1, nodes + 1, count - 1, match, accept);
  });
}

}  // namespace

bool UPat::matches(const UOp* node, Match& match) const {
  return matches(node, match, [] { return true; });
}

bool UPat::matches(const UOp* node, Match& match, FunctionRef<bool()> accept) const {
  const Node& pattern = *node_;
  if (pattern.ops && !pattern.ops->contains(node->op())) return false;
  if (!pattern.dtypes.accepts(node->dtype())) return false;
  if (pattern.arg) {
    if (pattern.scalar_const_value ? !constant_equals(*pattern.arg, *node) : *pattern.arg != node->arg())
      return false;
  }
  size_t mark = match.mark();
  if (!pattern.name.empty() && !match.bind(pattern.name, node)) return false;
  size_t after_name = match.mark();
  bool accepted = false;
  switch (pattern.sources) {
    case Node::Sources::Any: accepted = accept(); break;
    case Node::Sources::Each: {
      std::vector<UPat> repeated(node->src_count(), pattern.source_patterns[0]);
      std::vector<const UOp*> sources;
      for (const UOpPtr& source : node->srcs()) sources.push_back(source.get());
      accepted = match_sequence(repeated.data(), sources.data(), sources.size(), match, accept);
      break;
    }
    case Node::Sources::Exact: {
      const auto& patterns = pattern.source_patterns;
      if (patterns.size() != node->src_count()) break;
      const UOp* sources[3] = {};
      if (patterns.size() <= 3) {
        for (size_t i = 0; i < patterns.size(); ++i) sources[i] = node->src(i).get();
        accepted = match_sequence(patterns.data(), sources, patterns.size(), match, accept);
        if (!accepted && pattern.commutative && patterns.size() == 2) {
          match.reset_to(after_name);
          std::swap(sources[0], sources[1]);
          accepted = match_sequence(patterns.data(), sources, 2, match, accept);
        }
      } else {
        std::vector<const UOp*> many;
        for (const UOpPtr& source : node->srcs()) many.push_back(source.get());
        accepted = match_sequence(patterns.data(), many.data(), many.size(), match, accept);
      }
      break;
    }
  }
  if (!accepted) match.reset_to(mark);
  return accepted;
}

std::string UPat::describe() const {
  const Node& pattern = *node_;
  std::string text;
  if (!pattern.ops) text = "any";
  else if (pattern.ops->size() == 1) pattern.ops->for_each([&](Ops op) { text = op_name(op); });
  else text = "{" + std::to_string(pattern.ops->size()) + " ops}";
  if (pattern.arg) text += "{" + render_arg(*pattern.arg) + "}";
  if (!pattern.name.empty()) text += ":" + pattern.name;
  if (pattern.sources == Node::Sources::Exact) {
    text += "(";
    for (size_t i = 0; i < pattern.source_patterns.size(); ++i)
      text += (i ? ", " : "") + pattern.source_patterns[i].describe();
    text += ")";
  } else if (pattern.sources == Node::Sources::Each) {
    text += "(" + pattern.source_patterns[0].describe() + "...)";
  }
  return text;
}

namespace {
UPat binary(Ops op, const UPat& a, const UPat& b) {
  UPat pattern(op, {a, b});
  return op_is_commutative(op) ? pattern.commutative() : pattern;
}
}  // namespace

UPat operator+(const UPat& a, const UPat& b) { return binary(Ops::ADD, a, b); }
UPat operator-(const UPat& a, const UPat& b) { return binary(Ops::SUB, a, b); }
UPat operator*(const UPat& a, const UPat& b) { return binary(Ops::MUL, a, b); }
UPat operator/(const UPat& a, const UPat& b) { return binary(Ops::IDIV, a, b); }
UPat operator%(const UPat& a, const UPat& b) { return binary(Ops::MOD, a, b); }
UPat operator&(const UPat& a, const UPat& b) { return binary(Ops::AND, a, b); }
UPat operator|(const UPat& a, const UPat& b) { return binary(Ops::OR, a, b); }
UPat operator^(const UPat& a, const UPat& b) { return binary(Ops::XOR, a, b); }
UPat operator-(const UPat& a) { return UPat(Ops::NEG, {a}); }
UPat lt(const UPat& a, const UPat& b) { return binary(Ops::CMPLT, a, b); }
UPat ne(const UPat& a, const UPat& b) { return binary(Ops::CMPNE, a, b); }
UPat eq(const UPat& a, const UPat& b) { return binary(Ops::CMPEQ, a, b); }
UPat maximum(const UPat& a, const UPat& b) { return binary(Ops::MAX, a, b); }
UPat where(const UPat& c, const UPat& a, const UPat& b) { return UPat(Ops::WHERE, {c, a, b}); }
UPat logical_not(const UPat& a) { return UPat(Ops::NOT, {a}); }
UPat cast(const UPat& a) { return UPat(Ops::CAST, {a}); }

}  // namespace kiln
