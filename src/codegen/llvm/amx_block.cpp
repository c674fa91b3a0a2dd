// The CPU renderer's AMX bf16 block; see amx_block.h.
#include "codegen/llvm/amx_block.h"

#include <array>

#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include "opt/amx_layout.h"

namespace kiln {

namespace {

constexpr int64_t kTileRows = 16;
constexpr int64_t kTileBytes = 64;  // one row of a tile: 32 bf16, 16 bf16 pairs or 16 f32

// a's element offset at reduction step `step` (opt/amx_layout.h): the step itself for a row-major
// matrix, otherwise each part's position times its coefficient (divisions by constants, which
// LLVM turns into multiplications; once per four tile products).
llvm::Value* a_offset(llvm::IRBuilder<>& builder, llvm::Value* step, const std::vector<AmxStep>& steps) {
  if (steps.size() == 1 && steps.front().coefficient == 1) return step;
  llvm::Value* offset = builder.getInt64(0);
  int64_t inner = 1;
  for (size_t i = steps.size(); i-- > 0;) {
    llvm::Value* part = inner == 1 ? step : builder.CreateUDiv(step, builder.getInt64(inner));
    if (i > 0) part = builder.CreateURem(part, builder.getInt64(steps[i].extent));
    offset = builder.CreateAdd(offset, builder.CreateMul(part, builder.getInt64(steps[i].coefficient)));
    inner *= steps[i].extent;
  }
  return offset;
}

}  // namespace

void emit_amx_block(llvm::IRBuilder<>& builder, const AmxBlockOperands& operands) {
  llvm::Module* module = builder.GetInsertBlock()->getModule();
  llvm::Function* function = builder.GetInsertBlock()->getParent();
  llvm::LLVMContext& context = builder.getContext();
  llvm::Type* tile = llvm::Type::getX86_AMXTy(context);
  llvm::Function* zero = llvm::Intrinsic::getDeclaration(module, llvm::Intrinsic::x86_tilezero_internal);
  llvm::Function* load = llvm::Intrinsic::getDeclaration(module, llvm::Intrinsic::x86_tileloadd64_internal);
  llvm::Function* product = llvm::Intrinsic::getDeclaration(module, llvm::Intrinsic::x86_tdpbf16ps_internal);
  llvm::Function* store = llvm::Intrinsic::getDeclaration(module, llvm::Intrinsic::x86_tilestored64_internal);
  llvm::Value* rows = builder.getInt16(kTileRows);
  llvm::Value* bytes = builder.getInt16(kTileBytes);
  llvm::Type* i8 = builder.getInt8Ty();
  llvm::Type* i64 = builder.getInt64Ty();
  const int64_t a_row_bytes = operands.a_stride * operands.element_bytes;
  const int64_t b_row_bytes = operands.b_stride * operands.element_bytes;

  std::array<llvm::Value*, 4> start;  // accumulator tile 2·r + c: rows 16r.., columns 16c..
  for (llvm::Value*& accumulator : start) accumulator = builder.CreateCall(zero, {rows, bytes});

  llvm::BasicBlock* before = builder.GetInsertBlock();
  llvm::BasicBlock* body = llvm::BasicBlock::Create(context, "amx.steps", function);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(context, "amx.done", function);
  builder.CreateBr(body);
  builder.SetInsertPoint(body);
  llvm::PHINode* step = builder.CreatePHI(i64, 2, "amx.step");
  step->addIncoming(builder.getInt64(0), before);
  std::array<llvm::PHINode*, 4> sums;
  for (size_t t = 0; t < sums.size(); ++t) {
    sums[t] = builder.CreatePHI(tile, 2, "amx.sum");
    sums[t]->addIncoming(start[t], before);
  }
  // a's tiles: rows 0-15 and 16-31 at steps [step, step + 32); b's: pair row step / 2 on, columns
  // 0-15 and 16-31 (64 bytes each).
  llvm::Value* a_step = builder.CreateMul(a_offset(builder, step, operands.a_steps), builder.getInt64(operands.element_bytes));
  llvm::Value* b_step = builder.CreateMul(builder.CreateLShr(step, 1), builder.getInt64(b_row_bytes));
  std::array<llvm::Value*, 2> a_tiles, b_tiles;
  for (int64_t r = 0; r < 2; ++r) {
    llvm::Value* offset = builder.CreateAdd(a_step, builder.getInt64(r * kTileRows * a_row_bytes));
    a_tiles[r] = builder.CreateCall(load, {rows, bytes, builder.CreateGEP(i8, operands.a, offset),
                                           builder.getInt64(a_row_bytes)});
  }
  for (int64_t c = 0; c < 2; ++c) {
    llvm::Value* offset = builder.CreateAdd(b_step, builder.getInt64(c * kTileBytes));
    b_tiles[c] = builder.CreateCall(load, {rows, bytes, builder.CreateGEP(i8, operands.b, offset),
                                           builder.getInt64(b_row_bytes)});
  }
  std::array<llvm::Value*, 4> next;
  for (size_t t = 0; t < next.size(); ++t)
    next[t] = builder.CreateCall(product, {rows, bytes, bytes, sums[t], a_tiles[t / 2], b_tiles[t % 2]});
  llvm::Value* next_step = builder.CreateAdd(step, builder.getInt64(kAmxDepth));
  llvm::BasicBlock* latch = builder.GetInsertBlock();
  step->addIncoming(next_step, latch);
  for (size_t t = 0; t < sums.size(); ++t) sums[t]->addIncoming(next[t], latch);
  builder.CreateCondBr(builder.CreateICmpULT(next_step, builder.getInt64(operands.depth)), body, done);

  builder.SetInsertPoint(done);
  for (size_t t = 0; t < next.size(); ++t) {
    const int64_t first = static_cast<int64_t>(t / 2) * kTileRows * kAmxBlockColumns + static_cast<int64_t>(t % 2) * 16;
    llvm::Value* at = builder.CreateGEP(builder.getFloatTy(), operands.block, builder.getInt64(first));
    builder.CreateCall(store, {rows, bytes, at, builder.getInt64(kAmxBlockColumns * 4), next[t]});
  }
}

}  // namespace kiln
