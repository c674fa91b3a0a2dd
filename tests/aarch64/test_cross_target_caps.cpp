// CpuTarget::cross (src/codegen/llvm/cross_target.cpp): what the tile heuristics and the plan see of
// a CPU that plans are cross-compiled for, and the user errors for targets kiln does not know.
#include <doctest/doctest.h>

#include <string>

#include "codegen/cpu_codegen.h"
#include "codegen/llvm/llvm_target.h"
#include "support/error.h"

using namespace kiln;

namespace {

bool has_feature(const CpuTarget& target, const std::string& signed_name) {
  const std::string& features = "," + target.features() + ",";
  return features.find("," + signed_name + ",") != std::string::npos;
}

std::string user_error_of(const std::string& architecture, const std::string& cpu) {
  try {
    CpuTarget::cross(architecture, cpu);
  } catch (const UserError& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("generic AArch64: NEON's 16-byte vectors, 32 registers, no optional extensions") {
  CpuTarget target = CpuTarget::cross("aarch64", "");
  CHECK(target.triple() == "aarch64-unknown-linux-gnu");
  CHECK(target.cpu() == "generic");
  const TargetCaps& caps = target.caps();
  CHECK(caps.vector_bytes == 16);
  CHECK(caps.vector_lanes(DType(ScalarType::Float32)) == 4);
  CHECK(caps.vector_registers == 32);
  CHECK(caps.has_fma);
  CHECK(caps.narrow_floats_stored_wide);
  CHECK(caps.dot_product_bytes == 0);  // sdot is not rendered: int8 takes the widening path
  CHECK(caps.name == "cpu-neon");
  CHECK(has_feature(target, "+neon"));
  CHECK(has_feature(target, "-dotprod"));
  CHECK(has_feature(target, "-sve"));
}

TEST_CASE("named AArch64 CPUs bring their extensions, never wider vectors") {
  CpuTarget n1 = CpuTarget::cross("aarch64", "neoverse-n1");
  CHECK(has_feature(n1, "+dotprod"));
  CHECK(has_feature(n1, "+fullfp16"));
  CHECK(n1.caps().name == "cpu-neon-dotprod-fp16");
  CpuTarget a64fx = CpuTarget::cross("aarch64", "a64fx");  // 512-bit SVE
  CHECK(has_feature(a64fx, "+sve"));
  CHECK(a64fx.caps().vector_bytes == 16);
  CHECK(a64fx.caps().name.find("-sve") != std::string::npos);
}

TEST_CASE("cross targets are the same whatever machine asks, and not the host's") {
  CpuTarget first = CpuTarget::cross("aarch64", "cortex-a72");
  CpuTarget second = CpuTarget::cross("aarch64", "cortex-a72");
  CHECK(first.target_id() == second.target_id());
  CHECK(cpu_target_id(&first) != cpu_target_id());  // the kernel cache keeps their objects apart
  CHECK(&cpu_target_caps(&first) == &first.caps());
  CHECK(&cpu_target_caps() == &host_cpu_caps());
}

TEST_CASE("x86_64 cross target: x86-64-v3 by default, AVX2's 32-byte vectors") {
  CpuTarget target = CpuTarget::cross("x86_64", "");
  CHECK(target.triple() == "x86_64-unknown-linux-gnu");
  CHECK(target.cpu() == "x86-64-v3");
  CHECK(target.caps().vector_bytes == 32);
  CHECK(target.caps().vector_registers == 16);
  CHECK(has_feature(target, "+avx2"));
  CHECK(has_feature(target, "-avx512f"));
  CHECK(CpuTarget::cross("x86_64", "skylake-avx512").caps().vector_bytes == 64);
}

TEST_CASE("unknown architectures and CPUs are user errors naming what is wrong") {
  CHECK(user_error_of("riscv64", "") ==
        "unsupported: CPU target architecture 'riscv64' (kiln compiles CPU plans for aarch64 or x86_64)");
  std::string cpu = user_error_of("aarch64", "neoverse-n9");
  CHECK(cpu.rfind("unknown aarch64 CPU 'neoverse-n9' (--cpu takes one of LLVM's names: ", 0) == 0);
  CHECK(cpu.find("neoverse-n1") != std::string::npos);
  CHECK(user_error_of("x86_64", "cortex-a72").rfind("unknown x86_64 CPU 'cortex-a72'", 0) == 0);
}
