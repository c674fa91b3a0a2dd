/* The C API tests of plans, written in C11 and linked against libkiln only.
 *   test-plan end-to-end PLAN WORK_DIR   load, describe and run a plan on WORK_DIR/input_NAME.bin;
 *                                         compare with expected_K.bin (the ONNX test data, within
 *                                         atol 1e-4 + rtol 1e-3) and inprocess_K.bin (the JIT path,
 *                                         bit for bit)
 *   test-plan matches-data PLAN WORK_DIR  the same, without the bit-for-bit comparison: for plans
 *                                         compiled with other Opts than the JIT's (kiln tune)
 *   test-plan misuse PLAN                 every misuse gets its status and message
 *   test-plan threads PLAN                8 threads run one plan 1000 times each on different inputs;
 *                                         every output equals the single-threaded one bit for bit
 * WORK_DIR is written by plan-reference (plan_reference.cpp); run_plan_test.sh drives both. */
#define _POSIX_C_SOURCE 200112L
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "c_check.h"
#include "kiln/kiln.h"

/* A whole file in a 64-byte-aligned buffer (NULL when it cannot be read). */
static unsigned char* read_file(const char* path, size_t* out_size) {
  FILE* file = fopen(path, "rb");
  long size;
  unsigned char* data;
  if (file == NULL) return NULL;
  fseek(file, 0, SEEK_END);
  size = ftell(file);
  fseek(file, 0, SEEK_SET);
  data = aligned_alloc(64, ((size_t)size + 64) / 64 * 64);
  if (data != NULL && fread(data, 1, (size_t)size, file) != (size_t)size) {
    free(data);
    data = NULL;
  }
  fclose(file);
  *out_size = (size_t)size;
  return data;
}

static size_t element_count(const int64_t* shape, size_t rank) {
  size_t count = 1, i;
  for (i = 0; i < rank; ++i) count *= (size_t)shape[i];
  return count;
}

/* Expects `status` and a message containing `text`. */
/* ---- end-to-end ---- */

static void compare_outputs(const kiln_plan* plan, unsigned char** outputs, const char* work_dir, int bitwise) {
  size_t count = kiln_plan_output_count(plan), k, i, referenced = 0;
  char path[4096];
  for (k = 0; k < count; ++k) {
    const char* name;
    kiln_dtype dtype;
    size_t rank, size, n;
    const int64_t* shape;
    unsigned char* expected;
    kiln_plan_output_info(plan, k, &name, &dtype, &rank, &shape);
    n = element_count(shape, rank);
    snprintf(path, sizeof path, "%s/inprocess_%zu.bin", work_dir, k);
    expected = bitwise ? read_file(path, &size) : NULL;
    CHECK(!bitwise || (expected != NULL && size == n * kiln_dtype_size(dtype)), "%s: cannot read or wrong size", path);
    if (expected != NULL && size == n * kiln_dtype_size(dtype)) {
      int same = memcmp(expected, outputs[k], size) == 0;
      CHECK(same, "output '%s' differs from the in-process path", name);
      if (same) printf("ok   output '%s' equals the in-process (JIT) result bit for bit\n", name);
    }
    free(expected);
    snprintf(path, sizeof path, "%s/expected_%zu.bin", work_dir, k);
    expected = read_file(path, &size);
    if (expected == NULL) continue; /* the data set has no reference for this output */
    ++referenced;
    CHECK(size == n * kiln_dtype_size(dtype), "%s: %zu bytes, expected %zu", path, size, n * kiln_dtype_size(dtype));
    if (dtype == KILN_DTYPE_FLOAT32 && size == n * 4) {
      const float* want = (const float*)expected;
      const float* got = (const float*)outputs[k];
      double worst = 0;
      size_t bad = 0;
      for (i = 0; i < n; ++i) {
        double error = fabs((double)got[i] - (double)want[i]);
        if (!(error <= 1e-4 + 1e-3 * fabs((double)want[i]))) { /* NaN fails too */
          if (bad < 5)
            fprintf(stderr, "output '%s'[%zu] = %g, expected %g\n", name, i, (double)got[i], (double)want[i]);
          ++bad;
        }
        if (error > worst) worst = error;
      }
      CHECK(bad == 0, "output '%s': %zu of %zu elements outside atol 1e-4 + rtol 1e-3 (max abs error %g)", name, bad,
            n, worst);
      if (bad == 0) printf("ok   output '%s' matches the test data (max abs error %g)\n", name, worst);
    } else if (size == n * kiln_dtype_size(dtype)) {
      CHECK(memcmp(expected, outputs[k], size) == 0, "output '%s' differs from the test data", name);
    }
    free(expected);
  }
  /* Without the bit-for-bit comparison, the test data is all that checks the plan. */
  CHECK(bitwise || referenced > 0, "no output has a reference in %s: nothing was checked", work_dir);
}

static int end_to_end(const char* plan_path, const char* work_dir, int bitwise) {
  kiln_plan* plan = NULL;
  kiln_status status = kiln_plan_load_file(plan_path, &plan);
  size_t input_count, output_count, k;
  kiln_tensor inputs[16], outputs[16];
  unsigned char* input_data[16];
  unsigned char* output_data[16];
  char path[4096];
  CHECK(status == KILN_OK, "kiln_plan_load_file: %s", kiln_error_message());
  if (status != KILN_OK) return 1;
  input_count = kiln_plan_input_count(plan);
  output_count = kiln_plan_output_count(plan);
  CHECK(input_count <= 16 && output_count <= 16, "too many inputs/outputs for this test");
  for (k = 0; k < input_count; ++k) {
    size_t size;
    inputs[k].name = NULL;
    kiln_plan_input_info(plan, k, &inputs[k].name, &inputs[k].dtype, &inputs[k].rank, &inputs[k].shape);
    {
      /* input_NAME.bin, NAME with every character but letters and digits replaced by '_' */
      size_t at = (size_t)snprintf(path, sizeof path, "%s/input_", work_dir), c;
      for (c = 0; inputs[k].name[c] != '\0' && at + 5 < sizeof path; ++c, ++at)
        path[at] = isalnum((unsigned char)inputs[k].name[c]) ? inputs[k].name[c] : '_';
      snprintf(path + at, sizeof path - at, ".bin");
    }
    input_data[k] = read_file(path, &size);
    CHECK(input_data[k] != NULL, "cannot read %s", path);
    if (input_data[k] == NULL) return 1;
    inputs[k].data = input_data[k];
    inputs[k].byte_size = size;
    printf("input  %s: %s, rank %zu, %zu bytes\n", inputs[k].name, kiln_dtype_name(inputs[k].dtype), inputs[k].rank, size);
  }
  for (k = 0; k < output_count; ++k) {
    size_t bytes;
    kiln_plan_output_info(plan, k, &outputs[k].name, &outputs[k].dtype, &outputs[k].rank, &outputs[k].shape);
    bytes = element_count(outputs[k].shape, outputs[k].rank) * kiln_dtype_size(outputs[k].dtype);
    output_data[k] = aligned_alloc(64, (bytes + 64) / 64 * 64);
    outputs[k].data = output_data[k];
    outputs[k].byte_size = bytes;
  }
  status = kiln_plan_run(plan, inputs, input_count, outputs, output_count);
  CHECK(status == KILN_OK, "kiln_plan_run: %s", kiln_error_message());
  if (status == KILN_OK) compare_outputs(plan, output_data, work_dir, bitwise);

  /* The same plan from memory, inputs and outputs in misaligned buffers (the runtime stages them). */
  {
    size_t size;
    unsigned char* bytes = read_file(plan_path, &size);
    kiln_plan* copy = NULL;
    unsigned char* shifted[16];
    kiln_tensor moved_inputs[16], moved_outputs[16];
    CHECK(bytes != NULL && kiln_plan_load_buffer(bytes, size, &copy) == KILN_OK, "kiln_plan_load_buffer: %s",
          kiln_error_message());
    free(bytes); /* the plan keeps its own copy */
    for (k = 0; k < input_count && copy != NULL; ++k) {
      moved_inputs[k] = inputs[k];
      shifted[k] = malloc(inputs[k].byte_size + 4);
      memcpy(shifted[k] + 4, inputs[k].data, inputs[k].byte_size);
      moved_inputs[k].data = shifted[k] + 4;
    }
    for (k = 0; k < output_count && copy != NULL; ++k) {
      moved_outputs[k] = outputs[k];
      moved_outputs[k].data = (unsigned char*)malloc(outputs[k].byte_size + 4) + 4;
    }
    if (copy != NULL) {
      status = kiln_plan_run(copy, moved_inputs, input_count, moved_outputs, output_count);
      CHECK(status == KILN_OK, "kiln_plan_run (buffer, misaligned): %s", kiln_error_message());
      for (k = 0; k < output_count && status == KILN_OK; ++k)
        CHECK(memcmp(moved_outputs[k].data, outputs[k].data, outputs[k].byte_size) == 0,
              "output %zu differs between the file and buffer loads", k);
      if (status == KILN_OK) printf("ok   load_buffer + misaligned buffers give the same outputs\n");
      for (k = 0; k < input_count; ++k) free(shifted[k]);
      for (k = 0; k < output_count; ++k) free((unsigned char*)moved_outputs[k].data - 4);
    }
    kiln_plan_free(copy);
  }
  for (k = 0; k < input_count; ++k) free(input_data[k]);
  for (k = 0; k < output_count; ++k) free(output_data[k]);
  kiln_plan_free(plan);
  return failures == 0 ? 0 : 1;
}

/* ---- misuse ---- */

static uint64_t read_u64(const unsigned char* at) {
  uint64_t value = 0;
  int i;
  for (i = 7; i >= 0; --i) value = (value << 8) | at[i];
  return value;
}

/* Loads `bytes` with one byte at `offset` flipped, and expects the given failure. */
static void expect_flipped(const unsigned char* bytes, size_t size, size_t offset, kiln_status expected,
                           const char* text, const char* what) {
  unsigned char* copy = malloc(size);
  kiln_plan* plan = NULL;
  memcpy(copy, bytes, size);
  copy[offset] ^= 0x40;
  expect_error(kiln_plan_load_buffer(copy, size, &plan), expected, text, what);
  CHECK(plan == NULL, "%s: out_plan was written on error", what);
  free(copy);
}

static int misuse(const char* plan_path) {
  size_t size;
  unsigned char* bytes = read_file(plan_path, &size);
  kiln_plan* plan = NULL;
  kiln_plan* untouched = (kiln_plan*)&size; /* out-parameters stay untouched on error */
  kiln_tensor input, output;
  int64_t wrong_shape[8];
  size_t k;
  const char* name;
  unsigned char* input_data;
  unsigned char* output_data;
  CHECK(bytes != NULL, "cannot read %s", plan_path);
  if (bytes == NULL) return 1;

  /* NULL handles and pointers. */
  expect_error(kiln_plan_load_file(NULL, &plan), KILN_ERROR_INVALID_ARGUMENT, "path is NULL", "load_file(NULL path)");
  expect_error(kiln_plan_load_file(plan_path, NULL), KILN_ERROR_INVALID_ARGUMENT, "out_plan is NULL",
               "load_file(NULL out_plan)");
  expect_error(kiln_plan_load_buffer(NULL, 10, &plan), KILN_ERROR_INVALID_ARGUMENT, "data is NULL",
               "load_buffer(NULL data)");
  expect_error(kiln_plan_run(NULL, NULL, 0, NULL, 0), KILN_ERROR_INVALID_ARGUMENT, "plan is NULL", "run(NULL plan)");
  expect_error(kiln_plan_input_info(NULL, 0, &name, NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT, "plan is NULL",
               "input_info(NULL plan)");
  CHECK(kiln_plan_input_count(NULL) == 0 && kiln_plan_output_count(NULL) == 0, "counts of a NULL plan");
  kiln_plan_free(NULL);
  expect_error(kiln_plan_load_file("/nonexistent/plan.kiln", &untouched), KILN_ERROR_IO, "cannot open plan",
               "load_file(missing file)");
  CHECK(untouched == (kiln_plan*)&size, "out_plan was written on error");

  /* Damaged plans, each with its own message. */
  expect_error(kiln_plan_load_buffer(bytes, size - 100, &plan), KILN_ERROR_INVALID_PLAN, "truncated",
               "truncated plan");
  expect_error(kiln_plan_load_buffer(bytes, 40, &plan), KILN_ERROR_INVALID_PLAN, "shorter than its 128-byte header",
               "plan cut inside its header");
  expect_flipped(bytes, size, 1, KILN_ERROR_INVALID_PLAN, "bad magic", "bad magic");
  {
    unsigned char* newer = malloc(size);
    memcpy(newer, bytes, size);
    newer[8] = 99; /* format version, little-endian u32 at offset 8: far above any this libkiln reads */
    expect_error(kiln_plan_load_buffer(newer, size, &plan), KILN_ERROR_UNSUPPORTED_VERSION,
                 "newer than this libkiln", "newer format version");
    free(newer);
  }
  expect_flipped(bytes, size, 100, KILN_ERROR_INVALID_PLAN, "reserved bytes", "nonzero reserved header byte");
  expect_flipped(bytes, size, 24, KILN_ERROR_INVALID_PLAN, "content hash mismatch", "flipped byte in the stored hash");
  {
    const char* names[3] = {"metadata", "weights", "code"};
    int section;
    for (section = 0; section < 3; ++section) {
      uint64_t offset = read_u64(bytes + 32 + 16 * section), length = read_u64(bytes + 40 + 16 * section);
      char what[64];
      snprintf(what, sizeof what, "flipped byte in the %s section", names[section]);
      CHECK(length > 0, "the %s section is empty", names[section]);
      if (length > 0)
        expect_flipped(bytes, size, (size_t)(offset + length / 2), KILN_ERROR_INVALID_PLAN, "content hash mismatch",
                       what);
    }
  }

  /* A CPU feature this CPU lacks (simulated with the runtime's test hook). */
  setenv("KILN_HIDE_CPU_FEATURES", "sse2,avx,avx2,fma,avx512f", 1);
  expect_error(kiln_plan_load_buffer(bytes, size, &plan), KILN_ERROR_UNSUPPORTED_TARGET, "which this CPU lacks",
               "missing CPU feature");
  unsetenv("KILN_HIDE_CPU_FEATURES");

  /* Wrong inputs and outputs (the plan has one float32 input and one float32 output: mnist). */
  CHECK(kiln_plan_load_buffer(bytes, size, &plan) == KILN_OK, "load: %s", kiln_error_message());
  if (plan == NULL) return 1;
  CHECK(kiln_plan_input_count(plan) == 1 && kiln_plan_output_count(plan) == 1, "expected a one-in one-out plan");
  expect_error(kiln_plan_input_info(plan, 5, &name, NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT, "out of range",
               "input_info(index out of range)");
  memset(&input, 0, sizeof input);
  memset(&output, 0, sizeof output);
  kiln_plan_input_info(plan, 0, &input.name, &input.dtype, &input.rank, &input.shape);
  kiln_plan_output_info(plan, 0, &output.name, &output.dtype, &output.rank, &output.shape);
  input.byte_size = element_count(input.shape, input.rank) * kiln_dtype_size(input.dtype);
  output.byte_size = element_count(output.shape, output.rank) * kiln_dtype_size(output.dtype);
  input_data = aligned_alloc(64, (input.byte_size + 64) / 64 * 64);
  output_data = aligned_alloc(64, (output.byte_size + 64) / 64 * 64);
  memset(input_data, 0, input.byte_size);
  input.data = input_data;
  output.data = output_data;
  CHECK(kiln_plan_run(plan, &input, 1, &output, 1) == KILN_OK, "a correct run: %s", kiln_error_message());
  expect_error(kiln_plan_run(plan, &input, 0, &output, 1), KILN_ERROR_INVALID_ARGUMENT, "the plan has 1 input, 0 were given",
               "wrong input count");
  expect_error(kiln_plan_run(plan, NULL, 1, &output, 1), KILN_ERROR_INVALID_ARGUMENT, "inputs array is NULL",
               "NULL inputs array");
  expect_error(kiln_plan_run(plan, &input, 1, &output, 2), KILN_ERROR_INVALID_ARGUMENT, "the plan has 1 output, 2 were given",
               "wrong output count");
  {
    kiln_tensor wrong = input;
    wrong.name = "nope";
    expect_error(kiln_plan_run(plan, &wrong, 1, &output, 1), KILN_ERROR_INVALID_ARGUMENT, "no input named 'nope'",
                 "wrong input name");
    wrong = input;
    wrong.dtype = KILN_DTYPE_INT32;
    expect_error(kiln_plan_run(plan, &wrong, 1, &output, 1), KILN_ERROR_INVALID_ARGUMENT,
                 "has dtype int32, the plan expects float32", "wrong input dtype");
    /* A value that is no kiln_dtype is valid C; libkiln (C++) must reject it without undefined
     * behaviour (UBSan in the sanitizer builds, docs/sanitizers.md). */
    wrong.dtype = (kiln_dtype)99;
    expect_error(kiln_plan_run(plan, &wrong, 1, &output, 1), KILN_ERROR_INVALID_ARGUMENT,
                 "has dtype unknown, the plan expects float32", "input dtype out of the enum");
    CHECK(strcmp(kiln_dtype_name((kiln_dtype)99), "unknown") == 0 && kiln_dtype_size((kiln_dtype)-1) == 0 &&
              strcmp(kiln_status_string((kiln_status)99), "unknown status") == 0,
          "enum values out of range: a name, a size and a status string");
    wrong = input;
    for (k = 0; k < input.rank; ++k) wrong_shape[k] = input.shape[k];
    wrong_shape[input.rank - 1] -= 1;
    wrong.shape = wrong_shape;
    expect_error(kiln_plan_run(plan, &wrong, 1, &output, 1), KILN_ERROR_INVALID_ARGUMENT, "the plan expects (",
                 "wrong input shape");
    wrong = input;
    wrong.rank = input.rank - 1;
    expect_error(kiln_plan_run(plan, &wrong, 1, &output, 1), KILN_ERROR_INVALID_ARGUMENT, "has shape (",
                 "wrong input rank");
    wrong = input;
    wrong.data = NULL;
    expect_error(kiln_plan_run(plan, &wrong, 1, &output, 1), KILN_ERROR_INVALID_ARGUMENT, "has NULL data",
                 "NULL input data");
    wrong = output;
    wrong.byte_size -= 4;
    expect_error(kiln_plan_run(plan, &input, 1, &wrong, 1), KILN_ERROR_INVALID_ARGUMENT, "bytes, it needs",
                 "too small an output buffer");
  }
  CHECK(kiln_plan_run(plan, &input, 1, &output, 1) == KILN_OK && kiln_error_message()[0] == '\0',
        "a correct run after errors clears the message: %s", kiln_error_message());
  free(input_data);
  free(output_data);
  kiln_plan_free(plan);
  free(bytes);
  return failures == 0 ? 0 : 1;
}

/* ---- threads ---- */

enum { kThreads = 8, kRunsPerThread = 1000, kDistinctInputs = 16 };

struct Shared {
  const kiln_plan* plan;
  kiln_tensor input, output;
  float* inputs[kDistinctInputs];
  float* expected[kDistinctInputs];
  size_t input_floats, output_floats;
};

struct Worker {
  struct Shared* shared;
  int id;
  int mismatches;
  int errors;
};

static int worker_main(void* argument) {
  struct Worker* worker = argument;
  struct Shared* shared = worker->shared;
  float* output = aligned_alloc(64, (shared->output_floats * 4 + 64) / 64 * 64);
  int run;
  for (run = 0; run < kRunsPerThread; ++run) {
    int which = (worker->id * 7 + run) % kDistinctInputs;
    kiln_tensor input = shared->input, out = shared->output;
    input.data = shared->inputs[which];
    out.data = output;
    if (kiln_plan_run(shared->plan, &input, 1, &out, 1) != KILN_OK) {
      ++worker->errors;
      continue;
    }
    if (memcmp(output, shared->expected[which], shared->output_floats * 4) != 0) ++worker->mismatches;
  }
  free(output);
  return 0;
}

static int threads_test(const char* plan_path) {
  kiln_plan* plan = NULL;
  struct Shared shared;
  struct Worker workers[kThreads];
  thrd_t threads[kThreads];
  int i, t;
  size_t k;
  CHECK(kiln_plan_load_file(plan_path, &plan) == KILN_OK, "load: %s", kiln_error_message());
  if (plan == NULL) return 1;
  memset(&shared, 0, sizeof shared);
  shared.plan = plan;
  kiln_plan_input_info(plan, 0, &shared.input.name, &shared.input.dtype, &shared.input.rank, &shared.input.shape);
  kiln_plan_output_info(plan, 0, &shared.output.name, &shared.output.dtype, &shared.output.rank, &shared.output.shape);
  CHECK(shared.input.dtype == KILN_DTYPE_FLOAT32 && shared.output.dtype == KILN_DTYPE_FLOAT32, "expected float32");
  shared.input_floats = element_count(shared.input.shape, shared.input.rank);
  shared.output_floats = element_count(shared.output.shape, shared.output.rank);
  shared.input.byte_size = shared.input_floats * 4;
  shared.output.byte_size = shared.output_floats * 4;
  for (i = 0; i < kDistinctInputs; ++i) {
    kiln_tensor out = shared.output;
    shared.inputs[i] = aligned_alloc(64, (shared.input_floats * 4 + 64) / 64 * 64);
    shared.expected[i] = aligned_alloc(64, (shared.output_floats * 4 + 64) / 64 * 64);
    for (k = 0; k < shared.input_floats; ++k) shared.inputs[i][k] = (float)((k * 31 + (size_t)i * 17) % 255) / 255.0f;
    shared.input.data = shared.inputs[i];
    out.data = shared.expected[i];
    CHECK(kiln_plan_run(plan, &shared.input, 1, &out, 1) == KILN_OK, "reference run: %s", kiln_error_message());
  }
  for (t = 0; t < kThreads; ++t) {
    workers[t].shared = &shared;
    workers[t].id = t;
    workers[t].mismatches = 0;
    workers[t].errors = 0;
    CHECK(thrd_create(&threads[t], worker_main, &workers[t]) == thrd_success, "thrd_create");
  }
  for (t = 0; t < kThreads; ++t) {
    thrd_join(threads[t], NULL);
    CHECK(workers[t].errors == 0 && workers[t].mismatches == 0, "thread %d: %d errors, %d mismatching outputs", t,
          workers[t].errors, workers[t].mismatches);
  }
  if (failures == 0)
    printf("ok   %d threads x %d runs of one plan: every output equals the single-threaded one bit for bit\n",
           kThreads, kRunsPerThread);
  for (i = 0; i < kDistinctInputs; ++i) {
    free(shared.inputs[i]);
    free(shared.expected[i]);
  }
  kiln_plan_free(plan);
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  int result;
  if (argc == 4 && strcmp(argv[1], "end-to-end") == 0) result = end_to_end(argv[2], argv[3], 1);
  else if (argc == 4 && strcmp(argv[1], "matches-data") == 0) result = end_to_end(argv[2], argv[3], 0);
  else if (argc == 3 && strcmp(argv[1], "misuse") == 0) result = misuse(argv[2]);
  else if (argc == 3 && strcmp(argv[1], "threads") == 0) result = threads_test(argv[2]);
  else {
    fprintf(stderr, "usage: test-plan end-to-end PLAN WORK_DIR | matches-data PLAN WORK_DIR | misuse PLAN | threads PLAN\n");
    return 2;
  }
  if (failures > 0) fprintf(stderr, "%d check(s) failed\n", failures);
  return result;
}
