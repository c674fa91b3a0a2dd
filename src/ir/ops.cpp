// Per-op tables generated from ops.def.
#include "ir/ops.h"

#include <array>

namespace kiln {
namespace {

struct OpInfo {
  std::string_view name;
  OpGroup group;
  int arity;
  bool commutative;
};

constexpr std::array<OpInfo, op_count> op_table = {{
#define KILN_OP(name, group, arity, commutative) {#name, OpGroup::group, arity, commutative},
#include "ir/ops.def"
#undef KILN_OP
}};

const OpInfo& info(Ops op) { return op_table[static_cast<size_t>(op)]; }

}  // namespace

std::string_view op_name(Ops op) { return info(op).name; }
OpGroup op_group(Ops op) { return info(op).group; }
int op_arity(Ops op) { return info(op).arity; }
bool op_is_commutative(Ops op) { return info(op).commutative; }
bool op_is_alu(Ops op) {
  OpGroup group = info(op).group;
  return group == OpGroup::Unary || group == OpGroup::Binary || group == OpGroup::Ternary;
}

OpSet OpSet::group(OpGroup group) {
  OpSet set;
  for (int i = 0; i < op_count; ++i)
    if (op_table[static_cast<size_t>(i)].group == group) set.add(static_cast<Ops>(i));
  return set;
}

}  // namespace kiln
