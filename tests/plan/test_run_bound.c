/* A plan whose output shapes the run decides (docs/symbolic-shapes.md, stage 6), through kiln.h in
 * C11, linked against libkiln only, so the sanitizer builds run it (docs/sanitizers.md):
 *   test-run-bound PLAN
 * PLAN is tests/plan/data/nonzero_gathernd.onnx compiled by `kiln compile`: x float32 [3, 5] ->
 * where int64 [2, count] (NonZero) and picked float32 [count] (x at those coordinates). Runs at no,
 * one, some and all non-zero elements against a plain C reference, with buffers at the upper bound
 * and a guard past them; the real shapes come back through kiln_run_options.output_shapes. Then
 * the misuse errors, the plan running correctly after each, and four threads running it at once. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

#include "c_check.h"
#include "kiln/kiln.h"

enum { kRows = 3, kCols = 5, kElements = kRows * kCols, kGuard = 4 };

/* One run's buffers: the outputs at the bound (count = 15) plus a guard that must survive. */
struct Run {
  _Alignas(64) float x[kElements];
  _Alignas(64) int64_t where[2 * kElements + kGuard];
  _Alignas(64) float picked[kElements + kGuard];
  int64_t shapes[3];
};

static kiln_status run_plan(const kiln_plan* plan, struct Run* run, int with_shapes, size_t where_bytes) {
  static const int64_t x_shape[] = {kRows, kCols}, where_bound[] = {2, kElements}, picked_bound[] = {kElements};
  kiln_tensor inputs[] = {{"x", KILN_DTYPE_FLOAT32, 2, x_shape, run->x, sizeof run->x}};
  kiln_tensor outputs[] = {{"where", KILN_DTYPE_INT64, 2, where_bound, run->where, where_bytes},
                           {"picked", KILN_DTYPE_FLOAT32, 1, picked_bound, run->picked, sizeof(float) * kElements}};
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.output_shapes = with_shapes ? run->shapes : NULL;
  return kiln_plan_run_with_options(plan, inputs, 1, outputs, 2, &options);
}

/* Fills x so that element i is non-zero where `pattern` says (0: none, 1: the last only, 2: every
 * third, 3: all), runs, and compares with the reference. Returns how many things differ (printed;
 * no shared counter, so threads may call it). */
static int check_pattern(const kiln_plan* plan, struct Run* run, int pattern) {
  int bad = 0;
  int64_t expected[kElements], count = 0;
  for (int i = 0; i < kElements; ++i) {
    int nonzero = pattern == 3 || (pattern == 2 && i % 3 == 1) || (pattern == 1 && i == kElements - 1);
    run->x[i] = nonzero ? 0.5f + (float)i : 0.0f;
    if (nonzero) expected[count++] = i;
  }
  for (int i = 0; i < 2 * kElements + kGuard; ++i) run->where[i] = -7;
  for (int i = 0; i < kElements + kGuard; ++i) run->picked[i] = -7.0f;
  if (run_plan(plan, run, 1, sizeof(int64_t) * 2 * kElements) != KILN_OK) {
    fprintf(stderr, "pattern %d: %s\n", pattern, kiln_error_message());
    return 1;
  }
  if (run->shapes[0] != 2 || run->shapes[1] != count || run->shapes[2] != count) {
    fprintf(stderr, "pattern %d: shapes (%lld, %lld) and (%lld), expected (2, %lld) and (%lld)\n", pattern,
            (long long)run->shapes[0], (long long)run->shapes[1], (long long)run->shapes[2], (long long)count,
            (long long)count);
    return 1;
  }
  /* where is [2, count] row-major from the start of its buffer: rows, then columns. */
  for (int64_t j = 0; j < count; ++j) {
    bad += run->where[j] != expected[j] / kCols || run->where[count + j] != expected[j] % kCols;
    bad += run->picked[j] != run->x[expected[j]];
  }
  for (int i = 2 * kElements; i < 2 * kElements + kGuard; ++i) bad += run->where[i] != -7;
  for (int i = kElements; i < kElements + kGuard; ++i) bad += run->picked[i] != -7.0f;
  if (bad != 0) fprintf(stderr, "pattern %d: %d values differ from the reference or past the bound\n", pattern, bad);
  return bad;
}

static int run_in_thread(void* argument) {
  const kiln_plan* plan = argument;
  static _Thread_local struct Run run;
  int found = 0;
  for (int round = 0; round < 50; ++round) found += check_pattern(plan, &run, round % 4);
  return found;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test-run-bound PLAN\n");
    return 2;
  }
  kiln_plan* plan = NULL;
  if (kiln_plan_load_file(argv[1], &plan) != KILN_OK) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], kiln_error_message());
    return 1;
  }
  CHECK(kiln_plan_variable_count(plan) == 1, "one variable");
  kiln_variable_source source = KILN_VARIABLE_FROM_SHAPES;
  CHECK(kiln_plan_variable_source(plan, 0, &source) == KILN_OK && source == KILN_VARIABLE_FROM_RUN,
        "the count is decided by the run");

  static struct Run run;
  for (int pattern = 0; pattern < 4; ++pattern) CHECK(check_pattern(plan, &run, pattern) == 0, "pattern %d", pattern);

  expect_error(run_plan(plan, &run, 0, sizeof(int64_t) * 2 * kElements), KILN_ERROR_INVALID_ARGUMENT,
               "has a shape the run decides", "no output_shapes");
  expect_error(run_plan(plan, &run, 1, sizeof(int64_t) * 2 * kElements - 8), KILN_ERROR_INVALID_ARGUMENT,
               "output 'where' has a buffer of 232 bytes, it needs 240", "a buffer below the upper bound");
  CHECK(check_pattern(plan, &run, 2) == 0, "a run after the errors");

  /* Four threads at once, each with its own buffers: the values each run decides stay its own. */
  thrd_t threads[4];
  for (int t = 0; t < 4; ++t) CHECK(thrd_create(&threads[t], run_in_thread, plan) == thrd_success, "thread %d", t);
  for (int t = 0; t < 4; ++t) {
    int found = 0;
    thrd_join(threads[t], &found);
    CHECK(found == 0, "thread %d found %d failures", t, found);
  }
  kiln_plan_free(plan);
  printf("%s\n", failures == 0 ? "all checks passed" : "FAILED");
  return failures != 0;
}
