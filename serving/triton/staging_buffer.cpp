// StagingBuffer (model_state.h): aligned scratch for gathered inputs and batched outputs.
#include <algorithm>
#include <cstdlib>
#include <new>

#include "model_state.h"

namespace kiln::serving {

void StagingBuffer::Free::operator()(std::byte* pointer) const { std::free(pointer); }

std::byte* StagingBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_ && data_) return data_.get();
  // Grow by half again, so a batch that creeps up reallocates a few times, not every run.
  size_t capacity = std::max(bytes, capacity_ + capacity_ / 2);
  capacity = (std::max<size_t>(capacity, 64) + 63) / 64 * 64;
  auto* memory = static_cast<std::byte*>(std::aligned_alloc(64, capacity));
  if (!memory) throw std::bad_alloc();
  data_.reset(memory);
  capacity_ = capacity;
  return memory;
}

}  // namespace kiln::serving
