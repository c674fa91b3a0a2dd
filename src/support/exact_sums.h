// Error-free sums and products: a + b (or a * b) as an unevaluated pair hi + lo, with hi the
// rounded result and lo its exact rounding error. Written once for any value type with + and - (a UOp graph in the transcendental
// pass, a lazy Tensor in the Tensor math composites); exact under IEEE round-to-nearest as long as
// nothing reassociates or contracts the operations.
#pragma once

namespace kiln {

template <class Value>
struct ExactPair {
  Value hi, lo;
};

// hi + lo == a + b exactly, whatever the magnitudes (Knuth's TwoSum, six operations).
template <class Value>
ExactPair<Value> two_sum(const Value& a, const Value& b) {
  Value sum = a + b;
  Value b_part = sum - a;
  Value a_part = sum - b_part;
  return {sum, (a - a_part) + (b - b_part)};
}

// The same when |a| >= |b| (Dekker's Fast2Sum, three operations).
template <class Value>
ExactPair<Value> fast_two_sum(const Value& a, const Value& b) {
  Value sum = a + b;
  return {sum, b - (sum - a)};
}

// Veltkamp's split of a into hi + lo, halves short enough that products of halves are exact.
// `factor` is 2^s + 1 in a's type, s = half the significand: 4097 for f32, 134217729 for f64.
template <class Value>
ExactPair<Value> veltkamp_split(const Value& a, const Value& factor) {
  Value scaled = a * factor;
  Value hi = scaled - (scaled - a);
  return {hi, a - hi};
}

// hi + lo == a * b exactly with hi = fl(a * b) (Dekker's TwoProduct), barring overflow and
// underflow. Built without a fused multiply-add, which not every target promises.
template <class Value>
ExactPair<Value> two_product(const Value& a, const Value& b, const Value& split_factor) {
  Value product = a * b;
  ExactPair<Value> x = veltkamp_split(a, split_factor), y = veltkamp_split(b, split_factor);
  Value error = (((x.hi * y.hi - product) + x.hi * y.lo) + x.lo * y.hi) + x.lo * y.lo;
  return {product, error};
}

}  // namespace kiln
