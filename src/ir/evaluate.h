// Exact evaluation of ALU ops on constant values, with kiln's semantics (ops.def): fixed-width
// integers wrap, `index` does not, division truncates, floats round to their type. Constant
// folding uses it, and so do the tests that check rewrites by evaluating graphs.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "ir/uop.h"

namespace kiln {

// A scalar value: integers and bool in `integer`, floats in `real`, tagged by dtype.
struct ScalarValue {
  DType dtype;
  int128 integer = 0;
  double real = 0.0;
};

// The value of a scalar CONST node.
ScalarValue constant_value(const UOp& node);
// A CONST node holding `value` (its dtype decides the argument type).
UOpPtr make_constant(const ScalarValue& value);
// Two's-complement wrap of `value` into an integer type (unchanged for index and bool 0/1).
int128 wrap_integer(int128 value, DType dtype);

// Applies an ALU op (or CAST, BITCAST) to scalar values. Returns nothing when the result is undefined
// (integer division by zero, out-of-range shift) or the op is not folded (transcendentals, whose
// generated approximations need not match the host's libm).
std::optional<ScalarValue> fold_alu(Ops op, DType result, std::span<const ScalarValue> sources);

// Evaluates a graph of scalar ALU ops over CONSTs and DEFINE_VARs, with the variables' values
// taken from `variables` (by name) and, where given, RANGEs' values from `ranges`. Returns nothing
// if any step is undefined, not an ALU op, or a RANGE without a value.
std::optional<ScalarValue> evaluate(const UOpPtr& root,
                                    const std::unordered_map<std::string, int128>& variables,
                                    const std::unordered_map<const UOp*, int128>* ranges = nullptr);

}  // namespace kiln
