// The one private symbol that libkiln exports beyond kiln.h: libkiln-compiler (capi/compiler.cpp)
// stores its error messages through it, so that kiln_error_message() reports the failures of both
// libraries from one per-thread message. Not declared in any public header; not a stable API.
#pragma once

#include "kiln/kiln.h"

extern "C" {
// Sets the calling thread's message (NULL clears it) and returns `status`. Never throws.
KILN_API kiln_status kiln_private_set_error_message(kiln_status status, const char* message);
}
