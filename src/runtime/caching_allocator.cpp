// The device memory cache; see caching_allocator.h.
#include "runtime/caching_allocator.h"

#include <algorithm>
#include <bit>

namespace kiln {

CachingAllocator::CachingAllocator(AllocateFunction allocate, FreeFunction free, size_t max_cached_bytes)
    : allocate_(std::move(allocate)), free_(std::move(free)), max_cached_bytes_(max_cached_bytes) {}

CachingAllocator::~CachingAllocator() { trim(0); }

size_t CachingAllocator::bucket_size(size_t bytes) {
  constexpr size_t kSmallest = 256;
  if (bytes <= kSmallest) return kSmallest;
  // Four steps per power of two: 2^k, 1.25·2^k, 1.5·2^k, 1.75·2^k.
  size_t power = std::bit_floor(bytes);
  size_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

DeviceMemory CachingAllocator::allocate(size_t bytes) {
  size_t size = bucket_size(bytes);
  {
    std::lock_guard lock(mutex_);
    auto bucket = buckets_.find(size);
    if (bucket != buckets_.end() && !bucket->second.empty()) {
      // The most recently released block of the size: the likeliest to be warm in a cache.
      auto entry = bucket->second.back();
      bucket->second.pop_back();
      DeviceMemory memory = *entry;
      lru_.erase(entry);
      stats_.cached_bytes -= memory.bytes;
      ++stats_.hits;
      return memory;
    }
    ++stats_.misses;
  }
  try {
    DeviceMemory memory = allocate_(size);
    memory.bytes = size;
    return memory;
  } catch (...) {
    // Out of device memory, perhaps only because of what the cache holds: empty it and try again.
    trim(0);
    DeviceMemory memory = allocate_(size);
    memory.bytes = size;
    return memory;
  }
}

void CachingAllocator::release(DeviceMemory memory) {
  if (memory.handle == nullptr) return;
  std::lock_guard lock(mutex_);
  auto entry = lru_.insert(lru_.end(), memory);
  buckets_[memory.bytes].push_back(entry);
  stats_.cached_bytes += memory.bytes;
  trim_locked(max_cached_bytes_);
}

void CachingAllocator::trim(size_t keep_bytes) {
  std::lock_guard lock(mutex_);
  trim_locked(keep_bytes);
}

void CachingAllocator::trim_locked(size_t keep_bytes) {
  while (stats_.cached_bytes > keep_bytes && !lru_.empty()) {
    auto oldest = lru_.begin();
    DeviceMemory memory = *oldest;
    auto& bucket = buckets_[memory.bytes];
    bucket.erase(std::find(bucket.begin(), bucket.end(), oldest));
    if (bucket.empty()) buckets_.erase(memory.bytes);
    lru_.erase(oldest);
    stats_.cached_bytes -= memory.bytes;
    ++stats_.device_frees;
    free_(memory);
  }
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace kiln
