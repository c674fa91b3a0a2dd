// The two error channels of kiln (see STYLE.md, habit 8).
//  - UserError: the input is wrong (a bad model, a bad argument). The message is written for the user
//    and names what to fix; for models it carries the ONNX node name, op type and opset.
//  - InternalError: kiln has a bug. It carries the file and line that detected it and, where useful,
//    a dump of the IR involved.
// Only the C API boundary turns these into status codes.
#pragma once

#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kiln/error.hpp"

namespace kiln {

// Concatenates anything that has an ostream operator<<. Used to build error messages.
template <class... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// The public kiln::Error, so that C++ users catch one type.
class UserError : public Error {
 public:
  explicit UserError(const std::string& message) : Error(message) {}
};

class InternalError : public std::logic_error {
 public:
  InternalError(const std::string& message, std::source_location where, std::string ir_dump = {});
  const std::string& ir_dump() const { return ir_dump_; }
  const std::source_location& where() const { return where_; }

 private:
  std::source_location where_;
  std::string ir_dump_;
};

[[noreturn]] void throw_internal_error(const std::string& message,
                                       std::source_location where = std::source_location::current());

}  // namespace kiln

// An invariant that only a kiln bug can break. Active in every build type: the checks guard memory
// safety of later stages and cost little next to compilation.
#define KILN_ASSERT(condition, ...)                                                    \
  do {                                                                                 \
    if (!(condition)) [[unlikely]]                                                     \
      ::kiln::throw_internal_error(::kiln::str_cat("assertion failed: " #condition " ", \
                                                   ##__VA_ARGS__));                    \
  } while (0)
