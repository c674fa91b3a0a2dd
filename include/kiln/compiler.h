/*
 * compiler.h — the C API of libkiln-compiler: compile an ONNX model into a plan file from C.
 *
 * This header is C11 and stands alone (it includes kiln.h for kiln_status and KILN_API). It is
 * served by libkiln-compiler, a separate shared library that carries the compiler (LLVM, LLD,
 * protobuf, the ONNX importer) so that libkiln, which only runs plans, stays libc-only. A program
 * that only runs plans links libkiln alone; one that compiles links libkiln-compiler (which itself
 * depends on libkiln).
 *
 * Errors: every fallible call returns a kiln_status; the message is read with kiln_error_message()
 * from kiln.h, as for libkiln: both libraries share one message per thread (libkiln-compiler
 * stores its messages in libkiln). No exception crosses this boundary.
 *
 * Stability: as kiln.h (signatures never change; a changed behaviour gets a _v2 name).
 */
#ifndef KILN_COMPILER_H
#define KILN_COMPILER_H

#include <stddef.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of a compile. Set `size` (kiln_compile_options_init does) so that a newer library knows
 * which fields an older caller filled in; fields past `size` take their defaults. */
typedef struct kiln_compile_options {
  size_t size;               /* sizeof(kiln_compile_options), set by kiln_compile_options_init */
  const char* const* shapes; /* shape_count specs, as `kiln compile --shape`: "NAME=D1,D2" (the whole
                                shape of input NAME; "NAME=" is a scalar) or "SYMBOL=N" (one
                                symbolic dimension, everywhere it is used) */
  size_t shape_count;
  int verbose;               /* nonzero: progress lines on stderr ("kiln compile: [  0.12s] ...") */
  const char* const* values; /* value_count specs, as `kiln compile --value`: "NAME=V1,V2,..." (input
                                NAME compiled for that one value, row-major; the plan refuses runs
                                that give another) or "NAME=MIN..MAX" (each element of an int64
                                scalar or 1-D input NAME is a size read at run time, in that range).
                                docs/symbolic-shapes.md, decisions 14 and 19. Since 0.2.0. */
  size_t value_count;
  const char* precision;     /* NULL or "fp32" (the default): every op in the model's own types;
                                "bf16": f32 matmuls by a weight round both operands to bf16 and sum
                                in f32, on AMX tiles where the CPU has them, elsewhere unchanged
                                (as `kiln compile --precision bf16`; docs/optimisation.md). */
} kiln_compile_options;

/* Fills *options with the defaults (size = sizeof, no shapes, quiet). NULL is a no-op. */
KILN_API void kiln_compile_options_init(kiln_compile_options* options);

/* Compiles the ONNX model at `model_path` for this CPU and writes the plan to `plan_path`
 * (docs/plan-format.md), as `kiln compile` does: the file is written beside plan_path and renamed
 * into place, so a failed compile never leaves half a plan. `options` NULL means the defaults; it
 * is read during the call only. The same model and options give a byte-identical plan. Kernels
 * are cached on disk as for the JIT (KILN_CACHE_DIR, KILN_CACHE=0). ONNX models are untrusted
 * input: a malformed one gets an error, never a crash.
 * Thread-safety: may be called from several threads at once (each compile is independent).
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL model_path or plan_path, options->size 0, a NULL or
 * malformed shape spec), KILN_ERROR_IO (the model cannot be read, the plan cannot be written),
 * KILN_ERROR_INVALID_MODEL (a malformed or unsupported model, a dimension left unbound, a spec
 * that names no input or contradicts the model; the message names the input, node or op),
 * KILN_ERROR_OUT_OF_MEMORY, KILN_ERROR_INTERNAL (a bug in kiln). */
KILN_API kiln_status kiln_compile_onnx_file(const char* model_path, const kiln_compile_options* options,
                                            const char* plan_path);

#ifdef __cplusplus
}
#endif

#endif /* KILN_COMPILER_H */
