/* Run options, cancellation and plan load options through kiln.h, in C11, linked against libkiln only.
 *   test-run-options cancel PLAN    a token requested before a run, from the plan's parallel_for hook
 *                                   in the middle of a run, and from another thread while runs go on;
 *                                   each run returns KILN_ERROR_CANCELLED with its message, and the
 *                                   plan runs correctly afterwards
 *   test-run-options options PLAN   a counting allocator, a log callback, a counting parallel_for hook,
 *                                   a plan-owned thread pool and per-run thread counts are used, and
 *                                   the outputs equal those of a plain load bit for bit; misuse
 *   test-run-options dlpack PLAN    inputs given as DLPack tensors (with strides and a byte offset, as
 *                                   producers write them), outputs handed out as DLManagedTensors;
 *                                   outputs equal kiln_plan_run's; misuse
 * PLAN is any plan (inputs of any dtype: float inputs get values in [0, 1), others zeros). */
#define _POSIX_C_SOURCE 200112L
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>

#include "c_check.h"
#include "kiln/kiln.h"

/* Every input and output of a plan, with 64-byte-aligned buffers. */
struct Buffers {
  size_t input_count, output_count;
  kiln_tensor* inputs;
  kiln_tensor* outputs;
};

static size_t byte_size_of(kiln_dtype dtype, size_t rank, const int64_t* shape) {
  size_t count = 1, i;
  for (i = 0; i < rank; ++i) count *= (size_t)shape[i];
  return count * kiln_dtype_size(dtype);
}

static void describe(const kiln_plan* plan, int output, size_t index, kiln_tensor* tensor) {
  memset(tensor, 0, sizeof *tensor);
  if (output) kiln_plan_output_info(plan, index, &tensor->name, &tensor->dtype, &tensor->rank, &tensor->shape);
  else kiln_plan_input_info(plan, index, &tensor->name, &tensor->dtype, &tensor->rank, &tensor->shape);
  tensor->byte_size = byte_size_of(tensor->dtype, tensor->rank, tensor->shape);
  tensor->data = aligned_alloc(64, (tensor->byte_size + 64) / 64 * 64);
  memset(tensor->data, 0, tensor->byte_size);
}

static void make_buffers(const kiln_plan* plan, struct Buffers* buffers, unsigned seed) {
  size_t i, k;
  buffers->input_count = kiln_plan_input_count(plan);
  buffers->output_count = kiln_plan_output_count(plan);
  buffers->inputs = calloc(buffers->input_count + 1, sizeof(kiln_tensor));
  buffers->outputs = calloc(buffers->output_count + 1, sizeof(kiln_tensor));
  for (i = 0; i < buffers->input_count; ++i) {
    describe(plan, 0, i, &buffers->inputs[i]);
    if (buffers->inputs[i].dtype == KILN_DTYPE_FLOAT32) {
      float* values = buffers->inputs[i].data;
      for (k = 0; k < buffers->inputs[i].byte_size / 4; ++k) values[k] = (float)((k * 31 + seed * 17) % 255) / 255.0f;
    }
  }
  for (i = 0; i < buffers->output_count; ++i) describe(plan, 1, i, &buffers->outputs[i]);
}

static void free_buffers(struct Buffers* buffers) {
  size_t i;
  for (i = 0; i < buffers->input_count; ++i) free(buffers->inputs[i].data);
  for (i = 0; i < buffers->output_count; ++i) free(buffers->outputs[i].data);
  free(buffers->inputs);
  free(buffers->outputs);
}

static kiln_status run(const kiln_plan* plan, struct Buffers* buffers, const kiln_run_options* options) {
  return kiln_plan_run_with_options(plan, buffers->inputs, buffers->input_count, buffers->outputs,
                                    buffers->output_count, options);
}

/* Whether every output of `a` equals that of `b` bit for bit. */
static int same_outputs(const struct Buffers* a, const struct Buffers* b) {
  size_t i;
  for (i = 0; i < a->output_count; ++i)
    if (memcmp(a->outputs[i].data, b->outputs[i].data, a->outputs[i].byte_size) != 0) return 0;
  return 1;
}

/* ---- a parallel_for hook that runs the tasks in order on the calling thread, counting ---- */

struct Hook {
  atomic_size_t calls, tasks;
  size_t cancel_at_call; /* 0: never */
  kiln_cancel* cancel;
};

static void serial_parallel_for(void* user, size_t n, void (*task)(void* context, size_t index), void* context) {
  struct Hook* hook = user;
  size_t i, call = atomic_fetch_add(&hook->calls, 1) + 1;
  if (hook->cancel_at_call != 0 && call == hook->cancel_at_call) kiln_cancel_request(hook->cancel);
  for (i = 0; i < n; ++i) {
    task(context, i);
    atomic_fetch_add(&hook->tasks, 1);
  }
}

/* ---- cancel ---- */

struct Runner {
  const kiln_plan* plan;
  struct Buffers buffers;
  kiln_run_options options;
  atomic_int started;
  kiln_status status;
  char message[512];
  long runs;
};

/* Runs until a run fails (or 100000 runs), keeping the failing status and message. */
static int runner_main(void* argument) {
  struct Runner* runner = argument;
  for (runner->runs = 0; runner->runs < 100000; ++runner->runs) {
    atomic_store(&runner->started, 1);
    runner->status = run(runner->plan, &runner->buffers, &runner->options);
    if (runner->status != KILN_OK) {
      snprintf(runner->message, sizeof runner->message, "%s", kiln_error_message());
      break;
    }
  }
  return 0;
}

static int cancel_test(const char* plan_path) {
  kiln_plan *plan = NULL, *hooked = NULL;
  kiln_cancel* cancel = NULL;
  kiln_run_options options;
  kiln_plan_options plan_options;
  struct Buffers reference, buffers;
  struct Hook hook;
  struct Runner runner;
  size_t kernels = 0;
  thrd_t thread;
  struct timespec pause = {0, 2000000};

  CHECK(kiln_plan_load_file(plan_path, &plan) == KILN_OK, "load: %s", kiln_error_message());
  if (plan == NULL) return 1;
  kiln_plan_describe(plan, NULL, NULL, NULL, NULL, &kernels);
  printf("plan: %zu kernels\n", kernels);
  make_buffers(plan, &reference, 1);
  make_buffers(plan, &buffers, 1);
  CHECK(kiln_plan_run(plan, reference.inputs, reference.input_count, reference.outputs, reference.output_count) ==
            KILN_OK, "reference run: %s", kiln_error_message());

  expect_error(kiln_cancel_create(NULL), KILN_ERROR_INVALID_ARGUMENT, "out_cancel is NULL", "cancel_create(NULL)");
  CHECK(kiln_cancel_create(&cancel) == KILN_OK, "kiln_cancel_create: %s", kiln_error_message());
  CHECK(!kiln_cancel_is_requested(cancel), "a new token is not requested");
  kiln_run_options_init(&options);
  options.cancel = cancel;

  /* Requested before the run: nothing runs. */
  kiln_cancel_request(cancel);
  CHECK(kiln_cancel_is_requested(cancel), "requested");
  expect_error(run(plan, &buffers, &options), KILN_ERROR_CANCELLED, "cancelled (before its first kernel)",
               "a run with a token requested before it");
  kiln_cancel_reset(cancel);
  CHECK(run(plan, &buffers, &options) == KILN_OK && same_outputs(&buffers, &reference),
        "after a reset the run succeeds: %s", kiln_error_message());

  /* Requested in the middle of a run (deterministically, from the hook of kernel kernels/2): the
   * kernels after it never run. */
  memset(&hook, 0, sizeof hook);
  hook.cancel = cancel;
  hook.cancel_at_call = kernels / 2 > 0 ? kernels / 2 : 1;
  kiln_plan_options_init(&plan_options);
  plan_options.parallel_for = serial_parallel_for;
  plan_options.parallel_for_user_data = &hook;
  CHECK(kiln_plan_load_file_v2(plan_path, &plan_options, &hooked) == KILN_OK, "load with a hook: %s",
        kiln_error_message());
  if (hooked != NULL) {
    expect_error(run(hooked, &buffers, &options), KILN_ERROR_CANCELLED, "kernels had run",
                 "a run cancelled in the middle (from the hook)");
    CHECK(atomic_load(&hook.calls) == hook.cancel_at_call, "kernels after the cancel ran: %zu hook calls, expected %zu",
          (size_t)atomic_load(&hook.calls), hook.cancel_at_call);
    kiln_cancel_reset(cancel);
    hook.cancel_at_call = 0;
    CHECK(run(hooked, &buffers, &options) == KILN_OK && same_outputs(&buffers, &reference),
          "the hooked plan runs correctly after a cancelled run: %s", kiln_error_message());
    kiln_plan_free(hooked);
  }

  /* From another thread while that thread runs the plan again and again. */
  memset(&runner, 0, sizeof runner);
  runner.plan = plan;
  runner.buffers = buffers;
  runner.options = options;
  atomic_store(&runner.started, 0);
  CHECK(thrd_create(&thread, runner_main, &runner) == thrd_success, "thrd_create");
  while (!atomic_load(&runner.started)) thrd_yield();
  thrd_sleep(&pause, NULL);
  kiln_cancel_request(cancel);
  thrd_join(thread, NULL);
  CHECK(runner.status == KILN_ERROR_CANCELLED, "the other thread's run: status %s (%s)",
        kiln_status_string(runner.status), runner.message);
  CHECK(strstr(runner.message, "the run was cancelled") != NULL, "message: %s", runner.message);
  if (runner.status == KILN_ERROR_CANCELLED)
    printf("ok   cancelled from another thread after %ld complete runs: %s\n", runner.runs, runner.message);
  kiln_cancel_reset(cancel);
  memset(buffers.outputs[0].data, 0, buffers.outputs[0].byte_size);
  CHECK(run(plan, &buffers, &options) == KILN_OK && same_outputs(&buffers, &reference),
        "the plan runs correctly after a cancelled run: %s", kiln_error_message());
  CHECK(kiln_plan_run(plan, buffers.inputs, buffers.input_count, buffers.outputs, buffers.output_count) == KILN_OK &&
            same_outputs(&buffers, &reference),
        "kiln_plan_run after a cancelled run: %s", kiln_error_message());

  kiln_cancel_free(cancel);
  kiln_cancel_free(NULL);
  free_buffers(&buffers);
  free_buffers(&reference);
  kiln_plan_free(plan);
  if (failures == 0) printf("ok   cancellation\n");
  return failures == 0 ? 0 : 1;
}

/* ---- options ---- */

struct Counting {
  atomic_size_t allocations, frees, live_bytes;
};

static void* counting_alloc(void* user, size_t size, size_t alignment) {
  struct Counting* counting = user;
  atomic_fetch_add(&counting->allocations, 1);
  atomic_fetch_add(&counting->live_bytes, size);
  return aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}

static void counting_free(void* user, void* pointer, size_t size) {
  struct Counting* counting = user;
  atomic_fetch_add(&counting->frees, 1);
  atomic_fetch_sub(&counting->live_bytes, size);
  free(pointer);
}

struct Log {
  atomic_int lines;
  char first[256];
};

static void log_line(void* user, kiln_log_level level, const char* message) {
  struct Log* log = user;
  if (atomic_fetch_add(&log->lines, 1) == 0) snprintf(log->first, sizeof log->first, "%d %s", (int)level, message);
}

static int options_test(const char* plan_path) {
  kiln_plan *plain = NULL, *plan = NULL;
  kiln_plan_options options;
  kiln_run_options run_options;
  struct Buffers reference, buffers;
  struct Counting counting;
  struct Hook hook;
  struct Log log;
  int threads;

  CHECK(kiln_plan_load_file(plan_path, &plain) == KILN_OK, "load: %s", kiln_error_message());
  if (plain == NULL) return 1;
  make_buffers(plain, &reference, 3);
  make_buffers(plain, &buffers, 3);
  CHECK(kiln_plan_run(plain, reference.inputs, reference.input_count, reference.outputs, reference.output_count) ==
            KILN_OK, "reference run: %s", kiln_error_message());

  /* Allocator, log and hook together. */
  memset(&counting, 0, sizeof counting);
  memset(&hook, 0, sizeof hook);
  memset(&log, 0, sizeof log);
  kiln_plan_options_init(&options);
  CHECK(options.size == sizeof options && options.log_level == KILN_LOG_INFO && options.thread_count == 0,
        "kiln_plan_options_init");
  options.allocator.alloc = counting_alloc;
  options.allocator.free = counting_free;
  options.allocator.user_data = &counting;
  options.log = log_line;
  options.log_user_data = &log;
  options.log_level = KILN_LOG_DEBUG;
  options.parallel_for = serial_parallel_for;
  options.parallel_for_user_data = &hook;
  CHECK(kiln_plan_load_file_v2(plan_path, &options, &plan) == KILN_OK, "load_file_v2: %s", kiln_error_message());
  if (plan != NULL) {
    CHECK(atomic_load(&counting.allocations) == 1, "one arena allocated through the allocator at load, got %zu",
          (size_t)atomic_load(&counting.allocations));
    CHECK(atomic_load(&log.lines) >= 1 && strstr(log.first, "loaded a plan") != NULL, "log: %d lines, first '%s'",
          atomic_load(&log.lines), log.first);
    CHECK(run(plan, &buffers, NULL) == KILN_OK, "run: %s", kiln_error_message());
    CHECK(same_outputs(&buffers, &reference), "outputs with the allocator and hook differ from a plain load's");
    CHECK(atomic_load(&hook.calls) > 0 && atomic_load(&hook.tasks) >= atomic_load(&hook.calls),
          "the hook ran: %zu calls, %zu tasks", (size_t)atomic_load(&hook.calls), (size_t)atomic_load(&hook.tasks));
    printf("ok   allocator (%zu allocation), log ('%s'), parallel_for hook (%zu calls, %zu tasks); outputs equal\n",
           (size_t)atomic_load(&counting.allocations), log.first, (size_t)atomic_load(&hook.calls),
           (size_t)atomic_load(&hook.tasks));
    kiln_plan_free(plan);
    plan = NULL;
    CHECK(atomic_load(&counting.frees) == atomic_load(&counting.allocations) && atomic_load(&counting.live_bytes) == 0,
          "everything allocated is freed: %zu allocations, %zu frees", (size_t)atomic_load(&counting.allocations),
          (size_t)atomic_load(&counting.frees));
  }

  /* The same from memory. */
  {
    FILE* file = fopen(plan_path, "rb");
    long size;
    void* bytes;
    fseek(file, 0, SEEK_END);
    size = ftell(file);
    fseek(file, 0, SEEK_SET);
    bytes = malloc((size_t)size);
    CHECK(fread(bytes, 1, (size_t)size, file) == (size_t)size, "read %s", plan_path);
    fclose(file);
    CHECK(kiln_plan_load_buffer_v2(bytes, (size_t)size, &options, &plan) == KILN_OK, "load_buffer_v2: %s",
          kiln_error_message());
    free(bytes);
    memset(buffers.outputs[0].data, 0, buffers.outputs[0].byte_size);
    CHECK(plan != NULL && run(plan, &buffers, NULL) == KILN_OK && same_outputs(&buffers, &reference),
          "load_buffer_v2 run: %s", kiln_error_message());
    kiln_plan_free(plan);
    plan = NULL;
  }

  /* A pool of the plan's own, and per-run thread counts. */
  for (threads = 1; threads <= 3; ++threads) {
    kiln_plan_options_init(&options);
    options.thread_count = threads;
    CHECK(kiln_plan_load_file_v2(plan_path, &options, &plan) == KILN_OK, "load with %d threads: %s", threads,
          kiln_error_message());
    memset(buffers.outputs[0].data, 0, buffers.outputs[0].byte_size);
    CHECK(plan != NULL && run(plan, &buffers, NULL) == KILN_OK && same_outputs(&buffers, &reference),
          "a plan with %d threads of its own: %s", threads, kiln_error_message());
    kiln_plan_free(plan);
    plan = NULL;
    kiln_run_options_init(&run_options);
    run_options.thread_count = threads;
    memset(buffers.outputs[0].data, 0, buffers.outputs[0].byte_size);
    CHECK(run(plain, &buffers, &run_options) == KILN_OK && same_outputs(&buffers, &reference),
          "a run limited to %d threads: %s", threads, kiln_error_message());
  }
  if (failures == 0) printf("ok   plan thread pools of 1-3 threads and runs limited to 1-3 threads: outputs equal\n");

  /* Misuse. */
  kiln_plan_options_init(&options);
  options.size = 0;
  expect_error(kiln_plan_load_file_v2(plan_path, &options, &plan), KILN_ERROR_INVALID_ARGUMENT, "options->size is 0",
               "plan options of size 0");
  kiln_plan_options_init(&options);
  options.allocator.alloc = counting_alloc;
  expect_error(kiln_plan_load_file_v2(plan_path, &options, &plan), KILN_ERROR_INVALID_ARGUMENT,
               "needs both alloc and free", "an allocator without free");
  kiln_plan_options_init(&options);
  options.thread_count = -1;
  expect_error(kiln_plan_load_file_v2(plan_path, &options, &plan), KILN_ERROR_INVALID_ARGUMENT,
               "thread_count is negative", "a negative plan thread count");
  expect_error(kiln_plan_load_file_v2(NULL, NULL, &plan), KILN_ERROR_INVALID_ARGUMENT, "path is NULL",
               "load_file_v2(NULL)");
  expect_error(kiln_plan_load_buffer_v2(NULL, 0, NULL, &plan), KILN_ERROR_INVALID_ARGUMENT, "data is NULL",
               "load_buffer_v2(NULL)");
  CHECK(plan == NULL, "out_plan untouched on error");
  kiln_run_options_init(&run_options);
  run_options.thread_count = -2;
  expect_error(run(plain, &buffers, &run_options), KILN_ERROR_INVALID_ARGUMENT, "thread_count is negative",
               "a negative run thread count");
  run_options.size = 0;
  expect_error(run(plain, &buffers, &run_options), KILN_ERROR_INVALID_ARGUMENT, "options->size is 0",
               "run options of size 0");
  expect_error(kiln_plan_run_with_options(NULL, NULL, 0, NULL, 0, NULL), KILN_ERROR_INVALID_ARGUMENT, "plan is NULL",
               "run_with_options(NULL)");
  /* An older caller's shorter struct: the fields it lacks take their defaults. */
  kiln_run_options_init(&run_options);
  run_options.size = sizeof(size_t);
  run_options.thread_count = -5; /* past `size`: ignored */
  CHECK(run(plain, &buffers, &run_options) == KILN_OK, "a short run options struct: %s", kiln_error_message());
  kiln_plan_options_init(NULL);
  kiln_run_options_init(NULL);

  free_buffers(&buffers);
  free_buffers(&reference);
  kiln_plan_free(plain);
  return failures == 0 ? 0 : 1;
}

/* ---- dlpack ---- */

static void count_release(void* user) { ++*(int*)user; }

static int dlpack_test(const char* plan_path) {
  kiln_plan* plan = NULL;
  struct Buffers reference, buffers;
  DLTensor* producers;
  DLManagedTensor* managed;
  kiln_tensor* inputs;
  kiln_tensor viewed;
  int64_t* strides;
  unsigned char* shifted;
  size_t i;
  int d, released = 0;

  CHECK(kiln_plan_load_file(plan_path, &plan) == KILN_OK, "load: %s", kiln_error_message());
  if (plan == NULL) return 1;
  make_buffers(plan, &reference, 5);
  make_buffers(plan, &buffers, 5);
  CHECK(kiln_plan_run(plan, reference.inputs, reference.input_count, reference.outputs, reference.output_count) ==
            KILN_OK, "reference run: %s", kiln_error_message());

  /* Inputs as a producer writes them: explicit compact strides and the data 64 bytes into a block. */
  producers = calloc(buffers.input_count + 1, sizeof(DLTensor));
  inputs = calloc(buffers.input_count + 1, sizeof(kiln_tensor));
  for (i = 0; i < buffers.input_count; ++i) {
    const kiln_tensor* source = &buffers.inputs[i];
    DLManagedTensor* exported = NULL;
    CHECK(kiln_tensor_to_dlpack(source, NULL, NULL, &exported) == KILN_OK, "to_dlpack: %s", kiln_error_message());
    producers[i] = exported->dl_tensor;
    strides = calloc(source->rank + 1, sizeof(int64_t));
    for (d = (int)source->rank - 1; d >= 0; --d)
      strides[d] = d == (int)source->rank - 1 ? 1 : strides[d + 1] * source->shape[d + 1];
    shifted = aligned_alloc(64, (source->byte_size + 128) / 64 * 64);
    memcpy(shifted + 64, source->data, source->byte_size);
    producers[i].data = shifted;
    producers[i].byte_offset = 64;
    producers[i].strides = strides;
    producers[i].shape = (int64_t*)source->shape;
    exported->deleter(exported);
    CHECK(kiln_tensor_from_dltensor(&producers[i], source->name, &inputs[i]) == KILN_OK, "from_dltensor: %s",
          kiln_error_message());
    CHECK(inputs[i].data == shifted + 64 && inputs[i].byte_size == source->byte_size && inputs[i].dtype == source->dtype,
          "the view points at the data after byte_offset");
  }
  CHECK(kiln_plan_run(plan, inputs, buffers.input_count, buffers.outputs, buffers.output_count) == KILN_OK,
        "run on DLPack inputs: %s", kiln_error_message());
  CHECK(same_outputs(&buffers, &reference), "outputs from DLPack inputs differ");

  /* Output 0 out as a DLManagedTensor, and back in. */
  CHECK(kiln_tensor_to_dlpack(&buffers.outputs[0], count_release, &released, &managed) == KILN_OK, "to_dlpack: %s",
        kiln_error_message());
  CHECK(managed->dl_tensor.data == buffers.outputs[0].data && managed->dl_tensor.ndim == (int32_t)buffers.outputs[0].rank &&
            managed->dl_tensor.device.device_type == kDLCPU && managed->dl_tensor.strides == NULL &&
            managed->dl_tensor.dtype.lanes == 1 &&
            managed->dl_tensor.dtype.bits == 8 * kiln_dtype_size(buffers.outputs[0].dtype),
        "the exported DLTensor");
  CHECK(kiln_tensor_from_dlpack(managed, NULL, &viewed) == KILN_OK && viewed.dtype == buffers.outputs[0].dtype &&
            viewed.rank == buffers.outputs[0].rank && viewed.byte_size == buffers.outputs[0].byte_size &&
            memcmp(viewed.shape, buffers.outputs[0].shape, viewed.rank * sizeof(int64_t)) == 0,
        "round trip: %s", kiln_error_message());
  managed->deleter(managed);
  CHECK(released == 1, "the deleter calls release once (%d)", released);

  /* Misuse. */
  {
    DLTensor bad = producers[0];
    expect_error(kiln_tensor_from_dltensor(NULL, NULL, &viewed), KILN_ERROR_INVALID_ARGUMENT, "tensor is NULL",
                 "from_dltensor(NULL)");
    expect_error(kiln_tensor_from_dlpack(NULL, NULL, &viewed), KILN_ERROR_INVALID_ARGUMENT, "managed is NULL",
                 "from_dlpack(NULL)");
    bad.device.device_type = kDLCUDA;
    expect_error(kiln_tensor_from_dltensor(&bad, NULL, &viewed), KILN_ERROR_INVALID_ARGUMENT, "CPU memory",
                 "a CUDA tensor");
    bad = producers[0];
    bad.dtype.lanes = 4;
    expect_error(kiln_tensor_from_dltensor(&bad, NULL, &viewed), KILN_ERROR_INVALID_ARGUMENT, "lanes",
                 "a vector element type");
    bad = producers[0];
    bad.dtype.code = kDLComplex;
    expect_error(kiln_tensor_from_dltensor(&bad, NULL, &viewed), KILN_ERROR_INVALID_ARGUMENT, "no element type",
                 "a complex tensor");
    if (bad.ndim >= 2) {
      int64_t transposed[8];
      bad = producers[0];
      memcpy(transposed, bad.strides, (size_t)bad.ndim * sizeof(int64_t));
      transposed[bad.ndim - 1] = 2;
      bad.strides = transposed;
      expect_error(kiln_tensor_from_dltensor(&bad, NULL, &viewed), KILN_ERROR_INVALID_ARGUMENT, "not dense row-major",
                   "a strided tensor");
    }
    {
      kiln_tensor unknown = buffers.outputs[0];
      unknown.dtype = (kiln_dtype)99;
      expect_error(kiln_tensor_to_dlpack(&unknown, NULL, NULL, &managed), KILN_ERROR_INVALID_ARGUMENT,
                   "not a kiln_dtype", "to_dlpack of an unknown dtype");
    }
  }

  for (i = 0; i < buffers.input_count; ++i) {
    free((unsigned char*)producers[i].data);
    free(producers[i].strides);
  }
  free(producers);
  free(inputs);
  free_buffers(&buffers);
  free_buffers(&reference);
  kiln_plan_free(plan);
  if (failures == 0) printf("ok   DLPack in and out\n");
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  int result;
  if (argc == 3 && strcmp(argv[1], "cancel") == 0) result = cancel_test(argv[2]);
  else if (argc == 3 && strcmp(argv[1], "options") == 0) result = options_test(argv[2]);
  else if (argc == 3 && strcmp(argv[1], "dlpack") == 0) result = dlpack_test(argv[2]);
  else {
    fprintf(stderr, "usage: test-run-options cancel PLAN | options PLAN | dlpack PLAN\n");
    return 2;
  }
  if (failures > 0) fprintf(stderr, "%d check(s) failed\n", failures);
  return result;
}
