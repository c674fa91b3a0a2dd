/* A program outside kiln, built against an installed kiln the usual way (pkg-config, or Meson's
 * dependency('kiln')): it includes <kiln/kiln.h>, links libkiln alone, loads a plan of a matrix
 * product C = A B (ONNX's test_matmul_2d compiled by the installed `kiln compile`), runs it on
 * values of its own and checks every element against its own product.
 *   usage: consumer PLAN          prints "ok: ..." and exits 0 when every element matches */
#include <kiln/kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char* what, kiln_status status) {
  fprintf(stderr, "consumer: %s: %s (%s)\n", what, kiln_error_message(), kiln_status_string(status));
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: consumer PLAN\n");
    return 2;
  }
  /* The header this program was built with and the library it runs with are the same release. */
  if (strcmp(kiln_version(), KILN_VERSION_STRING) != 0 || kiln_version_number() != KILN_VERSION_NUMBER) {
    fprintf(stderr, "consumer: built with kiln %s, runs with libkiln %s\n", KILN_VERSION_STRING, kiln_version());
    return 1;
  }
  kiln_plan* plan = NULL;
  kiln_status status = kiln_plan_load_file(argv[1], &plan);
  if (status != KILN_OK) return fail(argv[1], status);
  if (kiln_plan_input_count(plan) != 2 || kiln_plan_output_count(plan) != 1) {
    fprintf(stderr, "consumer: expected a plan with inputs a, b and output c\n");
    return 1;
  }
  kiln_tensor tensors[3];
  float* values[3];
  for (size_t i = 0; i < 3; ++i) {
    kiln_tensor* tensor = &tensors[i];
    memset(tensor, 0, sizeof *tensor);
    status = i < 2 ? kiln_plan_input_info(plan, i, &tensor->name, &tensor->dtype, &tensor->rank, &tensor->shape)
                   : kiln_plan_output_info(plan, 0, &tensor->name, &tensor->dtype, &tensor->rank, &tensor->shape);
    if (status != KILN_OK) return fail("plan info", status);
    if (tensor->dtype != KILN_DTYPE_FLOAT32 || tensor->rank != 2) {
      fprintf(stderr, "consumer: %s is not a float32 matrix\n", tensor->name);
      return 1;
    }
    tensor->byte_size = (size_t)(tensor->shape[0] * tensor->shape[1]) * sizeof(float);
    values[i] = malloc(tensor->byte_size);
    if (values[i] == NULL) return 1;
    tensor->data = values[i];
  }
  const size_t rows = (size_t)tensors[0].shape[0], depth = (size_t)tensors[0].shape[1];
  const size_t columns = (size_t)tensors[1].shape[1];
  for (size_t i = 0; i < rows * depth; ++i) values[0][i] = (float)(i % 7) * 0.25f - 0.5f;
  for (size_t i = 0; i < depth * columns; ++i) values[1][i] = (float)((i * 3) % 5) * 0.5f - 1.0f;

  status = kiln_plan_run(plan, tensors, 2, &tensors[2], 1);
  if (status != KILN_OK) return fail("kiln_plan_run", status);
  double max_error = 0;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < columns; ++c) {
      double expected = 0;
      for (size_t k = 0; k < depth; ++k) expected += (double)values[0][r * depth + k] * values[1][k * columns + c];
      double error = fabs(values[2][r * columns + c] - expected);
      if (error > max_error) max_error = error;
      if (error > 1e-5 * (1 + fabs(expected))) {
        fprintf(stderr, "consumer: c[%zu][%zu] = %g, expected %g\n", r, c, values[2][r * columns + c], expected);
        return 1;
      }
    }
  printf("ok: libkiln %s ran %s: a %zux%zu by %zux%zu product, every element within 1e-5 (max error %.2g)\n",
         kiln_version(), argv[1], rows, depth, depth, columns, max_error);
  for (size_t i = 0; i < 3; ++i) free(values[i]);
  kiln_plan_free(plan);
  return 0;
}
