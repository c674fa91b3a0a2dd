// match_strided_gather (src/codegen/llvm/strided_gather.h): which VECTORIZEs of loads the CPU
// renderer reads as one masked contiguous load plus a shuffle. What it renders is checked at run
// time by the Opt oracle (tests/opt), whose stride-2 pool and conv kernels take this path.
#include "codegen/llvm/strided_gather.h"

#include <functional>

#include "codegen_test_helpers.h"

namespace kiln {
namespace {

using testing::global;
using testing::idx;
using testing::index;
using testing::load;

UOpPtr lanes_at(const UOpPtr& buffer, const UOpPtr& base, const std::vector<int64_t>& offsets) {
  std::vector<UOpPtr> loads;
  for (int64_t offset : offsets) loads.push_back(load(index(buffer, base + idx(offset))));
  return UOp::make(Ops::VECTORIZE, loads.front()->dtype().vec(static_cast<int>(loads.size())), loads);
}

TEST_CASE("strided gathers: strides 2 to 4 in arithmetic progression from one base") {
  UOpPtr buffer = global(dtypes::f32, 1024, 0);
  UOpPtr base = range(64, 0) * idx(16);
  std::optional<StridedGather> two = match_strided_gather(*lanes_at(buffer, base, {0, 2, 4, 6, 8, 10, 12, 14}));
  REQUIRE(two);
  CHECK(two->stride == 2);
  CHECK(two->first == 0);
  CHECK(two->base == base);
  CHECK(two->loads.size() == 8);
  std::optional<StridedGather> four = match_strided_gather(*lanes_at(buffer, base, {3, 7, 11, 15}));
  REQUIRE(four);
  CHECK(four->stride == 4);
  CHECK(four->first == 3);
}

TEST_CASE("strided gathers: what is not one") {
  UOpPtr buffer = global(dtypes::f32, 1024, 0), other = global(dtypes::f32, 1024, 1);
  UOpPtr base = range(64, 0) * idx(16);
  CHECK_FALSE(match_strided_gather(*lanes_at(buffer, base, {0, 1, 2, 3})));     // contiguous: a vector load
  CHECK_FALSE(match_strided_gather(*lanes_at(buffer, base, {0, 5, 10, 15})));   // wider than max_gather_stride
  CHECK_FALSE(match_strided_gather(*lanes_at(buffer, base, {0, 2, 4, 7})));     // not a progression
  CHECK_FALSE(match_strided_gather(*lanes_at(buffer, base, {6, 4, 2, 0})));     // descending
  std::vector<UOpPtr> mixed{load(index(buffer, base)), load(index(other, base + idx(2)))};
  CHECK_FALSE(match_strided_gather(*UOp::make(Ops::VECTORIZE, dtypes::f32.vec(2), mixed)));  // two buffers
  UOpPtr base2 = range(64, 1) * idx(16);
  std::vector<UOpPtr> bases{load(index(buffer, base)), load(index(buffer, base2 + idx(2)))};
  CHECK_FALSE(match_strided_gather(*UOp::make(Ops::VECTORIZE, dtypes::f32.vec(2), bases)));  // two bases
  UOpPtr bools = global(dtypes::bool_, 1024, 2);
  CHECK_FALSE(match_strided_gather(*lanes_at(bools, base, {0, 2})));  // bool: one byte in memory, i1 in registers
}

TEST_CASE("strided gathers: masked lanes keep their own valid and alternative") {
  UOpPtr buffer = global(dtypes::f32, 1024, 0);
  UOpPtr x = range(27, 0);
  std::vector<UOpPtr> loads;
  for (int64_t lane = 0; lane < 4; ++lane) {
    UOpPtr valid = alu(Ops::CMPLT, x + idx(lane), idx(27));
    loads.push_back(testing::load(index(buffer, x * idx(2) + idx(2 * lane), valid), const_float(dtypes::f32, 0.0)));
  }
  std::optional<StridedGather> gather = match_strided_gather(*UOp::make(Ops::VECTORIZE, dtypes::f32.vec(4), loads));
  REQUIRE(gather);
  CHECK(gather->stride == 2);
  for (size_t lane = 0; lane < 4; ++lane) CHECK(gather->loads[lane] == loads[lane].get());
  CHECK_FALSE(gather->valids);  // a constant bound: LLVM folds the lanes' compares
}

TEST_CASE("strided gathers: lanes valid below a size variable are one vector compare") {
  // A block of an image row of any width: lane k valid while x + k < (w + 1) / 2.
  UOpPtr buffer = global(dtypes::f32, 1024, 0);
  UOpPtr x = range(27, 0) * idx(4);
  UOpPtr bound = variable("w", 1, 500) + idx(1);
  auto gather_of = [&](const std::function<UOpPtr(int64_t)>& valid_of) {
    std::vector<UOpPtr> loads;
    for (int64_t lane = 0; lane < 4; ++lane)
      loads.push_back(testing::load(index(buffer, x * idx(2) + idx(2 * lane), valid_of(lane)), const_float(dtypes::f32, 0.0)));
    return match_strided_gather(*UOp::make(Ops::VECTORIZE, dtypes::f32.vec(4), loads));
  };
  std::optional<StridedGather> gather = gather_of([&](int64_t lane) { return alu(Ops::CMPLT, x + idx(lane), bound); });
  REQUIRE(gather);
  REQUIRE(gather->valids);
  CHECK(gather->valids->term == x);
  CHECK(gather->valids->bound == bound);
  CHECK(gather->valids->offsets == std::vector<int64_t>{0, 1, 2, 3});
  // Lanes with different bounds, or not all compared: lane by lane.
  CHECK_FALSE(gather_of([&](int64_t lane) { return alu(Ops::CMPLT, x + idx(lane), bound + idx(lane)); })->valids);
  CHECK_FALSE(gather_of([&](int64_t lane) { return lane == 3 ? const_bool(true) : alu(Ops::CMPLT, x + idx(lane), bound); })->valids);
}

}  // namespace
}  // namespace kiln
