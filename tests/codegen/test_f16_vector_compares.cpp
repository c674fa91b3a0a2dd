// Vector f16 compares stay compares of f32 vectors through LLVM's optimiser (llvm_alu.cpp, widen):
// InstCombine would otherwise narrow `fcmp (fpext a), (fpext b)`, and a compare of a widened value
// with a constant that f16 holds exactly, to a compare of the halves, which x86 without AVX512-FP16
// scalarises lane by lane (BERT-base fp16's GELU ran 3x slower so). The kernel's values are still
// checked against the C++ reference elsewhere (test_cpu_elementwise.cpp, tests/opt's oracle); this
// checks the code's shape after the O3 pipeline that CPU kernels go through.
#include <llvm/IR/Module.h>

#include "codegen/llvm/llvm_alu.h"
#include "codegen/llvm/llvm_target.h"
#include "codegen_test_helpers.h"

using namespace kiln;

namespace {

// What `emit` leaves of `void f(ptr a, ptr b, ptr out)` after the O3 pipeline, as IR text; `emit`
// gets a and b loaded as <16 x half> and returns a <16 x i1> that is stored to out as bytes.
template <typename Emit>
std::string optimised_ir(Emit emit) {
  initialize_llvm_native_target();
  llvm::LLVMContext context;
  llvm::Module module("f16_compares", context);
  llvm::IRBuilder<> b(context);
  llvm::Type* ptr = b.getPtrTy();
  auto* type = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr}, false);
  llvm::Function* function = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "f", module);
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", function));
  llvm::Type* halves = llvm::FixedVectorType::get(b.getHalfTy(), 16);
  llvm::Value* a = b.CreateLoad(halves, function->getArg(0));
  llvm::Value* c = b.CreateLoad(halves, function->getArg(1));
  llvm::Value* truth = emit(b, a, c);
  b.CreateStore(b.CreateZExt(truth, llvm::FixedVectorType::get(b.getInt8Ty(), 16)), function->getArg(2));
  b.CreateRetVoid();
  const CpuTarget& target = CpuTarget::host();
  std::unique_ptr<llvm::TargetMachine> machine = target.create_machine();
  target.prepare(module, *machine);
  target.optimize(module, *machine);
  return llvm_ir_text(module);
}

bool compares_halves(const std::string& ir) {
  for (size_t line = 0; line < ir.size();) {
    size_t end = ir.find('\n', line);
    if (end == std::string::npos) end = ir.size();
    std::string text = ir.substr(line, end - line);
    if (text.find("fcmp") != std::string::npos && text.find("x half>") != std::string::npos) return true;
    line = end + 1;
  }
  return false;
}

DType f16x16() { return dtypes::f16.vec(16); }
DType f32x16() { return dtypes::f32.vec(16); }

}  // namespace

TEST_SUITE("codegen") {

TEST_CASE("vector f16 compares are not narrowed to compares of halves by LLVM's optimiser") {
  // CMPLT on f16 operands: kiln compares the widened values.
  std::string both = optimised_ir([](llvm::IRBuilderBase& b, llvm::Value* a, llvm::Value* c) {
    llvm::Value* sources[] = {a, c};
    return llvm_alu(b, Ops::CMPLT, f16x16(), sources, dtypes::f16, false);
  });
  CHECK_MESSAGE(!compares_halves(both), both);
  CHECK(both.find("fcmp olt <16 x float>") != std::string::npos);

  // The GELU pattern: an f16 value cast to f32, then compared with constants f16 holds exactly.
  std::string constant = optimised_ir([](llvm::IRBuilderBase& b, llvm::Value* a, llvm::Value*) {
    llvm::Value* wide = llvm_cast(b, a, f16x16(), f32x16());
    llvm::Value* half = llvm::ConstantFP::get(wide->getType(), 0.5);
    llvm::Value* zero = llvm::ConstantFP::get(wide->getType(), 0.0);
    llvm::Value* below_half[] = {wide, half};
    llvm::Value* negative[] = {wide, zero};
    llvm::Value* is_nan[] = {wide, wide};
    return b.CreateOr(b.CreateAnd(llvm_alu(b, Ops::CMPLT, f32x16(), below_half, dtypes::f32, false),
                                  llvm_alu(b, Ops::CMPLT, f32x16(), negative, dtypes::f32, false)),
                      llvm_alu(b, Ops::CMPNE, f32x16(), is_nan, dtypes::f32, false));
  });
  CHECK_MESSAGE(!compares_halves(constant), constant);

  // MAX of f16 values (ReLU, max pooling) compares too.
  std::string maximum = optimised_ir([](llvm::IRBuilderBase& b, llvm::Value* a, llvm::Value* c) {
    llvm::Value* sources[] = {a, c};
    llvm::Value* larger = llvm_alu(b, Ops::MAX, f16x16(), sources, dtypes::f16, false);
    llvm::Value* against[] = {larger, a};
    return llvm_alu(b, Ops::CMPNE, f16x16(), against, dtypes::f16, false);
  });
  CHECK_MESSAGE(!compares_halves(maximum), maximum);
}

}  // TEST_SUITE
