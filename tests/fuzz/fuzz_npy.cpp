// Fuzz target: the .npy reader of the kiln tool (tools/npy_file.cpp). Any bytes must give either an
// array whose body holds exactly its shape's elements, or a kiln::UserError.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "npy_file.h"
#include "support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    kiln::tools::NpyArray array = kiln::tools::parse_npy(bytes, "fuzz.npy");
    // The reader's promise to `kiln run`, which hands the bytes to a plan with this shape.
    uint64_t expected = kiln_dtype_size(array.dtype);
    for (int64_t dim : array.shape)
      if (dim < 0 || __builtin_mul_overflow(expected, static_cast<uint64_t>(dim), &expected)) std::abort();
    if (array.bytes.size() != expected) std::abort();
  } catch (const kiln::UserError&) {
    // A rejected file: the expected outcome for most inputs.
  }
  return 0;
}
