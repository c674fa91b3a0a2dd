// The host CPU target; see llvm_target.h.
#include "codegen/llvm/llvm_target.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

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

CpuTarget::CpuTarget() {
  initialize_llvm_native_target();
  triple_ = llvm::sys::getProcessTriple();
  cpu_ = llvm::sys::getHostCPUName().str();
  std::vector<std::string> features;
  for (const auto& feature : llvm::sys::getHostCPUFeatures())
    features.push_back((feature.getValue() ? "+" : "-") + feature.getKey().str());
  // Sorted by name (not by sign), so the string is the same however LLVM orders its map.
  std::sort(features.begin(), features.end(),
            [](const std::string& a, const std::string& b) { return a.substr(1) < b.substr(1); });
  for (const std::string& feature : features) features_ += (features_.empty() ? "" : ",") + feature;
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
  for (llvm::Function& function : module) {
    function.addFnAttr("target-cpu", cpu_);
    function.addFnAttr("target-features", features_);
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

std::string llvm_ir_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  module.print(stream, nullptr);
  return text;
}

}  // namespace kiln
