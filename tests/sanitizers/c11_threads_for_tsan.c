// C11 thrd_create and thrd_join over pthreads, linked into the C tests of a thread-sanitized build
// only (tests/meson.build). ThreadSanitizer (gcc 12's libtsan and clang 14's alike) intercepts
// pthread_create but not thrd_create, which glibc 2.34+ implements with its internal
// pthread_create: a thread started that way has no TSan state and crashes (SEGV at address 0) at its
// first instrumented access. These definitions, in the test executable, take the place of glibc's.
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

typedef struct {
  thrd_start_t function;
  void* argument;
} start_routine;

static void* run(void* start_pointer) {
  start_routine start = *(start_routine*)start_pointer;
  free(start_pointer);
  return (void*)(intptr_t)start.function(start.argument);
}

int thrd_create(thrd_t* thread, thrd_start_t function, void* argument) {
  start_routine* start = malloc(sizeof *start);
  if (start == NULL) return thrd_nomem;
  start->function = function;
  start->argument = argument;
  if (pthread_create(thread, NULL, run, start) != 0) {
    free(start);
    return thrd_error;
  }
  return thrd_success;
}

int thrd_join(thrd_t thread, int* result) {
  void* value;
  if (pthread_join(thread, &value) != 0) return thrd_error;
  if (result != NULL) *result = (int)(intptr_t)value;
  return thrd_success;
}
