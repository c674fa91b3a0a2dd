/*
 * kiln.h — the C API of the kiln runtime.
 *
 * This header is C11 and stands alone. It declares libkiln, the runtime: load a plan file made by
 * `kiln compile` (docs/plan-format.md), ask for its inputs and outputs, and run it on buffers the
 * caller owns. libkiln depends on libc, libdl and pthreads only. No exception or C++ type crosses
 * this boundary; every fallible call returns a kiln_status.
 *
 * Stability: every function declared here keeps its signature for the life of the major version;
 * a changed behaviour gets a new name with a _v2 suffix.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KILN_API __declspec(dllimport)
#else
#define KILN_API __attribute__((visibility("default")))
#endif

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH". Compare with
 * KILN_VERSION_STRING to detect a header/library mismatch. Thread-safe; never fails. */
KILN_API const char* kiln_version(void);

/* The same version as one number, MAJOR*1000000 + MINOR*1000 + PATCH (see KILN_VERSION_NUMBER). */
KILN_API int kiln_version_number(void);

/* ---- Status codes and error messages ---------------------------------------------------------- */

/* What every fallible call returns. On an error the call's out-parameters are left untouched and a
 * message saying what went wrong can be read with kiln_error_message(). Values never change. */
typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_INVALID_ARGUMENT = 1, /* a NULL pointer, wrong input count/name/dtype/shape/size */
  KILN_ERROR_IO = 2,               /* the plan file cannot be opened or read */
  KILN_ERROR_INVALID_PLAN = 3,     /* not a plan, truncated, hash mismatch, metadata fails the verifier */
  KILN_ERROR_UNSUPPORTED_VERSION = 4, /* the plan's format version is newer than this library reads */
  KILN_ERROR_UNSUPPORTED_TARGET = 5,  /* built for another target, or a CPU feature this CPU lacks */
  KILN_ERROR_OUT_OF_MEMORY = 6,
  KILN_ERROR_INTERNAL = 7          /* a bug in kiln; the message says where */
} kiln_status;

/* A static, never-NULL name for a status code ("KILN_OK", "KILN_ERROR_INVALID_PLAN", ...; "unknown
 * status" for a value not listed above). Thread-safe. */
KILN_API const char* kiln_status_string(kiln_status status);

/* The message of the last call that failed on the calling thread, or "" if none has. The text is
 * owned by the library and stays valid until the next kiln_* call on this thread. Each thread has
 * its own message, so threads sharing one plan never see each other's errors. */
KILN_API const char* kiln_error_message(void);

/* ---- Element types ---------------------------------------------------------------------------- */

/* Element types of plan inputs and outputs. Values never change. */
typedef enum kiln_dtype {
  KILN_DTYPE_BOOL = 1, /* one byte, 0 or 1 */
  KILN_DTYPE_INT8 = 2,
  KILN_DTYPE_INT16 = 3,
  KILN_DTYPE_INT32 = 4,
  KILN_DTYPE_INT64 = 5,
  KILN_DTYPE_UINT8 = 6,
  KILN_DTYPE_UINT16 = 7,
  KILN_DTYPE_UINT32 = 8,
  KILN_DTYPE_UINT64 = 9,
  KILN_DTYPE_FLOAT16 = 10,
  KILN_DTYPE_BFLOAT16 = 11,
  KILN_DTYPE_FLOAT32 = 12,
  KILN_DTYPE_FLOAT64 = 13
} kiln_dtype;

/* A static name ("float32", ...; "unknown" for other values). Thread-safe. */
KILN_API const char* kiln_dtype_name(kiln_dtype dtype);

/* Bytes per element; 0 for a value that is not a kiln_dtype. Thread-safe. */
KILN_API size_t kiln_dtype_size(kiln_dtype dtype);

/* ---- Plans ------------------------------------------------------------------------------------ */

/* A loaded plan: verified metadata, mapped weights and loaded kernels. Opaque. Immutable once
 * loaded: every query and kiln_plan_run may be called from many threads at once. */
typedef struct kiln_plan kiln_plan;

/* Loads the plan file at `path` (made by `kiln compile`) into *out_plan.
 * Before any code is loaded, the file is checked in this order, each failure with its own message:
 * magic, format version (KILN_ERROR_UNSUPPORTED_VERSION when newer than this library), size
 * (truncated), section bounds, content hash, metadata (flatbuffers verifier), target triple and
 * CPU features (KILN_ERROR_UNSUPPORTED_TARGET, naming the missing feature). The weights are mapped
 * read-only from the file, not copied. A plan is code: load only plans you trust like a shared
 * library. Free with kiln_plan_free. Thread-safe.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL path or out_plan), KILN_ERROR_IO, and the above. */
KILN_API kiln_status kiln_plan_load_file(const char* path, kiln_plan** out_plan);

/* The same for a plan held in memory: `size` bytes at `data`. The bytes are copied (into aligned
 * memory), so the caller may free `data` as soon as this returns. Thread-safe.
 * Errors: as kiln_plan_load_file, except KILN_ERROR_IO. */
KILN_API kiln_status kiln_plan_load_buffer(const void* data, size_t size, kiln_plan** out_plan);

/* Releases a plan and everything it holds. NULL is a no-op. No run of this plan may be in progress
 * (the caller must join the threads running it first). */
KILN_API void kiln_plan_free(kiln_plan* plan);

/* The number of inputs / outputs of the plan, in graph order. 0 for a NULL plan. Thread-safe. */
KILN_API size_t kiln_plan_input_count(const kiln_plan* plan);
KILN_API size_t kiln_plan_output_count(const kiln_plan* plan);

/* Describes input (or output) `index`: its name, element type, rank and shape. Every out-pointer
 * may be NULL (that item is not reported). *out_name and *out_shape point into the plan and stay
 * valid until kiln_plan_free; out_shape has *out_rank elements. Thread-safe.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan, index out of range). */
KILN_API kiln_status kiln_plan_input_info(const kiln_plan* plan, size_t index, const char** out_name,
                                          kiln_dtype* out_dtype, size_t* out_rank, const int64_t** out_shape);
KILN_API kiln_status kiln_plan_output_info(const kiln_plan* plan, size_t index, const char** out_name,
                                           kiln_dtype* out_dtype, size_t* out_rank, const int64_t** out_shape);

/* A caller-owned dense row-major tensor passed to kiln_plan_run. `name` NULL binds by position;
 * otherwise by name (each plan input or output exactly once, in any order). The dtype, rank and
 * shape must equal the plan's, and byte_size must be at least the tensor's size in bytes. `data`
 * may be NULL only for an empty tensor. Buffers that are 64-byte aligned are used in place; others
 * are copied through the plan's staging memory (correct, but a copy per run). */
typedef struct kiln_tensor {
  const char* name;
  kiln_dtype dtype;
  size_t rank;
  const int64_t* shape;
  void* data;
  size_t byte_size;
} kiln_tensor;

/* Runs the plan: reads `inputs` (input_count of them, one per plan input), writes every element of
 * `outputs` (output_count, one per plan output). Memory: input and output buffers are the caller's;
 * scratch memory comes from a pool of arenas owned by the plan, so a run allocates nothing once
 * the plan has run as many times at once as it ever will (the first run on each concurrent thread
 * allocates one arena). Thread-safe: any number of threads may run one plan at once, each with its
 * own output buffers. Kernels split their work over the library's thread pool (KILN_THREADS sets
 * its size). Outputs must not overlap inputs or each other.
 * Errors: KILN_ERROR_INVALID_ARGUMENT naming the tensor and what is wrong (count, unknown or
 * repeated name, dtype, rank, shape, too small a buffer, NULL or misaligned data), and
 * KILN_ERROR_OUT_OF_MEMORY. Outputs are unspecified after an error. */
KILN_API kiln_status kiln_plan_run(const kiln_plan* plan, const kiln_tensor* inputs, size_t input_count,
                                   const kiln_tensor* outputs, size_t output_count);

/* Plan facts for tools (`kiln inspect`). Every out-pointer may be NULL. Strings point into the plan
 * and stay valid until kiln_plan_free. Thread-safe.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan). Unstable: may change before 1.0. */
KILN_API kiln_status kiln_plan_describe(const kiln_plan* plan, const char** out_target_triple,
                                        const char** out_cpu_name, uint64_t* out_arena_bytes,
                                        uint64_t* out_weights_bytes, size_t* out_kernel_count);

/* The symbol of kernel `index` in launch order and its parallel extent (either out-pointer may be
 * NULL). Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan, index out of range). Unstable. */
KILN_API kiln_status kiln_plan_kernel_info(const kiln_plan* plan, size_t index, const char** out_symbol,
                                           int64_t* out_parallel_extent);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H */
