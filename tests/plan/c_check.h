/* The checks the C API tests share: CHECK counts a failure and says where, expect_error asserts a
 * call's status and that its message (kiln_error_message) contains a fragment. Header-only: each
 * test program is one C file. A program returns `failures != 0`. */
#ifndef KILN_TESTS_PLAN_C_CHECK_H
#define KILN_TESTS_PLAN_C_CHECK_H

#include <stdio.h>
#include <string.h>

#include "kiln/kiln.h"

static int failures = 0;

#define CHECK(condition, ...)                                   \
  do {                                                          \
    if (!(condition)) {                                         \
      fprintf(stderr, "%s:%d: FAILED: ", __FILE__, __LINE__);   \
      fprintf(stderr, __VA_ARGS__);                             \
      fprintf(stderr, "\n");                                    \
      ++failures;                                               \
    }                                                           \
  } while (0)

static inline void expect_error(kiln_status status, kiln_status expected, const char* text, const char* what) {
  const char* message = kiln_error_message();
  CHECK(status == expected, "%s: status %s, expected %s (message: %s)", what, kiln_status_string(status),
        kiln_status_string(expected), message);
  CHECK(strstr(message, text) != NULL, "%s: message \"%s\" lacks \"%s\"", what, message, text);
  if (status == expected && strstr(message, text) != NULL) printf("ok   %s: %s\n", what, message);
}

#endif
