// Division and modulo folding for index arithmetic (truncating division, C remainder).
// The data rules cover the usual shapes; `fold_sum_by_divisor` handles a whole numerator at once:
// it factors out a common divisor and splits off the terms that the divisor divides exactly.
#include <numeric>
#include <utility>

#include "ir/build.h"
#include "passes/linear_terms.h"
#include "passes/symbolic.h"

namespace kiln {
namespace {

const UPat xn = UPat::var("x").index(), yn = UPat::var("y").index();
const UPat c = UPat::cvar("c"), c1 = UPat::cvar("c1"), c2 = UPat::cvar("c2");
// A divisor that is a size known only when the plan runs (a sequence length): (b·s + j) / s and
// % s, a flattened (batch, sequence) position split again, must fold as they do for a constant s,
// or every element pays two 64-bit divisions (BERT's attention mask gathered from its flattened
// batch·sequence form).
const UPat sn = UPat::var("s").index();

int128 absolute(int128 value) { return value < 0 ? -value : value; }

int128 gcd128(int128 a, int128 b) {
  a = absolute(a);
  b = absolute(b);
  while (b != 0) {
    int128 next = a % b;
    a = b;
    b = next;
  }
  return a;
}

// Floor division for a positive divisor.
int128 floor_divide(int128 a, int128 d) { return a >= 0 ? a / d : -((-a + d - 1) / d); }

// `sum` = factor·multiples + rest: the terms whose coefficient `factor` divides (divided by it,
// with the constant's floor quotient) and the others (with the constant's remainder in [0, factor)).
std::pair<LinearSum, LinearSum> split_by_factor(const LinearSum& sum, int128 factor) {
  LinearSum multiples, rest;
  for (const LinearTerm& term : sum.terms) {
    if (term.coefficient % factor == 0) multiples.terms.push_back({term.base, term.coefficient / factor});
    else rest.terms.push_back(term);
  }
  multiples.constant = floor_divide(sum.constant, factor);
  rest.constant = sum.constant - multiples.constant * factor;
  return {multiples, rest};
}

// (Σ a_i·t_i + k) / d and % d for a constant d > 0:
//  1. g = gcd(a_i…, k, d) > 1:  N/d → (N/g)/(d/g),  N%d → ((N/g)%(d/g))*g  (exact for any sign).
//  2. N >= 0: write N = d·Q + R. For %, R takes every coefficient modulo d (so (r + 11k) % 10 →
//     (r + k) % 10); for /, Q takes the terms d divides exactly. If R >= 0:  N/d → Q + R/d,
//     N%d → R%d  (floor and truncation agree).
//  3. N >= 0 and R's range lies in one bucket [q·d, (q+1)·d):  N/d → Q + q,  N%d → R - q·d.
//  4. (after 1) a divisor g > 1 of d that divides the "large" terms, with the other terms and the
//     constant's remainder S in [0, g): N = g·B + S, so N/d → B/(d/g) and N%d → (B%(d/g))·g + S.
//     A flattened (h·64 + d)·128 + r read as (j·128 + r)/8192 becomes j/64.
UOpPtr fold_small_remainder(const LinearSum& sum, int128 divisor, bool is_division, DType dtype);

UOpPtr fold_sum_by_divisor(const Match& m) {
  const UOp& node = *m.get("op");
  UOpPtr numerator = m["x"];
  int128 divisor = m.get("c")->const_int();
  if (divisor <= 0) return nullptr;
  DType dtype = node.dtype();
  bool is_division = node.op() == Ops::IDIV;
  LinearSum sum = canonical_sum(numerator);
  // The sums built below have coefficients and constants no larger than these, so they fit too.
  if (!constants_representable(sum, dtype)) return nullptr;

  int128 common = divisor;
  for (const LinearTerm& term : sum.terms) common = gcd128(common, term.coefficient);
  common = gcd128(common, sum.constant);
  if (common > 1) {
    LinearSum reduced = sum;
    for (LinearTerm& term : reduced.terms) term.coefficient /= common;
    reduced.constant /= common;
    UOpPtr reduced_numerator = build_sum(reduced, dtype);
    UOpPtr reduced_divisor = integer_constant(dtype, divisor / common);
    if (is_division) return reduced_numerator / reduced_divisor;
    return (reduced_numerator % reduced_divisor) * integer_constant(dtype, common);
  }

  if (numerator->vmin() < 0) return nullptr;
  if (UOpPtr folded = fold_small_remainder(sum, divisor, is_division, dtype)) return folded;
  // Split every coefficient a = d·q + r with 0 <= r < d: N = d·Q + R. With N >= 0 and R >= 0,
  // N/d = Q + R/d and N%d = R%d (floor and truncation agree), and R has the smallest coefficients.
  LinearSum quotient, remainder;
  for (const LinearTerm& term : sum.terms) {
    int128 q = floor_divide(term.coefficient, divisor), r = term.coefficient - q * divisor;
    if (q != 0) quotient.terms.push_back({term.base, q});
    if (r != 0) remainder.terms.push_back({term.base, r});
  }
  quotient.constant = floor_divide(sum.constant, divisor);
  remainder.constant = sum.constant - quotient.constant * divisor;
  UOpPtr rest = build_sum(remainder, dtype);
  if (rest->vmin() < 0) return nullptr;
  int128 bucket = floor_divide(rest->vmin(), divisor);
  if (floor_divide(rest->vmax(), divisor) == bucket) {
    if (is_division) {
      quotient.constant += bucket;
      return build_sum(quotient, dtype);
    }
    remainder.constant -= bucket * divisor;
    UOpPtr folded = build_sum(remainder, dtype);
    return folded == numerator ? nullptr : folded;
  }
  UOpPtr divisor_node = integer_constant(dtype, divisor);
  if (!is_division) return rest == numerator ? nullptr : rest % divisor_node;
  // A quotient is only worth splitting off for terms that d divides exactly: (11·x)/10 stays.
  auto [exact_quotient, rest_terms] = split_by_factor(sum, divisor);
  UOpPtr exact_rest = build_sum(rest_terms, dtype);
  if (exact_rest->vmin() < 0) return nullptr;
  if (exact_quotient.terms.empty() && exact_quotient.constant == 0) return nullptr;
  return build_sum(exact_quotient, dtype) + exact_rest / divisor_node;
}

// Rule 4 of fold_sum_by_divisor, for a numerator known to be >= 0 whose terms share no factor
// with the divisor as a whole.
UOpPtr fold_small_remainder(const LinearSum& sum, int128 divisor, bool is_division, DType dtype) {
  for (const LinearTerm& candidate : sum.terms) {
    int128 g = gcd128(candidate.coefficient, divisor);
    if (g <= 1 || g == divisor) continue;
    auto [large, small] = split_by_factor(sum, g);
    UOpPtr rest = build_sum(small, dtype);
    if (rest->vmin() < 0 || rest->vmax() >= g) continue;
    UOpPtr scaled = build_sum(large, dtype);
    if (scaled->vmin() < 0) continue;
    UOpPtr outer = integer_constant(dtype, divisor / g);
    if (is_division) return scaled / outer;
    return (scaled % outer) * integer_constant(dtype, g) + rest;
  }
  return nullptr;
}

}  // namespace

const PatternMatcher& divmod_rules() {
  static const PatternMatcher table("divmod", {
      Rule((xn / c1) / c2, when(val("c1") > 0 && val("c2") > 0), [](auto& m) { return m["x"] / (m["c1"] * m["c2"]); },
       "(x/c1)/c2 → x/(c1*c2)"),
      Rule((xn * c) / c, when(val("c") != 0), [](auto& m) { return m["x"]; }, "(x*c)/c → x"),
      Rule((xn * c1) / c2, when(val("c2") != 0 && val("c1") % val("c2") == 0),
       [](auto& m) { return m["x"] * (m["c1"] / m["c2"]); }, "(x*c1)/c2 → x*(c1/c2) when c2 divides c1"),
      Rule((xn * c1) / c2, when(val("c1") > 0 && val("c2") > 0 && val("c2") % val("c1") == 0),
       [](auto& m) { return m["x"] / (m["c2"] / m["c1"]); }, "(x*c1)/c2 → x/(c2/c1) when c1 divides c2"),
      Rule((xn * c1) % c2, when(val("c2") != 0 && val("c1") % val("c2") == 0), [](auto& m) { return const_like(m["x"], 0); },
       "(x*c1)%c2 → 0 when c2 divides c1"),
      Rule((xn % c1) % c2, when(val("c2") != 0 && val("c1") % val("c2") == 0), [](auto& m) { return m["x"] % m["c2"]; },
       "(x%c1)%c2 → x%c2 when c2 divides c1"),
      Rule((xn + yn * c) % c, when(val("c") > 0 && vmin("x") >= 0 && vmin("y") >= 0), [](auto& m) { return m["x"] % m["c"]; },
       "(x+y*c)%c → x%c when x, y >= 0"),
      Rule((xn + yn * c) / c, when(val("c") > 0 && vmin("x") >= 0 && vmin("y") >= 0),
       [](auto& m) { return m["x"] / m["c"] + m["y"]; }, "(x+y*c)/c → x/c+y when x, y >= 0"),
      Rule((xn + yn * sn) / sn, when(vmin("s") > 0 && vmin("x") >= 0 && vmin("y") >= 0),
       [](auto& m) { return m["x"] / m["s"] + m["y"]; }, "(x+y*s)/s → x/s+y when s > 0 and x, y >= 0"),
      Rule((xn + yn * sn) % sn, when(vmin("s") > 0 && vmin("x") >= 0 && vmin("y") >= 0),
       [](auto& m) { return m["x"] % m["s"]; }, "(x+y*s)%s → x%s when s > 0 and x, y >= 0"),
      Rule((xn / sn) * sn + xn % sn, when(vmin("s") > 0), [](auto& m) { return m["x"]; }, "(x/s)*s+x%s → x when s > 0"),
      Rule((yn * sn) / sn, when(vmin("s") > 0), [](auto& m) { return m["y"]; }, "(y*s)/s → y when s > 0"),
      Rule((yn * sn) % sn, when(vmin("s") > 0), [](auto& m) { return const_like(m["y"], 0); }, "(y*s)%s → 0 when s > 0"),
      // A loop variable over [0, s) divided by its own end: the bounds say only r <= max(s) - 1.
      Rule(UPat(Ops::IDIV, {UPat(Ops::RANGE, {sn}).named("r"), sn}), [](auto& m) { return const_like(m["r"], 0); },
           "r/s → 0 for r a loop over [0, s)")
          .opaque("a loop variable's bound is its RANGE's end, which the Z3 translation does not model; test_symbolic_rules cases"),
      Rule(UPat(Ops::MOD, {UPat(Ops::RANGE, {sn}).named("r"), sn}), [](auto& m) { return m["r"]; },
           "r%s → r for r a loop over [0, s)")
          .opaque("a loop variable's bound is its RANGE's end, which the Z3 translation does not model; test_symbolic_rules cases"),
      Rule(xn % c, when(val("c") < 0), [](auto& m) { return m["x"] % (-m["c"]); }, "x%c → x%(-c) when c < 0"),
      Rule(xn / c, when(val("c") < 0), [](auto& m) { return -(m["x"] / (-m["c"])); }, "x/c → -(x/(-c)) when c < 0"),
      Rule(UPat(OpSet{Ops::IDIV, Ops::MOD}, {xn, c}).named("op"), fold_sum_by_divisor,
           "(Σ a_i·t_i + k) / d and % d: common factors out, multiples of d split off")
          .opaque("inspects every term of the numerator; checked by the randomized oracle test"),
  });
  return table;
}

}  // namespace kiln
