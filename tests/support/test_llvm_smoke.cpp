// LLVM 19 is linked into the build and works in process: build a function `i32 add(i32, i32)`,
// verify it, and compile it for the host with the x86 backend.
#include <doctest/doctest.h>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

TEST_CASE("LLVM builds, verifies and targets an add function") {
  llvm::LLVMContext context;
  llvm::Module module("smoke", context);
  llvm::IRBuilder<> builder(context);
  auto* i32 = builder.getInt32Ty();
  auto* type = llvm::FunctionType::get(i32, {i32, i32}, false);
  auto* function = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "add", module);
  builder.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", function));
  builder.CreateRet(builder.CreateAdd(function->getArg(0), function->getArg(1)));
  CHECK_FALSE(llvm::verifyModule(module, &llvm::errs()));

  llvm::InitializeNativeTarget();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(llvm::sys::getDefaultTargetTriple(), error);
  INFO(error);
  REQUIRE(target != nullptr);
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      llvm::sys::getDefaultTargetTriple(), llvm::sys::getHostCPUName(), "", llvm::TargetOptions(), std::nullopt));
  CHECK(machine != nullptr);
}
