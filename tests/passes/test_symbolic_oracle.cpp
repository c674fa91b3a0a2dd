// Randomized oracle for the symbolic simplifier: random integer expressions over bounded variables
// are simplified, and an evaluator written here (independent of kiln's constant folding) checks that
// both forms agree at range corners and random points, and that simplifying shrinks them on average.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/build.h"
#include "ir/printer.h"
#include "ir/substitute.h"
#include "ir/uop.h"
#include "passes/symbolic.h"
#include "rewrite/graph_rewrite.h"
#include "support/error.h"

using namespace kiln;

namespace {

// ---------------------------------------------------------------------------------------------
// Reference semantics, written from ops.def and nothing else: C division and remainder, fixed-width
// results wrapped to two's complement, `index` unbounded (evaluated in int128).

int fixed_width_bits(DType dtype) {
  switch (dtype.scalar()) {
    case ScalarType::Int8: case ScalarType::UInt8: return 8;
    case ScalarType::Int16: case ScalarType::UInt16: return 16;
    case ScalarType::Int32: case ScalarType::UInt32: return 32;
    case ScalarType::Int64: case ScalarType::UInt64: return 64;
    default: return 0;  // index (and bool) have no wrap-around width
  }
}

bool is_unsigned_scalar(DType dtype) {
  switch (dtype.scalar()) {
    case ScalarType::UInt8: case ScalarType::UInt16: case ScalarType::UInt32: case ScalarType::UInt64: return true;
    default: return false;
  }
}

// The value `value` takes in `dtype`: bool is "non-zero", fixed-width types wrap, index is exact.
int128 reference_wrap(int128 value, DType dtype) {
  if (dtype.scalar() == ScalarType::Bool) return value != 0 ? 1 : 0;
  int bits = fixed_width_bits(dtype);
  if (bits == 0) return value;
  int128 modulus = int128{1} << bits;
  int128 low = value % modulus;
  if (low < 0) low += modulus;
  if (!is_unsigned_scalar(dtype) && low >= modulus / 2) low -= modulus;
  return low;
}

// Undefined: a division by zero or a shift by at least the bit width (ops.def leaves both undefined).
enum class Outcome { Value, Undefined, OutOfDomain };

// What INDEX(buffer, offset, valid) evaluates to when `valid` is false (no index value is this low).
constexpr int128 masked_address = -(int128{1} << 100);

struct Evaluation {
  Outcome outcome = Outcome::Value;
  int128 value = 0;
};

std::string describe(const Evaluation& evaluation) {
  switch (evaluation.outcome) {
    case Outcome::Value: return to_string(evaluation.value);
    case Outcome::Undefined: return "undefined (division by zero or shift too far)";
    case Outcome::OutOfDomain:
      return "out of range (an index intermediate beyond int64 in the input, int128 elsewhere)";
  }
  return "?";
}

// A graph flattened into straight-line code once, so that evaluating it at many points is cheap.
// Leaves (DEFINE_VAR, RANGE) read their value from the point, by position in `leaves`.
class Program {
 public:
  // Fails (with a reason) on an op or leaf the reference does not model: a simplified graph must
  // not invent variables (the valid rules' temporary ones must all be put back).
  static std::optional<Program> compile(const UOpPtr& root, const std::vector<const UOp*>& leaves,
                                        std::string& error) {
    Program program;
    std::unordered_map<const UOp*, int> slot;
    for (const UOp* node : toposort(root)) {
      Instruction instruction{node->op(), node->dtype()};
      if (node->op() == Ops::DEFINE_VAR || node->op() == Ops::RANGE) {
        auto found = std::find(leaves.begin(), leaves.end(), node);
        if (found == leaves.end()) {
          error = "unknown leaf " + render_expr(node->self());
          return std::nullopt;
        }
        instruction.leaf = static_cast<int>(found - leaves.begin());
      } else if (node->op() == Ops::CONST) {
        instruction.constant = reference_wrap(node->const_int(), node->dtype());
      } else if (node->op() == Ops::DEFINE_GLOBAL) {
        instruction.constant = 0;  // a buffer's base address: only the offset from it matters
      } else if (!is_modelled(node->op())) {
        error = std::string("op not modelled by the reference: ") + std::string(op_name(node->op()));
        return std::nullopt;
      }
      for (size_t i = 0; i < node->src_count() && node->op() != Ops::RANGE; ++i)
        instruction.sources[i] = slot.at(node->src(i).get());
      if (fixed_width_bits(node->dtype()) != 0) instruction.width = fixed_width_bits(node->dtype());
      slot[node] = static_cast<int>(program.code_.size());
      program.code_.push_back(instruction);
    }
    return program;
  }

  // Strict semantics: a division by zero anywhere (even in a WHERE arm not taken) makes the whole
  // expression undefined at that point.
  //
  // Index arithmetic is exact. For an input (`within_int64`) a point where some index intermediate
  // leaves int64 is outside the simplifier's contract (bounds.h) and reported as OutOfDomain, to be
  // skipped. A simplified form is evaluated exactly whatever its intermediates: `x + (c1+c2)` may
  // hold an unfoldable constant beyond int64 and still be right; only a value beyond int128 (never
  // expected) is OutOfDomain there.
  Evaluation run(const std::vector<int128>& point, std::vector<int128>& scratch, bool within_int64) const {
    scratch.resize(code_.size());
    for (size_t i = 0; i < code_.size(); ++i) {
      const Instruction& in = code_[i];
      int128 a = in.sources[0] >= 0 ? scratch[in.sources[0]] : 0;
      int128 b = in.sources[1] >= 0 ? scratch[in.sources[1]] : 0;
      int128 c = in.sources[2] >= 0 ? scratch[in.sources[2]] : 0;
      bool exact = in.dtype.is_index();
      // Fixed-width ring ops are computed modulo 2^128 (the wrap below reduces further); index ones
      // must not overflow int128.
      auto ring = [&](Ops op, int128 x, int128 y, int128& out) {
        if (exact) {
          if (op == Ops::ADD) return !__builtin_add_overflow(x, y, &out);
          if (op == Ops::SUB) return !__builtin_sub_overflow(x, y, &out);
          return !__builtin_mul_overflow(x, y, &out);
        }
        uint128 ux = static_cast<uint128>(x), uy = static_cast<uint128>(y);
        out = static_cast<int128>(op == Ops::ADD ? ux + uy : op == Ops::SUB ? ux - uy : ux * uy);
        return true;
      };
      int128 result = 0;
      bool fits = true;
      switch (in.op) {
        case Ops::CONST:
        case Ops::DEFINE_GLOBAL: result = in.constant; break;
        // The address of a masked access is never used, whatever its offset: one marker for all.
        case Ops::INDEX: result = c != 0 ? a + b : masked_address; break;
        case Ops::DEFINE_VAR:
        case Ops::RANGE: result = point[in.leaf]; break;
        case Ops::ADD:
        case Ops::SUB:
        case Ops::MUL: fits = ring(in.op, a, b, result); break;
        case Ops::NEG: fits = ring(Ops::SUB, 0, a, result); break;
        case Ops::IDIV:
          if (b == 0) return {Outcome::Undefined};
          result = a / b;  // int128 division truncates toward zero, like C
          break;
        case Ops::MOD:
          if (b == 0) return {Outcome::Undefined};
          result = a % b;  // sign of the dividend, like C
          break;
        case Ops::SHL:
          if (b < 0 || b >= in.width) return {Outcome::Undefined};
          fits = ring(Ops::MUL, a, int128{1} << static_cast<int>(b), result);
          break;
        case Ops::SHR:
          if (b < 0 || b >= in.width) return {Outcome::Undefined};
          result = a >> static_cast<int>(b);  // arithmetic on signed values; unsigned ones are >= 0
          break;
        case Ops::MAX: result = a > b ? a : b; break;
        case Ops::CMPLT: result = a < b; break;
        case Ops::CMPNE: result = a != b; break;
        case Ops::CMPEQ: result = a == b; break;
        // On wrapped values (sign-extended into int128) bitwise ops then a wrap give the type's result.
        case Ops::AND: result = a & b; break;
        case Ops::OR: result = a | b; break;
        case Ops::XOR: result = a ^ b; break;
        case Ops::NOT: result = in.dtype.is_bool() ? (a == 0 ? 1 : 0) : ~a; break;
        case Ops::WHERE: result = a != 0 ? b : c; break;
        case Ops::CAST: result = a; break;  // the wrap below converts to the target type
        default: return {Outcome::OutOfDomain};  // unreachable: compile() rejects other ops
      }
      if (!fits) return {Outcome::OutOfDomain};
      result = reference_wrap(result, in.dtype);
      if (within_int64 && exact && (result > INT64_MAX || result < INT64_MIN)) return {Outcome::OutOfDomain};
      scratch[i] = result;
    }
    return {Outcome::Value, scratch.back()};
  }

 private:
  struct Instruction {
    Ops op;
    DType dtype;
    int sources[3] = {-1, -1, -1};
    int128 constant = 0;
    int leaf = -1;
    int width = 64;  // bits of a shifted value: index is lowered to at most 64 bits
  };

  static bool is_modelled(Ops op) {
    switch (op) {
      case Ops::ADD: case Ops::SUB: case Ops::MUL: case Ops::NEG: case Ops::IDIV: case Ops::MOD:
      case Ops::MAX: case Ops::CMPLT: case Ops::CMPNE: case Ops::CMPEQ: case Ops::AND: case Ops::OR:
      case Ops::XOR: case Ops::NOT: case Ops::WHERE: case Ops::CAST: case Ops::SHL: case Ops::SHR: case Ops::INDEX:
        return true;
      default: return false;
    }
  }

  std::vector<Instruction> code_;
};

// ---------------------------------------------------------------------------------------------
// Randomness: a fixed, printed seed; every expression gets its own stream derived from (seed, number)
// so that a failure names the one number that reproduces it.

uint64_t mix_seed(uint64_t value) {  // splitmix64 finaliser
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  int64_t uniform(int64_t low, int64_t high) {  // inclusive; high >= low
    uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low) + 1;
    uint64_t draw = span == 0 ? engine_() : engine_() % span;
    return static_cast<int64_t>(static_cast<uint64_t>(low) + draw);
  }
  bool chance(double probability) { return static_cast<double>(engine_() >> 11) * 0x1.0p-53 < probability; }
  int64_t pick(std::initializer_list<int64_t> items) {
    return items.begin()[uniform(0, static_cast<int64_t>(items.size()) - 1)];
  }
  template <class T>
  const T& pick(const std::vector<T>& items) { return items[uniform(0, static_cast<int64_t>(items.size()) - 1)]; }
  // Index of an alternative drawn with the given relative weights.
  int weighted(std::initializer_list<int> weights) {
    int total = 0;
    for (int weight : weights) total += weight;
    int64_t draw = uniform(0, total - 1);
    int index = 0;
    for (int weight : weights) {
      if (draw < weight) return index;
      draw -= weight;
      ++index;
    }
    return index - 1;
  }

 private:
  std::mt19937_64 engine_;
};

uint64_t oracle_seed() {
  // KILN_ORACLE_SEED lets a developer explore other seeds; the default keeps CI deterministic.
  if (const char* text = std::getenv("KILN_ORACLE_SEED")) return std::strtoull(text, nullptr, 0);
  return 20261122;
}

// ---------------------------------------------------------------------------------------------
// Expression generator. Shapes are biased toward what the rules look for: sums with coefficients,
// division and remainder by constants (often ones that divide some coefficients), nested div/mod,
// `(x/c)*c + x%c` recombinations, comparisons against constants, and `where(valid, x, y)` guarded by
// `v < c` / `c < v` clauses on loop-index-like variables.

class ExpressionGenerator {
 public:
  // `dtype` is index for the index fuzz, or the fixed-width type all variables share.
  ExpressionGenerator(Random& random, DType dtype) : random_(random), dtype_(dtype) {
    int count = static_cast<int>(random_.uniform(3, 4));
    for (int i = 0; i < count; ++i) variables_.push_back(make_variable(i));
  }

  UOpPtr generate(int depth) { return integer(dtype_, depth); }

  // INDEX(buffer, offset, valid): a masked memory access, whose offset the valid rules simplify
  // under the mask (index mode only).
  UOpPtr generate_masked_address(int depth) {
    UOpPtr buffer = UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(), {}, int64_t{0});
    UOpPtr valid = clause(any_variable());
    for (int64_t extra = random_.uniform(0, 2); extra > 0; --extra) valid = valid & clause(any_variable());
    return UOp::make(Ops::INDEX, buffer->dtype(), {buffer, integer(dtype_, depth), valid});
  }

 private:
  bool index_mode() const { return dtype_.is_index(); }
  // Limits of a fixed-width type as far as int64 reaches: variable ranges are int64, so u64
  // variables stay below 2^63 (u64 constants above it come from constant() as bit patterns).
  int64_t type_min(DType t) const {
    int bits = fixed_width_bits(t);
    if (is_unsigned_scalar(t)) return 0;
    return bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1));
  }
  int64_t type_max(DType t) const {
    int bits = fixed_width_bits(t);
    if (bits == 64) return INT64_MAX;
    return is_unsigned_scalar(t) ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
  }

  UOpPtr make_variable(int position) {
    std::string name(1, static_cast<char>('a' + position));
    if (index_mode()) {
      switch (random_.weighted({2, 2, 2, 2, 2, 2, 1})) {
        case 0:
        case 1: {  // a loop index [0, n)
          int64_t extent = random_.pick({1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 64});
          if (random_.chance(0.3)) return range(extent, position);
          return variable(name, 0, extent - 1);
        }
        case 2: return variable(name, -random_.uniform(1, 20), random_.uniform(0, 20));  // spans zero
        case 3: {  // negative only
          int64_t low = -random_.uniform(2, 40);
          return variable(name, low, std::min<int64_t>(low + random_.uniform(0, 20), -1));
        }
        case 4: return variable(name, random_.uniform(1, 5), random_.uniform(5, 30));  // positive: a safe divisor
        case 5: {
          int64_t low = random_.uniform(-100, 100);
          return variable(name, low, low + random_.uniform(0, 200));
        }
        default:  // huge: products of these leave the int64 range the bounds assume (points skipped)
          return random_.chance(0.5) ? variable(name, 0, int64_t{1} << random_.uniform(20, 40))
                                     : variable(name, -(int64_t{1} << 31), int64_t{1} << 31);
      }
    }
    int64_t low_limit = type_min(dtype_), high_limit = type_max(dtype_);
    int64_t low = 0, high = 0;
    switch (random_.uniform(0, 4)) {
      case 0:  // small values
        low = std::max(low_limit, random_.uniform(-20, 10));
        high = std::min(high_limit, std::max(low, int64_t{0}) + random_.uniform(0, 30));
        break;
      case 1: low = low_limit, high = high_limit; break;  // the whole type
      case 2: high = high_limit, low = high_limit - random_.uniform(0, 20); break;  // near the top
      case 3: low = low_limit, high = low_limit + random_.uniform(0, 20); break;  // near the bottom
      default:
        low = random_.uniform(low_limit, high_limit);
        high = random_.uniform(low, high_limit);
    }
    return variable(name, low, high, dtype_);
  }

  UOpPtr number(DType t, int64_t value) { return const_int(t, value); }

  int64_t small_constant() {
    switch (random_.weighted({60, 25, 10, 5})) {
      case 0: return random_.uniform(-10, 10);
      case 1: return random_.uniform(0, 20);
      case 2: return random_.pick({16, 32, 64, 100, 128, 256, -16, -64});
      default: return random_.uniform(-1000, 1000);
    }
  }

  // A constant of `t`: small ones mostly, and for fixed widths also the type's edges, where wrapping
  // happens. Always in the type's range (the canonical form of a constant).
  int64_t constant(DType t) {
    if (t.is_index()) return small_constant();
    // u64 values from 2^63 up are written as negative int64 bit patterns (make_constant's form).
    if (fixed_width_bits(t) == 64 && is_unsigned_scalar(t) && random_.chance(0.2))
      return random_.pick({-1, -2, INT64_MIN, INT64_MIN + 1});
    int64_t low = type_min(t), high = type_max(t);
    switch (random_.weighted({50, 20, 15})) {
      case 0: return std::clamp<int64_t>(random_.uniform(-8, 16), low, high);
      case 1: return random_.pick({low, low + 1, high, high - 1, high / 2 + 1, is_unsigned_scalar(t) ? high : -1});
      default: return random_.uniform(low, high);
    }
  }

  int64_t coefficient() {
    if (random_.chance(0.05)) return 0;
    int64_t value = random_.uniform(-6, 9);
    return value == 0 ? 1 : value;
  }

  // A non-zero constant divisor of `t`; both signs for signed types.
  int64_t divisor(DType t) {
    int64_t value = random_.chance(0.85) ? random_.uniform(1, 12) : random_.pick({16, 24, 32, 64, 128});
    if (!is_unsigned_scalar(t) && random_.chance(0.2)) value = -value;
    if (!t.is_index()) value = std::clamp(value, type_min(t), type_max(t));
    return value == 0 ? 1 : value;
  }

  const UOpPtr& any_variable() { return random_.pick(variables_); }

  // A variable viewed in type `t` (fixed-width expressions of another type reach the variables
  // through a cast).
  UOpPtr leaf(DType t) {
    if (random_.chance(0.3)) return number(t, constant(t));
    const UOpPtr& chosen = any_variable();
    return chosen->dtype() == t ? chosen : cast(chosen, t);
  }

  UOpPtr integer(DType t, int depth) {
    if (depth <= 0 || random_.chance(0.12)) return leaf(t);
    int shape = random_.weighted({14, 5, 4, 5, 2, 8, 8, 7, 4, 3, 3, 5, 5, 6, 2, 2, 1, 2, 2, 2});
    switch (shape) {
      case 0: return linear_sum(t, depth);
      case 1: {
        UOpPtr left = integer(t, depth - 1), right = integer(t, depth - 1);
        return left + right;
      }
      case 2: {
        UOpPtr left = integer(t, depth - 1), right = integer(t, depth - 1);
        return left - right;
      }
      case 3: {
        UOpPtr operand = integer(t, depth - 1);
        UOpPtr factor = number(t, index_mode() ? coefficient() : constant(t));
        return random_.chance(0.7) ? operand * factor : factor * operand;
      }
      case 4: {
        UOpPtr left = integer(t, depth - 1), right = integer(t, depth - 1);
        return left * right;
      }
      case 5: return integer(t, depth - 1) / number(t, divisor(t));
      case 6: return integer(t, depth - 1) % number(t, divisor(t));
      case 7: return strided_div_mod(t, depth);
      case 8: return nested_div_mod(t, depth);
      case 9: return recombined_div_mod(t, depth);
      case 10: return divided_by_expression(t, depth);
      case 11: {
        UOpPtr left = integer(t, depth - 1);
        UOpPtr right = random_.chance(0.4) ? number(t, constant(t)) : integer(t, depth - 1);
        return random_.chance(0.5) ? maximum(left, right) : minimum(left, right);
      }
      case 12: {
        UOpPtr test = condition(t, depth - 1);
        UOpPtr if_true = integer(t, depth - 1), if_false = integer(t, depth - 1);
        return where(test, if_true, if_false);
      }
      case 13: return guarded(t, depth);
      case 14: return -integer(t, depth - 1);
      case 15: {
        UOpPtr left = integer(t, depth - 1), right = integer(t, depth - 1);
        switch (random_.uniform(0, 2)) {
          case 0: return left & right;
          case 1: return left | right;
          default: return left ^ right;
        }
      }
      case 16: return logical_not(integer(t, depth - 1));  // bitwise not
      case 17: return cast(condition(t, depth - 1), t);
      case 18: {
        // A value computed in another type and converted (truncating, extending, or an island of
        // index arithmetic inside a fixed-width expression).
        std::vector<DType> others{dtypes::i8, dtypes::u8, dtypes::i32, dtypes::u32};
        if (!t.is_index()) others.push_back(dtypes::index);
        return cast(integer(random_.pick(others), depth - 1), t);
      }
      default: {
        // Shifts by a constant below the width; a computed amount at times (points where it is out
        // of range are undefined and skipped).
        UOpPtr value = integer(t, depth - 1);
        int width = t.is_index() ? 64 : fixed_width_bits(t);
        UOpPtr amount = random_.chance(0.85) ? number(t, random_.uniform(0, std::min(width - 1, 8)))
                                             : integer(t, depth - 1);
        return random_.chance(0.5) ? value << amount : value >> amount;
      }
    }
  }

  // Σ base_i * c_i + c, in a random order and association, sometimes written with SUB or c*x.
  UOpPtr linear_sum(DType t, int depth) {
    std::vector<UOpPtr> terms;
    int count = static_cast<int>(random_.uniform(1, 4));
    for (int i = 0; i < count; ++i) {
      UOpPtr base = random_.chance(0.75) ? leaf(t) : integer(t, depth - 1);
      int64_t factor = random_.chance(0.2) ? 1 : (t.is_index() ? coefficient() : constant(t));
      if (factor == 1) terms.push_back(base);
      else terms.push_back(random_.chance(0.8) ? base * number(t, factor) : number(t, factor) * base);
    }
    if (random_.chance(0.7)) terms.push_back(number(t, constant(t)));
    for (size_t i = terms.size(); i > 1; --i)
      std::swap(terms[i - 1], terms[random_.uniform(0, static_cast<int64_t>(i) - 1)]);
    UOpPtr sum = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) {
      if (random_.chance(0.15)) sum = sum - terms[i];
      else if (random_.chance(0.2)) sum = terms[i] + sum;
      else sum = sum + terms[i];
    }
    return sum;
  }

  // (Σ v_i * k_i + c) / d or % d where d divides some of the k_i: the shape of flattened indices.
  UOpPtr strided_div_mod(DType t, int depth) {
    int64_t stride = random_.pick({2, 3, 4, 6, 8, 16, 32});
    if (!t.is_index()) stride = std::min(stride, type_max(t));
    UOpPtr sum;
    int count = static_cast<int>(random_.uniform(1, 3));
    for (int i = 0; i < count; ++i) {
      UOpPtr base = random_.chance(0.8) ? leaf(t) : integer(t, depth - 2);
      int64_t factor = random_.chance(0.5) ? stride * random_.uniform(-2, 4) : random_.uniform(-3, 5);
      if (factor == 0) factor = stride;
      UOpPtr term = factor == 1 ? base : base * number(t, factor);
      sum = sum ? sum + term : term;
    }
    if (random_.chance(0.6)) sum = sum + number(t, random_.uniform(-2 * stride, 3 * stride));
    UOpPtr result = random_.chance(0.5) ? sum / number(t, stride) : sum % number(t, stride);
    if (random_.chance(0.3)) {
      int64_t outer = random_.chance(0.5) ? random_.pick({1, 2, 3, 4}) : stride;
      result = random_.chance(0.5) ? result / number(t, outer) : result % number(t, outer);
    }
    return result;
  }

  UOpPtr nested_div_mod(DType t, int depth) {
    UOpPtr operand = integer(t, depth - 1);
    int64_t first = divisor(t);
    // Half the time the second constant divides the first (or the other way round), which is what
    // the (x%c1)%c2 and (x*c1)/c2 rules need.
    int64_t second = random_.chance(0.5)   ? divisor(t)
                     : random_.chance(0.5) ? first * random_.pick({1, 2, 3, -2})
                                           : random_.pick({1, 2, 3, 4});
    if (!t.is_index()) second = std::clamp(second, type_min(t), type_max(t));
    if (second == 0) second = 1;
    if (is_unsigned_scalar(t) && second < 0) second = -second;
    UOpPtr c1 = number(t, first), c2 = number(t, second);
    switch (random_.uniform(0, 5)) {
      case 0: return (operand / c1) / c2;
      case 1: return (operand % c1) % c2;
      case 2: return (operand % c1) / c2;
      case 3: return (operand / c1) % c2;
      case 4: return (operand * c1) / c2;
      default: return (operand * c1) % c2;
    }
  }

  // (x/c)*(c*k) + (x%c)*k (+ other terms): the remainder-quotient pair the sum canonicaliser folds.
  UOpPtr recombined_div_mod(DType t, int depth) {
    UOpPtr operand = integer(t, depth - 1);
    int64_t d = divisor(t);
    int64_t k = random_.chance(0.5) ? 1 : coefficient();
    if (random_.chance(0.15)) k = coefficient();  // sometimes a pair that does not match
    // Sometimes the remainder's operand is itself a quotient x/c1, whose quotient by d the divmod
    // rules write x/(c1*d): the pair of a flattened 3-level index.
    UOpPtr quotient_base = operand / number(t, d), remainder_base = operand % number(t, d);
    if (random_.chance(0.3)) {
      int64_t inner = divisor(t);
      quotient_base = operand / number(t, inner * d);
      remainder_base = (operand / number(t, inner)) % number(t, d);
    }
    UOpPtr quotient = quotient_base * number(t, d * (random_.chance(0.85) ? k : k + 1));
    UOpPtr remainder = k == 1 ? remainder_base : remainder_base * number(t, k);
    UOpPtr sum = random_.chance(0.5) ? quotient + remainder : remainder + quotient;
    if (random_.chance(0.4)) sum = sum + leaf(t);
    return sum;
  }

  // Division by a non-constant: usually a variable whose range excludes 0, rarely anything (then
  // points where it is 0 are skipped as undefined).
  UOpPtr divided_by_expression(DType t, int depth) {
    UOpPtr numerator = integer(t, depth - 1);
    UOpPtr denominator;
    for (const UOpPtr& candidate : variables_)
      if (candidate->dtype() == t && (candidate->vmin() > 0 || candidate->vmax() < 0)) denominator = candidate;
    if (!denominator || random_.chance(0.25)) denominator = integer(t, depth - 1);
    return random_.chance(0.5) ? numerator / denominator : numerator % denominator;
  }

  // v < c or c < v with c near v's range, so that it often narrows it. For index variables it is
  // sometimes a clause on a small sum k*v + w + k0 instead (what a padded convolution's mask looks
  // like), which the valid rules narrow by interval propagation.
  UOpPtr clause(const UOpPtr& variable_node) {
    UOpPtr v = variable_node;
    if (v->dtype().is_index() && random_.chance(0.3)) {
      UOpPtr other = any_variable();
      if (other->dtype().is_index() && other != v && v->vmax() - v->vmin() < 1000 &&
          other->vmax() - other->vmin() < 1000) {
        UOpPtr scaled = v * number(v->dtype(), random_.pick({-3, -2, -1, 1, 2, 4}));
        v = random_.chance(0.5) ? scaled + other + number(v->dtype(), random_.uniform(-5, 5))
                                : other + scaled;
      }
    }
    int64_t low = static_cast<int64_t>(v->vmin()), high = static_cast<int64_t>(v->vmax());
    int64_t bound = random_.uniform(low == INT64_MIN ? low : low - 1, high == INT64_MAX ? high : high + 1);
    if (!v->dtype().is_index()) bound = std::clamp(bound, type_min(v->dtype()), type_max(v->dtype()));
    UOpPtr c = number(v->dtype(), bound);
    return random_.chance(0.5) ? lt(v, c) : lt(c, v);
  }

  // where(valid, x, y) with valid a conjunction of range clauses on the variables (what padding and
  // image-boundary masks look like).
  UOpPtr guarded(DType t, int depth) {
    UOpPtr valid = clause(any_variable());
    int extra = static_cast<int>(random_.uniform(0, 2));
    for (int i = 0; i < extra; ++i) {
      UOpPtr more = random_.chance(0.85) ? clause(any_variable()) : condition(t, depth - 1);
      valid = random_.chance(0.5) ? valid & more : more & valid;
    }
    UOpPtr if_true = integer(t, depth - 1);
    UOpPtr if_false = random_.chance(0.5) ? number(t, 0) : integer(t, depth - 1);
    return where(valid, if_true, if_false);
  }

  // A bool expression comparing values of type `t`.
  UOpPtr condition(DType t, int depth) {
    if (depth <= 0) return clause(any_variable());
    switch (random_.weighted({10, 4, 4, 8, 6, 3, 1, 1})) {
      case 0: {
        UOpPtr operand = integer(t, depth - 1);
        UOpPtr c = number(t, constant(t));
        return random_.chance(0.5) ? lt(operand, c) : lt(c, operand);
      }
      case 1: {
        UOpPtr left = integer(t, depth - 1), right = integer(t, depth - 1);
        return lt(left, right);
      }
      case 2: {
        UOpPtr left = integer(t, depth - 1);
        UOpPtr right = random_.chance(0.5) ? number(t, constant(t)) : integer(t, depth - 1);
        return random_.chance(0.5) ? ne(left, right) : eq(left, right);
      }
      case 3: {
        UOpPtr result = clause(any_variable());
        int extra = static_cast<int>(random_.uniform(1, 2));
        for (int i = 0; i < extra; ++i) result = result & clause(any_variable());
        return result;
      }
      case 4: {
        UOpPtr left = condition(t, depth - 1), right = condition(t, depth - 1);
        switch (random_.uniform(0, 2)) {
          case 0: return left & right;
          case 1: return left | right;
          default: return left ^ right;
        }
      }
      case 5: return logical_not(condition(t, depth - 1));
      case 6: return const_bool(random_.chance(0.5));
      default: return cast(integer(t, depth - 1), dtypes::bool_);
    }
  }

  Random& random_;
  DType dtype_;
  std::vector<UOpPtr> variables_;
};

// ---------------------------------------------------------------------------------------------
// Checking one expression.

// The variable-like leaves of a graph, each once, in dependency order.
std::vector<const UOp*> leaves_of(const UOpPtr& root) {
  std::vector<const UOp*> leaves;
  for (const UOp* node : toposort(root))
    if (node->op() == Ops::DEFINE_VAR || node->op() == Ops::RANGE) leaves.push_back(node);
  return leaves;
}

// Every corner of the leaves' box, then `random_count` points inside it, biased toward the edges
// and zero where the range is wide (that is where wrapping and sign changes happen).
std::vector<std::vector<int128>> sample_points(const std::vector<const UOp*>& leaves, Random& random,
                                               int random_count) {
  std::vector<std::vector<int128>> points;
  size_t corners = leaves.size() <= 6 ? size_t{1} << leaves.size() : 64;
  for (size_t mask = 0; mask < corners; ++mask) {
    std::vector<int128> point;
    for (size_t i = 0; i < leaves.size(); ++i) point.push_back((mask >> i) & 1 ? leaves[i]->vmax() : leaves[i]->vmin());
    points.push_back(std::move(point));
  }
  for (int n = 0; n < random_count; ++n) {
    std::vector<int128> point;
    for (const UOp* leaf : leaves) {
      int64_t low = static_cast<int64_t>(leaf->vmin()), high = static_cast<int64_t>(leaf->vmax());
      int64_t value = random.uniform(low, high);
      if (int128{high} - low > 64 && random.chance(0.4)) {
        int64_t near = random.uniform(0, 8);
        switch (random.uniform(0, 2)) {
          case 0: value = low + near; break;
          case 1: value = high - near; break;
          default: value = std::clamp<int64_t>(random.uniform(-8, 8), low, high);
        }
      }
      point.push_back(value);
    }
    points.push_back(std::move(point));
  }
  return points;
}

struct Mismatch {
  std::string reason;  // empty when there is none
  std::vector<int128> point;
  Evaluation original, simplified;
};

struct PointCounts {
  uint64_t compared = 0, undefined = 0, out_of_domain = 0;
};

// Compares `original` and `simplified` at `points`; returns the first disagreement.
Mismatch compare_forms(const UOpPtr& original, const UOpPtr& simplified, const std::vector<const UOp*>& leaves,
                       const std::vector<std::vector<int128>>& points, PointCounts* counts) {
  std::string error;
  std::optional<Program> before = Program::compile(original, leaves, error);
  if (!before) return {"the generator built something the reference does not model: " + error, {}, {}, {}};
  std::optional<Program> after = Program::compile(simplified, leaves, error);
  if (!after) return {"the simplified form cannot be evaluated: " + error, {}, {}, {}};
  std::vector<int128> scratch;
  for (const std::vector<int128>& point : points) {
    Evaluation expected = before->run(point, scratch, true);
    if (expected.outcome != Outcome::Value) {
      if (counts) ++(expected.outcome == Outcome::Undefined ? counts->undefined : counts->out_of_domain);
      continue;
    }
    Evaluation actual = after->run(point, scratch, false);
    if (counts) ++counts->compared;
    if (actual.outcome != Outcome::Value || actual.value != expected.value)
      return {"values differ", point, expected, actual};
  }
  return {};
}

// The simplified form, or the text of the exception simplify() threw (a rewrite loop, a verifier
// failure): both count as failures of the simplifier.
UOpPtr simplify_catching(const UOpPtr& expression, std::string& error) {
  try {
    return simplify(expression);
  } catch (const std::exception& exception) {
    error = exception.what();
    return nullptr;
  }
}

// simplify() promises a fixed point: simplifying its result again must change nothing. Returns
// the failure text, empty when it holds.
std::string check_fixed_point(const UOpPtr& simplified) {
  std::string error;
  UOpPtr again = simplify_catching(simplified, error);
  if (again == simplified) return {};
  return "not a fixed point: simplifying the result again gives " +
         (again ? render_expr(again) : "exception: " + error);
}

// Whether `expression` still shows a simplifier failure (used while shrinking a failing case).
bool still_fails(const UOpPtr& expression, uint64_t seed) {
  std::string error;
  UOpPtr simplified = simplify_catching(expression, error);
  if (!simplified) return true;
  std::vector<const UOp*> leaves = leaves_of(expression);
  Random random(seed);
  return !compare_forms(expression, simplified, leaves, sample_points(leaves, random, 200), nullptr).reason.empty() ||
         !check_fixed_point(simplified).empty();
}

// Greedy shrinking: replace any node by one of its same-typed sources or by 0/1 as long as the
// failure persists. Gives a small case to read in the failure message.
UOpPtr shrink(UOpPtr expression, uint64_t seed) {
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<const UOp*> nodes = toposort(expression);
    for (auto node = nodes.rbegin(); node != nodes.rend() && !progress; ++node) {
      if ((*node)->src_count() == 0 || (*node)->op() == Ops::RANGE) continue;
      std::vector<UOpPtr> candidates;
      for (const UOpPtr& source : (*node)->srcs())
        if (source->dtype() == (*node)->dtype()) candidates.push_back(source);
      if ((*node)->dtype().count() == 1 && !(*node)->dtype().is_float() && !(*node)->dtype().is_pointer()) {
        candidates.push_back(const_int((*node)->dtype(), 0));
        candidates.push_back(const_int((*node)->dtype(), 1));
      }
      for (const UOpPtr& candidate : candidates) {
        UOpPtr smaller = substitute(expression, {{*node, candidate}});
        if (smaller != expression && still_fails(smaller, seed)) {
          expression = smaller;
          progress = true;
          break;
        }
      }
    }
  }
  return expression;
}

std::string render_point(const std::vector<const UOp*>& leaves, const std::vector<int128>& point) {
  std::string text;
  for (size_t i = 0; i < leaves.size(); ++i)
    text += (i ? ", " : "") + render_expr(leaves[i]->self()) + " = " + to_string(point[i]);
  return text;
}

// The failure message: the seed and expression number that reproduce the case, the case shrunk,
// the original in both printed forms, the point and both values.
std::string failure_report(uint64_t seed, uint64_t number, const UOpPtr& expression, const UOpPtr& simplified,
                           const std::string& simplify_error, const Mismatch& mismatch, uint64_t shrink_seed) {
  std::string report = str_cat("oracle failure: seed ", seed, ", expression #", number, "\n");
  UOpPtr small = shrink(expression, shrink_seed);
  report += "shrunk case: " + render_expr(small) + "\n";
  std::string small_error;
  UOpPtr small_simplified = simplify_catching(small, small_error);
  report += "  simplifies to: " +
            (small_simplified ? render_expr(small_simplified) : "exception: " + small_error) + "\n";
  report += "expression: " + render_expr(expression) + "\n" + print_graph(expression);
  if (!simplified) return report + "simplify() threw: " + simplify_error + "\n";
  report += "simplified: " + render_expr(simplified) + "\n" + print_graph(simplified);
  report += mismatch.reason + "\n";
  if (!mismatch.point.empty()) {
    report += "at " + render_point(leaves_of(expression), mismatch.point) + ": original " +
              describe(mismatch.original) + ", simplified " + describe(mismatch.simplified) + "\n";
  }
  return report;
}

// Aggregates of one fuzz run.
struct FuzzSummary {
  uint64_t expressions = 0;
  PointCounts points;
  uint64_t failures = 0;
  double nodes_before = 0, nodes_after = 0;
  uint64_t smaller = 0, equal = 0, larger = 0;
  int64_t largest_growth = 0;
  std::string largest_growth_case;
  // How often each rule of symbolic() fired, over a sample of the expressions.
  std::unordered_map<const Rule*, uint64_t> rules_fired;
};

// Adds a part's counts to a total (the fixed-width fuzz runs one part per type).
void accumulate(FuzzSummary& total, const FuzzSummary& part, const std::string& label) {
  total.expressions += part.expressions;
  total.points.compared += part.points.compared;
  total.points.undefined += part.points.undefined;
  total.points.out_of_domain += part.points.out_of_domain;
  total.failures += part.failures;
  total.nodes_before += part.nodes_before;
  total.nodes_after += part.nodes_after;
  total.smaller += part.smaller;
  total.equal += part.equal;
  total.larger += part.larger;
  for (const auto& [rule, times] : part.rules_fired) total.rules_fired[rule] += times;
  if (part.largest_growth > total.largest_growth) {
    total.largest_growth = part.largest_growth;
    total.largest_growth_case = label + ": " + part.largest_growth_case;
  }
}

// Every tenth expression is also rewritten with rule counting on, to show which rules the fuzz
// exercises (simplify() itself has no statistics to hand back).
constexpr uint64_t coverage_sample = 10;

// Generates `count` expressions of `dtype` with depths 2..`max_depth` (small cases isolate a rule,
// deep ones make rules interact), checks each, and reports the first few failures in full (the
// rest are only counted).
FuzzSummary run_fuzz(DType dtype, uint64_t count, int max_depth, int random_points, uint64_t stream) {
  uint64_t seed = oracle_seed();
  FuzzSummary summary;
  for (uint64_t number = 0; number < count; ++number) {
    uint64_t expression_seed = mix_seed(seed ^ mix_seed(stream + number));
    Random random(expression_seed);
    ExpressionGenerator generator(random, dtype);
    int depth = static_cast<int>(random.uniform(2, max_depth));
    UOpPtr expression = dtype.is_index() && random.chance(0.05) ? generator.generate_masked_address(depth)
                                                                : generator.generate(depth);
    std::string error;
    UOpPtr simplified = simplify_catching(expression, error);
    ++summary.expressions;
    Mismatch mismatch;
    if (simplified) {
      std::vector<const UOp*> leaves = leaves_of(expression);
      mismatch = compare_forms(expression, simplified, leaves, sample_points(leaves, random, random_points),
                               &summary.points);
      if (mismatch.reason.empty()) mismatch.reason = check_fixed_point(simplified);
      int64_t before = static_cast<int64_t>(toposort(expression).size());
      int64_t after = static_cast<int64_t>(toposort(simplified).size());
      summary.nodes_before += static_cast<double>(before);
      summary.nodes_after += static_cast<double>(after);
      ++(after < before ? summary.smaller : after == before ? summary.equal : summary.larger);
      if (after - before > summary.largest_growth) {
        summary.largest_growth = after - before;
        summary.largest_growth_case = str_cat(render_expr(expression), "  →  ", render_expr(simplified), "  (",
                                              before, " → ", after, " nodes, expression #", number, ")");
      }
    }
    if (simplified && number % coverage_sample == 0) {
      RewriteStats stats;
      try {
        graph_rewrite(expression, symbolic(), {.pass_name = "oracle coverage", .stats = &stats, .count_rules = true});
      } catch (const std::exception&) {
        // simplify() succeeded on the same input; a failure here would be reported by the rule tests.
      }
      for (const auto& [rule, times] : stats.fired_by_rule) summary.rules_fired[rule] += times;
    }
    if (!simplified || !mismatch.reason.empty()) {
      if (summary.failures++ < 3)
        FAIL_CHECK(failure_report(seed, number, expression, simplified, error, mismatch, expression_seed));
    }
  }
  return summary;
}

void report(const char* title, const FuzzSummary& summary, double seconds) {
  double mean_before = summary.nodes_before / static_cast<double>(summary.expressions);
  double mean_after = summary.nodes_after / static_cast<double>(summary.expressions);
  auto percent = [&](uint64_t part) {
    return 100.0 * static_cast<double>(part) / static_cast<double>(summary.expressions);
  };
  MESSAGE(str_cat(title, ": seed ", oracle_seed(), ", ", summary.expressions, " expressions, ", summary.points.compared,
                  " points compared (", summary.points.undefined, " skipped: undefined, ",
                  summary.points.out_of_domain, " skipped: index beyond int64), ", summary.failures, " failures, ",
                  seconds, " s"));
  MESSAGE(str_cat(title, ": mean size ", mean_before, " → ", mean_after, " nodes, shrink ratio ",
                  mean_after / mean_before, "; smaller ", percent(summary.smaller), "%, equal ",
                  percent(summary.equal), "%, larger ", percent(summary.larger), "%"));
  MESSAGE(str_cat(title, ": largest growth +", summary.largest_growth, " nodes: ", summary.largest_growth_case));
  std::string never;
  for (const Rule& rule : symbolic().rules())
    if (!summary.rules_fired.contains(&rule)) never += "\n  " + rule.doc;
  MESSAGE(str_cat(title, ": rules that never fired in the sampled expressions:", never.empty() ? " none" : never));
}

// The opaque rules say that this test checks them (they cannot be proven rule by rule): make sure
// the generator really reaches each of them.
void check_oracle_rules_fired(const FuzzSummary& summary) {
  for (const Rule& rule : symbolic().rules()) {
    if (rule.opaque_reason.find("oracle") == std::string::npos) continue;
    INFO("rule: ", rule.doc);
    CHECK(summary.rules_fired.contains(&rule));
  }
}

// Simplifies `expression` and compares both forms at every point of the variables' box (the boxes
// of the regression cases are small); a thrown error fails with its text.
void check_simplifies_correctly(const UOpPtr& expression) {
  INFO("expression: ", render_expr(expression));
  std::string error;
  UOpPtr simplified = simplify_catching(expression, error);
  INFO("simplify() error: ", error);
  REQUIRE(simplified);
  INFO("simplified: ", render_expr(simplified));
  std::vector<const UOp*> leaves = leaves_of(expression);
  std::vector<std::vector<int128>> points{{}};
  for (const UOp* leaf : leaves) {
    std::vector<std::vector<int128>> extended;
    for (const std::vector<int128>& point : points)
      for (int128 value = leaf->vmin(); value <= leaf->vmax(); ++value) {
        extended.push_back(point);
        extended.back().push_back(value);
      }
    points = std::move(extended);
  }
  REQUIRE(points.size() <= 100000);
  Mismatch mismatch = compare_forms(expression, simplified, leaves, points, nullptr);
  INFO(mismatch.reason, mismatch.point.empty() ? std::string() : " at " + render_point(leaves, mismatch.point),
       ": original ", describe(mismatch.original), ", simplified ", describe(mismatch.simplified));
  CHECK(mismatch.reason.empty());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("symbolic oracle: the reference evaluator follows ops.def") {
  // The oracle is only as good as its reference: pin down the semantics it implements.
  UOpPtr a = variable("a", -8, 8);
  std::vector<const UOp*> leaves{a.get()};
  std::string error;
  auto value_at = [&](const UOpPtr& expression, int64_t at) {
    std::optional<Program> program = Program::compile(expression, leaves, error);
    REQUIRE(program);
    std::vector<int128> scratch;
    return program->run({int128{at}}, scratch, true);
  };
  CHECK(value_at(a / 2, -7).value == -3);   // truncation toward zero
  CHECK(value_at(a % 2, -7).value == -1);   // sign of the dividend
  CHECK(value_at(a / -2, 7).value == -3);
  CHECK(value_at(a % -2, 7).value == 1);
  CHECK(value_at(a / (a - 3), 3).outcome == Outcome::Undefined);
  CHECK(value_at(a >> 1, -7).value == -4);  // arithmetic shift: floor
  CHECK(value_at(a << 62, 8).outcome == Outcome::OutOfDomain);
  CHECK(value_at(where(lt(a, 0), -a, a), -5).value == 5);
  UOpPtr buffer = UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(), {}, int64_t{0});
  UOpPtr masked = UOp::make(Ops::INDEX, buffer->dtype(), {buffer, a * 2, lt(a, 0)});
  CHECK(value_at(masked, -3).value == -6);
  CHECK(value_at(masked, 3).value == masked_address);

  UOpPtr byte = variable("b", 0, 255, dtypes::u8);
  UOpPtr small = variable("s", -128, 127, dtypes::i8);
  leaves = {byte.get()};
  CHECK(value_at(byte + const_int(dtypes::u8, 10), 250).value == 4);  // wraps modulo 256
  CHECK(value_at(byte - const_int(dtypes::u8, 1), 0).value == 255);
  CHECK(value_at(cast(byte, dtypes::i8), 200).value == -56);
  leaves = {small.get()};
  CHECK(value_at(small * const_int(dtypes::i8, -1), -128).value == -128);
  CHECK(value_at(small / const_int(dtypes::i8, -1), -128).value == -128);
  CHECK(value_at(logical_not(small), 5).value == -6);

  // Index arithmetic never wraps: a product far beyond 32 bits is exact.
  UOpPtr big = variable("n", 0, int64_t{1} << 40);
  leaves = {big.get()};
  CHECK(value_at(big * 1000, int64_t{1} << 40).value == (int128{1} << 40) * 1000);
  CHECK(value_at(big * big * big, int64_t{1} << 40).outcome == Outcome::OutOfDomain);

  // A graph with a leaf the point does not provide cannot be evaluated (the check that catches a
  // temporary variable of the valid rules leaking into a result).
  CHECK_FALSE(Program::compile(variable("z", 0, 3), leaves, error));
}

TEST_CASE("symbolic oracle: 100,000 random index expressions") {
  auto start = std::chrono::steady_clock::now();
  FuzzSummary summary = run_fuzz(dtypes::index, 100000, 5, 8, 0);
  report("index oracle", summary, seconds_since(start));
  CHECK(summary.expressions >= 100000);
  CHECK(summary.failures == 0);
  check_oracle_rules_fired(summary);
  // Simplification is meant to make index math smaller: on average it must not grow it.
  CHECK(summary.nodes_after <= summary.nodes_before);
}

TEST_CASE("symbolic oracle: 26,000 random fixed-width expressions wrap like two's complement") {
  auto start = std::chrono::steady_clock::now();
  FuzzSummary summary;
  // 5,000 each of the common widths, and a few of the others: the 64-bit ones reach values near
  // the int64 limits (through casts to index), where a combined index constant can overflow.
  const std::pair<DType, uint64_t> batches[] = {{dtypes::i32, 5000}, {dtypes::i8, 5000}, {dtypes::u8, 5000},
                                                {dtypes::u32, 5000}, {dtypes::i16, 2000}, {dtypes::i64, 2000},
                                                {dtypes::u64, 2000}};
  for (const auto& [dtype, count] : batches) {
    // Each type gets its own stream of expressions (the stream number only has to differ).
    uint64_t stream = uint64_t{1} << 40 | static_cast<uint64_t>(dtype.scalar()) << 32;
    accumulate(summary, run_fuzz(dtype, count, 5, 6, stream), dtype.name());
  }
  report("fixed-width oracle", summary, seconds_since(start));
  CHECK(summary.expressions >= 26000);
  CHECK(summary.failures == 0);
  CHECK(summary.nodes_after <= summary.nodes_before);
}


TEST_CASE("symbolic oracle: regressions found by the fuzzer") {
  UOpPtr a = variable("a", -12, 5);
  UOpPtr b = variable("b", 0, 31);
  UOpPtr r = range(8, 0);
  // The valid rule simplified `b+a` under b<7 with a temporary variable that sorts before `a`, and
  // restored `b+a`; the sum canonicaliser turned it back into `a+b`: a rewrite loop.
  check_simplifies_correctly(where(lt(b, 7), b + a, 0));
  check_simplifies_correctly(where(lt(r, 3), r + a, a));
  check_simplifies_correctly(where(lt(const_int(dtypes::u8, 47), variable("c", 40, 60, dtypes::u8)),
                                   variable("c", 40, 60, dtypes::u8) + variable("b", 0, 9, dtypes::u8),
                                   const_int(dtypes::u8, 3)));
  // Nested guards that narrow two different variables to the same range: the temporary variables
  // of the two levels must stay distinct, or `a-b` becomes 0.
  UOpPtr x = variable("x", -5, 10), y = variable("y", -5, 10);
  UOpPtr inner = where(lt(y, 4) & lt(const_int(dtypes::index, -1), y), x - y, 0);
  check_simplifies_correctly(where(lt(x, 4) & lt(const_int(dtypes::index, -1), x), inner, 0));
  // WHERE computes both arms, so simplifying an arm under its guard must not create a division
  // by zero where the guard fails: `c<1 ? a/c : c` became `c<1 ? a/0 : c`, undefined at c = 3.
  UOpPtr c = variable("c", 0, 5), d = variable("d", -5, 5);
  check_simplifies_correctly(where(lt(c, 1), a / c, c));
  check_simplifies_correctly(where(lt(a, -11), a % (a % -12), 0));
  // max(d, 1) is d under 0<d, but d/max(d, 1) → d/d would divide by zero at d = 0.
  check_simplifies_correctly(where(lt(const_int(dtypes::index, 0), d), a / maximum(d, 1), 0));
  // Shift amounts are the same story: `(e+f)%6` is `(f-1)%6` under -2<e (e in -3..-1), but the
  // arm is computed at e = -2 too, where the new amount is negative (f = -4).
  UOpPtr e = variable("e", -3, -1), f = variable("f", -4, 4);
  UOpPtr five = const_int(dtypes::index, 5);
  check_simplifies_correctly(where(lt(const_int(dtypes::index, -2), e), five >> ((e + f) % 6), 2));
  // Index values fit in int64, but a combined constant may not: n%2 is n - (2^63-2) for n in
  // [2^63-2, 2^63-1], and adding -4 gives -2^63-2, which the CONST silently wrapped to 2^63-2:
  // n%2 + -4 became n + 9223372036854775806. The same through (n+c1)+c2 → n+(c1+c2).
  UOpPtr near_limit = variable("n", INT64_MAX - 1, INT64_MAX);
  check_simplifies_correctly(near_limit % 2 + -4);
  check_simplifies_correctly((near_limit + (INT64_MIN / 2 - 1)) + (INT64_MIN / 2 - 1));
  // Folding now leaves such a constant unfolded; a product of two constants must then not be
  // swapped back and forth by c*x → x*c (a rewrite loop).
  UOpPtr top = variable("t", INT64_MAX, INT64_MAX);
  std::string error;
  CHECK(simplify_catching(top * 32, error));
  CHECK(error == "");
  // Here every input value of n*4 leaves int64, so no point is compared: this checks only that
  // the narrowed n = 2^63-2 does not start the same loop.
  check_simplifies_correctly(where(lt(near_limit, INT64_MAX), near_limit * 4, near_limit));
}
