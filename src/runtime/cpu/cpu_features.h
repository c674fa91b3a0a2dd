// Which CPU features this machine has, under LLVM's feature names ("avx2", "avx512f", ... on x86-64,
// queried with cpuid and xgetbv for the register state the OS saves; "dotprod", "fullfp16", "sve", ...
// on AArch64, from the kernel's AT_HWCAP words), so that libkiln can refuse a plan compiled for
// features this CPU lacks, without LLVM.
#pragma once

#include <optional>
#include <string_view>

namespace kiln {

// true / false for a feature this function knows how to query; nullopt for one it does not (the
// caller decides; plan loading skips those, see docs/plan-format.md). AVX-family features count as
// present only when the OS saves their registers; AMX features ("amx-tile", "amx-bf16", "amx-int8")
// only when Linux also grants this process the tile state, which this call requests (once). The environment variable KILN_HIDE_CPU_FEATURES
// (comma-separated names, for tests) makes the listed features read as absent.
std::optional<bool> host_has_cpu_feature(std::string_view feature);

}  // namespace kiln
