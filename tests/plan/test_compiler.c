/* compiler.h from C11: compile an ONNX model into a plan with libkiln-compiler, then load and run it
 * with libkiln (kiln.h); every error comes back as a status with its message from kiln_error_message().
 *   test-compiler MODEL.onnx PLAN WORK_DIR   compiles MODEL to PLAN (the caller then checks PLAN with
 *                                            test-plan end-to-end and against `kiln compile`'s) */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/compiler.h"
#include "c_check.h"
#include "kiln/kiln.h"

int main(int argc, char** argv) {
  const char *model, *plan_path, *work;
  char path[4096];
  kiln_compile_options options;
  kiln_plan* plan = NULL;
  FILE* file;
  const char* bad_shapes[] = {"Input3=1,1,28,x"};
  const char* unknown_shapes[] = {"no_such_input=1,2"};
  const char* null_shapes[] = {NULL};
  const char* good_shapes[] = {"Input3=1,1,28,28"};
  if (argc != 4) {
    fprintf(stderr, "usage: test-compiler MODEL.onnx PLAN WORK_DIR\n");
    return 2;
  }
  model = argv[1];
  plan_path = argv[2];
  work = argv[3];

  kiln_compile_options_init(&options);
  CHECK(options.size == sizeof options && options.shapes == NULL && options.shape_count == 0 && !options.verbose &&
            options.precision == NULL,
        "kiln_compile_options_init");
  kiln_compile_options_init(NULL);

  /* Errors, each with its status and message. */
  expect_error(kiln_compile_onnx_file(NULL, NULL, plan_path), KILN_ERROR_INVALID_ARGUMENT, "model_path is NULL",
               "NULL model path");
  expect_error(kiln_compile_onnx_file(model, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT, "plan_path is NULL",
               "NULL plan path");
  snprintf(path, sizeof path, "%s/no-such-model.onnx", work);
  expect_error(kiln_compile_onnx_file(path, NULL, plan_path), KILN_ERROR_IO, "cannot open ONNX model",
               "a missing model");
  snprintf(path, sizeof path, "%s/garbage.onnx", work);
  file = fopen(path, "wb");
  fputs("this is not an ONNX model", file);
  fclose(file);
  expect_error(kiln_compile_onnx_file(path, NULL, plan_path), KILN_ERROR_INVALID_MODEL, "garbage.onnx",
               "a file that is not a model");
  options.size = 0;
  expect_error(kiln_compile_onnx_file(model, &options, plan_path), KILN_ERROR_INVALID_ARGUMENT, "options->size is 0",
               "options of size 0");
  kiln_compile_options_init(&options);
  options.shapes = bad_shapes;
  options.shape_count = 1;
  expect_error(kiln_compile_onnx_file(model, &options, plan_path), KILN_ERROR_INVALID_ARGUMENT, "Input3=1,1,28,x",
               "a malformed shape spec");
  options.shapes = null_shapes;
  expect_error(kiln_compile_onnx_file(model, &options, plan_path), KILN_ERROR_INVALID_ARGUMENT, "shapes[0] is NULL",
               "a NULL shape spec");
  options.shapes = unknown_shapes;
  expect_error(kiln_compile_onnx_file(model, &options, plan_path), KILN_ERROR_INVALID_MODEL, "no_such_input",
               "a spec that names no input");
  kiln_compile_options_init(&options);
  options.precision = "fp16";
  expect_error(kiln_compile_onnx_file(model, &options, plan_path), KILN_ERROR_INVALID_ARGUMENT,
               "options->precision 'fp16'", "an unknown precision");
  options.precision = "bf16";  /* accepted; mnist has no matmul by a weight that qualifies */
  CHECK(kiln_compile_onnx_file(model, &options, plan_path) == KILN_OK, "compile with precision bf16: %s",
        kiln_error_message());
  kiln_compile_options_init(&options);
  options.shape_count = 1;
  snprintf(path, sizeof path, "%s/no-such-dir/plan.kiln", work);
  expect_error(kiln_compile_onnx_file(model, NULL, path), KILN_ERROR_IO, "cannot write the plan",
               "a plan path that cannot be written");

  /* The compile itself (a redundant but consistent spec, verbose), then load and describe. */
  options.shapes = good_shapes;
  options.verbose = 1;
  CHECK(kiln_compile_onnx_file(model, &options, plan_path) == KILN_OK, "compile: %s", kiln_error_message());
  CHECK(strcmp(kiln_error_message(), "") == 0, "a successful compile clears the message");
  CHECK(kiln_plan_load_file(plan_path, &plan) == KILN_OK, "load the compiled plan: %s", kiln_error_message());
  if (plan != NULL) {
    const char* name = NULL;
    CHECK(kiln_plan_input_count(plan) == 1 && kiln_plan_output_count(plan) == 1, "mnist has one input and output");
    kiln_plan_input_info(plan, 0, &name, NULL, NULL, NULL);
    CHECK(name != NULL && strcmp(name, "Input3") == 0, "input name %s", name ? name : "(null)");
    kiln_plan_free(plan);
  }
  if (failures == 0) printf("ok   compiled %s to %s through compiler.h\n", model, plan_path);
  else fprintf(stderr, "%d check(s) failed\n", failures);
  return failures == 0 ? 0 : 1;
}
