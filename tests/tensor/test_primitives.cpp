// The Tensor handle itself: realize semantics, sharing between outputs, errors a user can cause,
// empty and large tensors. Op-by-op parity lives in the other files of this folder.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <numeric>

#include "kiln/kiln.hpp"
#include "tensor_test_helpers.h"

namespace kiln {
namespace {

using test::error_of;

std::vector<float> iota_floats(size_t count, float start = 0.0f) {
  std::vector<float> values(count);
  std::iota(values.begin(), values.end(), start);
  return values;
}


TEST_SUITE("tensor") {

TEST_CASE("realize computes once and leaves other handles lazy but equal") {
  Tensor a = Tensor::from_vector(iota_floats(6), {2, 3});
  Tensor lazy = a * 2.0 + 1.0;
  Tensor copy = lazy;
  lazy.realize();
  CHECK(lazy.to_vector<float>() == std::vector<float>{1, 3, 5, 7, 9, 11});
  CHECK(copy.to_vector<float>() == lazy.to_vector<float>());
  lazy.realize();  // a realized tensor is not computed again
  CHECK(lazy.shape() == Shape{2, 3});
}

TEST_CASE("realize_all computes outputs that share work in one schedule") {
  Tensor a = Tensor::from_vector(iota_floats(8), {8});
  Tensor total = a.sum();
  Tensor first = total * 2.0, second = total - a;
  Tensor::realize_all({&first, &second});
  CHECK(first.item() == 56.0);
  CHECK(second.to_vector<float>() == std::vector<float>{28, 27, 26, 25, 24, 23, 22, 21});
}

TEST_CASE("inputs stay alive as long as a graph reads them") {
  Tensor result;
  {
    Tensor a = Tensor::from_vector(iota_floats(4, 1.0f), {4});
    result = a * a;
  }
  CHECK(result.to_vector<float>() == std::vector<float>{1, 4, 9, 16});
}

TEST_CASE("zero-sized tensors: no kernel runs, reductions give the identity") {
  Tensor empty = Tensor::from_data(nullptr, {3, 0}, ScalarType::Float32);
  CHECK((empty + 1.0).to_vector<float>().empty());
  CHECK(empty.sum({1}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(empty.prod({1}).to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK(empty.sum().item() == 0.0);
}

TEST_CASE("a large elementwise kernel runs across threads and matches element by element") {
  const size_t count = 3'000'017;  // not a multiple of any chunk size
  std::vector<float> values = iota_floats(count);
  Tensor a = Tensor::from_vector(values, {static_cast<int64_t>(count)});
  std::vector<float> got = (a * 0.5 - 3.0).to_vector<float>();
  REQUIRE(got.size() == count);
  for (size_t i = 0; i < count; ++i) REQUIRE(got[i] == values[i] * 0.5f - 3.0f);
  CHECK(a.cast(ScalarType::Float64).sum().item() == doctest::Approx(static_cast<double>(count) * (count - 1) / 2));
}

TEST_CASE("every dtype round-trips through a kernel") {
  for (ScalarType type : {ScalarType::Bool, ScalarType::Int8, ScalarType::Int16, ScalarType::Int32, ScalarType::Int64,
                          ScalarType::UInt8, ScalarType::UInt16, ScalarType::UInt32, ScalarType::UInt64,
                          ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64}) {
    CAPTURE(scalar_type_name(type));
    std::vector<unsigned char> bytes(static_cast<size_t>(12 * scalar_type_size(type)));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 37 % 64);
    if (type == ScalarType::Bool)
      for (auto& b : bytes) b &= 1;
    Tensor t = Tensor::from_data(bytes.data(), {3, 4}, type);
    // A transpose forces a real kernel (a strided read) rather than a copy of the buffer.
    Tensor back = t.permute({1, 0}).permute({1, 0}) + Tensor::zeros({1}, type);
    if (type == ScalarType::Bool) back = t.permute({1, 0}).permute({1, 0}).logical_not().logical_not();
    std::vector<unsigned char> got(bytes.size());
    back.copy_to(got.data(), got.size());
    CHECK(got == bytes);
  }
}

TEST_CASE("errors name the operation and the shapes") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  CHECK(error_of([&] { (void)(a + b); }).find("add: shapes (2, 3) and (4,) do not broadcast") != std::string::npos);
  CHECK(error_of([&] { (void)a.reshape({4, 2}); }).find("reshape: (2, 3) has 6 elements") != std::string::npos);
  CHECK(error_of([&] { (void)a.sum({2}); }).find("sum: axis 2 is out of range") != std::string::npos);
  CHECK(error_of([&] { (void)a.permute({0, 0}); }).find("appears twice") != std::string::npos);
  CHECK(error_of([&] { (void)a.expand({3, 3}); }).find("cannot broadcast (2, 3) to (3, 3)") != std::string::npos);
  CHECK(error_of([&] { (void)Tensor().sum(); }).find("empty") != std::string::npos);
  CHECK(error_of([&] { (void)Tensor::from_data(nullptr, {2}, ScalarType::Float32); }).find("NULL") != std::string::npos);
  float small[2];
  CHECK(error_of([&] { a.copy_to(small, sizeof(small)); }).find("holds 24 bytes") != std::string::npos);
  CHECK(error_of([&] { (void)a.item(); }).find("6 elements") != std::string::npos);
  CHECK(error_of([&] { (void)a.bitcast(ScalarType::Float64); }).find("differ in size") != std::string::npos);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kiln
