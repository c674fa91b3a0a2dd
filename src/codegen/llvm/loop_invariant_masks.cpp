// Vector masks kept outside the loops that use them (loop_invariant_masks.h).
#include "codegen/llvm/loop_invariant_masks.h"

#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>

#include <unordered_map>
#include <vector>

namespace kiln {
namespace {

// The operand position of the mask of a masked memory intrinsic, or -1 for any other call.
int mask_operand(const llvm::IntrinsicInst& call) {
  switch (call.getIntrinsicID()) {
    case llvm::Intrinsic::masked_load: return 2;
    case llvm::Intrinsic::masked_gather: return 2;
    case llvm::Intrinsic::masked_store: return 3;
    case llvm::Intrinsic::masked_scatter: return 3;
    default: return -1;
  }
}

}  // namespace

void keep_masks_where_computed(llvm::Module& module) {
  for (llvm::Function& function : module) {
    std::unordered_map<llvm::CmpInst*, llvm::FreezeInst*> frozen;
    std::vector<std::pair<llvm::IntrinsicInst*, int>> uses;
    for (llvm::BasicBlock& block : function)
      for (llvm::Instruction& instruction : block)
        if (auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&instruction); call != nullptr && mask_operand(*call) >= 0)
          uses.emplace_back(call, mask_operand(*call));
    for (auto [call, position] : uses) {
      auto* compare = llvm::dyn_cast<llvm::CmpInst>(call->getArgOperand(static_cast<unsigned>(position)));
      if (compare == nullptr || !compare->getType()->isVectorTy() || compare->getParent() == call->getParent()) continue;
      llvm::FreezeInst*& freeze = frozen[compare];
      if (freeze == nullptr) {
        freeze = new llvm::FreezeInst(compare, compare->getName() + ".mask");
        freeze->insertAfter(compare);
      }
      call->setArgOperand(static_cast<unsigned>(position), freeze);
    }
  }
}

}  // namespace kiln
