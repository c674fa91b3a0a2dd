// The fixed header of a kiln plan file and its content hash: what the writer (compiler side) and
// the reader (libkiln) share. The layout is specified in docs/plan-format.md; this file is the code.
// No dependencies beyond the C++ standard library: libkiln compiles it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kiln::plan {

// The newest format version this build reads and writes. Bump it for any change an older reader
// would misread (see "Versioning" in docs/plan-format.md). Version 5 added symbolic device plans,
// version 4 kernels' work-group sizes to device plans, version 3 device plans, version 2 symbolic
// sizes; a plan
// without variables is written as version 1 (kPlanFormatVersionFixedShapes), so fixed-shape plans
// stay byte-identical and an older libkiln still reads them.
constexpr uint32_t kPlanFormatVersion = 6;
constexpr uint32_t kPlanFormatVersionFixedShapes = 1;
// The first version whose plans may carry variables and size programs.
constexpr uint32_t kPlanFormatVersionSymbolic = 2;
// The first version whose plans may be for a device (OpenCL kernels as source): CPU plans are still
// written as version 1 or 2, so they keep their bytes and older readers still load them.
constexpr uint32_t kPlanFormatVersionDevice = 3;
// The first version whose device plans may fix a kernel's work-group size (Kernel.device_local_size):
// a device plan whose kernels all let the device choose is still written as version 3.
constexpr uint32_t kPlanFormatVersionLocalSizes = 4;
// The first version whose device plans may have variables (symbolic sizes): each kernel takes its
// variables' values as integer parameters after its buffers. Fixed-shape device plans keep 3 or 4,
// so an older libkiln, which refuses a device plan with variables as invalid, is told instead that
// the plan is newer than it reads.
constexpr uint32_t kPlanFormatVersionSymbolicDevice = 5;
// The first version whose plans may have variables the run decides (Plan.run_bindings): only such a
// plan is written as version 6, so an older libkiln, which would run its kernels with a variable it
// never set, refuses it as too new.
constexpr uint32_t kPlanFormatVersionRunBound = 6;

constexpr char kPlanMagic[8] = {'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'};
constexpr uint64_t kPlanHeaderSize = 128;
// Sections start on this boundary so that a reader can map the weights (and the code) directly.
constexpr uint64_t kPlanSectionAlignment = 4096;
// Each weight starts on this boundary inside the weights section: the kernels' alignment promise.
constexpr uint64_t kPlanWeightAlignment = 64;

// Byte offsets of the header fields (all integers little-endian). The header is kPlanHeaderSize
// bytes; bytes after the last field are zero.
namespace header_field {
constexpr size_t magic = 0;             // 8 bytes, "KILNPLAN"
constexpr size_t format_version = 8;    // u32
constexpr size_t header_size = 12;      // u32, kPlanHeaderSize
constexpr size_t file_size = 16;        // u64, the whole file
constexpr size_t content_hash = 24;     // u64, plan_content_hash of bytes [header_size, file_size)
constexpr size_t metadata_offset = 32;  // u64 offset, u64 size: the flatbuffers metadata
constexpr size_t metadata_size = 40;
constexpr size_t weights_offset = 48;   // u64 offset, u64 size: the weights
constexpr size_t weights_size = 56;
constexpr size_t code_offset = 64;      // u64 offset, u64 size: the ELF shared object
constexpr size_t code_size = 72;
}  // namespace header_field

inline uint64_t read_u64(const unsigned char* at) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | at[i];
  return value;
}
inline uint32_t read_u32(const unsigned char* at) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | at[i];
  return value;
}
inline void write_u64(unsigned char* at, uint64_t value) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<unsigned char>(value >> (8 * i));
}
inline void write_u32(unsigned char* at, uint32_t value) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<unsigned char>(value >> (8 * i));
}

// The content hash: four FNV-1a-style lanes over little-endian 64-bit words (word i feeds lane
// i % 4; a last partial word is zero-padded), each step followed by an xor-shift so that high bits
// reach low ones; the lanes and the length are then folded together and finished with MurmurHash3's
// 64-bit finaliser. Every step is a bijection of the lane, so any single changed byte changes the
// hash. It detects corruption, not tampering: a plan is trusted like a shared library.
inline uint64_t plan_content_hash(const unsigned char* data, size_t size) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  constexpr uint64_t kOffset = 0xcbf29ce484222325ull;
  uint64_t lanes[4] = {kOffset, kOffset ^ 1, kOffset ^ 2, kOffset ^ 3};
  size_t words = size / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, data + 8 * i, 8);  // little-endian hosts only (x86-64, AArch64)
    uint64_t& lane = lanes[i % 4];
    lane = (lane ^ word) * kPrime;
    lane ^= lane >> 29;
  }
  if (size % 8 != 0) {
    uint64_t word = 0;
    std::memcpy(&word, data + 8 * words, size % 8);
    uint64_t& lane = lanes[words % 4];
    lane = (lane ^ word) * kPrime;
    lane ^= lane >> 29;
  }
  uint64_t hash = kOffset;
  for (uint64_t lane : lanes) hash = (hash ^ lane) * kPrime;
  hash ^= static_cast<uint64_t>(size);
  hash ^= hash >> 33;
  hash *= 0xff51afd7ed558ccdull;
  hash ^= hash >> 33;
  hash *= 0xc4ceb3f99e16b28bull;
  hash ^= hash >> 33;
  return hash;
}

}  // namespace kiln::plan
