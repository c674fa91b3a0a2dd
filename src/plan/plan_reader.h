// The plan reader (runtime side, part of libkiln): holds a plan's bytes (mapped from a file or
// copied from memory) and verifies everything in them before any of their code is loaded. No LLVM,
// no protobuf: only libc and the flatbuffers headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kiln/kiln.h"
#include "plan/plan_generated.h"

namespace kiln {

// An error of the plan runtime, with the C status it maps to (capi/ turns it into one).
class PlanError : public std::runtime_error {
 public:
  PlanError(kiln_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  kiln_status status() const { return status_; }

 private:
  kiln_status status_;
};

// Throws PlanError KILN_ERROR_INVALID_PLAN with "invalid plan: MESSAGE": the one wording of every
// metadata check (plan_reader.cpp, symbolic_metadata.cpp).
[[noreturn]] void invalid_plan(const std::string& message);

// The bytes of one plan, page-aligned and read-only: an mmap of the file, or an aligned copy of a
// caller's buffer. Move-only.
class PlanBytes {
 public:
  static PlanBytes map_file(const std::string& path);            // PlanError (KILN_ERROR_IO)
  static PlanBytes copy_buffer(const void* data, size_t size);
  PlanBytes(PlanBytes&& other) noexcept;
  PlanBytes& operator=(PlanBytes&&) = delete;
  PlanBytes(const PlanBytes&) = delete;
  ~PlanBytes();
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  PlanBytes() = default;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // munmap (else free)
};

// A plan whose header, hash, metadata and target have been checked: views into its bytes.
struct VerifiedPlan {
  const plan_fb::Plan* metadata = nullptr;
  const unsigned char* weights = nullptr;
  uint64_t weights_size = 0;
  const unsigned char* code = nullptr;
  uint64_t code_size = 0;
};

// Checks, in this order, each failure a PlanError with its own message: magic, format version,
// header and file size (truncation), section bounds, content hash, the flatbuffers verifier, the
// metadata's internal consistency (every slot, weight and value in range), the target triple and
// every CPU feature the code was compiled with that this runtime can query.
VerifiedPlan verify_plan(const unsigned char* data, size_t size);

// "(1, 1, 28, 28)"
std::string shape_text(const int64_t* shape, size_t rank);

}  // namespace kiln
