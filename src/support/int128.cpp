// Decimal formatting for int128.
#include "support/int128.h"

#include <algorithm>

namespace kiln {

std::string to_string(int128 value) {
  if (value == 0) return "0";
  bool negative = value < 0;
  // Work on the unsigned magnitude so that int128_min does not overflow when negated.
  uint128 magnitude =
      negative ? static_cast<uint128>(-(value + 1)) + 1 : static_cast<uint128>(value);
  std::string digits;
  while (magnitude != 0) {
    digits.push_back(static_cast<char>('0' + static_cast<int>(magnitude % 10)));
    magnitude /= 10;
  }
  if (negative) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  return digits;
}

}  // namespace kiln
