/* Compiled as strict C11: kiln.h stands alone, and the version queries agree with the macros. */
#include <stdio.h>
#include <string.h>

#include "kiln/kiln.h"

int main(void) {
  if (strcmp(kiln_version(), KILN_VERSION_STRING) != 0) {
    fprintf(stderr, "kiln_version() = %s, header says %s\n", kiln_version(), KILN_VERSION_STRING);
    return 1;
  }
  if (kiln_version_number() != KILN_VERSION_NUMBER) {
    fprintf(stderr, "kiln_version_number() = %d, header says %d\n", kiln_version_number(), KILN_VERSION_NUMBER);
    return 1;
  }
  printf("kiln %s\n", kiln_version());
  return 0;
}
