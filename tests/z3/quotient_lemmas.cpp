// Candidate quotient lemmas by polynomial division over Z3 terms; see quotient_lemmas.h.
#include "z3/quotient_lemmas.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "support/int128.h"

namespace kiln::z3check {
namespace {

using Monomial = std::vector<unsigned>;          // sorted atom ids (with repetition for powers)
using Polynomial = std::map<Monomial, int128>;  // monomial → non-zero coefficient

void add_into(Polynomial& sum, const Polynomial& term, int128 scale) {
  for (const auto& [monomial, coefficient] : term) {
    int128& slot = sum[monomial];
    slot += coefficient * scale;
    if (slot == 0) sum.erase(monomial);
  }
}

Polynomial multiply(const Polynomial& a, const Polynomial& b) {
  Polynomial product;
  for (const auto& [left, x] : a)
    for (const auto& [right, y] : b) {
      Monomial monomial = left;
      monomial.insert(monomial.end(), right.begin(), right.end());
      std::sort(monomial.begin(), monomial.end());
      add_into(product, Polynomial{{monomial, x * y}}, 1);
    }
  return product;
}

// a / b when b is one monomial that divides every term of a exactly; nothing otherwise.
std::optional<Polynomial> divide(const Polynomial& a, const Polynomial& b) {
  if (b.size() != 1) return std::nullopt;
  const auto& [divisor, scale] = *b.begin();
  Polynomial quotient;
  for (const auto& [monomial, coefficient] : a) {
    if (coefficient % scale != 0) return std::nullopt;
    Monomial rest;
    if (!std::includes(monomial.begin(), monomial.end(), divisor.begin(), divisor.end())) return std::nullopt;
    std::set_difference(monomial.begin(), monomial.end(), divisor.begin(), divisor.end(), std::back_inserter(rest));
    quotient[rest] = coefficient / scale;
  }
  return quotient;
}

std::optional<int128> parse_integer(const std::string& text) {
  if (text.empty() || text.size() > 36) return std::nullopt;
  int128 value = 0;
  size_t start = text[0] == '-' ? 1 : 0;
  for (size_t i = start; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return start ? -value : value;
}

class Polynomials {
 public:
  explicit Polynomials(z3::context& context) : context_(context) {}

  // Symbols that stand for polynomials in other atoms, expanded when met: a remainder is
  // dividend - divisor*quotient, an exact dividend divisor*quotient.
  void define_remainder(const IntegerDivision& division) {
    definitions_.emplace(division.remainder.id(), Definition{&division, false});
  }
  void define_exact_dividend(const IntegerDivision& division) {
    definitions_.emplace(division.dividend.id(), Definition{&division, true});
  }

  Polynomial of(const z3::expr& term) {
    if (term.is_numeral()) {
      if (std::optional<int128> value = parse_integer(Z3_get_numeral_string(context_, term)))
        return *value == 0 ? Polynomial{} : Polynomial{{{}, *value}};
      return atom(term);
    }
    if (!term.is_app()) return atom(term);
    Z3_decl_kind kind = term.decl().decl_kind();
    unsigned count = term.num_args();
    switch (kind) {
      case Z3_OP_ADD: case Z3_OP_SUB: {
        Polynomial sum = of(term.arg(0));
        for (unsigned i = 1; i < count; ++i) add_into(sum, of(term.arg(i)), kind == Z3_OP_ADD ? 1 : -1);
        return sum;
      }
      case Z3_OP_UMINUS: {
        Polynomial negated;
        add_into(negated, of(term.arg(0)), -1);
        return negated;
      }
      case Z3_OP_MUL: {
        Polynomial product = of(term.arg(0));
        for (unsigned i = 1; i < count; ++i) product = multiply(product, of(term.arg(i)));
        return product;
      }
      default: break;
    }
    auto defined = definitions_.find(term.id());
    if (defined == definitions_.end() || !expanding_.insert(term.id()).second) return atom(term);
    const IntegerDivision& division = *defined->second.division;
    Polynomial value = multiply(of(division.divisor), of(division.quotient));
    if (!defined->second.exact_dividend) {
      Polynomial remainder = of(division.dividend);
      add_into(remainder, value, -1);
      value = remainder;
    }
    expanding_.erase(term.id());
    return value;
  }

  z3::expr to_expr(const Polynomial& polynomial) {
    z3::expr sum = context_.int_val(0);
    for (const auto& [monomial, coefficient] : polynomial) {
      z3::expr term = context_.int_val(to_string(coefficient).c_str());
      for (unsigned id : monomial) term = term * atoms_.at(id);
      sum = sum + term;
    }
    return sum;
  }

 private:
  Polynomial atom(const z3::expr& term) {
    atoms_.emplace(term.id(), term);
    return Polynomial{{{term.id()}, 1}};
  }

  z3::context& context_;
  std::map<unsigned, z3::expr> atoms_;
  struct Definition {
    const IntegerDivision* division;
    bool exact_dividend;
  };
  std::map<unsigned, Definition> definitions_;
  std::set<unsigned> expanding_;
};

bool is_symbol(const z3::expr& term) {
  return term.is_app() && term.num_args() == 0 && term.decl().decl_kind() == Z3_OP_UNINTERPRETED;
}

}  // namespace

std::vector<z3::expr> quotient_lemma_candidates(const std::vector<IntegerDivision>& divisions,
                                                const std::vector<bool>& exact) {
  std::vector<z3::expr> candidates;
  if (divisions.empty()) return candidates;
  z3::context& context = divisions[0].dividend.ctx();
  Polynomials polynomials(context);
  for (size_t i = 0; i < divisions.size(); ++i) {
    polynomials.define_remainder(divisions[i]);
    if (exact[i] && is_symbol(divisions[i].dividend)) polynomials.define_exact_dividend(divisions[i]);
  }

  std::vector<Polynomial> dividends, divisors;
  for (const IntegerDivision& division : divisions) {
    dividends.push_back(polynomials.of(division.dividend));
    divisors.push_back(polynomials.of(division.divisor));
  }
  for (size_t i = 0; i < divisions.size(); ++i) {
    // q = a / b when b divides a as polynomials.
    if (std::optional<Polynomial> whole = divide(dividends[i], divisors[i]))
      candidates.push_back(divisions[i].quotient == polynomials.to_expr(*whole));
    for (size_t j = i + 1; j < divisions.size(); ++j) {
      // Equal remainders and divisors b and ±b give a_i - a_j = b*(q_i ∓ q_j), so
      // q_i = ±q_j + (a_i - a_j) / b when b divides the difference of the dividends.
      Polynomial negated;
      add_into(negated, divisors[j], -1);
      bool same = divisors[i] == divisors[j];
      if (!same && divisors[i] != negated) continue;
      Polynomial difference = dividends[i];
      add_into(difference, dividends[j], -1);
      std::optional<Polynomial> offset = divide(difference, divisors[i]);
      if (!offset) continue;
      z3::expr other = same ? divisions[j].quotient : -divisions[j].quotient;
      candidates.push_back(divisions[i].quotient == other + polynomials.to_expr(*offset));
    }
  }
  return candidates;
}

}  // namespace kiln::z3check
