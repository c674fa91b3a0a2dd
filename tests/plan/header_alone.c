/* kiln.h compiles alone as strict C11 (-std=c11 -pedantic -Wall -Wextra -Werror): nothing is
 * included before it, and this file uses only what it declares. */
#include "kiln/kiln.h"

int main(void) {
  kiln_tensor tensor = {0};
  (void)tensor;
  return kiln_status_string(KILN_OK)[0] == 'K' ? 0 : 1;
}
