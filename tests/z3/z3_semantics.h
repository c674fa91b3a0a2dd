// kiln's scalar semantics (src/ir/ops.def) written as Z3 terms: the sort of each dtype, each ALU op,
// the guard language of rewrite rules, and the rendering of model values. The rule verifier and the
// fold_alu cross-check both use it, so the semantics that rules are proven under is the one tested.
#pragma once

#include <z3++.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/uop.h"
#include "rewrite/guard.h"

namespace kiln::z3check {

// Thrown when a node, op or dtype has no translation; the text says why.
struct Untranslatable {
  std::string reason;
};

// How truncating division on `index` (Z3 Int) is written. All three are exact definitions of C
// division; they differ only in how well Z3's nonlinear arithmetic copes, so the verifier tries
// them in turn and a result from any one of them is a result for the rule.
enum class IntDivision {
  Native,             // Z3's Euclidean div/mod, sign-corrected by case on the dividend
  AbsoluteDivisor,    // like Native, on |divisor| with the quotient's sign restored
  QuotientRemainder,  // fresh q, r with a = b*q + r, |r| < |b|, r having a's sign
};

// A truncating division a / b written with quotient and remainder symbols (QuotientRemainder).
struct IntegerDivision {
  z3::expr dividend, divisor, quotient, remainder;
};

class Z3Semantics {
 public:
  explicit Z3Semantics(z3::context& context, IntDivision division = IntDivision::Native);

  z3::context& context() { return context_; }
  // Int for index, bit-vectors for fixed-width integers, Bool for bool, IEEE sorts for floats.
  z3::sort sort_of(DType dtype);

  // The value of `root`, with every node translated once (LHS and RHS share one Z3Semantics, so
  // shared nodes are the same term). Each IDIV/MOD/shift met for the first time adds the condition
  // under which it is defined (divisor non-zero, shift in range) to `definedness`.
  z3::expr translate(const UOp* root, std::vector<z3::expr>& definedness);

  // One op on already translated operands: what `translate` uses per node, exposed for the
  // fold_alu cross-check.
  z3::expr apply(Ops op, DType result, const std::vector<DType>& source_dtypes,
                 const std::vector<z3::expr>& sources, std::vector<z3::expr>& definedness);
  z3::expr constant(const UOp& node);

  // Facts that define auxiliary symbols of the encoding (quotient/remainder pairs); always assumed.
  const std::vector<z3::expr>& definitions() const { return definitions_; }

  // Every division met so far, in the QuotientRemainder encoding (empty in the others).
  const std::vector<IntegerDivision>& divisions() const { return divisions_; }

  // Truncating division and C remainder on Int terms, in this object's IntDivision encoding.
  z3::expr int_divide(const z3::expr& a, const z3::expr& b);
  z3::expr int_remainder(const z3::expr& a, const z3::expr& b);

  // The mathematical integer a value of `dtype` stands for (signed or unsigned reading of the bits,
  // 0/1 for bool). Index terms are returned as they are.
  z3::expr to_integer(const z3::expr& value, DType dtype);

  // A model value as text: "-3", "255", "true", "-0.0", "NaN", "1.5 (0x3fc00000)".
  std::string render(const z3::model& model, const z3::expr& value, DType dtype);

 private:
  z3::expr apply_integer(Ops op, DType dtype, const std::vector<z3::expr>& s, std::vector<z3::expr>& definedness);
  z3::expr apply_bitvector(Ops op, DType dtype, const std::vector<DType>& source_dtypes,
                           const std::vector<z3::expr>& s, std::vector<z3::expr>& definedness);
  z3::expr apply_bool(Ops op, const std::vector<z3::expr>& s, std::vector<z3::expr>& definedness);
  z3::expr apply_float(Ops op, DType dtype, const std::vector<z3::expr>& s);
  z3::expr cast(const z3::expr& value, DType from, DType to);
  z3::expr float_maximum(const z3::expr& a, const z3::expr& b, DType dtype);

  z3::context& context_;
  IntDivision division_;
  std::unordered_map<const UOp*, z3::expr> memo_;
  std::vector<z3::expr> definitions_;
  std::map<std::pair<unsigned, unsigned>, size_t> quotients_;  // index in divisions_, by (a, b) AST ids
  std::vector<IntegerDivision> divisions_;
  int fresh_ = 0;
};

// What a guard term's leaves stand for in one instance of a rule.
struct GuardLeaves {
  // Names bound to constants (symbolic or literal), with their translated value and dtype.
  std::map<std::string, std::pair<z3::expr, DType>> constants;
  // Names bound to other nodes: their translated value and dtype (for vmin/vmax).
  std::map<std::string, std::pair<z3::expr, DType>> nodes;
};

// A guard translated for one instance: `holds` is the rule's side condition (defined and non-zero,
// as Guard::holds), `assumptions` the range facts vmin(x) <= x <= vmax(x) for the names it reads,
// and `range_symbols` the fresh vmin/vmax symbols, for counter-examples.
struct TranslatedGuard {
  z3::expr holds;
  std::vector<z3::expr> assumptions;
  std::vector<std::pair<std::string, z3::expr>> range_symbols;  // ("vmin(x)", L), …, as Int or bit-vector
  bool signed_bitvector = false;  // range symbols are wide signed bit-vectors (else Int)
};

// Translates `guard` over unbounded integers. Guards over index values are written over Int;
// guards over fixed-width and bool values over signed bit-vectors wide enough that no
// intermediate result can overflow, which is exact and keeps the query free of bv2int.
TranslatedGuard translate_guard(Z3Semantics& semantics, const Guard& guard, const GuardLeaves& leaves);

// Decimal text of an Int or (signed) bit-vector model value.
std::string render_integer(const z3::model& model, const z3::expr& value, bool signed_bitvector);

}  // namespace kiln::z3check
