// The scalar element types of kiln, shared by the public C++ API and the compiler's IR (one
// definition, here). `Void` and `Index` exist only inside the compiler: `Index` is the abstract
// integer of index arithmetic, which never overflows; codegen lowers it to a 64-bit integer.
#pragma once

#include <cstdint>

namespace kiln {

enum class ScalarType : uint8_t {
  Void, Bool,
  Int8, Int16, Int32, Int64,
  UInt8, UInt16, UInt32, UInt64,
  Float16, BFloat16, Float32, Float64,
  Index,
};

}  // namespace kiln
