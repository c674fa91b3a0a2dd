// Vectors assembled from parts, and the 8-bit dot product; see llvm_vectors.h.
#include "codegen/llvm/llvm_vectors.h"

#include <llvm/IR/IntrinsicsX86.h>

#include "support/error.h"

namespace kiln {

llvm::Value* repeated_group(llvm::IRBuilder<>& builder, const std::vector<llvm::Value*>& group, unsigned count) {
  auto size = static_cast<unsigned>(group.size());
  llvm::Value* vector = llvm::PoisonValue::get(llvm::FixedVectorType::get(group.front()->getType(), size));
  for (unsigned lane = 0; lane < size; ++lane) vector = builder.CreateInsertElement(vector, group[lane], builder.getInt64(lane));
  std::vector<int> mask(count);
  for (unsigned lane = 0; lane < count; ++lane) mask[lane] = static_cast<int>(lane % size);
  return builder.CreateShuffleVector(vector, mask);
}

llvm::Value* lanes_of_vectors(llvm::IRBuilder<>& builder, const std::vector<llvm::Value*>& vectors,
                              const std::vector<std::pair<unsigned, unsigned>>& lanes) {
  size_t parts = vectors.size();
  if (parts == 0 || (parts & (parts - 1)) != 0) return nullptr;
  llvm::Type* type = vectors.front()->getType();
  auto* vector_type = llvm::dyn_cast<llvm::FixedVectorType>(type);
  if (vector_type == nullptr) return nullptr;
  for (llvm::Value* vector : vectors)
    if (vector->getType() != type) return nullptr;
  const unsigned width = vector_type->getNumElements();
  // Concatenated pairwise, the vectors keep their order: vector q's lanes start at q * width.
  std::vector<llvm::Value*> level = vectors;
  while (level.size() > 1) {
    std::vector<llvm::Value*> next;
    for (size_t i = 0; i < level.size(); i += 2) {
      auto half = llvm::cast<llvm::FixedVectorType>(level[i]->getType())->getNumElements();
      std::vector<int> both(2 * half);
      for (unsigned lane = 0; lane < 2 * half; ++lane) both[lane] = static_cast<int>(lane);
      next.push_back(builder.CreateShuffleVector(level[i], level[i + 1], both));
    }
    level = std::move(next);
  }
  std::vector<int> mask;
  mask.reserve(lanes.size());
  for (const auto& [vector, lane] : lanes) {
    if (vector >= parts || lane >= width) throw_internal_error("lanes_of_vectors: a lane outside its vectors");
    mask.push_back(static_cast<int>(vector * width + lane));
  }
  return builder.CreateShuffleVector(level.front(), mask);
}

llvm::Value* dot_product_8bit(llvm::IRBuilder<>& builder, llvm::Value* accumulator, llvm::Value* unsigned_bytes,
                              llvm::Value* signed_bytes) {
  auto* type = llvm::cast<llvm::FixedVectorType>(accumulator->getType());
  llvm::Intrinsic::ID id;
  switch (type->getNumElements()) {
    case 16: id = llvm::Intrinsic::x86_avx512_vpdpbusd_512; break;
    case 8: id = llvm::Intrinsic::x86_avx512_vpdpbusd_256; break;
    case 4: id = llvm::Intrinsic::x86_avx512_vpdpbusd_128; break;
    default: throw_internal_error("dot_product_8bit: an accumulator of " + std::to_string(type->getNumElements()) + " lanes");
  }
  llvm::Value* u = builder.CreateBitCast(unsigned_bytes, type);
  llvm::Value* s = builder.CreateBitCast(signed_bytes, type);
  return builder.CreateIntrinsic(id, {}, {accumulator, u, s});
}

}  // namespace kiln
