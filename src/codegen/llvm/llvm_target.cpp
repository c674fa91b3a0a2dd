// The host CPU target; see llvm_target.h (cross targets: cross_target.cpp).
#include "codegen/llvm/llvm_target.h"

#include <algorithm>
#include <cstdlib>

#include <unistd.h>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/llvm/cpu_caps.h"
#include "codegen/llvm/loop_invariant_masks.h"
#include "support/amx_permission.h"
#include "support/error.h"

namespace kiln {

void initialize_llvm_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

namespace {

enum class Narrowing { kNone, kAvx2, kX86_64_V3 };

// KILN_CPU_TARGET: "" or "host" (everything the CPU has), "avx2" (AVX-512 switched off) or
// "x86-64-v3" (only the x86-64-v3 level's features: a plan that loads on any AVX2+FMA machine, and
// under valgrind, whose emulated CPU lacks newer features such as ADX).
Narrowing requested_narrowing() {
  const char* requested = std::getenv("KILN_CPU_TARGET");
  if (requested == nullptr || *requested == '\0' || std::string(requested) == "host") return Narrowing::kNone;
  if (std::string(requested) == "avx2") return Narrowing::kAvx2;
  if (std::string(requested) == "x86-64-v3") return Narrowing::kX86_64_V3;
  throw UserError(std::string("KILN_CPU_TARGET='") + requested +
                  "' is not a CPU target (use 'host', 'avx2' or 'x86-64-v3')");
}

bool is_avx512_feature(const std::string& name) {
  return name.rfind("avx512", 0) == 0 || name == "evex512" || name.rfind("amx", 0) == 0 || name == "avx10.1-256" ||
         name == "avx10.1-512";
}

// The features of the x86-64-v3 micro-architecture level (x86-64 psABI), in LLVM's names.
bool is_x86_64_v3_feature(const std::string& name) {
  static const std::set<std::string> level = {"avx",  "avx2", "bmi",    "bmi2",   "cmov",   "crc32", "cx16",
                                              "cx8",  "f16c", "fma",    "fxsr",   "lzcnt",  "mmx",   "movbe",
                                              "popcnt", "sahf", "sse", "sse2", "sse3", "sse4.1", "sse4.2",
                                              "ssse3", "x87", "xsave", "64bit"};
  return level.count(name) != 0;
}

// AMX needs the OS's permission as well as the CPU and XCR0, which LLVM's host features check
// (support/amx_permission.h); KILN_AMX=0 switches it off (A/B runs against the AVX-512 kernels).
bool amx_usable() {
  const char* setting = std::getenv("KILN_AMX");
  if (setting != nullptr && std::string(setting) == "0") return false;
  return request_amx_permission();
}

}  // namespace

// The vector width and registers of an x86-64 CPU from its LLVM features (cpu_caps.h).
TargetCaps x86_64_target_caps(const std::set<std::string>& features) {
  TargetCaps caps;
  caps.name = "cpu";
  caps.has_fma = features.count("fma") != 0;
  caps.narrow_floats_stored_wide = true;
  if (features.count("avx512f")) {
    caps.name = "cpu-avx512";
    caps.vector_bytes = 64;
    caps.vector_registers = 32;
  } else if (features.count("avx2") || features.count("avx")) {
    caps.name = "cpu-avx2";
    caps.vector_bytes = 32;
    caps.vector_registers = 16;
  } else {
    caps.name = "cpu-sse";
    caps.vector_bytes = 16;
    caps.vector_registers = 16;
  }
  // vpdpbusd at the vector width: AVX-512 VNNI for 512-bit vectors; for 256-bit ones AVX-VNNI (VEX)
  // or AVX-512 VNNI with VL (EVEX).
  bool vnni512 = features.count("avx512vnni") != 0;
  if (caps.vector_bytes == 64 && vnni512) caps.dot_product_bytes = 64;
  if (caps.vector_bytes == 32 &&
      (features.count("avxvnni") || (vnni512 && features.count("avx512vl"))))
    caps.dot_product_bytes = 32;
  caps.amx_bf16 = caps.vector_bytes == 64 && features.count("amx-tile") && features.count("amx-bf16");
  return caps;
}

CpuTarget::CpuTarget() {
  initialize_llvm_native_target();
  triple_ = llvm::sys::getProcessTriple();
  cpu_ = llvm::sys::getHostCPUName().str();
  Narrowing narrowing = requested_narrowing();
  std::vector<std::string> features;
  for (const auto& feature : llvm::sys::getHostCPUFeatures()) {
    bool enabled = feature.getValue();
    std::string name = feature.getKey().str();
    if (narrowing == Narrowing::kAvx2 && is_avx512_feature(name)) enabled = false;
    if (narrowing == Narrowing::kX86_64_V3 && !is_x86_64_v3_feature(name)) enabled = false;
    if (name.rfind("amx", 0) == 0 && enabled && !amx_usable()) enabled = false;
    features.push_back((enabled ? "+" : "-") + name);
    if (enabled) enabled_features_.insert(name);
  }
  if (narrowing == Narrowing::kAvx2) cpu_ = enabled_features_.count("avx2") ? "haswell" : cpu_;
  if (narrowing == Narrowing::kX86_64_V3) {
    for (const char* needed : {"avx2", "fma", "bmi2", "f16c", "movbe"})
      if (!enabled_features_.count(needed))
        throw UserError(std::string("KILN_CPU_TARGET=x86-64-v3: this CPU lacks '") + needed +
                        "', so kiln cannot compile or check code for that level here");
    cpu_ = "x86-64-v3";
  }
  // Cache sizes steer tiling only (never results); sysconf reports them on Linux/glibc.
  if (long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE); l1 > 0) caps_.l1_bytes = l1;
  if (long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE); l2 > 0) caps_.l2_bytes = l2;
  // A compiler running on AArch64 describes its host as it would describe that CPU as a cross target.
  bool aarch64 = llvm::Triple(triple_).getArch() == llvm::Triple::aarch64;
  TargetCaps detected = aarch64 ? aarch64_target_caps(enabled_features_) : x86_64_target_caps(enabled_features_);
  detected.l1_bytes = caps_.l1_bytes;
  detected.l2_bytes = caps_.l2_bytes;
  caps_ = detected;
  // Sorted by name (not by sign), so the string is the same however LLVM orders its map.
  std::sort(features.begin(), features.end(),
            [](const std::string& a, const std::string& b) { return a.substr(1) < b.substr(1); });
  for (const std::string& feature : features) features_ += (features_.empty() ? "" : ",") + feature;
}

CpuTarget::CpuTarget(std::string triple, std::string cpu, const std::set<std::string>& enabled,
                     const std::set<std::string>& disabled, TargetCaps caps)
    : triple_(std::move(triple)), cpu_(std::move(cpu)), enabled_features_(enabled), caps_(std::move(caps)) {
  std::set<std::string> names(enabled);
  names.insert(disabled.begin(), disabled.end());
  for (const std::string& name : names)  // std::set: sorted by name, as the host's string is
    features_ += (features_.empty() ? "" : ",") + std::string(enabled.count(name) ? "+" : "-") + name;
}

const CpuTarget& CpuTarget::host() {
  static const CpuTarget target;  // C++ guarantees thread-safe initialisation
  return target;
}

std::string CpuTarget::target_id() const { return triple_ + ";" + cpu_ + ";" + features_; }

std::unique_ptr<llvm::TargetMachine> CpuTarget::create_machine() const {
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple_, error);
  if (target == nullptr) throw_internal_error("LLVM has no target for " + triple_ + ": " + error);
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple_, cpu_, features_, options, llvm::Reloc::PIC_, llvm::CodeModel::Small, llvm::CodeGenOptLevel::Aggressive));
  if (!machine) throw_internal_error("LLVM could not create a target machine for " + target_id());
  return machine;
}

void CpuTarget::prepare(llvm::Module& module, const llvm::TargetMachine& machine) const {
  module.setTargetTriple(triple_);
  module.setDataLayout(machine.createDataLayout());
  std::string vector_bits = std::to_string(caps_.vector_bytes * 8);
  for (llvm::Function& function : module) {
    function.addFnAttr("target-cpu", cpu_);
    function.addFnAttr("target-features", features_);
    // Some CPUs' tuning prefers 256-bit vectors and would split the 512-bit vectors the expander
    // emits; the capability object decides the width instead.
    function.addFnAttr("prefer-vector-width", vector_bits);
    function.addFnAttr("min-legal-vector-width", vector_bits);
  }
}

void CpuTarget::optimize(llvm::Module& module, llvm::TargetMachine& machine) const {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager call_graphs;
  llvm::ModuleAnalysisManager modules;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  tuning.LoopUnrolling = true;
  llvm::PassBuilder passes(&machine, tuning);
  // Kernels may call nothing, so the optimiser is told that no library function exists.
  llvm::TargetLibraryInfoImpl library(llvm::Triple(module.getTargetTriple()));
  library.disableAllFunctions();
  functions.registerPass([&] { return llvm::TargetLibraryAnalysis(library); });
  passes.registerModuleAnalyses(modules);
  passes.registerCGSCCAnalyses(call_graphs);
  passes.registerFunctionAnalyses(functions);
  passes.registerLoopAnalyses(loops);
  passes.crossRegisterProxies(loops, functions, call_graphs, modules);
  llvm::ModulePassManager pipeline = passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  pipeline.run(module, modules);
  keep_masks_where_computed(module);
}

namespace {
std::string emit(llvm::Module& module, llvm::TargetMachine& machine, llvm::CodeGenFileType type) {
  llvm::SmallVector<char, 0> bytes;
  llvm::raw_svector_ostream stream(bytes);
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, stream, nullptr, type))
    throw_internal_error("LLVM cannot emit this file type for " + machine.getTargetTriple().str());
  codegen.run(module);
  return std::string(bytes.begin(), bytes.end());
}
}  // namespace

std::string CpuTarget::emit_object(llvm::Module& module, llvm::TargetMachine& machine) const {
  return emit(module, machine, llvm::CodeGenFileType::ObjectFile);
}

std::string CpuTarget::emit_assembly(llvm::Module& module, llvm::TargetMachine& machine) const {
  return emit(module, machine, llvm::CodeGenFileType::AssemblyFile);
}

const TargetCaps& host_cpu_caps() { return CpuTarget::host().caps(); }

std::string llvm_ir_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  module.print(stream, nullptr);
  return text;
}

}  // namespace kiln
