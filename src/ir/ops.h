// The Ops enum and per-op facts, generated from ops.def.
#pragma once

#include <bitset>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace kiln {

enum class Ops : uint8_t {
#define KILN_OP(name, group, arity, commutative) name,
#include "ir/ops.def"
#undef KILN_OP
};

inline constexpr int op_count = 0
#define KILN_OP(name, group, arity, commutative) +1
#include "ir/ops.def"
#undef KILN_OP
    ;

enum class OpGroup : uint8_t {
  Meta, Buffer, Const, Special, Control, Memory, Vector, Cast, Movement, Reduce, Unary, Binary, Ternary
};

std::string_view op_name(Ops op);
OpGroup op_group(Ops op);
// Number of sources the op takes, or -1 when it varies.
int op_arity(Ops op);
bool op_is_commutative(Ops op);
// Unary, binary and ternary arithmetic/logic ops: the ones that compute a value from values.
bool op_is_alu(Ops op);

// The arg of a CONTIGUOUS that stores its source's value rounded to bf16 (a channels-last copy of
// a conv's computed input, as bf16 bits, under `--precision bf16`) and may stand in for that value:
// the scheduler gives the value's other readers the copy, widened back, instead of a store of
// their own (schedule/rangeify.cpp, contiguous_copy_of). Only the tensor layer's bf16 convs make
// it; a plain CONTIGUOUS never changes what its source's other readers see.
inline constexpr std::string_view kRoundedStandIn = "rounded stand-in";

// A set of ops, used by patterns and rule indexes.
class OpSet {
 public:
  constexpr OpSet() = default;
  OpSet(std::initializer_list<Ops> ops) {
    for (Ops op : ops) add(op);
  }
  static OpSet all() {
    OpSet set;
    set.bits_.set();
    return set;
  }
  static OpSet group(OpGroup group);
  void add(Ops op) { bits_.set(static_cast<size_t>(op)); }
  bool contains(Ops op) const { return bits_.test(static_cast<size_t>(op)); }
  bool empty() const { return bits_.none(); }
  size_t size() const { return bits_.count(); }
  OpSet operator|(const OpSet& other) const {
    OpSet result = *this;
    result.bits_ |= other.bits_;
    return result;
  }
  template <class Visit>
  void for_each(Visit visit) const {
    for (int i = 0; i < op_count; ++i)
      if (bits_.test(static_cast<size_t>(i))) visit(static_cast<Ops>(i));
  }

 private:
  std::bitset<op_count> bits_;
};

}  // namespace kiln
