// How the kiln backend reports: a failure is a TRITONSERVER_Error carrying a message a user can act
// on (kiln's own where kiln found the problem), and log lines go to the server's log.
#pragma once

#include <source_location>
#include <string>

#include "kiln/kiln.h"
#include "triton_api.h"

namespace kiln::serving {

// A new server error; the caller (or the server, once returned to it) owns it.
inline TRITONSERVER_Error* error(TRITONSERVER_Error_Code code, const std::string& message) {
  return TRITONSERVER_ErrorNew(code, message.c_str());
}

// The error of a failed kiln call: `context` (what was being done) then kiln's message. A bad
// argument is the request's fault (INVALID_ARG); a bad plan or target is UNSUPPORTED or
// INVALID_ARG at load time; the rest are INTERNAL.
TRITONSERVER_Error* kiln_error(kiln_status status, const std::string& context);

// Writes one line to the server's log at `level` when that level is enabled, tagged with the
// caller's file and line.
void log(TRITONSERVER_LogLevel level, const std::string& message,
         std::source_location where = std::source_location::current());

// Evaluates a call returning TRITONSERVER_Error*; returns the error from the enclosing function.
#define KILN_TRITON_TRY(call)                  \
  do {                                         \
    if (TRITONSERVER_Error* error__ = (call)) \
      return error__;                          \
  } while (0)

}  // namespace kiln::serving
