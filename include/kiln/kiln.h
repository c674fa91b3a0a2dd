/*
 * kiln.h — the C API of the kiln runtime.
 *
 * This header is C11 and stands alone. It grows with the runtime (plans, tensors, runs); for now it
 * holds the version queries that every later call builds on.
 *
 * Stability: every function declared here keeps its signature for the life of the major version;
 * a changed behaviour gets a new name with a _v2 suffix.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KILN_API __declspec(dllimport)
#else
#define KILN_API __attribute__((visibility("default")))
#endif

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH". Compare with
 * KILN_VERSION_STRING to detect a header/library mismatch. Thread-safe; never fails. */
KILN_API const char* kiln_version(void);

/* The same version as one number, MAJOR*1000000 + MINOR*1000 + PATCH (see KILN_VERSION_NUMBER). */
KILN_API int kiln_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H */
