/* A warm run of a symbolic plan allocates nothing (docs/plan-format.md, "Symbolic plans"): the
 * variables, the per-run sizes and the kernels' variable arrays live in the run context. This
 * program counts malloc calls (it interposes malloc, so it is built without sanitizers) while it
 * runs the plan of test-symbolic-plan at many shapes, after one warm-up round.
 * usage: symbolic_no_alloc PLAN THREADS */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "kiln/kiln.h"

static int counting = 0;
static long mallocs = 0;

void* malloc(size_t size) {
  static void* (*real)(size_t) = NULL;
  if (real == NULL) *(void**)&real = dlsym(RTLD_NEXT, "malloc");
  if (counting) ++mallocs;
  return real(size);
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  kiln_plan* plan = NULL;
  if (kiln_plan_load_file(argv[1], &plan) != KILN_OK) {
    printf("FAIL: %s\n", kiln_error_message());
    return 1;
  }
  static _Alignas(64) float a[64], b[64], x[128], y[128], s[8];
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.thread_count = atoi(argv[2]);
  for (int round = 0; round < 3; ++round)
    for (int64_t n = 1; n <= 64; n += 9) {
      int64_t a_shape[1] = {n}, x_shape[2] = {n % 8 + 1, n % 16 + 1}, y_shape[1] = {2 * n}, s_shape[1] = {n % 8 + 1};
      kiln_tensor inputs[3] = {{"a", KILN_DTYPE_FLOAT32, 1, a_shape, a, sizeof a},
                               {"b", KILN_DTYPE_FLOAT32, 1, a_shape, b, sizeof b},
                               {"x", KILN_DTYPE_FLOAT32, 2, x_shape, x, sizeof x}};
      kiln_tensor outputs[2] = {{"y", KILN_DTYPE_FLOAT32, 1, y_shape, y, sizeof y},
                                {"s", KILN_DTYPE_FLOAT32, 1, s_shape, s, sizeof s}};
      counting = round > 0;
      kiln_status status = kiln_plan_run_with_options(plan, inputs, 3, outputs, 2, &options);
      counting = 0;
      if (status != KILN_OK) {
        printf("FAIL: %s\n", kiln_error_message());
        return 1;
      }
    }
  kiln_plan_free(plan);
  if (mallocs != 0) {
    printf("FAIL: %ld mallocs in warm runs with thread_count %s\n", mallocs, argv[2]);
    return 1;
  }
  printf("ok: no malloc in warm runs with thread_count %s\n", argv[2]);
  return 0;
}
