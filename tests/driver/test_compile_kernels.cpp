// compile_schedule_kernels: one entry per kernel in schedule order, each distinct symbol compiled
// once (a repeat shares the first), one progress line per kernel compiled, and the same kernels
// whether realize() asks for functions or the plan writer for objects.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "driver/compile_kernels.h"
#include "schedule/schedule.h"
#include "tensor/tensor_internal.h"

using namespace kiln;

namespace {

// Two kernels with one symbol (the same code on two buffers) and a third, different one.
Schedule schedule_with_a_repeat() {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  Tensor b = Tensor::from_vector<float>({5, 6, 7, 8}, {4});
  Tensor c = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Schedule schedule = create_schedule({(a * 3.0f).data().node, (b * 3.0f).data().node, c.sum({1}).data().node});
  REQUIRE(schedule.kernels.size() == 3);
  REQUIRE(schedule.kernels[0].name() == schedule.kernels[1].name());
  REQUIRE(schedule.kernels[0].name() != schedule.kernels[2].name());
  return schedule;
}

}  // namespace

TEST_CASE("objects: each distinct symbol once, in schedule order, one progress line each") {
  Schedule schedule = schedule_with_a_repeat();
  std::vector<std::string> lines;
  KernelBuildOptions options;
  options.product = KernelProduct::Object;
  options.progress = [&](const std::string& line) { lines.push_back(line); };
  std::vector<KernelBuild> builds = compile_schedule_kernels(schedule, options);
  REQUIRE(builds.size() == 3);
  CHECK(!builds[0].repeat);
  CHECK(!builds[0].object.empty());
  CHECK(builds[1].repeat);
  CHECK(builds[1].object.empty());
  CHECK(!builds[2].repeat);
  CHECK(!builds[2].object.empty());
  for (const KernelBuild& build : builds) CHECK((build.function == nullptr));
  REQUIRE(lines.size() == 2);
  for (size_t line = 0, k = 0; line < lines.size(); ++line, k += 2) {
    const KernelBuild& build = builds[k];
    std::string how = build.from_cache ? " (from the disk cache)" : " (compiled)";
    CHECK(lines[line] == "kernel " + std::to_string(k + 1) + "/3 " + schedule.kernels[k].name() + how);
  }

  // The same objects again: now from the disk cache, byte for byte.
  options.progress = nullptr;
  std::vector<KernelBuild> again = compile_schedule_kernels(schedule, options);
  CHECK(again[0].from_cache);
  CHECK(again[0].object == builds[0].object);
  CHECK(again[2].object == builds[2].object);
}

TEST_CASE("functions: a repeat shares the first's function and counts as reused") {
  Schedule schedule = schedule_with_a_repeat();
  std::vector<KernelBuild> builds = compile_schedule_kernels(schedule);
  REQUIRE(builds.size() == 3);
  for (const KernelBuild& build : builds) CHECK((build.function != nullptr));
  CHECK(builds[1].repeat);
  CHECK(builds[1].reused);
  CHECK((builds[1].function == builds[0].function));
  CHECK((builds[2].function != builds[0].function));

  // A second compile finds every kernel loaded in this process.
  std::vector<KernelBuild> again = compile_schedule_kernels(schedule);
  for (size_t k = 0; k < again.size(); ++k) {
    CHECK(again[k].reused);
    CHECK((again[k].function == builds[k].function));
  }
}
