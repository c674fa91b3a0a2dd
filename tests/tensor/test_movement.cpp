// Parity tests of the movement composites (transpose … cumsum) against plain reference loops, for
// every dtype where the op is pure data movement (exact), on contiguous and non-contiguous inputs,
// with zero-sized and size-1 axes, plus kernel counts (views must fuse) and error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "nn_test_helpers.h"

namespace kiln {
namespace {

using nn_test::all_types;
using nn_test::Array;
using nn_test::as_type;
using nn_test::check_close;
using nn_test::check_error;
using nn_test::check_exact;
using nn_test::for_each_index;
using nn_test::kernel_count;
using nn_test::random_array;
using nn_test::random_integers;
using nn_test::to_permuted_view;
using nn_test::to_sliced_view;
using nn_test::to_tensor;

// ---- references ----

Array ref_permute(const Array& a, const std::vector<int64_t>& order) {
  Shape shape;
  for (int64_t axis : order) shape.push_back(a.shape[static_cast<size_t>(axis)]);
  Array out(shape);
  for_each_index(shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> source(index.size());
    for (size_t i = 0; i < order.size(); ++i) source[static_cast<size_t>(order[i])] = index[i];
    out.at(index) = a.at(source);
  });
  return out;
}

// numpy.pad with crop for negative pads. Reflect is periodic with period 2(n-1); edge clamps.
Array ref_pad(const Array& a, const std::vector<int64_t>& pads, PadMode mode, double value) {
  Shape shape = a.shape;
  std::vector<int64_t> before(shape.size(), 0);
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    before[i] = pads[2 * i];
    shape[i] += pads[2 * i] + pads[2 * i + 1];
  }
  // Cropping first, as the implementation documents: positions are relative to the cropped array.
  Array out(shape);
  for_each_index(shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> source(index.size());
    bool inside = true;
    for (size_t i = 0; i < index.size(); ++i) {
      int64_t n = a.shape[i];
      int64_t crop_lo = i < pads.size() / 2 ? std::max<int64_t>(0, -pads[2 * i]) : 0;
      int64_t crop_hi = i < pads.size() / 2 ? std::max<int64_t>(0, -pads[2 * i + 1]) : 0;
      int64_t kept = n - crop_lo - crop_hi;
      int64_t p = index[i] - std::max<int64_t>(0, before[i]);  // position in the cropped array
      if (p < 0 || p >= kept) {
        if (mode == PadMode::Constant) {
          inside = false;
        } else if (mode == PadMode::Edge) {
          p = std::clamp<int64_t>(p, 0, kept - 1);
        } else if (kept == 1) {
          p = 0;
        } else {
          int64_t period = 2 * (kept - 1);
          p = ((p % period) + period) % period;
          if (p >= kept) p = period - p;
        }
      }
      source[i] = p + crop_lo;
    }
    out.at(index) = inside ? a.at(source) : value;
  });
  return out;
}

// Python's slice semantics, written out as the range of taken indices.
Array ref_slice(const Array& a, int64_t axis, int64_t start, int64_t stop, int64_t step) {
  int64_t n = a.shape[static_cast<size_t>(axis)];
  std::vector<int64_t> taken;
  auto adjust = [&](int64_t v, bool positive) {
    if (v < 0) v += n;
    if (positive) return std::clamp<int64_t>(v, 0, n);
    return std::clamp<int64_t>(v, -1, n - 1);
  };
  int64_t first = adjust(start, step > 0), last = adjust(stop, step > 0);
  for (int64_t i = first; step > 0 ? i < last : i > last; i += step) taken.push_back(i);
  Shape shape = a.shape;
  shape[static_cast<size_t>(axis)] = static_cast<int64_t>(taken.size());
  Array out(shape);
  for_each_index(shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> source = index;
    source[static_cast<size_t>(axis)] = taken[static_cast<size_t>(index[static_cast<size_t>(axis)])];
    out.at(index) = a.at(source);
  });
  return out;
}

Array ref_concat(const std::vector<Array>& parts, int64_t axis) {
  Shape shape = parts[0].shape;
  shape[static_cast<size_t>(axis)] = 0;
  for (const Array& p : parts) shape[static_cast<size_t>(axis)] += p.shape[static_cast<size_t>(axis)];
  Array out(shape);
  int64_t offset = 0;
  for (const Array& p : parts) {
    for_each_index(p.shape, [&](const std::vector<int64_t>& index) {
      std::vector<int64_t> target = index;
      target[static_cast<size_t>(axis)] += offset;
      out.at(target) = p.at(index);
    });
    offset += p.shape[static_cast<size_t>(axis)];
  }
  return out;
}

int64_t wrap(double index, int64_t n) { return index < 0 ? static_cast<int64_t>(index) + n : static_cast<int64_t>(index); }

Array ref_gather(const Array& a, int64_t axis, const Array& indices) {
  Array out(indices.shape);
  for_each_index(indices.shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> source = index;
    source[static_cast<size_t>(axis)] = wrap(indices.at(index), a.shape[static_cast<size_t>(axis)]);
    out.at(index) = a.at(source);
  });
  return out;
}

Array ref_take(const Array& a, const Array& indices, int64_t axis) {
  auto ax = static_cast<size_t>(axis);
  Shape shape(a.shape.begin(), a.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), a.shape.begin() + axis + 1, a.shape.end());
  Array out(shape);
  for_each_index(shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> source(index.begin(), index.begin() + axis);
    std::vector<int64_t> at_index(index.begin() + axis, index.begin() + axis + static_cast<int64_t>(indices.shape.size()));
    source.push_back(wrap(indices.at(at_index), a.shape[ax]));
    source.insert(source.end(), index.begin() + axis + static_cast<int64_t>(indices.shape.size()), index.end());
    out.at(index) = a.at(source);
  });
  return out;
}

Array ref_cumsum(const Array& a, int64_t axis) {
  Array out = a;
  for_each_index(a.shape, [&](const std::vector<int64_t>& index) {
    if (index[static_cast<size_t>(axis)] == 0) return;
    std::vector<int64_t> previous = index;
    --previous[static_cast<size_t>(axis)];
    out.at(index) += out.at(previous);
  });
  return out;
}

// Non-negative small integers: valid in every dtype (bool turns them into 0/1).
Array data_for(const Shape& shape, uint64_t seed) { return random_integers(shape, seed, 0, 100); }

TEST_SUITE("tensor") {

TEST_CASE("transpose, squeeze, unsqueeze and flatten are views with the reference values") {
  Array a = random_array({2, 3, 1, 4}, 1);
  Tensor t = to_tensor(a);
  check_exact(t.transpose(), ref_permute(a, {0, 1, 3, 2}));
  check_exact(t.transpose(0, -2), ref_permute(a, {2, 1, 0, 3}));
  CHECK(t.squeeze().shape() == Shape{2, 3, 4});
  CHECK(t.squeeze({2}).shape() == Shape{2, 3, 4});
  CHECK(t.squeeze({-2}).shape() == Shape{2, 3, 4});
  CHECK(t.unsqueeze(0).shape() == Shape{1, 2, 3, 1, 4});
  CHECK(t.unsqueeze(-1).shape() == Shape{2, 3, 1, 4, 1});
  CHECK(t.unsqueeze(4).shape() == Shape{2, 3, 1, 4, 1});
  CHECK(t.flatten().shape() == Shape{24});
  CHECK(t.flatten(1).shape() == Shape{2, 12});
  CHECK(t.flatten(1, 2).shape() == Shape{2, 3, 4});
  CHECK(t.flatten(0, -2).shape() == Shape{6, 4});
  CHECK(Tensor::scalar(3).flatten().shape() == Shape{1});
  CHECK(Tensor::zeros({0, 3}).flatten().shape() == Shape{0});
  // A transposed non-contiguous input flattens by its logical order.
  Array b = random_array({3, 5}, 2);
  Array bt = ref_permute(b, {1, 0});
  Array flat = bt;
  flat.shape = {15};
  check_exact(to_tensor(b).transpose().flatten(), flat);
  CHECK(kernel_count(to_tensor(b).transpose().flatten().unsqueeze(0)) == 1);
  // Views move data only: exact for every dtype.
  for (ScalarType type : all_types()) {
    CAPTURE(scalar_type_name(type));
    Array d = as_type(data_for({2, 1, 3}, 35), type);
    Array flat_t = ref_permute(d, {2, 1, 0});
    flat_t.shape = {6};
    check_exact(to_tensor(d, type).transpose(0, 2).flatten(), flat_t);
    check_exact(to_sliced_view(d, type).squeeze().unsqueeze(1).flatten(0, 1), [&] { Array r = d; r.shape = {2, 3}; return r; }());
  }
  check_error([&] { (void)t.squeeze({0}); }, "squeeze: axis 0");
  check_error([&] { (void)t.transpose(0, 4); }, "transpose: axis 4");
  check_error([&] { (void)t.flatten(2, 1); }, "flatten");
  check_error([&] { (void)t.unsqueeze(5); }, "unsqueeze");
}

TEST_CASE("pad: constant (any value, negative pads crop), reflect and edge, every dtype") {
  Shape shape{3, 4};
  for (ScalarType type : all_types()) {
    CAPTURE(scalar_type_name(type));
    Array a = as_type(data_for(shape, 3), type);
    Tensor t = to_tensor(a, type);
    double fill = type == ScalarType::Bool ? 1.0 : 7.0;
    check_exact(t.pad({1, 2, 0, 3}), ref_pad(a, {1, 2, 0, 3}, PadMode::Constant, 0.0));
    check_exact(t.pad({1, 2, 2, 1}, PadMode::Constant, fill), ref_pad(a, {1, 2, 2, 1}, PadMode::Constant, fill));
    check_exact(t.pad({-1, 2, 1, -2}, PadMode::Constant, fill), ref_pad(a, {-1, 2, 1, -2}, PadMode::Constant, fill));
    check_exact(t.pad({2, 1, 3, 2}, PadMode::Reflect), ref_pad(a, {2, 1, 3, 2}, PadMode::Reflect, 0.0));
    check_exact(t.pad({2, 2, 1, 3}, PadMode::Edge), ref_pad(a, {2, 2, 1, 3}, PadMode::Edge, 0.0));
  }
}

TEST_CASE("pad: large reflect pads, size-1 and zero-size axes, non-contiguous input, one kernel") {
  Array a = random_array({2, 3, 5}, 4);
  // Pads beyond the axis size reflect periodically (numpy): the tiled-period path.
  check_exact(to_tensor(a).pad({0, 0, 7, 9, 4, 13}, PadMode::Reflect),
              ref_pad(a, {0, 0, 7, 9, 4, 13}, PadMode::Reflect, 0.0));
  check_exact(to_permuted_view(a).pad({1, 1, 2, 0, 0, 4}, PadMode::Reflect),
              ref_pad(a, {1, 1, 2, 0, 0, 4}, PadMode::Reflect, 0.0));
  check_exact(to_sliced_view(a).pad({1, 1, 2, 0, 0, 4}, PadMode::Edge), ref_pad(a, {1, 1, 2, 0, 0, 4}, PadMode::Edge, 0.0));
  check_exact(to_permuted_view(a).pad({0, 1, -1, 2, 3, -2}, PadMode::Constant, -2.5),
              ref_pad(a, {0, 1, -1, 2, 3, -2}, PadMode::Constant, -2.5));
  Array one = random_array({1, 4}, 5);
  check_exact(to_tensor(one).pad({3, 2}, PadMode::Reflect), ref_pad(one, {3, 2}, PadMode::Reflect, 0.0));
  check_exact(to_tensor(one).pad({3, 2, 1, 1}, PadMode::Edge), ref_pad(one, {3, 2, 1, 1}, PadMode::Edge, 0.0));
  Array empty({0, 3});
  check_exact(to_tensor(empty).pad({1, 1, 0, 0}, PadMode::Constant, 4.0), ref_pad(empty, {1, 1, 0, 0}, PadMode::Constant, 4.0));
  check_exact(to_tensor(empty).pad({0, 0, 1, 2}, PadMode::Edge), ref_pad(empty, {0, 0, 1, 2}, PadMode::Edge, 0.0));
  // Padding of every mode is index arithmetic: one kernel, even after an elementwise op.
  Tensor x = to_tensor(a) * 2.0;
  CHECK(kernel_count(x.pad({0, 0, 2, 2, 2, 2}, PadMode::Constant, 1.0)) == 1);
  CHECK(kernel_count(x.pad({0, 0, 2, 2, 2, 2}, PadMode::Reflect)) == 1);
  CHECK(kernel_count(x.pad({0, 0, 2, 2, 2, 2}, PadMode::Edge)) == 1);
  check_error([&] { (void)to_tensor(empty).pad({1, 1, 0, 0}, PadMode::Reflect); }, "reflect padding of an empty axis");
  check_error([&] { (void)to_tensor(a).pad({1, 1, 1}); }, "pad: 3 pads");
  check_error([&] { (void)to_tensor(a).pad({-2, -2}); }, "crop more than");
}

TEST_CASE("slice: python semantics for every step sign, clamping and emptiness") {
  Array a = random_array({11, 3}, 6);
  Tensor t = to_tensor(a);
  const std::vector<std::array<int64_t, 3>> cases{
      {0, 11, 1},  {2, 9, 1},   {0, 11, 2},  {1, 11, 3},  {1, 10, 3},   {-4, 100, 2}, {-100, 5, 4}, {3, 3, 1},
      {8, 2, 1},   {10, 0, -1}, {10, -12, -1}, {9, 1, -3}, {-1, -100, -4}, {100, -100, -5}, {4, 4, -1}, {2, 8, 7},
      {0, 11, 11}, {0, 11, 20}, {5, 0, -20}, {-2, -9, -2}};
  for (auto [start, stop, step] : cases) {
    CAPTURE(start);
    CAPTURE(stop);
    CAPTURE(step);
    check_exact(t.slice(0, start, stop, step), ref_slice(a, 0, start, stop, step));
    check_exact(to_permuted_view(a).slice(0, start, stop, step), ref_slice(a, 0, start, stop, step));
  }
  check_exact(t.slice(-1, 0, 3, 2), ref_slice(a, 1, 0, 3, 2));
  check_exact(t.slice(1, -1, -4, -1), ref_slice(a, 1, -1, -4, -1));
  // A strided slice is a view: it fuses with what reads it.
  CHECK(kernel_count((t * 3.0).slice(0, 1, 10, 3).slice(1, 2, -10, -2) + 1.0) == 1);
  check_error([&] { (void)t.slice(0, 0, 5, 0); }, "slice: step must not be zero");
  check_error([&] { (void)t.slice(2, 0, 5); }, "slice: axis 2");
}

TEST_CASE("slice: every dtype, and a size-1 / zero-size axis") {
  for (ScalarType type : all_types()) {
    CAPTURE(scalar_type_name(type));
    Array a = as_type(data_for({4, 7}, 7), type);
    check_exact(to_tensor(a, type).slice(1, 6, 0, -2), ref_slice(a, 1, 6, 0, -2));
    check_exact(to_sliced_view(a, type).slice(0, 0, 4, 3), ref_slice(a, 0, 0, 4, 3));
  }
  Array one = random_array({1, 5}, 8);
  check_exact(to_tensor(one).slice(0, 0, 1, 2), ref_slice(one, 0, 0, 1, 2));
  check_exact(to_tensor(one).slice(0, -1, -2, -1), ref_slice(one, 0, -1, -2, -1));
  Array empty({0, 5});
  check_exact(to_tensor(empty).slice(0, 0, 3, 2), ref_slice(empty, 0, 0, 3, 2));
  check_exact(to_tensor(empty).slice(1, 4, 0, -2), ref_slice(empty, 1, 4, 0, -2));
}

TEST_CASE("concat is one kernel for any number of inputs, every dtype, exact") {
  for (ScalarType type : all_types()) {
    CAPTURE(scalar_type_name(type));
    Array a = as_type(data_for({2, 3}, 9), type), b = as_type(data_for({2, 1}, 10), type),
          c = as_type(data_for({2, 4}, 11), type);
    Tensor out = Tensor::concat({to_tensor(a, type), to_tensor(b, type), to_tensor(c, type)}, 1);
    check_exact(out, ref_concat({a, b, c}, 1));
    CHECK(out.dtype() == type);
  }
  Array a = random_array({2, 3, 4}, 12), b = random_array({5, 3, 4}, 13), c = random_array({1, 3, 4}, 14);
  Array empty({0, 3, 4});
  Tensor out = Tensor::concat({to_permuted_view(a), to_tensor(empty), to_sliced_view(b), to_tensor(c) * 2.0}, 0);
  Array c2 = c;
  for (double& v : c2.values) v *= 2;
  check_exact(out, ref_concat({a, empty, b, c2}, 0));
  CHECK(kernel_count(out) == 1);
  check_exact(Tensor::concat({to_tensor(a), to_tensor(a)}, -1), ref_concat({a, a}, 2));
  // An expanded (broadcast) input.
  Array row = random_array({1, 3, 4}, 36), rows({3, 3, 4});
  for_each_index(rows.shape, [&](const std::vector<int64_t>& i) { rows.at(i) = row.at({0, i[1], i[2]}); });
  check_exact(Tensor::concat({to_tensor(row).expand({3, 3, 4}), to_tensor(a)}, 0), ref_concat({rows, a}, 0));
  // -0.0 keeps its sign (a where, not a sum of padded inputs).
  Tensor negative_zero = Tensor::concat({Tensor::full({1}, -0.0), Tensor::full({1}, 1.0)}, 0);
  CHECK(std::signbit(negative_zero.to_vector<float>()[0]));
  // Mixed dtypes promote.
  Tensor mixed = Tensor::concat({Tensor::ones({2}, ScalarType::Int16), Tensor::full({1}, 0.5)}, 0);
  CHECK(mixed.dtype() == ScalarType::Float32);
  CHECK(mixed.to_vector<float>() == std::vector<float>{1, 1, 0.5f});
  check_error([&] { (void)Tensor::concat({to_tensor(a), to_tensor(b)}, 1); }, "concat: shapes (2, 3, 4) and (5, 3, 4)");
  check_error([&] { (void)Tensor::concat({}, 0); }, "concat: no tensors");
}

TEST_CASE("stack and split") {
  Array a = random_array({3, 4}, 15), b = random_array({3, 4}, 16);
  for (int64_t axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    Tensor stacked = Tensor::stack({to_tensor(a), to_permuted_view(b)}, axis);
    int64_t ax = axis < 0 ? axis + 3 : axis;
    Array ea = a, eb = b;
    ea.shape.insert(ea.shape.begin() + ax, 1);
    eb.shape.insert(eb.shape.begin() + ax, 1);
    check_exact(stacked, ref_concat({ea, eb}, ax));
  }
  for (ScalarType type : {ScalarType::Bool, ScalarType::Int8, ScalarType::Float16}) {
    Array x = as_type(data_for({2, 2}, 17), type);
    Array ex = x;
    ex.shape = {1, 2, 2};
    check_exact(Tensor::stack({to_tensor(x, type), to_tensor(x, type)}, 0), ref_concat({ex, ex}, 0));
  }
  Array c = random_array({2, 9}, 18);
  std::vector<Tensor> parts = to_sliced_view(c).split({2, 0, 4, 3}, 1);
  REQUIRE(parts.size() == 4);
  check_exact(parts[0], ref_slice(c, 1, 0, 2, 1));
  check_exact(parts[1], ref_slice(c, 1, 2, 2, 1));
  check_exact(parts[2], ref_slice(c, 1, 2, 6, 1));
  check_exact(parts[3], ref_slice(c, 1, 6, 9, 1));
  check_error([&] { (void)to_tensor(c).split({2, 3}, 1); }, "split: sizes add up to 5");
  check_error([&] { (void)Tensor::stack({to_tensor(a), to_tensor(c)}, 0); }, "stack: shapes");
}

TEST_CASE("gather: torch semantics, negative indices, every dtype, one kernel") {
  Array a = random_array({4, 5, 3}, 19);
  Array indices = random_integers({4, 2, 3}, 20, -5, 5);  // axis 1 has 5 elements
  for (ScalarType index_type : {ScalarType::Int64, ScalarType::Int32}) {
    Tensor out = to_tensor(a).gather(1, to_tensor(indices, index_type));
    check_exact(out, ref_gather(a, 1, indices));
    CHECK(kernel_count(out) == 1);
  }
  Array axis0 = random_integers({2, 5, 3}, 21, -4, 4);
  check_exact(to_permuted_view(a).gather(0, to_tensor(axis0, ScalarType::Int32)), ref_gather(a, 0, axis0));
  // Indices smaller than the data on the other axes read that corner only.
  Array corner = random_integers({3, 2, 6}, 22, 0, 3);
  Array a_corner({3, 2, 3});
  for_each_index(a_corner.shape, [&](const std::vector<int64_t>& i) { a_corner.at(i) = a.at(i); });
  check_exact(to_tensor(a).gather(-1, to_tensor(corner, ScalarType::Int64)), ref_gather(a_corner, 2, corner));
  for (ScalarType type : all_types()) {
    CAPTURE(scalar_type_name(type));
    Array d = as_type(data_for({3, 6}, 23), type);
    Array idx = random_integers({3, 4}, 24, -6, 6);
    check_exact(to_tensor(d, type).gather(1, to_tensor(idx, ScalarType::Int64)), ref_gather(d, 1, idx));
  }
  // Expanded data and expanded indices.
  Array row = random_array({1, 5, 3}, 37), rows({4, 5, 3});
  for_each_index(rows.shape, [&](const std::vector<int64_t>& i) { rows.at(i) = row.at({0, i[1], i[2]}); });
  Array index_row = random_integers({1, 2, 3}, 38, -5, 5), index_rows({4, 2, 3});
  for_each_index(index_rows.shape, [&](const std::vector<int64_t>& i) { index_rows.at(i) = index_row.at({0, i[1], i[2]}); });
  check_exact(to_tensor(row).expand({4, 5, 3}).gather(1, to_tensor(index_row, ScalarType::Int64).expand({4, 2, 3})),
              ref_gather(rows, 1, index_rows));
  CHECK(to_tensor(a).gather(1, Tensor::zeros({4, 0, 3}, ScalarType::Int64)).shape() == Shape{4, 0, 3});
  check_error([&] { (void)to_tensor(a).gather(1, Tensor::zeros({4, 2}, ScalarType::Int64)); }, "gather: indices of shape (4, 2)");
  check_error([&] { (void)to_tensor(a).gather(1, Tensor::zeros({5, 2, 3}, ScalarType::Int64)); }, "exceed");
  check_error([&] { (void)to_tensor(a).gather(1, Tensor::zeros({4, 2, 3})); }, "gather: indices must be integers");
}

TEST_CASE("take: numpy semantics for index tensors of any rank") {
  Array a = random_array({3, 4, 2}, 25);
  Array vector_indices = random_integers({5}, 26, -4, 4);
  Array matrix_indices = random_integers({2, 3}, 27, -3, 3);
  Array scalar_index({}, -1.0);
  check_exact(to_tensor(a).take(to_tensor(vector_indices, ScalarType::Int64), 1), ref_take(a, vector_indices, 1));
  check_exact(to_sliced_view(a).take(to_tensor(matrix_indices, ScalarType::Int32), 0), ref_take(a, matrix_indices, 0));
  check_exact(to_tensor(a).take(to_tensor(scalar_index, ScalarType::Int64), -1), ref_take(a, scalar_index, 2));
  Array last_axis_indices = random_integers({2, 3}, 34, -2, 2);
  Tensor out = to_permuted_view(a).take(to_tensor(last_axis_indices, ScalarType::Int64), 2);
  check_exact(out, ref_take(a, last_axis_indices, 2));
  CHECK(out.shape() == Shape{3, 4, 2, 3});
  CHECK(kernel_count(out) == 1);
  for (ScalarType type : {ScalarType::Bool, ScalarType::UInt8, ScalarType::Int64, ScalarType::Float16, ScalarType::Float64}) {
    CAPTURE(scalar_type_name(type));
    Array d = as_type(data_for({6}, 28), type);
    check_exact(to_tensor(d, type).take(to_tensor(vector_indices, ScalarType::Int64), 0), ref_take(d, vector_indices, 0));
  }
  CHECK(to_tensor(a).take(Tensor::zeros({0}, ScalarType::Int64), 1).shape() == Shape{3, 0, 2});
  check_error([&] { (void)to_tensor(a).take(to_tensor(vector_indices, ScalarType::Float32), 0); }, "take: indices must be integers");
}

TEST_CASE("cumsum: short axes (one kernel), long axes (log-step scan), dtypes") {
  Array a = random_array({3, 7, 2}, 29);
  for (int64_t axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    Tensor out = to_permuted_view(a).cumsum(axis);
    // Sums of up to 7 multiples of 1/64 below 1 are exact in f32.
    check_exact(out, ref_cumsum(a, axis < 0 ? axis + 3 : axis));
  }
  CHECK(kernel_count(to_tensor(a).cumsum(1)) == 1);
  // The scan (axis > 64): per-element tolerance of an f32 sum of ±1 values; one kernel per
  // doubling of the summed span, so ⌈log2 n⌉ kernels of one add per element.
  for (auto [n, passes] : {std::pair<int64_t, int>{65, 7}, {513, 10}, {1000, 10}, {2500, 12}}) {
    CAPTURE(n);
    Array long_axis = random_array({2, n}, 30 + static_cast<uint64_t>(n));
    Tensor out = to_tensor(long_axis).cumsum(1);
    check_close(out, ref_cumsum(long_axis, 1), 1e-4, 1e-5);
    CHECK(kernel_count(out) == passes);
  }
  Array ints = random_integers({4, 600}, 31, -50, 50);
  Tensor int_sum = to_tensor(ints, ScalarType::Int32).cumsum(1);
  CHECK(int_sum.dtype() == ScalarType::Int32);
  check_exact(int_sum, ref_cumsum(ints, 1));
  Array flags = random_integers({9}, 32, 0, 2);
  Tensor counts = to_tensor(flags, ScalarType::Bool).cumsum(0);
  CHECK(counts.dtype() == ScalarType::Int64);
  check_exact(counts, ref_cumsum(flags, 0));
  Array halves = random_array({40}, 33);
  Tensor half_sum = to_tensor(halves, ScalarType::Float16).cumsum(0);
  CHECK(half_sum.dtype() == ScalarType::Float16);
  // f16: accumulated in f32, rounded once: half an f16 ulp of values below 16.
  check_close(half_sum, ref_cumsum(halves, 0), 4e-3, 1e-3);
  check_exact(to_tensor(Array({0, 3})).cumsum(0), Array({0, 3}));
  check_exact(to_tensor(Array({2, 1}, 3.0)).cumsum(1), Array({2, 1}, 3.0));
  check_error([&] { (void)to_tensor(a).cumsum(3); }, "cumsum: axis 3");
}

}  // TEST_SUITE

}  // namespace
}  // namespace kiln
