// The exception kiln's C++ API throws for every error a user can cause (a bad argument, shapes
// that do not fit, a malformed model). Internal errors (kiln bugs) are std::logic_error instead.
#pragma once

#include <stdexcept>

namespace kiln {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kiln
