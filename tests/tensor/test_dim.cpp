// Dim (src/tensor/dim.h): known dims stay integers, symbolic ones simplify, bounds come from the
// variables' ranges, and asking a symbolic dim for a fixed size names it.
#include <doctest/doctest.h>

#include "ir/build.h"
#include "support/error.h"
#include "tensor/dim.h"

using namespace kiln;

TEST_CASE("known dims are integers, with overflow and division by zero refused") {
  Dim a = 6, b = 4;
  CHECK((a + b).value() == 10);
  CHECK((a - b).value() == 2);
  CHECK((a * b).value() == 24);
  CHECK((a / b).value() == 1);
  CHECK((a % b).value() == 2);
  CHECK(max(a, b).value() == 6);
  CHECK((a * b).is_known());
  CHECK(Dim(const_int(dtypes::index, 5)).is_known());  // a constant expression is a known dim
  CHECK(Dim(const_int(dtypes::index, 5)) == Dim(5));
  CHECK_THROWS_AS(Dim(INT64_MAX) + Dim(1), UserError);
  CHECK_THROWS_AS(Dim(INT64_MAX / 2 + 1) * Dim(2), UserError);
  CHECK_THROWS_AS(Dim(3) / Dim(0), UserError);
}

TEST_CASE("symbolic dims simplify, compare structurally and know their bounds") {
  Dim sequence(variable("sequence", 1, 512));
  Dim batch(variable("batch", 1, 32));
  CHECK(!sequence.is_known());
  CHECK((sequence + 0) == sequence);
  CHECK((sequence * 1) == sequence);
  CHECK(((sequence + 3) - 3) == sequence);
  CHECK(((sequence * 4) / 4) == sequence);
  CHECK(((sequence * 4) % 4).is_known());
  CHECK(((sequence * 4) % 4).value() == 0);
  CHECK(!(sequence == batch));
  CHECK(!(sequence == Dim(512)));
  CHECK((batch * sequence).min() == 1);
  CHECK((batch * sequence).max() == 32 * 512);
  CHECK((sequence + 2).min() == 3);
  CHECK(max(sequence, Dim(600)).value() == 600);  // every allowed sequence is below 600
  CHECK((sequence - sequence).value() == 0);
}

TEST_CASE("a symbolic dim asked for a fixed size is an error naming it") {
  Dim sequence(variable("sequence", 1, 512));
  CHECK_THROWS_WITH_AS((sequence * 2).value("Conv's kernel size"),
                       doctest::Contains("unsupported: the symbolic dimension"), UserError);
  CHECK_THROWS_WITH_AS((sequence * 2).value("Conv's kernel size"), doctest::Contains("sequence"), UserError);
  CHECK_THROWS_WITH_AS((sequence * 2).value("Conv's kernel size"), doctest::Contains("where Conv's kernel size needs a fixed size"),
                       UserError);
}
