/* Soak test of libkiln (links libkiln only): one plan run many times from many threads, and the
 * plan loaded and freed many times, watching three things that short tests cannot see:
 *   - outputs stay bit-identical to a single-threaded reference run, for the whole soak;
 *   - resident memory (RSS) stays flat once warmed up: a run allocates nothing after each thread's
 *     first (kiln.h), and a load/free cycle returns everything it took;
 *   - nothing leaks (run under LeakSanitizer or valgrind memcheck by run_soak.sh / the sanitizer
 *     builds; this program frees everything it allocates, so any leak report is libkiln's).
 *
 *   soak PLAN RUNS THREADS RELOADS [RSS_GROWTH_LIMIT_KIB]
 *
 * RUNS runs are split over THREADS threads; then RELOADS load/run/free cycles on one thread. The
 * environment variable KILN_SOAK_SCALE (a positive float, default 1) multiplies RUNS and RELOADS, so
 * a sanitizer or valgrind build can run the same soak shorter. RSS is sampled at every tenth of the
 * work; the first tenth is the warm-up (thread arenas, the thread pool, malloc's per-thread arenas),
 * and the growth from its end to the end of the soak must stay within the limit (default 1024 KiB).
 * Prints one line per sample and a summary; exits 0 when every check holds. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "plan/c_check.h" /* CHECK and the failure count */

enum { kDistinctInputSets = 4, kSamples = 10, kMaxThreads = 64 };

static long resident_kib(void) {
  long pages_total = 0, pages_resident = 0;
  FILE* statm = fopen("/proc/self/statm", "r");
  if (statm == NULL) return -1;
  if (fscanf(statm, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = -1;
  fclose(statm);
  return pages_resident < 0 ? -1 : pages_resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static double seconds_now(void) {
  struct timespec now;
  timespec_get(&now, TIME_UTC);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

static size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* The plan's tensors as kiln_tensor templates (name, dtype, shape, size; data filled per use). */
struct Signature {
  size_t input_count, output_count;
  kiln_tensor* inputs;
  kiln_tensor* outputs;
};

static int read_signature(const kiln_plan* plan, struct Signature* signature) {
  size_t i, k;
  signature->input_count = kiln_plan_input_count(plan);
  signature->output_count = kiln_plan_output_count(plan);
  signature->inputs = calloc(signature->input_count + 1, sizeof(kiln_tensor));
  signature->outputs = calloc(signature->output_count + 1, sizeof(kiln_tensor));
  if (signature->inputs == NULL || signature->outputs == NULL) return 0;
  for (i = 0; i < signature->input_count + signature->output_count; ++i) {
    int is_input = i < signature->input_count;
    size_t index = is_input ? i : i - signature->input_count;
    kiln_tensor* tensor = is_input ? &signature->inputs[index] : &signature->outputs[index];
    size_t elements = 1;
    kiln_status status =
        is_input ? kiln_plan_input_info(plan, index, &tensor->name, &tensor->dtype, &tensor->rank, &tensor->shape)
                 : kiln_plan_output_info(plan, index, &tensor->name, &tensor->dtype, &tensor->rank, &tensor->shape);
    if (status != KILN_OK) return 0;
    for (k = 0; k < tensor->rank; ++k) elements *= (size_t)tensor->shape[k];
    tensor->byte_size = elements * kiln_dtype_size(tensor->dtype);
  }
  return 1;
}

static void free_signature(struct Signature* signature) {
  free(signature->inputs);
  free(signature->outputs);
}

/* Deterministic input values that differ per set; floats in [0, 1), integers small and non-negative
 * (so that index inputs such as Gather's stay in range for small tables). */
static void fill_input(const kiln_tensor* tensor, unsigned char* data, int set) {
  size_t size = kiln_dtype_size(tensor->dtype), count = size == 0 ? 0 : tensor->byte_size / size, i;
  memset(data, 0, tensor->byte_size);
  for (i = 0; i < count; ++i) {
    unsigned value = (unsigned)((i * 31 + (size_t)set * 17) % 251);
    if (tensor->dtype == KILN_DTYPE_FLOAT32) {
      float f = (float)value / 251.0f;
      memcpy(data + i * 4, &f, 4);
    } else if (tensor->dtype == KILN_DTYPE_FLOAT64) {
      double d = (double)value / 251.0;
      memcpy(data + i * 8, &d, 8);
    } else {
      data[i * size] = (unsigned char)(value % 2); /* little-endian: 0 or 1 in any integer width */
    }
  }
}

/* Input and reference-output buffers for each input set, made by single-threaded runs. */
struct Reference {
  unsigned char* inputs[kDistinctInputSets][8];
  unsigned char* outputs[kDistinctInputSets][8];
};

struct Soak {
  const kiln_plan* plan;
  struct Signature signature;
  struct Reference reference;
  size_t runs_per_thread;
  atomic_size_t runs_done;
};

struct Worker {
  struct Soak* soak;
  int id;
  size_t errors, mismatches;
  char first_error[256];
};

static int run_set(const kiln_plan* plan, const struct Signature* signature, unsigned char* const* inputs,
                   unsigned char* const* outputs) {
  kiln_tensor in[8], out[8];
  size_t i;
  for (i = 0; i < signature->input_count; ++i) {
    in[i] = signature->inputs[i];
    in[i].data = inputs[i];
  }
  for (i = 0; i < signature->output_count; ++i) {
    out[i] = signature->outputs[i];
    out[i].data = outputs[i];
  }
  return kiln_plan_run(plan, in, signature->input_count, out, signature->output_count) == KILN_OK;
}

static int worker_main(void* argument) {
  struct Worker* worker = argument;
  struct Soak* soak = worker->soak;
  const struct Signature* signature = &soak->signature;
  unsigned char* outputs[8];
  size_t run, i;
  for (i = 0; i < signature->output_count; ++i) outputs[i] = aligned_alloc(64, round_up_64(signature->outputs[i].byte_size + 1));
  for (run = 0; run < soak->runs_per_thread; ++run) {
    int set = (int)((worker->id * 7 + run) % kDistinctInputSets);
    if (!run_set(soak->plan, signature, soak->reference.inputs[set], outputs)) {
      if (worker->errors++ == 0) snprintf(worker->first_error, sizeof worker->first_error, "%s", kiln_error_message());
    } else {
      for (i = 0; i < signature->output_count; ++i)
        if (memcmp(outputs[i], soak->reference.outputs[set][i], signature->outputs[i].byte_size) != 0) {
          ++worker->mismatches;
          break;
        }
    }
    atomic_fetch_add_explicit(&soak->runs_done, 1, memory_order_relaxed);
  }
  for (i = 0; i < signature->output_count; ++i) free(outputs[i]);
  return 0;
}

/* RSS at the end of each tenth of `total` units of work, polled from `progress`. */
static void sample_rss(atomic_size_t* progress, size_t total, long* samples) {
  int next = 0;
  while (next < kSamples) {
    size_t done = atomic_load_explicit(progress, memory_order_relaxed);
    while (next < kSamples && done >= total * (size_t)(next + 1) / kSamples) samples[next++] = resident_kib();
    if (next < kSamples) thrd_sleep(&(struct timespec){.tv_nsec = 200000}, NULL);
  }
}

static void check_flat(const char* phase, const long* samples, long limit_kib) {
  long peak_after_warmup = samples[0];
  int i;
  for (i = 0; i < kSamples; ++i) {
    printf("  %s: after %3d%% of the work RSS %ld KiB\n", phase, (i + 1) * 100 / kSamples, samples[i]);
    if (i > 0 && samples[i] > peak_after_warmup) peak_after_warmup = samples[i];
  }
  printf("  %s: RSS after warm-up %ld KiB, peak after %ld KiB, growth %ld KiB (limit %ld)\n", phase, samples[0],
         peak_after_warmup, peak_after_warmup - samples[0], limit_kib);
  CHECK(samples[0] > 0, "%s: cannot read /proc/self/statm", phase);
  CHECK(peak_after_warmup - samples[0] <= limit_kib, "%s: RSS grew %ld KiB after warm-up (limit %ld KiB)", phase,
        peak_after_warmup - samples[0], limit_kib);
}

static int make_reference(struct Soak* soak) {
  const struct Signature* signature = &soak->signature;
  int set;
  size_t i;
  if (signature->input_count > 8 || signature->output_count > 8) {
    fprintf(stderr, "soak supports at most 8 inputs and 8 outputs\n");
    return 0;
  }
  for (set = 0; set < kDistinctInputSets; ++set) {
    for (i = 0; i < signature->input_count; ++i) {
      soak->reference.inputs[set][i] = aligned_alloc(64, round_up_64(signature->inputs[i].byte_size + 1));
      fill_input(&signature->inputs[i], soak->reference.inputs[set][i], set);
    }
    for (i = 0; i < signature->output_count; ++i)
      soak->reference.outputs[set][i] = aligned_alloc(64, round_up_64(signature->outputs[i].byte_size + 1));
    if (!run_set(soak->plan, signature, soak->reference.inputs[set], soak->reference.outputs[set])) {
      fprintf(stderr, "reference run: %s\n", kiln_error_message());
      return 0;
    }
  }
  return 1;
}

static void free_reference(struct Soak* soak) {
  int set;
  size_t i;
  for (set = 0; set < kDistinctInputSets; ++set) {
    for (i = 0; i < soak->signature.input_count; ++i) free(soak->reference.inputs[set][i]);
    for (i = 0; i < soak->signature.output_count; ++i) free(soak->reference.outputs[set][i]);
  }
}

static void soak_runs(struct Soak* soak, size_t runs, int thread_count, long limit_kib) {
  struct Worker workers[kMaxThreads];
  thrd_t threads[kMaxThreads];
  long samples[kSamples];
  double start = seconds_now(), seconds;
  size_t errors = 0, mismatches = 0;
  int t;
  soak->runs_per_thread = (runs + (size_t)thread_count - 1) / (size_t)thread_count;
  atomic_init(&soak->runs_done, 0);
  for (t = 0; t < thread_count; ++t) {
    memset(&workers[t], 0, sizeof workers[t]);
    workers[t].soak = soak;
    workers[t].id = t;
    if (thrd_create(&threads[t], worker_main, &workers[t]) != thrd_success) {
      fprintf(stderr, "thrd_create failed\n");
      exit(1);
    }
  }
  sample_rss(&soak->runs_done, soak->runs_per_thread * (size_t)thread_count, samples);
  for (t = 0; t < thread_count; ++t) {
    thrd_join(threads[t], NULL);
    errors += workers[t].errors;
    mismatches += workers[t].mismatches;
    CHECK(workers[t].errors == 0, "thread %d: %zu failed runs, the first: %s", t, workers[t].errors,
          workers[t].first_error);
  }
  seconds = seconds_now() - start;
  printf("runs: %zu runs on %d threads in %.2f s (%.2f us a run), %zu errors, %zu outputs that differ from the "
         "reference\n", soak->runs_per_thread * (size_t)thread_count, thread_count, seconds,
         seconds * 1e6 / (double)(soak->runs_per_thread * (size_t)thread_count), errors, mismatches);
  CHECK(mismatches == 0, "%zu runs gave outputs that differ from the single-threaded reference bit for bit",
        mismatches);
  check_flat("runs", samples, limit_kib);
}

/* Load, run once, free, RELOADS times: every cycle's memory must come back. */
struct Reloads {
  const char* path;
  const struct Soak* soak;
  size_t count;
  atomic_size_t done;
  size_t failures, mismatches;
};

static int reload_main(void* argument) {
  struct Reloads* reloads = argument;
  const struct Signature* signature = &reloads->soak->signature;
  unsigned char* outputs[8];
  size_t cycle, i;
  for (i = 0; i < signature->output_count; ++i) outputs[i] = aligned_alloc(64, round_up_64(signature->outputs[i].byte_size + 1));
  for (cycle = 0; cycle < reloads->count; ++cycle) {
    kiln_plan* plan = NULL;
    int set = (int)(cycle % kDistinctInputSets);
    if (kiln_plan_load_file(reloads->path, &plan) != KILN_OK || !run_set(plan, signature,
                                                                        reloads->soak->reference.inputs[set], outputs)) {
      if (reloads->failures++ == 0) fprintf(stderr, "reload %zu: %s\n", cycle, kiln_error_message());
    } else {
      for (i = 0; i < signature->output_count; ++i)
        if (memcmp(outputs[i], reloads->soak->reference.outputs[set][i], signature->outputs[i].byte_size) != 0) {
          ++reloads->mismatches;
          break;
        }
    }
    kiln_plan_free(plan);
    atomic_fetch_add_explicit(&reloads->done, 1, memory_order_relaxed);
  }
  for (i = 0; i < signature->output_count; ++i) free(outputs[i]);
  return 0;
}

static void soak_reloads(const char* path, const struct Soak* soak, size_t count, long limit_kib) {
  struct Reloads reloads = {.path = path, .soak = soak, .count = count};
  long samples[kSamples];
  double start = seconds_now();
  thrd_t thread;
  atomic_init(&reloads.done, 0);
  if (thrd_create(&thread, reload_main, &reloads) != thrd_success) exit(1);
  sample_rss(&reloads.done, count, samples);
  thrd_join(thread, NULL);
  printf("reloads: %zu load/run/free cycles in %.2f s, %zu failed, %zu outputs that differ\n", count,
         seconds_now() - start, reloads.failures, reloads.mismatches);
  CHECK(reloads.failures == 0 && reloads.mismatches == 0, "reloads: %zu failed, %zu differ", reloads.failures,
        reloads.mismatches);
  check_flat("reloads", samples, limit_kib);
}

static size_t scaled(const char* text, double scale, size_t minimum) {
  double value = strtod(text, NULL) * scale;
  return value < (double)minimum ? minimum : (size_t)value;
}

int main(int argc, char** argv) {
  const char* scale_text = getenv("KILN_SOAK_SCALE");
  double scale = scale_text != NULL ? strtod(scale_text, NULL) : 1.0;
  struct Soak soak;
  kiln_plan* plan = NULL;
  size_t runs, reloads;
  int thread_count;
  long limit_kib;
  if (argc < 5 || argc > 6) {
    fprintf(stderr, "usage: soak PLAN RUNS THREADS RELOADS [RSS_GROWTH_LIMIT_KIB]\n");
    return 2;
  }
  if (!(scale > 0)) {
    fprintf(stderr, "KILN_SOAK_SCALE must be a positive number, not \"%s\"\n", scale_text);
    return 2;
  }
  thread_count = atoi(argv[3]);
  if (thread_count < 1 || thread_count > kMaxThreads) {
    fprintf(stderr, "THREADS must be 1..%d\n", kMaxThreads);
    return 2;
  }
  runs = scaled(argv[2], scale, (size_t)thread_count * kSamples);
  reloads = scaled(argv[4], scale, kSamples);
  limit_kib = argc == 6 ? atol(argv[5]) : 1024;

  memset(&soak, 0, sizeof soak);
  if (kiln_plan_load_file(argv[1], &plan) != KILN_OK) {
    fprintf(stderr, "load %s: %s\n", argv[1], kiln_error_message());
    return 1;
  }
  soak.plan = plan;
  if (!read_signature(plan, &soak.signature) || !make_reference(&soak)) return 1;
  printf("soak %s: %zu runs on %d threads, then %zu reloads (KILN_SOAK_SCALE %g)\n", argv[1], runs, thread_count,
         reloads, scale);
  soak_runs(&soak, runs, thread_count, limit_kib);
  soak_reloads(argv[1], &soak, reloads, limit_kib);

  free_reference(&soak);
  free_signature(&soak.signature);
  kiln_plan_free(plan);
  printf(failures == 0 ? "ok   soak passed\n" : "FAILED: %d checks\n", failures);
  return failures == 0 ? 0 : 1;
}
