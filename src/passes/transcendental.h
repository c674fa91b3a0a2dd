// kiln's own transcendental functions: EXP2, LOG2 and SIN rewritten into range reduction plus a
// polynomial, built only from basic ALU ops (ADD, SUB, MUL, FDIV, WHERE, CMPLT/CMPNE/CMPEQ, TRUNC,
// CAST, BITCAST and integer shifts and masks), so that no kernel ever calls libm.
//
// Before: EXP2/LOG2/SIN nodes of any float dtype (scalars or vectors). After: none remain; every
// other node is unchanged. f16 and bf16 are computed in f32 and rounded back once; f32 and f64 are
// computed in their own type. Algorithms, reduction ranges and measured errors: docs/transcendentals.md.
//
// The approximations rely on IEEE round-to-nearest for each op and on no contraction of a*b+c into
// a fused multiply-add (the exact-product steps of the sine reduction assume separately rounded
// products); renderers must keep float ops uncontracted.
#pragma once

#include "ir/uop.h"
#include "rewrite/pattern_matcher.h"

namespace kiln {

// 2^x, log2(x) and sin(x) of a float node, as graphs of basic ALU ops of x's dtype. Vectors are
// computed lane by lane (GEP each lane, VECTORIZE the results).
UOpPtr approx_exp2(const UOpPtr& x);
UOpPtr approx_log2(const UOpPtr& x);
UOpPtr approx_sin(const UOpPtr& x);

// EXP2(x) → approx_exp2(x), LOG2(x) → approx_log2(x), SIN(x) → approx_sin(x), for float x.
const PatternMatcher& transcendental_rules();

// graph_rewrite(root, transcendental_rules()) with pass name "transcendental".
UOpPtr decompose_transcendentals(const UOpPtr& root);

}  // namespace kiln
