// A block of host memory holding tensor data: 64-byte aligned (the kernels' alignment promise, see
// docs/kernel-ast.md) and freed with its last reference. Zero-initialised unless the caller is
// about to overwrite every byte (kernel outputs, the arena): that saves a pass over the memory.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "ir/dtype.h"

namespace kiln {

class HostBuffer {
 public:
  enum class Fill { Zero, None };
  HostBuffer(DType dtype, int64_t count, Fill fill = Fill::Zero) : dtype_(dtype), count_(count) {
    bytes_ = static_cast<size_t>(count) * static_cast<size_t>(dtype.scalar_bytes());
    // aligned_alloc needs a size that is a multiple of the alignment, and a non-zero one.
    size_t rounded = (bytes_ + kAlignment - 1) / kAlignment * kAlignment;
    data_ = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (data_ == nullptr) throw std::bad_alloc();
    if (fill == Fill::Zero) std::memset(data_, 0, rounded == 0 ? kAlignment : rounded);
  }
  ~HostBuffer() { std::free(data_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  static constexpr size_t kAlignment = 64;
  DType dtype() const { return dtype_; }
  int64_t count() const { return count_; }
  size_t bytes() const { return bytes_; }
  void* data() { return data_; }
  const void* data() const { return data_; }

 private:
  DType dtype_;
  int64_t count_;
  size_t bytes_;
  void* data_;
};

}  // namespace kiln
