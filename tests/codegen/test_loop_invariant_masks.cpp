// keep_masks_where_computed (src/codegen/llvm/loop_invariant_masks.h): the mask of a masked load or
// store inside a loop, computed outside it, reaches the access through a freeze in the compare's
// own block, so that instruction selection cannot sink the compare into the loop. Whether that pays
// is a benchmark question (bench/README.md); every CPU kernel with a masked vector goes through it
// in the model tests.
#include "codegen/llvm/loop_invariant_masks.h"

#include <doctest/doctest.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/SourceMgr.h>

#include <memory>

namespace kiln {
namespace {

// A reduction over k whose vector load is masked by `lane < end`, computed before the loop, and
// whose result is stored with the same mask after it; and a masked load whose compare sits in the
// loop itself.
constexpr const char* kKernel = R"(
define void @kernel(ptr %in, ptr %out, i64 %end) {
entry:
  %end.splat.0 = insertelement <4 x i64> poison, i64 %end, i64 0
  %end.splat = shufflevector <4 x i64> %end.splat.0, <4 x i64> poison, <4 x i32> zeroinitializer
  %mask = icmp slt <4 x i64> <i64 0, i64 1, i64 2, i64 3>, %end.splat
  br label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k.next, %loop ]
  %sum = phi <4 x float> [ zeroinitializer, %entry ], [ %sum.next, %loop ]
  %at = getelementptr float, ptr %in, i64 %k
  %x = call <4 x float> @llvm.masked.load.v4f32.p0(ptr %at, i32 4, <4 x i1> %mask, <4 x float> zeroinitializer)
  %local = icmp slt <4 x i64> <i64 4, i64 5, i64 6, i64 7>, %end.splat
  %y = call <4 x float> @llvm.masked.load.v4f32.p0(ptr %at, i32 4, <4 x i1> %local, <4 x float> zeroinitializer)
  %xy = fadd <4 x float> %x, %y
  %sum.next = fadd <4 x float> %sum, %xy
  %k.next = add i64 %k, 1
  %more = icmp slt i64 %k.next, 64
  br i1 %more, label %loop, label %exit
exit:
  call void @llvm.masked.store.v4f32.p0(<4 x float> %sum.next, ptr %out, i32 4, <4 x i1> %mask)
  ret void
}
declare <4 x float> @llvm.masked.load.v4f32.p0(ptr, i32, <4 x i1>, <4 x float>)
declare void @llvm.masked.store.v4f32.p0(<4 x float>, ptr, i32, <4 x i1>)
)";

TEST_CASE("a loop-invariant vector mask reaches its masked accesses through a freeze beside its compare") {
  llvm::LLVMContext context;
  llvm::SMDiagnostic error;
  std::unique_ptr<llvm::Module> module = llvm::parseAssemblyString(kKernel, error, context);
  REQUIRE(module != nullptr);
  keep_masks_where_computed(*module);
  llvm::Function* kernel = module->getFunction("kernel");
  REQUIRE(kernel != nullptr);
  int frozen = 0, direct = 0;
  for (llvm::BasicBlock& block : *kernel)
    for (llvm::Instruction& instruction : block) {
      auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&instruction);
      if (call == nullptr) continue;
      unsigned position = call->getIntrinsicID() == llvm::Intrinsic::masked_store ? 3 : 2;
      llvm::Value* mask = call->getArgOperand(position);
      if (auto* freeze = llvm::dyn_cast<llvm::FreezeInst>(mask)) {
        // The freeze is in the compare's block (the entry), of the compare itself.
        CHECK(freeze->getParent()->getName() == "entry");
        CHECK(freeze->getOperand(0)->getName() == "mask");
        ++frozen;
      } else {
        // The compare in the loop's own block keeps it.
        CHECK(mask->getName() == "local");
        ++direct;
      }
    }
  CHECK(frozen == 2);  // the load in the loop and the store after it: one freeze for both
  CHECK(direct == 1);
  int freezes = 0;
  for (llvm::Instruction& instruction : kernel->getEntryBlock()) freezes += llvm::isa<llvm::FreezeInst>(instruction) ? 1 : 0;
  CHECK(freezes == 1);
}

}  // namespace
}  // namespace kiln
