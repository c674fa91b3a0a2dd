// C shims for the version queries of kiln.h.
#include "kiln/kiln.h"

extern "C" const char* kiln_version(void) { return KILN_VERSION_STRING; }
extern "C" int kiln_version_number(void) { return KILN_VERSION_NUMBER; }
