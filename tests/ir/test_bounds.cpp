// Unit tests of range analysis (src/ir/bounds.cpp): exact [vmin, vmax] for representative nodes of
// every integer op, and a brute-force soundness check — every value an op can produce on small
// intervals, computed by evaluate(), must lie in the range the analysis claims.
#include <doctest/doctest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/bounds.h"
#include "ir/build.h"
#include "ir/evaluate.h"
#include "ir/uop.h"

namespace kiln {
namespace {

struct Range {
  int128 min, max;
  friend bool operator==(const Range&, const Range&) = default;
};

// doctest prints both sides of a failed CHECK with this.
[[maybe_unused]] std::ostream& operator<<(std::ostream& out, const Range& range) {
  return out << "[" << to_string(range.min) << ", " << to_string(range.max) << "]";
}

Range range_of(const UOpPtr& node) { return {node->vmin(), node->vmax()}; }
Range full(DType dtype) {
  if (dtype.is_index()) return {min_value(dtypes::i64), max_value(dtypes::i64)};
  return {min_value(dtype), max_value(dtype)};
}

UOpPtr var(const std::string& name, int64_t min, int64_t max, DType dtype = dtypes::index) {
  return variable(name, min, max, dtype);
}

TEST_CASE("ranges of leaves: CONST, VCONST, DEFINE_VAR, BIND, RANGE, SPECIAL") {
  CHECK(range_of(const_int(dtypes::i32, -7)) == Range{-7, -7});
  CHECK(range_of(const_bool(true)) == Range{1, 1});
  CHECK(range_of(const_bool(false)) == Range{0, 0});
  // u64 constants hold their bit pattern; the range is the unsigned value.
  int128 u64_max = max_value(dtypes::u64);
  CHECK(range_of(UOp::make(Ops::CONST, dtypes::u64, {}, int64_t{-1})) == Range{u64_max, u64_max});
  CHECK(range_of(UOp::make(Ops::VCONST, dtypes::i32.vec(3), {}, std::vector<int64_t>{4, -2, 9})) == Range{-2, 9});
  CHECK(range_of(var("leaf_v", -3, 7)) == Range{-3, 7});
  CHECK(range_of(UOp::make(Ops::BIND, dtypes::index, {var("leaf_b", 0, 99), const_int(dtypes::index, 5)})) ==
        Range{0, 99});
  CHECK(range_of(range(10, 0)) == Range{0, 9});
  CHECK(range_of(range(1, 0)) == Range{0, 0});
  CHECK(range_of(range(var("leaf_n", 1, 32), 1)) == Range{0, 31});
  CHECK(range_of(UOp::make(Ops::SPECIAL, dtypes::index, {const_int(dtypes::index, 256)}, std::string("gidx0"))) ==
        Range{0, 255});
}

TEST_CASE("ranges of arithmetic") {
  UOpPtr x = var("ar_x", 0, 9), y = var("ar_y", -4, 3), n = var("ar_n", 2, 5);
  CHECK(range_of(x + y) == Range{-4, 12});
  CHECK(range_of(x - y) == Range{-3, 13});
  CHECK(range_of(-y) == Range{-3, 4});
  CHECK(range_of(x * y) == Range{-36, 27});
  CHECK(range_of(y * y) == Range{-12, 16});  // interval arithmetic: the two y are not correlated
  CHECK(range_of(x * 4 + 3) == Range{3, 39});
  CHECK(range_of(maximum(x, y)) == Range{0, 9});
  CHECK(range_of(maximum(y, -2)) == Range{-2, 3});
  // Truncating division and C remainder.
  CHECK(range_of(x / 4) == Range{0, 2});
  CHECK(range_of(var("ar_m", -9, 9) / 4) == Range{-2, 2});
  CHECK(range_of(x / n) == Range{0, 4});
  CHECK(range_of(x / -3) == Range{-3, 0});
  CHECK(range_of(var("ar_big", 0, 99) / y) == Range{-99, 99});  // divisor range contains 0
  CHECK(range_of(x % 4) == Range{0, 3});
  CHECK(range_of(x % 100) == Range{0, 9});
  CHECK(range_of(var("ar_s", -7, 5) % 4) == Range{-3, 3});
  CHECK(range_of(var("ar_t", -7, -1) % n) == Range{-4, 0});
  CHECK(range_of(x % y) == Range{0, 9});
}

TEST_CASE("ranges of comparisons, logic and shifts") {
  UOpPtr low = var("lg_low", 0, 4), high = var("lg_high", 5, 9), mid = var("lg_mid", 3, 6);
  CHECK(range_of(lt(low, high)) == Range{1, 1});
  CHECK(range_of(lt(high, low)) == Range{0, 0});
  CHECK(range_of(lt(low, mid)) == Range{0, 1});
  CHECK(range_of(ne(low, high)) == Range{1, 1});
  CHECK(range_of(eq(low, high)) == Range{0, 0});
  CHECK(range_of(eq(low, mid)) == Range{0, 1});
  CHECK(range_of(eq(const_int(dtypes::index, 3), const_int(dtypes::index, 3))) == Range{1, 1});
  CHECK(range_of(ne(const_int(dtypes::index, 3), const_int(dtypes::index, 3))) == Range{0, 0});
  // Comparisons of floats know nothing.
  CHECK(range_of(lt(const_float(dtypes::f32, 1.0), const_float(dtypes::f32, 2.0))) == Range{0, 1});

  UOpPtr a = var("lg_a", 0, 12), b = var("lg_b", 0, 5), negative = var("lg_neg", -1, 5);
  CHECK(range_of(a & b) == Range{0, 5});
  CHECK(range_of(a | b) == Range{0, 15});
  CHECK(range_of(a ^ b) == Range{0, 15});
  CHECK(range_of(negative & b) == full(dtypes::index));
  CHECK(range_of(var("lg_s", 1, 3) << var("lg_k", 0, 2)) == Range{1, 12});
  CHECK(range_of(var("lg_r", 8, 64) >> var("lg_k", 1, 3)) == Range{1, 32});
  CHECK(range_of(negative >> var("lg_k", 1, 3)) == full(dtypes::index));
  CHECK(range_of(var("lg_t", -3, 5) << 1) == full(dtypes::index));

  UOpPtr maybe = lt(low, mid), yes = lt(low, high), no = lt(high, low);
  CHECK(range_of(maybe & yes) == Range{0, 1});
  CHECK(range_of(no & maybe) == Range{0, 0});
  CHECK(range_of(yes | maybe) == Range{1, 1});
  CHECK(range_of(yes ^ no) == Range{1, 1});
  CHECK(range_of(yes ^ maybe) == Range{0, 1});
  CHECK(range_of(logical_not(yes)) == Range{0, 0});
  CHECK(range_of(logical_not(maybe)) == Range{0, 1});
  // Bitwise not of a signed value is -x-1; of an unsigned value it may be anything.
  CHECK(range_of(logical_not(var("lg_n", -3, 5))) == Range{-6, 2});
  CHECK(range_of(logical_not(var("lg_u", 3, 5, dtypes::u8))) == full(dtypes::u8));
}

TEST_CASE("ranges of WHERE and CAST") {
  UOpPtr x = var("wc_x", 0, 9);
  CHECK(range_of(where(lt(x, 5), x, 20)) == Range{0, 20});
  CHECK(range_of(where(lt(x, 5), x + 30, var("wc_y", -4, 2))) == Range{-4, 39});
  // A decided condition picks its branch's range.
  CHECK(range_of(where(lt(x, 10), x, 20)) == Range{0, 9});
  CHECK(range_of(where(lt(x, 0), x, var("wc_z", 40, 50))) == Range{40, 50});

  UOpPtr wide = var("wc_w", 0, 300, dtypes::i32), narrow = var("wc_n", 0, 200, dtypes::i32);
  CHECK(range_of(cast(narrow, dtypes::u8)) == Range{0, 200});
  CHECK(range_of(cast(wide, dtypes::u8)) == full(dtypes::u8));  // 256..300 wrap
  CHECK(range_of(cast(var("wc_neg", -1, 1, dtypes::i32), dtypes::u16)) == full(dtypes::u16));
  CHECK(range_of(cast(var("wc_small", -5, 5, dtypes::i32), dtypes::i8)) == Range{-5, 5});
  CHECK(range_of(cast(var("wc_b", -1, 1, dtypes::i32), dtypes::bool_)) == Range{0, 1});
  CHECK(range_of(cast(var("wc_p", 1, 5, dtypes::i32), dtypes::bool_)) == Range{1, 1});
  CHECK(range_of(cast(var("wc_q", -5, -1, dtypes::i32), dtypes::bool_)) == Range{1, 1});
  CHECK(range_of(cast(var("wc_0", 0, 0, dtypes::i32), dtypes::bool_)) == Range{0, 0});
  CHECK(range_of(cast(lt(x, 5), dtypes::i32)) == Range{0, 1});
  CHECK(range_of(cast(const_float(dtypes::f32, 2.5), dtypes::i32)) == full(dtypes::i32));
  CHECK(range_of(cast(x, dtypes::f32)) == Range{int128_min, int128_max});
}

TEST_CASE("ranges of vector and pass-through ops, and of ops with no integer range") {
  UOpPtr a = var("vp_a", 0, 3), b = var("vp_b", 10, 12);
  UOpPtr vector = UOp::make(Ops::VECTORIZE, dtypes::index.vec(2), {a, b});
  CHECK(range_of(vector) == Range{0, 12});
  CHECK(range_of(UOp::make(Ops::GEP, dtypes::index, {vector}, std::vector<int64_t>{1})) == Range{0, 12});
  CHECK(range_of(UOp::make(Ops::NOOP, dtypes::index, {b})) == Range{10, 12});
  // A LOAD can return anything of its type.
  UOpPtr buffer = UOp::make(Ops::DEFINE_GLOBAL, dtypes::i8.ptr(), {}, int64_t{0});
  UOpPtr load = UOp::make(Ops::LOAD, dtypes::i8, {UOp::make(Ops::INDEX, dtypes::i8.ptr(), {buffer, a})});
  CHECK(range_of(load) == full(dtypes::i8));
  CHECK(range_of(load + const_int(dtypes::i8, 1)) == full(dtypes::i8));
  CHECK(range_of(const_float(dtypes::f32, 1.0)) == Range{int128_min, int128_max});
}

TEST_CASE("fixed-width overflow widens to the whole type; index does not wrap") {
  CHECK(range_of(var("ov_a", 100, 110, dtypes::i8) + var("ov_b", 10, 17, dtypes::i8)) == Range{110, 127});
  CHECK(range_of(var("ov_a", 100, 110, dtypes::i8) + var("ov_c", 10, 18, dtypes::i8)) == full(dtypes::i8));
  CHECK(range_of(var("ov_u", 0, 10, dtypes::u8) - var("ov_v", 5, 6, dtypes::u8)) == full(dtypes::u8));
  CHECK(range_of(var("ov_u", 0, 10, dtypes::u8) - var("ov_w", 0, 0, dtypes::u8)) == Range{0, 10});
  CHECK(range_of(-var("ov_n", -128, -120, dtypes::i8)) == full(dtypes::i8));
  CHECK(range_of(-var("ov_m", -127, -120, dtypes::i8)) == Range{120, 127});
  CHECK(range_of(var("ov_p", 16, 20, dtypes::i8) * var("ov_q", 8, 9, dtypes::i8)) == full(dtypes::i8));
  CHECK(range_of(var("ov_s", 64, 65, dtypes::u8) << const_int(dtypes::u8, 2)) == full(dtypes::u8));
  CHECK(range_of(var("ov_d", -128, -100, dtypes::i8) / const_int(dtypes::i8, -1)) == full(dtypes::i8));
  int64_t i32_max = std::numeric_limits<int32_t>::max();
  CHECK(range_of(var("ov_i", i32_max - 3, i32_max, dtypes::i32) + const_int(dtypes::i32, 3)) == full(dtypes::i32));
  // index is the mathematical integers inside int64: no wrap, exact ranges up to int64's limits.
  int64_t i64_max = std::numeric_limits<int64_t>::max();
  CHECK(range_of(var("ov_x", 0, i64_max / 2) * 2) == Range{0, i64_max - 1});
  CHECK(range_of(var("ov_x", 0, i64_max / 2) * 3) == full(dtypes::index));
}

// --- brute-force soundness -------------------------------------------------------------------------

struct Interval64 {
  int64_t min, max;
};

// Small random intervals inside the type's range, half of them touching one of its ends so that
// wrap-around is exercised. index stays near zero (its values are assumed to fit in int64).
class IntervalSource {
 public:
  explicit IntervalSource(uint32_t seed) : random_(seed) {}
  Interval64 next(DType dtype, int64_t max_width = 7) {
    int64_t width = uniform(0, max_width);
    int64_t low, high;
    if (dtype.is_index()) {
      low = -24, high = 24;
    } else if (dtype.is_bool()) {
      low = 0, high = 1;
      width = std::min<int64_t>(width, 1);
    } else {
      low = static_cast<int64_t>(min_value(dtype)), high = static_cast<int64_t>(max_value(dtype));
    }
    int64_t start;
    switch (dtype.is_index() ? 2 : uniform(0, 3)) {
      case 0: start = low; break;                                // at the bottom of the type
      case 1: start = high - width; break;                       // at the top
      default: start = uniform(std::max(low, int64_t{-12}), std::min(high - width, int64_t{12}));  // near 0
    }
    if (uniform(0, 4) == 0 && !dtype.is_index() && !dtype.is_bool()) start = uniform(low, high - width);
    return {start, start + width};
  }
  Interval64 shift_amount(DType dtype) {
    // Amounts run past the bit width (undefined: evaluate declines them). index stays below 40 so
    // that the shifted values fit in int64, as index values are assumed to.
    int64_t bits = dtype.is_index() ? 40 : dtype.scalar_bytes() * 8;
    int64_t start = uniform(dtype.is_unsigned() ? 0 : -2, bits);
    return {start, start + uniform(0, 3)};
  }
  int64_t uniform(int64_t low, int64_t high) { return std::uniform_int_distribution<int64_t>(low, high)(random_); }

 private:
  std::mt19937 random_;
};

// An operand over `interval`: a constant when it holds one value (half the time), else a variable.
UOpPtr operand(const std::string& name, DType dtype, Interval64 interval, IntervalSource& source) {
  if (interval.min == interval.max && source.uniform(0, 1) == 0) return const_int(dtype, interval.min);
  return variable(name, interval.min, interval.max, dtype);
}

struct Violation {
  std::string text;
  int count = 0;
  int checked = 0;
};

// Every recorded value lay in its node's range, and enough values were checked to mean something.
void check_no_violation(const Violation& violation) {
  INFO(violation.count, " of ", violation.checked, " values outside the range; first: ", violation.text);
  CHECK(violation.count == 0);
  CHECK(violation.checked > 1000);
}

void record(Violation& violation, const UOpPtr& node, const ScalarValue& value, const std::string& inputs) {
  ++violation.checked;
  if (value.integer >= node->vmin() && value.integer <= node->vmax()) return;
  if (violation.count++ == 0)
    violation.text = std::string(op_name(node->op())) + " " + node->dtype().name() + " with " + inputs + " gave " +
                     to_string(value.integer) + ", outside [" + to_string(node->vmin()) + ", " +
                     to_string(node->vmax()) + "]";
}

std::string show(const char* name, int64_t value, Interval64 range) {
  return std::string(name) + "=" + std::to_string(value) + " in [" + std::to_string(range.min) + ", " +
         std::to_string(range.max) + "] ";
}

void check_binary_op(Ops op, DType dtype, int trials, uint32_t seed) {
  IntervalSource source(seed);
  Violation violation;
  bool shift = op == Ops::SHL || op == Ops::SHR;
  for (int trial = 0; trial < trials; ++trial) {
    Interval64 left = source.next(dtype), right = shift ? source.shift_amount(dtype) : source.next(dtype);
    UOpPtr a = operand("a", dtype, left, source), b = operand("b", dtype, right, source);
    UOpPtr node = alu(op, a, b);
    for (int64_t x = left.min; x <= left.max; ++x)
      for (int64_t y = right.min; y <= right.max; ++y) {
        std::optional<ScalarValue> value = evaluate(node, {{"a", x}, {"b", y}});
        if (!value) continue;  // undefined (division by zero, shift out of range): no claim to check
        record(violation, node, *value, show("a", x, left) + show("b", y, right));
      }
  }
  INFO(op_name(op), " on ", dtype.name(), ": ", violation.count, " of ", violation.checked,
       " values outside the range; first: ", violation.text);
  CHECK(violation.count == 0);
  // Make sure the trials actually produced values to check.
  CHECK(violation.checked > trials);
}

TEST_CASE("brute force: every binary op's range contains every value it computes") {
  const Ops ops[] = {Ops::ADD, Ops::SUB,   Ops::MUL,   Ops::IDIV,  Ops::MOD, Ops::MAX, Ops::CMPLT,
                     Ops::CMPNE, Ops::CMPEQ, Ops::AND, Ops::OR, Ops::XOR, Ops::SHL, Ops::SHR};
  const DType types[] = {dtypes::index, dtypes::i8, dtypes::u8, dtypes::i16, dtypes::i32, dtypes::u32};
  uint32_t seed = 1;
  for (Ops op : ops)
    for (DType dtype : types) check_binary_op(op, dtype, 120, seed++);
  // Logical forms on bool.
  for (Ops op : {Ops::AND, Ops::OR, Ops::XOR, Ops::CMPNE, Ops::CMPEQ, Ops::CMPLT, Ops::MAX})
    check_binary_op(op, dtypes::bool_, 40, seed++);
}

TEST_CASE("brute force: unary ops and casts") {
  IntervalSource source(99);
  Violation violation;
  const DType types[] = {dtypes::index, dtypes::i8, dtypes::u8, dtypes::i16, dtypes::i32, dtypes::u32, dtypes::bool_};
  for (DType dtype : types) {
    for (int trial = 0; trial < 150; ++trial) {
      Interval64 interval = source.next(dtype, 12);
      UOpPtr a = operand("a", dtype, interval, source);
      std::vector<UOpPtr> nodes = {logical_not(a)};
      if (!dtype.is_bool()) nodes.push_back(-a);
      for (DType target : types) nodes.push_back(cast(a, target));
      for (const UOpPtr& node : nodes)
        for (int64_t x = interval.min; x <= interval.max; ++x)
          if (std::optional<ScalarValue> value = evaluate(node, {{"a", x}}))
            record(violation, node, *value, show("a", x, interval));
    }
  }
  check_no_violation(violation);
}

TEST_CASE("brute force: WHERE") {
  IntervalSource source(7);
  Violation violation;
  for (DType dtype : {dtypes::index, dtypes::i8, dtypes::u8}) {
    for (int trial = 0; trial < 150; ++trial) {
      Interval64 condition = source.next(dtypes::bool_), left = source.next(dtype), right = source.next(dtype);
      UOpPtr node = where(operand("c", dtypes::bool_, condition, source), operand("a", dtype, left, source),
                          operand("b", dtype, right, source));
      for (int64_t c = condition.min; c <= condition.max; ++c)
        for (int64_t x = left.min; x <= left.max; ++x)
          for (int64_t y = right.min; y <= right.max; ++y)
            if (std::optional<ScalarValue> value = evaluate(node, {{"c", c}, {"a", x}, {"b", y}}))
              record(violation, node, *value, show("c", c, condition) + show("a", x, left) + show("b", y, right));
    }
  }
  check_no_violation(violation);
}

// Ranges compose: random expression trees over two variables, every subexpression checked at every
// point of the variables' box.
TEST_CASE("brute force: random expression trees") {
  IntervalSource source(2024);
  Violation violation;
  const Ops ops[] = {Ops::ADD, Ops::SUB, Ops::MUL, Ops::IDIV, Ops::MOD, Ops::MAX, Ops::AND, Ops::OR, Ops::XOR};
  for (DType dtype : {dtypes::index, dtypes::i8}) {
    for (int trial = 0; trial < 60; ++trial) {
      Interval64 box_x = source.next(dtype, 9), box_y = source.next(dtype, 9);
      std::vector<UOpPtr> pool = {variable("x", box_x.min, box_x.max, dtype),
                                  variable("y", box_y.min, box_y.max, dtype),
                                  const_int(dtype, source.uniform(-5, 5) + (dtype.is_index() ? 0 : 5))};
      for (int i = 0; i < 8; ++i) {
        Ops op = ops[source.uniform(0, std::size(ops) - 1)];
        const UOpPtr& a = pool[static_cast<size_t>(source.uniform(0, static_cast<int64_t>(pool.size()) - 1))];
        const UOpPtr& b = pool[static_cast<size_t>(source.uniform(0, static_cast<int64_t>(pool.size()) - 1))];
        // Products of products would leave int64 for index, whose values are assumed to fit.
        auto large = [](const UOpPtr& node) { return node->vmax() > 100'000 || node->vmin() < -100'000; };
        if (op == Ops::MUL && (large(a) || large(b))) op = Ops::ADD;
        pool.push_back(source.uniform(0, 5) == 0 ? where(lt(a, b), a, b) : alu(op, a, b));
      }
      for (const UOpPtr& node : pool)
        for (int64_t x = box_x.min; x <= box_x.max; ++x)
          for (int64_t y = box_y.min; y <= box_y.max; ++y)
            if (std::optional<ScalarValue> value = evaluate(node, {{"x", x}, {"y", y}}))
              record(violation, node, *value, show("x", x, box_x) + show("y", y, box_y));
    }
  }
  check_no_violation(violation);
}

TEST_CASE("full_range") {
  CHECK(full_range(dtypes::i8).min == -128);
  CHECK(full_range(dtypes::i8).max == 127);
  CHECK(full_range(dtypes::i32.vec(4)).max == std::numeric_limits<int32_t>::max());
  CHECK(full_range(dtypes::index).min == std::numeric_limits<int64_t>::min());
  CHECK(full_range(dtypes::bool_).max == 1);
  CHECK(full_range(dtypes::f32).min == int128_min);
  CHECK(full_range(dtypes::i32.ptr()).max == int128_max);
}

}  // namespace
}  // namespace kiln
