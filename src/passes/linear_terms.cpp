// Splitting, canonicalising and rebuilding integer sums; see linear_terms.h.
#include "passes/linear_terms.h"

#include <algorithm>
#include <cstdint>

#include "ir/build.h"
#include "ir/evaluate.h"
#include "support/error.h"

namespace kiln {

UOpPtr integer_constant(DType dtype, int128 value) {
  return make_constant(ScalarValue{dtype, wrap_integer(value, dtype), 0.0});
}

LinearSum split_sum(const UOpPtr& node) {
  LinearSum sum;
  std::vector<const UOp*> pending{node.get()};
  while (!pending.empty()) {
    const UOp* term = pending.back();
    pending.pop_back();
    if (term->op() == Ops::ADD) {
      // Push right first so that terms come out left to right.
      pending.push_back(term->src(1).get());
      pending.push_back(term->src(0).get());
    } else if (term->op() == Ops::CONST) {
      sum.constant += term->const_int();
    } else if (term->op() == Ops::MUL && term->src(1)->op() == Ops::CONST) {
      sum.terms.push_back({term->src(0), term->src(1)->const_int()});
    } else {
      sum.terms.push_back({term->self(), 1});
    }
  }
  return sum;
}

namespace {

// Whether `quotient` is y / c for the `y % c` of `remainder`. y may itself be x / c1 (c1, c > 0),
// whose quotient by c the divmod rules have rewritten to x / (c1*c): truncating divisions by
// positive constants compose. That is how a flattened index reads back, (i/49)*49 + ((i/7)%7)*7
// + i%7 for a reshape of (512, 7, 7) to 25088 (VGG-19's classifier input).
bool is_quotient_of(const UOp* quotient, const UOp* remainder) {
  if (quotient->op() != Ops::IDIV || quotient->src(1)->op() != Ops::CONST) return false;
  const UOp* numerator = remainder->src(0).get();
  if (quotient->src(0).get() == numerator) return quotient->src(1) == remainder->src(1);
  if (numerator->op() != Ops::IDIV || numerator->src(1)->op() != Ops::CONST ||
      quotient->src(0) != numerator->src(0))
    return false;
  int128 inner = numerator->src(1)->const_int(), outer = remainder->src(1)->const_int();
  return inner > 0 && outer > 0 && quotient->src(1)->const_int() == inner * outer;
}

// Whether `product` is (y / d) * d (either order) for the `y % d` of `remainder`, d not a constant
// (a row of an image of any width: a MERGE of its rows and columns reads them back as m / w and
// m % w, whose h·w + w is then m again).
bool is_symbolic_quotient_product_of(const UOp* product, const UOp* remainder) {
  if (product->op() != Ops::MUL) return false;
  const UOpPtr& divisor = remainder->src(1);
  for (int side = 0; side < 2; ++side) {
    const UOp* quotient = product->src(side).get();
    if (product->src(1 - side) == divisor && quotient->op() == Ops::IDIV && quotient->src(0) == remainder->src(0) &&
        quotient->src(1) == divisor)
      return true;
  }
  return false;
}

// Finds `y % c` (coefficient k) and `y / c` (coefficient k*c) among the terms and merges each
// such pair into (y, k): (y/c)*c + y%c = y holds for truncating division of any sign. For a divisor
// d that is not a constant, the pair is `y % d` and `(y / d) * d`, both of coefficient k.
bool fold_division_remainder_pairs(std::vector<LinearTerm>& terms) {
  for (size_t i = 0; i < terms.size(); ++i) {
    const UOp* remainder = terms[i].base.get();
    if (remainder->op() == Ops::MOD && remainder->src(1)->op() != Ops::CONST) {
      for (size_t j = 0; j < terms.size(); ++j) {
        if (j == i || terms[j].coefficient != terms[i].coefficient ||
            !is_symbolic_quotient_product_of(terms[j].base.get(), remainder))
          continue;
        terms[i] = {remainder->src(0), terms[i].coefficient};
        terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(j));
        return true;
      }
      continue;
    }
    if (remainder->op() != Ops::MOD || remainder->src(1)->op() != Ops::CONST) continue;
    int128 divisor = remainder->src(1)->const_int();
    for (size_t j = 0; j < terms.size(); ++j) {
      const UOp* quotient = terms[j].base.get();
      if (j == i || !is_quotient_of(quotient, remainder) || terms[j].coefficient != terms[i].coefficient * divisor)
        continue;
      terms[i] = {remainder->src(0), terms[i].coefficient};
      terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(j));
      return true;
    }
  }
  return false;
}

// Sorts by base and adds up the coefficients of equal bases, dropping terms that cancel.
void combine_like_terms(std::vector<LinearTerm>& terms, DType dtype) {
  std::stable_sort(terms.begin(), terms.end(), [](const LinearTerm& a, const LinearTerm& b) {
    return structural_compare(a.base.get(), b.base.get()) < 0;
  });
  std::vector<LinearTerm> combined;
  for (LinearTerm& term : terms) {
    if (!combined.empty() && combined.back().base == term.base) combined.back().coefficient += term.coefficient;
    else combined.push_back(std::move(term));
  }
  std::erase_if(combined, [&](const LinearTerm& t) { return wrap_integer(t.coefficient, dtype) == 0; });
  terms = std::move(combined);
}

}  // namespace

LinearSum canonical_sum(const UOpPtr& node) {
  LinearSum sum = split_sum(node);
  // A folded pair yields a new base that may combine with another term, so repeat until stable.
  do combine_like_terms(sum.terms, node->dtype());
  while (fold_division_remainder_pairs(sum.terms));
  return sum;
}

bool constants_representable(const LinearSum& sum, DType dtype) {
  if (!dtype.is_index()) return true;
  auto fits = [](int128 value) { return value >= INT64_MIN && value <= INT64_MAX; };
  if (!fits(sum.constant)) return false;
  for (const LinearTerm& term : sum.terms)
    if (!fits(term.coefficient)) return false;
  return true;
}

UOpPtr build_sum(const LinearSum& sum, DType dtype) {
  if (!constants_representable(sum, dtype)) return nullptr;
  UOpPtr result;
  for (const LinearTerm& term : sum.terms) {
    int128 coefficient = wrap_integer(term.coefficient, dtype);
    UOpPtr value = coefficient == 1 ? term.base : term.base * integer_constant(dtype, coefficient);
    result = result ? result + value : value;
  }
  int128 constant = wrap_integer(sum.constant, dtype);
  if (!result) return integer_constant(dtype, constant);
  return constant == 0 ? result : result + integer_constant(dtype, constant);
}

}  // namespace kiln
