/*
 * classify_digits.c: the smallest complete embedding of kiln, in plain C.
 *
 * It loads a plan made by `kiln compile` from the digits classifier that
 * samples/models/make_digits_model.py trains (input "pixels": float32 [B, 64], raw 8x8 images
 * with values 0..16; output "logits": float32 [B, 10]), classifies the held-out test images that
 * the same script saves, and prints a few predictions, the accuracy and the latency per image.
 *
 * It links only libkiln (check: `ldd build/samples/classify_digits` shows no LLVM, no protobuf)
 * and uses only include/kiln/kiln.h. scripts/demo.sh builds everything and runs it:
 *
 *     python3 samples/models/make_digits_model.py build/demo
 *     build/tools/kiln compile build/demo/digits.onnx -o build/demo/digits.kiln --shape N=1
 *     build/samples/classify_digits build/demo/digits.kiln \
 *         build/demo/digits_test_pixels.npy build/demo/digits_test_labels.npy
 *
 * The batch size B is whatever the plan was compiled for (N=1 above: one image per run, so the
 * latency printed is that of one call). Any B works: the images go through in chunks of B.
 */

/* clock_gettime is POSIX, not C11: ask for it before any system header. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/kiln.h"

/* ---- A minimal .npy reader --------------------------------------------------------------------
 * make_digits_model.py saves the test set with numpy.save. An .npy file is: the 6 bytes
 * "\x93NUMPY", a major and minor version byte, a little-endian header length (2 bytes in version
 * 1, 4 in versions 2 and 3), a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (300, 64), }
 * and then the raw elements in C order. This reader accepts exactly what the sample needs: one
 * expected descr, C order, and it returns the element count and the first dimension. */
static void* read_npy(const char* path, const char* expected_descr, size_t element_size, size_t* out_count,
                      size_t* out_rows) {
  FILE* file = fopen(path, "rb");
  if (!file) {
    fprintf(stderr, "classify_digits: cannot open %s\n", path);
    return NULL;
  }
  unsigned char prefix[12];
  char header[4096];
  void* data = NULL;
  size_t header_length = 0, prefix_length = 10;
  if (fread(prefix, 1, 10, file) != 10 || memcmp(prefix, "\x93NUMPY", 6) != 0) goto bad;
  if (prefix[6] == 1) {
    header_length = (size_t)prefix[8] | ((size_t)prefix[9] << 8);
  } else {
    if (fread(prefix + 10, 1, 2, file) != 2) goto bad;
    header_length = (size_t)prefix[8] | ((size_t)prefix[9] << 8) | ((size_t)prefix[10] << 16) |
                    ((size_t)prefix[11] << 24);
    prefix_length = 12;
  }
  (void)prefix_length;
  if (header_length >= sizeof header || fread(header, 1, header_length, file) != header_length) goto bad;
  header[header_length] = '\0';
  /* The dtype must be the expected one and the array in C order; otherwise the bytes would mean
   * something else. */
  char wanted[32];
  snprintf(wanted, sizeof wanted, "'descr': '%s'", expected_descr);
  if (!strstr(header, wanted) || !strstr(header, "'fortran_order': False")) {
    fprintf(stderr, "classify_digits: %s: expected a C-order array of dtype %s, header is %s\n", path,
            expected_descr, header);
    fclose(file);
    return NULL;
  }
  /* The shape tuple: multiply its dimensions for the element count; keep the first. */
  const char* shape = strstr(header, "'shape': (");
  if (!shape) goto bad;
  shape += strlen("'shape': (");
  size_t count = 1, rows = 0;
  int first = 1;
  while (*shape && *shape != ')') {
    char* end;
    unsigned long long dimension = strtoull(shape, &end, 10);
    if (end == shape) break;
    count *= (size_t)dimension;
    if (first) rows = (size_t)dimension;
    first = 0;
    shape = end;
    while (*shape == ',' || *shape == ' ') ++shape;
  }
  data = malloc(count * element_size + 1);
  if (!data || fread(data, element_size, count, file) != count) goto bad;
  fclose(file);
  *out_count = count;
  *out_rows = rows;
  return data;
bad:
  fprintf(stderr, "classify_digits: %s is not a readable .npy file\n", path);
  free(data);
  fclose(file);
  return NULL;
}

/* Prints why a kiln call failed. kiln_error_message() is per thread, so it is the message of
 * exactly the call that just failed on this thread, even if other threads use kiln meanwhile. */
static void report(const char* what, kiln_status status) {
  fprintf(stderr, "classify_digits: %s: %s (%s)\n", what, kiln_error_message(), kiln_status_string(status));
}

static double now_ms(void) {
  struct timespec time;
  clock_gettime(CLOCK_MONOTONIC, &time);
  return (double)time.tv_sec * 1e3 + (double)time.tv_nsec / 1e6;
}

/* Rounds a byte count up to a multiple of 64: aligned_alloc requires a multiple of the alignment. */
static size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PLAN TEST_PIXELS.npy TEST_LABELS.npy\n", argv[0]);
    return 2;
  }
  /* A header/library mismatch is worth knowing about before anything else goes wrong. */
  printf("kiln %s (header %s)\n", kiln_version(), KILN_VERSION_STRING);

  /* 1. Load the plan. libkiln verifies the whole file (magic, version, hash, metadata, CPU
   *    features) before loading any of its code; each failure has its own status and message. */
  kiln_plan* plan = NULL;
  kiln_status status = kiln_plan_load_file(argv[1], &plan);
  if (status != KILN_OK) {
    report(argv[1], status);
    return 1;
  }

  /* 2. Ask the plan what it expects, rather than assuming: one float32 input [B, 64] and one
   *    float32 output [B, 10]. The names and shape arrays belong to the plan; they stay valid until
   *    kiln_plan_free. */
  const char *input_name, *output_name;
  kiln_dtype input_dtype, output_dtype;
  size_t input_rank, output_rank;
  const int64_t *input_shape, *output_shape;
  if (kiln_plan_input_count(plan) != 1 || kiln_plan_output_count(plan) != 1 ||
      kiln_plan_input_info(plan, 0, &input_name, &input_dtype, &input_rank, &input_shape) != KILN_OK ||
      kiln_plan_output_info(plan, 0, &output_name, &output_dtype, &output_rank, &output_shape) != KILN_OK ||
      input_dtype != KILN_DTYPE_FLOAT32 || input_rank != 2 || input_shape[1] != 64 ||
      output_dtype != KILN_DTYPE_FLOAT32 || output_rank != 2 || output_shape[1] != 10 ||
      output_shape[0] != input_shape[0]) {
    fprintf(stderr, "classify_digits: %s is not the digits classifier (float32 [B, 64] -> float32 [B, 10])\n",
            argv[1]);
    kiln_plan_free(plan);
    return 1;
  }
  const size_t batch = (size_t)input_shape[0];
  printf("plan %s: input '%s' float32 [%zu, 64], output '%s' float32 [%zu, 10]\n", argv[1], input_name, batch,
         output_name, batch);

  /* 3. Read the test set: pixels float32 [count, 64] and labels int64 [count]. */
  size_t pixel_count, image_count, label_count, label_rows;
  float* pixels = read_npy(argv[2], "<f4", sizeof(float), &pixel_count, &image_count);
  int64_t* labels = read_npy(argv[3], "<i8", sizeof(int64_t), &label_count, &label_rows);
  if (!pixels || !labels || pixel_count != image_count * 64 || label_count != image_count) {
    if (pixels && labels) fprintf(stderr, "classify_digits: the pixel and label files do not match\n");
    free(pixels);
    free(labels);
    kiln_plan_free(plan);
    return 1;
  }

  /* 4. The buffers kiln_plan_run reads and writes are ours. 64-byte aligned ones are used in
   *    place; any other alignment works too, at the price of a copy per run. They are allocated
   *    once and reused for every run: a run itself allocates nothing. */
  const size_t input_bytes = batch * 64 * sizeof(float), output_bytes = batch * 10 * sizeof(float);
  float* input = aligned_alloc(64, round_up_64(input_bytes));
  float* logits = aligned_alloc(64, round_up_64(output_bytes));
  if (!input || !logits) {
    fprintf(stderr, "classify_digits: out of memory\n");
    return 1;
  }
  /* A kiln_tensor describes one buffer: name (NULL would bind by position), dtype, shape, data and
   * size. Dtype and shape must equal the plan's; here they are copied from the plan itself. */
  kiln_tensor input_tensor = {input_name, KILN_DTYPE_FLOAT32, 2, input_shape, input, input_bytes};
  kiln_tensor output_tensor = {output_name, KILN_DTYPE_FLOAT32, 2, output_shape, logits, output_bytes};

  /* 5. Classify in chunks of `batch` images; a last partial chunk is padded with blank images whose
   *    results are ignored. The prediction is the class with the largest logit. */
  size_t correct = 0;
  double run_ms = 0.0;
  for (size_t start = 0; start < image_count; start += batch) {
    size_t in_chunk = image_count - start < batch ? image_count - start : batch;
    memset(input, 0, input_bytes);
    memcpy(input, pixels + start * 64, in_chunk * 64 * sizeof(float));
    double before = now_ms();
    status = kiln_plan_run(plan, &input_tensor, 1, &output_tensor, 1);
    run_ms += now_ms() - before;
    if (status != KILN_OK) {
      report("kiln_plan_run", status);
      return 1;
    }
    for (size_t i = 0; i < in_chunk; ++i) {
      const float* row = logits + i * 10;
      int best = 0;
      for (int k = 1; k < 10; ++k)
        if (row[k] > row[best]) best = k;
      size_t image = start + i;
      correct += best == labels[image];
      if (image < 8)
        printf("image %3zu: predicted %d, true %d%s\n", image, best, (int)labels[image],
               best == labels[image] ? "" : "   <- wrong");
    }
  }
  printf("accuracy: %.1f%% (%zu of %zu test images)\n", 100.0 * (double)correct / (double)image_count, correct,
         image_count);
  printf("latency: %.4f ms per image (%zu runs of batch %zu, %.3f ms in all)\n", run_ms / (double)image_count,
         (image_count + batch - 1) / batch, batch, run_ms);

  /* 6. Release everything. kiln_plan_free must not race with a run (none is left here). */
  free(input);
  free(logits);
  free(pixels);
  free(labels);
  kiln_plan_free(plan);
  return 0;
}
