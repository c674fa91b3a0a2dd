// A 128-bit signed integer for exact bound arithmetic: products and sums of two 64-bit values never
// overflow it, so range analysis can detect when a fixed-width operation might wrap.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;

constexpr int128 int128_max = static_cast<int128>((~static_cast<uint128>(0)) >> 1);
constexpr int128 int128_min = -int128_max - 1;

// Decimal text of an int128 (ostream has no operator for it).
std::string to_string(int128 value);

}  // namespace kiln
