/* compiler.h compiles alone as strict C11 (-std=c11 -pedantic -Wall -Wextra -Werror): nothing is
 * included before it, and this file uses only what it (and the kiln.h it includes) declares. */
#include "kiln/compiler.h"

int main(void) {
  kiln_compile_options options;
  kiln_compile_options_init(&options);
  return options.size == sizeof options && kiln_status_string(KILN_ERROR_INVALID_MODEL)[0] == 'K' ? 0 : 1;
}
