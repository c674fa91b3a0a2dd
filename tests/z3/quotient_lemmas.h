// Candidate lemmas about integer quotients, for index rules that Z3's nonlinear arithmetic cannot
// prove unaided (such as (x+y*c)%c → x%c). The verifier proves each candidate with Z3 before it
// uses it, so a wrong candidate costs time, never soundness.
#pragma once

#include <z3++.h>

#include <vector>

#include "z3/z3_semantics.h"

namespace kiln::z3check {

// When two divisions have divisors b and ±b and dividends that differ by a polynomial multiple t*b,
// the candidate is q1 = ±q2 + t (it fails when the dividends' signs differ, which the proof finds);
// a dividend that is t*b gives q = t.
// `exact[i]` says that divisions[i] is known to leave no remainder (the caller proved it), so its
// dividend may be written as divisor * quotient when it is a plain symbol (a guard's `c1 % c2 == 0`).
std::vector<z3::expr> quotient_lemma_candidates(const std::vector<IntegerDivision>& divisions,
                                                const std::vector<bool>& exact);

}  // namespace kiln::z3check
