// The per-kernel profile table (src/support/kernel_profile.h): rows merged by kernel name, slowest
// first, shares of the total, rates from the estimates, sources shortened and cut after three.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/kernel_profile.h"

using namespace kiln;

namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

}  // namespace

TEST_CASE("short_source_label: the importer's tags become names, anything else is kept") {
  CHECK(short_source_label("node 'conv1' (Conv, opset 13)") == "conv1");
  CHECK(short_source_label("node 'a (b)' (Relu, opset 6)") == "a (b)");
  CHECK(short_source_label("unnamed node producing 'y' (Gemm, opset 11)") == "Gemm→y");
  CHECK(short_source_label("unnamed node producing 'y' (com.microsoft.FusedConv, no opset)") ==
        "com.microsoft.FusedConv→y");
  CHECK(short_source_label("my own tag") == "my own tag");
  CHECK(short_source_label("node 'x' (no comma)") == "node 'x' (no comma)");
  CHECK(short_source_label("") == "");
}

TEST_CASE("format_kernel_profile: one row per name, slowest first, shares add up, a total row") {
  std::vector<KernelLaunchTiming> launches{
      {"E_fast", 1.0, 2e6, 4e6, {"node 'relu' (Relu, opset 13)"}},
      {"r_slow", 3.0, 3e9, 6e6, {"node 'conv' (Conv, opset 13)", "node 'add' (Add, opset 13)"}},
      {"E_fast", 1.0, 2e6, 4e6, {"node 'relu2' (Relu, opset 13)"}},
      {"E_rest", 5.0, 0, 0, {"a", "b", "c", "d"}},
  };
  std::vector<std::string> lines = format_kernel_profile(launches);
  INFO(joined(lines));
  REQUIRE(lines.size() == 5);  // header, three kernels, total
  CHECK(lines[0].find("kernel") == 0);
  CHECK(lines[0].find("share") != std::string::npos);
  // E_rest 5 ms (50%), r_slow 3 ms (30%), E_fast 2 ms in two launches (20%).
  CHECK(lines[1].find("E_rest") == 0);
  CHECK(lines[1].find("50.0%") != std::string::npos);
  CHECK(lines[1].find("a, b, c, …") != std::string::npos);
  CHECK(lines[1].find(" - ") != std::string::npos);  // no estimates: no rates
  CHECK(lines[2].find("r_slow") == 0);
  CHECK(lines[2].find("30.0%") != std::string::npos);
  CHECK(lines[2].find("1000.00") != std::string::npos);  // 3 GFLOP in 3 ms
  CHECK(lines[2].find("conv, add") != std::string::npos);
  CHECK(lines[3].find("E_fast") == 0);
  CHECK(lines[3].find("       2 ") != std::string::npos);  // two launches
  CHECK(lines[3].find("20.0%") != std::string::npos);
  CHECK(lines[3].find("relu, relu2") != std::string::npos);
  CHECK(lines[4].find("total") == 0);
  CHECK(lines[4].find("100.0%") != std::string::npos);
  CHECK(lines[4].find("10.0000") != std::string::npos);
}

TEST_CASE("format_kernel_profile: no launches is a header and a zero total") {
  std::vector<std::string> lines = format_kernel_profile({});
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].find("total") == 0);
}
