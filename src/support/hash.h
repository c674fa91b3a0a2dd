// Deterministic hashing. UOp hashes must not depend on pointers or on the run, so that canonical
// orderings (and therefore generated code and plans) are the same in every process.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace kiln {

// Mixes `value` into `seed` (the 64-bit finaliser of splitmix64 applied to a combination).
constexpr uint64_t hash_mix(uint64_t seed, uint64_t value) {
  uint64_t x = seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// FNV-1a over bytes, then mixed; used for strings in UOp arguments.
inline uint64_t hash_bytes(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
  return hash_mix(h, bytes.size());
}

inline uint64_t hash_double(double value) {
  if (value == 0.0) value = 0.0;  // +0 and -0 are different constants but hash alike; equality decides
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

}  // namespace kiln
