// A caching allocator for device memory, one per device: freed blocks are kept in size buckets and
// handed out again, because device allocations are slow (a driver call, sometimes a page-table
// update) and a schedule allocates the same sizes on every run. Blocks are rounded up to a bucket
// (256 bytes at least, then four buckets per power of two, so at most 25% is wasted); the cache holds
// at most `max_cached_bytes`, dropping the least recently released blocks first. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/device.h"

namespace kiln {

struct CachingAllocatorStats {
  uint64_t hits = 0;         // allocations served from the cache
  uint64_t misses = 0;       // allocations that went to the device
  uint64_t device_frees = 0; // blocks given back to the device (trimmed or at destruction)
  size_t cached_bytes = 0;   // bytes held in the cache now
};

class CachingAllocator {
 public:
  using AllocateFunction = std::function<DeviceMemory(size_t bytes)>;
  using FreeFunction = std::function<void(DeviceMemory)>;

  CachingAllocator(AllocateFunction allocate, FreeFunction free, size_t max_cached_bytes);
  ~CachingAllocator();  // gives every cached block back; blocks still in use are the caller's to release first
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The bucket a request of `bytes` is served from (the size the block really has).
  static size_t bucket_size(size_t bytes);

  // A block of at least `bytes` (memory.bytes is its bucket size). When the device is out of memory,
  // the cache is emptied and the allocation tried once more before the error goes to the caller.
  DeviceMemory allocate(size_t bytes);
  // Returns a block from allocate() to the cache (most recently used), then trims to the limit.
  void release(DeviceMemory memory);
  // Gives least recently released blocks back to the device until at most `keep_bytes` are cached.
  void trim(size_t keep_bytes);

  CachingAllocatorStats stats() const;

 private:
  void trim_locked(size_t keep_bytes);

  AllocateFunction allocate_;
  FreeFunction free_;
  size_t max_cached_bytes_;
  mutable std::mutex mutex_;
  std::list<DeviceMemory> lru_;  // cached blocks, least recently released first
  std::map<size_t, std::vector<std::list<DeviceMemory>::iterator>> buckets_;  // bucket size → its blocks in lru_
  CachingAllocatorStats stats_;
};

}  // namespace kiln
