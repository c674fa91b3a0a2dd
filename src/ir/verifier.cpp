// The verifier and the base IR spec; see verifier.h.
#include "ir/verifier.h"

#include "ir/printer.h"
#include "support/error.h"

namespace kiln {

Spec::Spec(std::string name, std::vector<SpecRule> rules) : name_(std::move(name)), rules_(std::move(rules)) {}

Spec operator+(const Spec& first, const Spec& second) {
  std::vector<SpecRule> rules = first.rules_;
  rules.insert(rules.end(), second.rules_.begin(), second.rules_.end());
  return Spec(first.name_ + "+" + second.name_, std::move(rules));
}

const UOp* Spec::first_invalid(const UOpPtr& root) const {
  Match match;
  for (const UOp* node : toposort(root)) {
    bool valid = false;
    for (const SpecRule& rule : rules_) {
      if (!rule.pattern.root_ops().contains(node->op())) continue;
      match.start(node, nullptr);
      if (rule.pattern.matches(node, match, [&] { return rule.check(match); })) {
        valid = true;
        break;
      }
    }
    if (!valid) return node;
  }
  return nullptr;
}

void verify(const UOpPtr& root, const Spec& spec, std::string_view after_pass) {
  const UOp* invalid = spec.first_invalid(root);
  if (invalid == nullptr) return;
  std::string sources;
  for (const UOpPtr& source : invalid->srcs()) sources += (sources.empty() ? "" : ", ") + source->dtype().name();
  throw InternalError(str_cat("IR verification failed after '", after_pass, "' (spec '", spec.name(), "'): ",
                              op_name(invalid->op()), " of type ", invalid->dtype().name(), " with sources (",
                              sources, ") and argument {", render_arg(invalid->arg()), "} is not allowed"),
                      std::source_location::current(), print_graph(root));
}

namespace {

bool same_as_node(const UOp& node, const UOpPtr& source) { return source->dtype() == node.dtype(); }

bool const_argument_fits(const Match& m) {
  const UOp& node = *m.get("c");
  DType dtype = node.dtype();
  if (dtype.count() != 1) return false;
  if (dtype.is_bool()) return std::holds_alternative<bool>(node.arg());
  if (dtype.is_float()) return std::holds_alternative<double>(node.arg());
  if (!dtype.is_int() || !std::holds_alternative<int64_t>(node.arg())) return false;
  // Fixed-width constants are stored in their type's range (u64 as its bit pattern).
  return dtype.is_index() || (node.const_int() >= min_value(dtype) && node.const_int() <= max_value(dtype));
}

bool variable_is_well_formed(const Match& m) {
  const UOp& node = *m.get("v");
  const auto* spec = std::get_if<VariableSpec>(&node.arg());
  return node.dtype().is_int() && spec != nullptr && spec->min <= spec->max && !spec->name.empty();
}

bool range_is_well_formed(const Match& m) {
  const UOp& node = *m.get("r");
  return node.dtype().is_int() && same_as_node(node, node.src(0)) && std::holds_alternative<int64_t>(node.arg());
}

bool unary_keeps_type(const Match& m) {
  const UOp& node = *m.get("u");
  return same_as_node(node, node.src(0)) && (node.op() != Ops::NOT || node.dtype().base().is_int() ||
                                             node.dtype().base().is_bool());
}

bool binary_keeps_type(const Match& m) {
  const UOp& node = *m.get("b");
  DType base = node.dtype().base();
  bool shift = node.op() == Ops::SHL || node.op() == Ops::SHR;
  if (!same_as_node(node, node.src(0)) || (!shift && !same_as_node(node, node.src(1)))) return false;
  switch (node.op()) {
    case Ops::IDIV: case Ops::MOD: return base.is_int();
    case Ops::FDIV: case Ops::POW: return base.is_float();
    case Ops::SHL: case Ops::SHR: return base.is_int() && node.src(1)->dtype().base().is_int();
    case Ops::AND: case Ops::OR: case Ops::XOR: return base.is_int() || base.is_bool();
    default: return true;
  }
}

bool comparison_gives_bool(const Match& m) {
  const UOp& node = *m.get("b");
  return node.dtype() == dtypes::bool_.vec(node.src(0)->dtype().count()) &&
         node.src(0)->dtype() == node.src(1)->dtype();
}

bool where_is_well_formed(const Match& m) {
  const UOp& node = *m.get("w");
  return node.src(0)->dtype().base().is_bool() && same_as_node(node, node.src(1)) && same_as_node(node, node.src(2));
}

bool mulacc_keeps_type(const Match& m) {
  const UOp& node = *m.get("f");
  return same_as_node(node, node.src(0)) && same_as_node(node, node.src(1)) && same_as_node(node, node.src(2));
}

bool bitcast_keeps_size(const Match& m) {
  const UOp& node = *m.get("x");
  return node.dtype().bytes() == node.src(0)->dtype().bytes();
}

bool sink_is_void(const Match& m) { return m.get("s")->dtype() == dtypes::void_; }
bool accept(const Match&) { return true; }

OpSet unary_alu() { return OpSet::group(OpGroup::Unary); }
OpSet binary_alu_without_comparisons() {
  OpSet ops;
  OpSet::group(OpGroup::Binary).for_each([&](Ops op) {
    if (op != Ops::CMPLT && op != Ops::CMPNE && op != Ops::CMPEQ) ops.add(op);
  });
  return ops;
}
// Ops whose form later stages specify; the base spec only requires what UOp::make checks.
// A node is valid when any rule accepts it, so this catch-all must leave out the ops that have a
// rule of their own (DEFINE_VAR is a Buffer op, RANGE a Control op, SINK a Meta op): otherwise it
// would accept them whatever their own rule says.
OpSet structural_ops() {
  OpSet groups = OpSet::group(OpGroup::Meta) | OpSet::group(OpGroup::Buffer) | OpSet::group(OpGroup::Control) |
                 OpSet::group(OpGroup::Memory) | OpSet::group(OpGroup::Vector) | OpSet::group(OpGroup::Movement) |
                 OpSet::group(OpGroup::Reduce) | OpSet{Ops::VCONST, Ops::SPECIAL, Ops::CAST, Ops::BIND};
  OpSet ops;
  groups.for_each([&](Ops op) {
    if (op != Ops::DEFINE_VAR && op != Ops::RANGE && op != Ops::SINK) ops.add(op);
  });
  return ops;
}

}  // namespace

const Spec& ir_spec() {
  static const Spec spec("ir", {
      {UPat(Ops::CONST).named("c"), const_argument_fits, "CONST holds a value of its dtype"},
      {UPat(Ops::DEFINE_VAR).named("v"), variable_is_well_formed, "DEFINE_VAR: integer, named, min <= max"},
      {UPat(Ops::RANGE).named("r"), range_is_well_formed, "RANGE: integer, end of the same type"},
      {UPat::ops(unary_alu()).named("u"), unary_keeps_type, "unary ALU keeps its source's type"},
      {UPat::ops(binary_alu_without_comparisons()).named("b"), binary_keeps_type, "binary ALU on equal types"},
      {UPat::ops(OpSet{Ops::CMPLT, Ops::CMPNE, Ops::CMPEQ}).named("b"), comparison_gives_bool,
       "comparisons of equal types give bool"},
      {UPat(Ops::WHERE).named("w"), where_is_well_formed, "WHERE: bool condition, branches of its type"},
      {UPat(Ops::MULACC).named("f"), mulacc_keeps_type, "MULACC on equal types"},
      {UPat(Ops::BITCAST).named("x"), bitcast_keeps_size, "BITCAST keeps the byte size"},
      {UPat(Ops::SINK).named("s"), sink_is_void, "SINK is void"},
      {UPat::ops(structural_ops()), accept, "structure is checked by the stage specs"},
  });
  return spec;
}

}  // namespace kiln
