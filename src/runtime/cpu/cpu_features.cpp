// cpuid bit positions follow the Intel SDM (vol. 2A, CPUID) and AMD APM (vol. 3, appendix E); the
// names are LLVM's (llvm/TargetParser/X86TargetParser.def).
#include "runtime/cpu/cpu_features.h"

#include "support/amx_permission.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace kiln {
namespace {

enum Register { EAX, EBX, ECX, EDX };

struct FeatureBit {
  const char* name;
  unsigned leaf;
  unsigned subleaf;
  Register reg;
  int bit;
  // 0: none, 1: needs AVX state (XCR0 bits 1-2), 2: needs AVX-512 state (bits 1-2, 5-7), 3: needs
  // AMX tile state (bits 17-18) and Linux's permission to use it (support/amx_permission.h)
  int state;
};

constexpr FeatureBit kFeatures[] = {
    {"sse", 1, 0, EDX, 25, 0},         {"sse2", 1, 0, EDX, 26, 0},       {"fxsr", 1, 0, EDX, 24, 0},
    {"mmx", 1, 0, EDX, 23, 0},         {"cmov", 1, 0, EDX, 15, 0},       {"cx8", 1, 0, EDX, 8, 0},
    {"sse3", 1, 0, ECX, 0, 0},         {"pclmul", 1, 0, ECX, 1, 0},      {"ssse3", 1, 0, ECX, 9, 0},
    {"fma", 1, 0, ECX, 12, 1},         {"cx16", 1, 0, ECX, 13, 0},       {"sse4.1", 1, 0, ECX, 19, 0},
    {"sse4.2", 1, 0, ECX, 20, 0},      {"crc32", 1, 0, ECX, 20, 0},      {"movbe", 1, 0, ECX, 22, 0},
    {"popcnt", 1, 0, ECX, 23, 0},      {"aes", 1, 0, ECX, 25, 0},        {"xsave", 1, 0, ECX, 26, 0},
    {"avx", 1, 0, ECX, 28, 1},         {"f16c", 1, 0, ECX, 29, 1},       {"rdrnd", 1, 0, ECX, 30, 0},
    {"fsgsbase", 7, 0, EBX, 0, 0},     {"bmi", 7, 0, EBX, 3, 0},         {"avx2", 7, 0, EBX, 5, 1},
    {"bmi2", 7, 0, EBX, 8, 0},         {"invpcid", 7, 0, EBX, 10, 0},    {"avx512f", 7, 0, EBX, 16, 2},
    {"evex512", 7, 0, EBX, 16, 2},     {"avx512dq", 7, 0, EBX, 17, 2},   {"rdseed", 7, 0, EBX, 18, 0},
    {"adx", 7, 0, EBX, 19, 0},         {"avx512ifma", 7, 0, EBX, 21, 2}, {"clflushopt", 7, 0, EBX, 23, 0},
    {"clwb", 7, 0, EBX, 24, 0},        {"avx512cd", 7, 0, EBX, 28, 2},   {"sha", 7, 0, EBX, 29, 0},
    {"avx512bw", 7, 0, EBX, 30, 2},    {"avx512vl", 7, 0, EBX, 31, 2},   {"avx512vbmi", 7, 0, ECX, 1, 2},
    {"pku", 7, 0, ECX, 3, 0},          {"avx512vbmi2", 7, 0, ECX, 6, 2}, {"gfni", 7, 0, ECX, 8, 0},
    {"vaes", 7, 0, ECX, 9, 1},         {"vpclmulqdq", 7, 0, ECX, 10, 1}, {"avx512vnni", 7, 0, ECX, 11, 2},
    {"avx512bitalg", 7, 0, ECX, 12, 2}, {"avx512vpopcntdq", 7, 0, ECX, 14, 2}, {"rdpid", 7, 0, ECX, 22, 0},
    {"movdiri", 7, 0, ECX, 27, 0},     {"movdir64b", 7, 0, ECX, 28, 0},  {"avx512vp2intersect", 7, 0, EDX, 8, 2},
    {"serialize", 7, 0, EDX, 14, 0},   {"avx512fp16", 7, 0, EDX, 23, 2}, {"avxvnni", 7, 1, EAX, 4, 1},
    {"avx512bf16", 7, 1, EAX, 5, 2},   {"sahf", 0x80000001, 0, ECX, 0, 0}, {"lzcnt", 0x80000001, 0, ECX, 5, 0},
    {"sse4a", 0x80000001, 0, ECX, 6, 0}, {"prfchw", 0x80000001, 0, ECX, 8, 0}, {"xop", 0x80000001, 0, ECX, 11, 1},
    {"fma4", 0x80000001, 0, ECX, 16, 1}, {"tbm", 0x80000001, 0, ECX, 21, 0},
    {"amx-bf16", 7, 0, EDX, 22, 3},    {"amx-tile", 7, 0, EDX, 24, 3},   {"amx-int8", 7, 0, EDX, 25, 3},
};

bool hidden_by_environment(std::string_view feature) {
  const char* hidden = std::getenv("KILN_HIDE_CPU_FEATURES");
  if (hidden == nullptr) return false;
  std::string_view list(hidden);
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (list.substr(0, comma) == feature) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

#if defined(__x86_64__)
bool query(const FeatureBit& feature) {
  unsigned registers[4] = {0, 0, 0, 0};
  unsigned top = __get_cpuid_max(feature.leaf & 0x80000000u, nullptr);
  if (top < feature.leaf) return false;
  __cpuid_count(feature.leaf, feature.subleaf, registers[0], registers[1], registers[2], registers[3]);
  if (((registers[feature.reg] >> feature.bit) & 1u) == 0) return false;
  if (feature.state == 0) return true;
  unsigned a, b, c, d;
  __cpuid(1, a, b, c, d);
  if (((c >> 27) & 1u) == 0) return false;  // OSXSAVE: xgetbv is usable
  uint32_t xcr0_low, xcr0_high;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  uint32_t needed = feature.state == 1 ? 0x6u : feature.state == 2 ? 0xe6u : 0x60000u;
  if ((xcr0_low & needed) != needed) return false;
  return feature.state != 3 || request_amx_permission();
}
#endif

// AArch64: Linux reports the CPU's optional extensions in the auxiliary vector (AT_HWCAP and
// AT_HWCAP2; bit positions from the kernel's arch/arm64/include/uapi/asm/hwcap.h), under the LLVM
// names that plans cross-compiled for an ARM CPU record (`kiln compile --target aarch64 --cpu`).
// Only extensions that LLVM may use in arithmetic kernels are listed; the others are skipped.
struct HwcapBit {
  const char* name;
  int word;  // 1: AT_HWCAP, 2: AT_HWCAP2
  int bit;
  int also;  // -1, or a second AT_HWCAP bit that must be set too
};

constexpr HwcapBit kAarch64Features[] = {
    {"fp-armv8", 1, 0, -1}, {"neon", 1, 1, -1},      {"aes", 1, 3, -1},      {"sha2", 1, 6, -1},
    {"crc", 1, 7, -1},      {"lse", 1, 8, -1},       {"fullfp16", 1, 9, 10}, {"rdm", 1, 12, -1},
    {"jsconv", 1, 13, -1},  {"complxnum", 1, 14, -1}, {"rcpc", 1, 15, -1},   {"dotprod", 1, 20, -1},
    {"sve", 1, 22, -1},     {"fp16fml", 1, 23, -1},  {"sve2", 2, 1, -1},     {"i8mm", 2, 13, -1},
    {"bf16", 2, 14, -1},
};

#if defined(__aarch64__)
bool query(const HwcapBit& feature) {
  unsigned long word = getauxval(feature.word == 1 ? AT_HWCAP : AT_HWCAP2);
  bool present = ((word >> feature.bit) & 1ul) != 0;
  if (feature.also >= 0) present = present && ((getauxval(AT_HWCAP) >> feature.also) & 1ul) != 0;
  return present;
}
#endif

}  // namespace

std::optional<bool> host_has_cpu_feature(std::string_view feature) {
  for (const HwcapBit& known : kAarch64Features) {
    if (feature != known.name) continue;
    if (hidden_by_environment(feature)) return false;
#if defined(__aarch64__)
    return query(known);
#else
    return std::nullopt;  // an AArch64 feature on x86: the plan's triple already refused it
#endif
  }
  for (const FeatureBit& known : kFeatures) {
    if (feature != known.name) continue;
    if (hidden_by_environment(feature)) return false;
#if defined(__x86_64__)
    return query(known);
#else
    return std::nullopt;
#endif
  }
  if (hidden_by_environment(feature)) return false;
  return std::nullopt;
}

}  // namespace kiln
