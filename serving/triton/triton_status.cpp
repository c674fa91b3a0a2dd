// Error and log plumbing from kiln to the server (triton_status.h).
#include "triton_status.h"

namespace kiln::serving {

TRITONSERVER_Error* kiln_error(kiln_status status, const std::string& context) {
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
  switch (status) {
    case KILN_ERROR_INVALID_ARGUMENT:
    case KILN_ERROR_INVALID_PLAN:
    case KILN_ERROR_INVALID_MODEL:
    case KILN_ERROR_IO: code = TRITONSERVER_ERROR_INVALID_ARG; break;
    case KILN_ERROR_UNSUPPORTED_VERSION:
    case KILN_ERROR_UNSUPPORTED_TARGET: code = TRITONSERVER_ERROR_UNSUPPORTED; break;
    case KILN_ERROR_OUT_OF_MEMORY: code = TRITONSERVER_ERROR_UNAVAILABLE; break;
    case KILN_ERROR_CANCELLED: code = TRITONSERVER_ERROR_CANCELLED; break;
    default: break;
  }
  return error(code, context + ": " + kiln_error_message() + " (" + kiln_status_string(status) + ")");
}

void log(TRITONSERVER_LogLevel level, const std::string& message, std::source_location where) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  // The server reports its own failure to log on stderr; nothing better can be done with it here.
  if (TRITONSERVER_Error* failure = TRITONSERVER_LogMessage(level, where.file_name(), int(where.line()), message.c_str()))
    TRITONSERVER_ErrorDelete(failure);
}

}  // namespace kiln::serving
