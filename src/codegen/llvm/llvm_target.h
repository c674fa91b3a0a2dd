// A CPU as an LLVM target: the host (CpuTarget::host) or one that plans are cross-compiled for
// (CpuTarget::cross, cross_target.cpp): which triple, CPU and features kernels are compiled for, the
// optimisation pipeline (the new pass manager at O3), and emission of object files and assembly
// into memory. Nothing here touches the disk or runs a subprocess.
#pragma once

#include <memory>
#include <set>
#include <string>

#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/target.h"

namespace kiln {

// Registers LLVM's native target, its assembly printer and parser, once per process; thread-safe.
// Everything that creates a TargetMachine or a JIT calls this first.
void initialize_llvm_native_target();

// The architectures `kiln compile --target` cross-compiles CPU plans for, besides the host's.
// Registers the one named (LLVM's AArch64 or X86 back end) once per process; thread-safe.
void initialize_llvm_cross_target(const std::string& architecture);

class CpuTarget {
 public:
  // The CPU this process runs on (features detected once, so AVX2/AVX-512 are used where present),
  // narrowed to AVX2 when KILN_CPU_TARGET=avx2.
  static const CpuTarget& host();
  // A CPU that plans are cross-compiled for (cross_target.cpp): `architecture` is "aarch64" or
  // "x86_64", `cpu` an LLVM CPU name ("neoverse-n1", "cortex-a72", "x86-64-v3"; empty: the
  // architecture's baseline, "generic" for AArch64's NEON). Its features are exactly those LLVM
  // gives that CPU, never the build machine's, so the plan is the same on every machine. Throws
  // UserError naming an unknown architecture or CPU.
  static CpuTarget cross(const std::string& architecture, const std::string& cpu);
  const TargetCaps& caps() const { return caps_; }

  const std::string& triple() const { return triple_; }
  const std::string& cpu() const { return cpu_; }
  // "+avx2,+fma,-avx512f,…": every feature LLVM knows for the host, sorted by name.
  const std::string& features() const { return features_; }
  // "triple;cpu;features": equal ids mean an object compiled for one runs on the other. What a disk
  // cache of object files keys on (together with the kiln version).
  std::string target_id() const;

  // A fresh TargetMachine (PIC, small code model, aggressive codegen). One per compilation: a
  // TargetMachine must not be used by two threads at once.
  std::unique_ptr<llvm::TargetMachine> create_machine() const;

  // Sets the module's triple and data layout and tags its functions with the CPU and features, so
  // that the optimiser's cost models see the real vector widths.
  void prepare(llvm::Module& module, const llvm::TargetMachine& machine) const;
  // Runs the default O3 pipeline (loop and SLP vectorisation on). No library calls are assumed to
  // exist, so no optimisation can introduce memset/memcpy/libm calls.
  void optimize(llvm::Module& module, llvm::TargetMachine& machine) const;
  // Machine code as the bytes of a relocatable object file (ELF on Linux). Consumes the module's
  // codegen state: call once per module (clone it first to also print assembly).
  std::string emit_object(llvm::Module& module, llvm::TargetMachine& machine) const;
  // The same as assembly text, for KILN_DEBUG>=7.
  std::string emit_assembly(llvm::Module& module, llvm::TargetMachine& machine) const;

 private:
  CpuTarget();
  CpuTarget(std::string triple, std::string cpu, const std::set<std::string>& enabled,
            const std::set<std::string>& disabled, TargetCaps caps);
  std::string triple_;
  std::string cpu_;
  std::string features_;
  std::set<std::string> enabled_features_;
  TargetCaps caps_;
};

// The module as LLVM IR text (KILN_DEBUG>=4).
std::string llvm_ir_text(const llvm::Module& module);

}  // namespace kiln
