// The caching allocator over a fake device: buckets, reuse of the most recent block, LRU trimming,
// the retry after an out-of-memory error, and giving everything back at destruction.
#include <doctest/doctest.h>

#include <set>
#include <stdexcept>

#include "runtime/caching_allocator.h"

using namespace kiln;

namespace {

struct FakeDevice {
  std::set<void*> live;
  size_t live_bytes = 0;
  size_t limit = SIZE_MAX;
  uintptr_t next = 0x1000;
  DeviceMemory allocate(size_t bytes) {
    if (live_bytes + bytes > limit) throw std::runtime_error("out of device memory");
    void* handle = reinterpret_cast<void*>(next += 0x1000);
    live.insert(handle);
    live_bytes += bytes;
    return DeviceMemory{handle, bytes};
  }
  void free(DeviceMemory memory) {
    REQUIRE(live.erase(memory.handle) == 1);
    live_bytes -= memory.bytes;
  }
};

CachingAllocator make(FakeDevice& device, size_t max_cached) {
  return CachingAllocator([&](size_t bytes) { return device.allocate(bytes); },
                          [&](DeviceMemory memory) { device.free(memory); }, max_cached);
}

}  // namespace

TEST_SUITE("opencl-renderer") {

TEST_CASE("bucket sizes: 256 bytes at least, then four steps per power of two") {
  CHECK(CachingAllocator::bucket_size(0) == 256);
  CHECK(CachingAllocator::bucket_size(256) == 256);
  CHECK(CachingAllocator::bucket_size(257) == 320);
  CHECK(CachingAllocator::bucket_size(1000) == 1024);
  CHECK(CachingAllocator::bucket_size(1025) == 1280);
  CHECK(CachingAllocator::bucket_size(3 << 20) == (3 << 20));
  for (size_t bytes : {300, 5000, 123456, 7777777}) {
    CHECK(CachingAllocator::bucket_size(bytes) >= bytes);
    CHECK(CachingAllocator::bucket_size(bytes) <= bytes + bytes / 4);
  }
}

TEST_CASE("a released block is handed out again for the same bucket, the most recent first") {
  FakeDevice device;
  CachingAllocator cache = make(device, 1 << 20);
  DeviceMemory a = cache.allocate(1000), b = cache.allocate(1010);
  CHECK(a.bytes == 1024);
  cache.release(a);
  cache.release(b);
  CHECK(cache.stats().cached_bytes == 2048);
  DeviceMemory c = cache.allocate(1020);
  CHECK(c.handle == b.handle);
  DeviceMemory d = cache.allocate(2000);  // another bucket: a new block
  CHECK(d.handle != a.handle);
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().misses == 3);
  cache.release(c);
  cache.release(d);
}

TEST_CASE("the cache keeps at most its limit, dropping the least recently released blocks") {
  FakeDevice device;
  {
    CachingAllocator cache = make(device, 3000);
    DeviceMemory a = cache.allocate(1024), b = cache.allocate(1024), c = cache.allocate(1024);
    cache.release(a);
    cache.release(b);
    CHECK(device.live.size() == 3);
    cache.release(c);  // 3072 bytes > 3000: a (the oldest) goes back to the device
    CHECK(device.live.count(a.handle) == 0);
    CHECK(device.live.size() == 2);
    cache.trim(1024);
    CHECK(device.live.count(b.handle) == 0);
    CHECK(device.live.count(c.handle) == 1);
    CHECK(cache.stats().device_frees == 2);
  }
  CHECK(device.live.empty());  // destruction gives the rest back
}

TEST_CASE("out of device memory: the cache is emptied and the allocation tried again") {
  FakeDevice device;
  device.limit = 4096;
  CachingAllocator cache = make(device, 1 << 20);
  DeviceMemory a = cache.allocate(2048), b = cache.allocate(2048);
  cache.release(a);
  cache.release(b);
  DeviceMemory big = cache.allocate(4000);  // fits only once the cached blocks are freed
  CHECK(big.bytes == 4096);
  CHECK(cache.stats().cached_bytes == 0);
  device.limit = 0;
  CHECK_THROWS_AS(cache.allocate(100), std::runtime_error);
  cache.release(big);
}

}  // TEST_SUITE
