// Out-of-line pieces of the error channels, so that throwing sites stay small.
#include "support/error.h"

namespace kiln {

static std::string describe(const std::string& message, const std::source_location& where) {
  return str_cat("internal error at ", where.file_name(), ":", where.line(), ": ", message);
}

InternalError::InternalError(const std::string& message, std::source_location where,
                             std::string ir_dump)
    : std::logic_error(ir_dump.empty() ? describe(message, where)
                                       : describe(message, where) + "\n" + ir_dump),
      where_(where),
      ir_dump_(std::move(ir_dump)) {}

void throw_internal_error(const std::string& message, std::source_location where) {
  throw InternalError(message, where);
}

}  // namespace kiln
