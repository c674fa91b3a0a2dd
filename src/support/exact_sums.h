// Error-free sums: a + b as an unevaluated pair hi + lo, with hi the rounded sum and lo its exact
// rounding error. Written once for any value type with + and - (a UOp graph in the transcendental
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

}  // namespace kiln
