// Cross targets: CPU plans for an architecture or CPU other than the compiling machine's
// (`kiln compile --target aarch64 --cpu neoverse-n1`). Everything comes from LLVM's tables for the
// named CPU, nothing from the machine the compiler runs on, so a cross-compiled plan is the same
// bytes wherever it is compiled.
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>

#include "codegen/llvm/cpu_caps.h"
#include "codegen/llvm/llvm_target.h"
#include "support/error.h"

namespace kiln {
namespace {

struct Architecture {
  const char* name;         // what --target takes
  const char* triple;       // the plan's target_triple: libkiln compares its first component
  const char* default_cpu;  // the CPU without --cpu: the baseline every machine of the kind has
  TargetCaps (*caps)(const std::set<std::string>& features);
};

// The x86-64 baseline is x86-64-v3 (AVX2, FMA), the level the project's x86 plans already assume
// under KILN_CPU_TARGET=x86-64-v3; "generic" AArch64 is ARMv8-A with NEON, which every ARM64 Linux
// machine has.
constexpr Architecture kArchitectures[] = {
    {"aarch64", "aarch64-unknown-linux-gnu", "generic", aarch64_target_caps},
    {"x86_64", "x86_64-unknown-linux-gnu", "x86-64-v3", x86_64_target_caps},
};

const Architecture& find_architecture(const std::string& name) {
  for (const Architecture& architecture : kArchitectures)
    if (name == architecture.name) return architecture;
  throw UserError("unsupported: CPU target architecture '" + name + "' (kiln compiles CPU plans for aarch64 or x86_64)");
}

// The CPU names LLVM knows for the architecture, for the error message of a misspelt one.
std::string known_cpus(const llvm::MCSubtargetInfo& info) {
  std::string names;
  for (const llvm::SubtargetSubTypeKV& cpu : info.getAllProcessorDescriptions())
    names += (names.empty() ? "" : ", ") + std::string(cpu.Key);
  return names;
}

}  // namespace

void initialize_llvm_cross_target(const std::string& architecture) {
  static std::once_flag aarch64, x86;
  if (architecture == "aarch64") {
    std::call_once(aarch64, [] {
      LLVMInitializeAArch64TargetInfo();
      LLVMInitializeAArch64Target();
      LLVMInitializeAArch64TargetMC();
      LLVMInitializeAArch64AsmPrinter();
    });
  } else if (architecture == "x86_64") {
    std::call_once(x86, [] {
      LLVMInitializeX86TargetInfo();
      LLVMInitializeX86Target();
      LLVMInitializeX86TargetMC();
      LLVMInitializeX86AsmPrinter();
    });
  } else {
    find_architecture(architecture);  // throws the user's error
  }
}

CpuTarget CpuTarget::cross(const std::string& architecture_name, const std::string& cpu_name) {
  const Architecture& architecture = find_architecture(architecture_name);
  initialize_llvm_cross_target(architecture.name);
  std::string cpu = cpu_name.empty() ? architecture.default_cpu : cpu_name;
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(architecture.triple, error);
  if (target == nullptr) throw_internal_error(str_cat("LLVM has no target for ", architecture.triple, ": ", error));
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(architecture.triple, "generic", ""));
  if (!info) throw_internal_error(str_cat("LLVM has no subtarget information for ", architecture.triple));
  if (!info->isCPUStringValid(cpu))
    throw UserError(str_cat("unknown ", architecture.name, " CPU '", cpu, "' (--cpu takes one of LLVM's names: ",
                            known_cpus(*info), ")"));
  info.reset(target->createMCSubtargetInfo(architecture.triple, cpu, ""));
  std::set<std::string> enabled, disabled;
  for (const llvm::SubtargetFeatureKV& feature : info->getAllProcessorFeatures()) {
    std::string name = feature.Key;
    (info->checkFeatures("+" + name) ? enabled : disabled).insert(name);
  }
  return CpuTarget(architecture.triple, cpu, enabled, disabled, architecture.caps(enabled));
}

}  // namespace kiln
