// CPU code generation, end to end; see cpu_codegen.h.
#include "codegen/cpu_codegen.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "codegen/linearize.h"
#include "codegen/llvm/llvm_renderer.h"
#include "codegen/llvm/llvm_target.h"
#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

// Kernels run in a JIT library that sees no process symbols, and in plans that link against nothing:
// an undefined symbol (a libcall LLVM chose, such as memset or __truncsfhf2) is a codegen bug.
void check_no_external_symbols(const std::string& object, const std::string& kernel) {
  auto buffer = llvm::MemoryBuffer::getMemBuffer(object, kernel, false);
  auto file = llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!file) throw_internal_error("cannot read the object file of kernel '" + kernel + "': " +
                                  llvm::toString(file.takeError()));
  for (const llvm::object::SymbolRef& symbol : (*file)->symbols()) {
    auto flags = symbol.getFlags();
    if (!flags || !(*flags & llvm::object::SymbolRef::SF_Undefined)) {
      if (!flags) llvm::consumeError(flags.takeError());
      continue;
    }
    auto name = symbol.getName();
    std::string text = name ? name->str() : "?";
    if (!name) llvm::consumeError(name.takeError());
    if (text.empty()) continue;  // the null symbol of ELF
    throw_internal_error("kernel '" + kernel + "' references the external symbol '" + text +
                         "'; CPU kernels must be self-contained");
  }
}

}  // namespace

CompiledKernel cpu_compile_kernel(const UOpPtr& kernel_ast, const CpuTarget* cross_target) {
  LinearProgram program = linearize(kernel_ast);
  if (debug_level() >= 6) debug_print("linearised " + print_linear(program));

  llvm::LLVMContext context;
  const CpuTarget& target = cross_target != nullptr ? *cross_target : CpuTarget::host();
  std::unique_ptr<llvm::Module> module = render_llvm(program, context, target.caps().l2_bytes);
  std::unique_ptr<llvm::TargetMachine> machine = target.create_machine();
  target.prepare(*module, *machine);
  if (debug_level() >= 4) debug_print("LLVM IR of " + program.name + "\n" + llvm_ir_text(*module));
  target.optimize(*module, *machine);
  if (debug_level() >= 7) {
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*module);
    std::unique_ptr<llvm::TargetMachine> printer = target.create_machine();
    debug_print("assembly of " + program.name + "\n" + target.emit_assembly(*copy, *printer));
  }
  CompiledKernel compiled{program.name, target.emit_object(*module, *machine)};
  check_no_external_symbols(compiled.object, compiled.name);
  return compiled;
}

std::string cpu_compile(const UOpPtr& kernel_ast, const CpuTarget* target) {
  return cpu_compile_kernel(kernel_ast, target).object;
}

KernelFunction cpu_load(const std::string& object, const std::string& symbol) {
  return jit_load_kernel(object, symbol);
}

const TargetCaps& cpu_target_caps(const CpuTarget* target) {
  return target != nullptr ? target->caps() : host_cpu_caps();
}

std::string cpu_target_id(const CpuTarget* target) {
  return target != nullptr ? target->target_id() : CpuTarget::host().target_id();
}

}  // namespace kiln
