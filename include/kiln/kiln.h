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

#include "kiln/dlpack_compat.h"
#include "kiln/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KILN_API __declspec(dllimport)
#else
#define KILN_API __attribute__((visibility("default")))
#endif

/* The enums below take any value of their C type from a C caller (a bad dtype is an error kiln
 * reports, not undefined behaviour), so C++ sees them with a fixed underlying type: without one, a
 * value outside the enumerators would be undefined in libkiln, which is C++. int has the size and
 * calling convention of the type C compilers give these enums, so the ABI is the same. */
#ifdef __cplusplus
#define KILN_ENUM_TYPE : int
#else
#define KILN_ENUM_TYPE
#endif

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH". Compare with
 * KILN_VERSION_STRING to detect a header/library mismatch. Thread-safe; never fails. */
KILN_API const char* kiln_version(void);

/* The same version as one number, MAJOR*1000000 + MINOR*1000 + PATCH (see KILN_VERSION_NUMBER). */
KILN_API int kiln_version_number(void);

/* ---- Status codes and error messages ---------------------------------------------------------- */

/* What every fallible call returns. On an error the call's out-parameters are left untouched and a
 * message saying what went wrong can be read with kiln_error_message(). Values never change. */
typedef enum kiln_status KILN_ENUM_TYPE {
  KILN_OK = 0,
  KILN_ERROR_INVALID_ARGUMENT = 1, /* a NULL pointer, wrong input count/name/dtype/shape/size */
  KILN_ERROR_IO = 2,               /* the plan file cannot be opened or read */
  KILN_ERROR_INVALID_PLAN = 3,     /* not a plan, truncated, hash mismatch, metadata fails the verifier */
  KILN_ERROR_UNSUPPORTED_VERSION = 4, /* the plan's format version is newer than this library reads */
  KILN_ERROR_UNSUPPORTED_TARGET = 5,  /* built for another target, a CPU feature this CPU lacks, or no device */
  KILN_ERROR_OUT_OF_MEMORY = 6,
  KILN_ERROR_INTERNAL = 7,         /* a bug in kiln; the message says where */
  KILN_ERROR_CANCELLED = 8,        /* the run was cancelled through its kiln_cancel (see below) */
  KILN_ERROR_INVALID_MODEL = 9     /* compiler.h: the model is malformed, unsupported or has unbound
                                      dimensions; the message names the node or input */
} kiln_status;

/* A static, never-NULL name for a status code ("KILN_OK", "KILN_ERROR_INVALID_PLAN", ...; "unknown
 * status" for a value not listed above). Thread-safe. */
KILN_API const char* kiln_status_string(kiln_status status);

/* The message of the last call that failed on the calling thread, or "" if none has. The text is
 * owned by the library and stays valid until the next kiln_* call on this thread. Each thread has
 * its own message, so threads sharing one plan never see each other's errors. It also reports the
 * failures of libkiln-compiler (kiln/compiler.h), which stores its messages here: one message per
 * thread for both libraries. */
KILN_API const char* kiln_error_message(void);

/* ---- Element types ---------------------------------------------------------------------------- */

/* Element types of plan inputs and outputs. Values never change. */
typedef enum kiln_dtype KILN_ENUM_TYPE {
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
 * CPU features (KILN_ERROR_UNSUPPORTED_TARGET, naming the missing feature). An OpenCL plan
 * (`kiln compile --target opencl`) then opens the OpenCL device (libOpenCL is loaded with dlopen) and
 * builds its kernels there; no OpenCL library or device, or a device without a dtype the plan holds,
 * is KILN_ERROR_UNSUPPORTED_TARGET naming it. Its runs copy inputs and outputs between the caller's
 * host buffers and the device. The weights are mapped
 * read-only from the file, not copied. A plan is code: load only plans you trust like a shared
 * library. Free with kiln_plan_free. Thread-safe. kiln_plan_load_file_v2 takes load options.
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
 * In a symbolic plan (kiln_plan_variable_count > 0) a dimension known only at run time is -1 here;
 * kiln_plan_input_info_v2 / _output_info_v2 say what it is.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan, index out of range). */
KILN_API kiln_status kiln_plan_input_info(const kiln_plan* plan, size_t index, const char** out_name,
                                          kiln_dtype* out_dtype, size_t* out_rank, const int64_t** out_shape);
KILN_API kiln_status kiln_plan_output_info(const kiln_plan* plan, size_t index, const char** out_name,
                                           kiln_dtype* out_dtype, size_t* out_rank, const int64_t** out_shape);

/* A caller-owned dense row-major tensor passed to kiln_plan_run. `name` NULL binds by position;
 * otherwise by name (each plan input or output exactly once, in any order). The dtype, rank and
 * shape must equal the plan's (in a symbolic plan: each variable within its range, the same value
 * wherever it appears, every other dimension as the plan computes it; an output's shape as
 * kiln_plan_output_shape gives it), and byte_size must be at least the tensor's size in bytes. `data`
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
 * its size), or the plan's own pool or the caller's parallel_for (kiln_plan_options). Outputs must
 * not overlap inputs or each other. For a thread cap or cancellation see kiln_plan_run_with_options.
 * Errors: KILN_ERROR_INVALID_ARGUMENT naming the tensor and what is wrong (count, unknown or
 * repeated name, dtype, rank, shape, too small a buffer, NULL data, an output that overlaps an
 * input or another output), and
 * KILN_ERROR_OUT_OF_MEMORY. Outputs are unspecified after an error.
 * Symbolic plans (since 0.2.0): inputs of any shapes within the variables' ranges; also
 * KILN_ERROR_INVALID_ARGUMENT for a variable out of its range (naming input, axis and variable:
 * "input 'ids' axis 1 (sequence) is 600; the plan allows 1..512"), two inputs giving one variable
 * different values ("'ids' gives batch=2, 'mask' gives batch=3"), a dimension that is not its
 * expression's value, an output whose shape is not the one kiln_plan_output_shape computes; and
 * KILN_ERROR_INVALID_PLAN when the plan's sizes fail at these shapes (see kiln_plan_output_shape).
 * Plans with sizes the run decides (kiln_plan_variable_source): KILN_ERROR_INVALID_ARGUMENT when
 * the run decides a value outside the variable's range ("node 'nz' (NonZero, opset 13) decided
 * NonZero(nz)=13 in this run; the plan allows 0..12"; then no kernel that depends on it has run,
 * and nothing was written out of bounds), and when such a plan has an output whose shape the run
 * decides: kiln_plan_run cannot report it, use kiln_plan_run_with_options with output_shapes.
 * Plans with inputs compiled for one value (kiln compile --value): KILN_ERROR_INVALID_ARGUMENT when
 * such an input holds another ("input 'axes' holds (0); this plan was compiled for (1) only").
 * After any error the plan stays usable. */
KILN_API kiln_status kiln_plan_run(const kiln_plan* plan, const kiln_tensor* inputs, size_t input_count,
                                   const kiln_tensor* outputs, size_t output_count);

/* ---- Cancellation ----------------------------------------------------------------------------- */

/* A cancellation token: a flag that one thread sets and the runs that were given it poll. Opaque. */
typedef struct kiln_cancel kiln_cancel;

/* Creates a token (not requested) into *out_cancel. Free with kiln_cancel_free. Thread-safe.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL out_cancel), KILN_ERROR_OUT_OF_MEMORY. */
KILN_API kiln_status kiln_cancel_create(kiln_cancel** out_cancel);

/* Releases a token. NULL is a no-op. No run that was given it may still be in progress. */
KILN_API void kiln_cancel_free(kiln_cancel* cancel);

/* Asks every run given this token to stop: each checks it before every kernel and before every
 * chunk of a kernel's parallel work, skips what is left and returns KILN_ERROR_CANCELLED (the
 * outputs are then unspecified). A request stays until kiln_cancel_reset; runs started later with
 * the token return KILN_ERROR_CANCELLED at once. Thread-safe and async-signal-safe (one atomic
 * store); NULL is a no-op. */
KILN_API void kiln_cancel_request(kiln_cancel* cancel);

/* Clears a request, so that the token can be given to new runs. Call it only when no run that was
 * given the token is in progress. NULL is a no-op. */
KILN_API void kiln_cancel_reset(kiln_cancel* cancel);

/* 1 if a request is pending, 0 otherwise (and for NULL). Thread-safe. */
KILN_API int kiln_cancel_is_requested(const kiln_cancel* cancel);

/* ---- Run options ------------------------------------------------------------------------------ */

/* Options of one run. Set `size` (kiln_run_options_init does) so that a newer library knows which
 * fields an older caller filled in; fields past `size` take their defaults. */
typedef struct kiln_run_options {
  size_t size;         /* sizeof(kiln_run_options), set by kiln_run_options_init */
  int thread_count;    /* at most this many threads work on each kernel; 0 = all the plan has */
  kiln_cancel* cancel; /* polled between kernels and chunks; NULL = the run cannot be cancelled */
  int tensors_on_device; /* non-zero, for a device plan (compiled with --target cuda or opencl):
                            every input's and output's `data` is memory on the plan's device, not
                            on the host: a CUdeviceptr (cast to void*) in the primary context of
                            the GPU libkiln uses (KILN_CUDA_DEVICE, default 0), or a cl_mem of the
                            context of the OpenCL device libkiln uses (KILN_OPENCL_DEVICE). The
                            kernels read and write it in place: nothing goes through the host, and
                            the run has finished with it when the call returns. The shapes,
                            dtypes and byte sizes are checked as for host memory; the memory itself
                            cannot be (the caller vouches that each holds byte_size bytes).
                            Outputs must not be inputs or each other. 0 = host memory. Since 0.2.0. */
  void* queue; /* for a device plan: the caller's queue to run on, NULL = libkiln's own. A
                  cl_command_queue (in order) of the context kiln_plan_device returns, or a CUstream
                  of the primary context it returns. The run's copies and kernels are queued there
                  after the caller's earlier work on it. With host tensors the call still returns
                  with the outputs filled. With tensors_on_device it returns once the work is
                  queued, without waiting for it: the caller synchronises the queue before it reads
                  the outputs or reuses the inputs. Until that work has finished the plan's own
                  device buffers are in use: a later run on another queue, and kiln_plan_free, wait
                  for it first (on an event libkiln recorded, not on the queue, so the caller may
                  release its queue once it has synchronised it). A queue of another context or
                  device, or an out-of-order OpenCL queue, is KILN_ERROR_INVALID_ARGUMENT. Since
                  0.2.0. */
  int64_t* output_shapes; /* NULL, or room for the sum of the outputs' ranks (kiln_plan_output_info):
                             a successful run writes every output's shape there, output after
                             output. Required for a plan with an output whose shape the run decides
                             (a variable of KILN_VARIABLE_FROM_RUN, e.g. a NonZero count): the caller
                             gives that output a buffer of the upper bound kiln_plan_output_shape
                             reports, and the run writes the output row-major at the shape it reports
                             here, from the start of the buffer (the rest is unspecified). Since
                             0.2.0. */
} kiln_run_options;

/* Fills *options with the defaults (size = sizeof, everything else 0/NULL). NULL is a no-op. */
KILN_API void kiln_run_options_init(kiln_run_options* options);

/* kiln_plan_run with options (NULL = defaults, the same as kiln_plan_run). Thread-safe as
 * kiln_plan_run; one token may be shared by many runs. The options are read during the call only.
 * Errors: those of kiln_plan_run; KILN_ERROR_INVALID_ARGUMENT for options->size 0, a negative
 * thread_count, tensors_on_device or a queue for a CPU plan, a queue the device cannot take, or device
 * tensors where an output is an input or another output; KILN_ERROR_CANCELLED when the token was
 * requested before or during the run. */
KILN_API kiln_status kiln_plan_run_with_options(const kiln_plan* plan, const kiln_tensor* inputs, size_t input_count,
                                                const kiln_tensor* outputs, size_t output_count,
                                                const kiln_run_options* options);

/* ---- Plan load options ------------------------------------------------------------------------ */

/* Memory for the plan's run contexts (arena and staging space, one per concurrent run). `alloc`
 * returns `size` bytes aligned to `alignment` (a power of two, 64) or NULL; `free` releases what
 * `alloc` returned, with the same size. Both are called from whichever thread loads, runs or frees
 * the plan, so they must be thread-safe. Leave both NULL for the C library's allocator. */
typedef struct kiln_allocator {
  void* (*alloc)(void* user_data, size_t size, size_t alignment);
  void (*free)(void* user_data, void* pointer, size_t size);
  void* user_data;
} kiln_allocator;

/* Severity of a log line. */
typedef enum kiln_log_level KILN_ENUM_TYPE {
  KILN_LOG_DEBUG = 0,
  KILN_LOG_INFO = 1,
  KILN_LOG_WARNING = 2,
  KILN_LOG_ERROR = 3
} kiln_log_level;

/* Receives one log line; `message` is valid during the call only. Called from the thread that
 * loads or runs the plan, possibly from several at once. */
typedef void (*kiln_log_callback)(void* user_data, kiln_log_level level, const char* message);

/* A caller's parallel-for: runs task(context, i) once for every i in [0, n), on any threads, and
 * returns when all have returned. The tasks of one call are independent. Called from the threads
 * that run the plan, possibly several at once. */
typedef void (*kiln_parallel_for_function)(void* user_data, size_t n, void (*task)(void* context, size_t index),
                                           void* context);

/* Options of a plan load. Set `size` (kiln_plan_options_init does); fields past it take defaults. */
typedef struct kiln_plan_options {
  size_t size;                 /* sizeof(kiln_plan_options), set by kiln_plan_options_init */
  kiln_allocator allocator;    /* both functions NULL = aligned_alloc/free */
  kiln_log_callback log;       /* NULL = no logging */
  void* log_user_data;
  kiln_log_level log_level;    /* lines below this level are not sent; default KILN_LOG_INFO */
  int thread_count;            /* > 0: the plan gets its own pool of this many threads (the caller
                                  included); 0 = the library's shared pool (KILN_THREADS) */
  kiln_parallel_for_function parallel_for; /* non-NULL: every kernel's chunks run through it, about
                                  four per thread (thread_count, else KILN_THREADS or the cores: no
                                  pool is made); NULL = kiln's pool */
  void* parallel_for_user_data;
  size_t max_memory_bytes;     /* > 0: the most scratch memory one run of the plan may use (its
                                  arena of intermediate values plus staging space for unaligned
                                  inputs and outputs, allocated once per concurrent run); a plan
                                  that needs more is refused at load with KILN_ERROR_OUT_OF_MEMORY,
                                  before any of its code is loaded. 0 = no limit. Since 0.2.0. */
} kiln_plan_options;

/* Fills *options with the defaults. NULL is a no-op. */
KILN_API void kiln_plan_options_init(kiln_plan_options* options);

/* kiln_plan_load_file / kiln_plan_load_buffer with options (NULL = defaults). The options are
 * copied: the callbacks and their user data must stay valid until kiln_plan_free, the struct
 * itself need not. Thread-safe.
 * Errors: those of kiln_plan_load_file / _buffer; KILN_ERROR_INVALID_ARGUMENT for size 0, only one
 * of alloc/free set, or a negative thread_count; KILN_ERROR_OUT_OF_MEMORY when the allocator
 * returns NULL or the plan needs more scratch memory than options->max_memory_bytes (the message
 * gives both numbers). */
KILN_API kiln_status kiln_plan_load_file_v2(const char* path, const kiln_plan_options* options, kiln_plan** out_plan);
KILN_API kiln_status kiln_plan_load_buffer_v2(const void* data, size_t size, const kiln_plan_options* options,
                                              kiln_plan** out_plan);

/* ---- DLPack ----------------------------------------------------------------------------------- */

/* A kiln_tensor that views a DLPack tensor (any producer: numpy, PyTorch, ...), for kiln_plan_run.
 * Nothing is copied and no ownership moves: *out_tensor points at tensor->data (plus byte_offset)
 * and at tensor->shape, so the DLTensor (and its owner) must stay alive while *out_tensor is used.
 * `name` (may be NULL: bind by position) is stored as is. Accepts CPU memory (kDLCPU), one lane,
 * the element types of kiln_dtype (kDLBool with 8 bits is KILN_DTYPE_BOOL), and dense row-major
 * layouts (strides NULL, or the compact row-major strides; dimensions of size 1 may have any
 * stride). For a DLManagedTensorVersioned pass &managed->dl_tensor (and do not use one flagged
 * DLPACK_FLAG_BITMASK_READ_ONLY as an output). Thread-safe.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL tensor or out_tensor, another device, lanes, an element
 * type kiln lacks, a negative dimension, strides that are not dense row-major). */
KILN_API kiln_status kiln_tensor_from_dltensor(const DLTensor* tensor, const char* name, kiln_tensor* out_tensor);

/* The same for a DLPack 0.x managed tensor: a view of managed->dl_tensor. The caller still owns
 * `managed` and calls its deleter when done with the view (after the run). */
KILN_API kiln_status kiln_tensor_from_dlpack(const DLManagedTensor* managed, const char* name, kiln_tensor* out_tensor);

/* Wraps a caller's kiln_tensor (dense row-major, CPU) in a new DLManagedTensor for a DLPack
 * consumer: dl_tensor.data is tensor->data (not copied), the shape is copied, strides are NULL
 * (compact). The consumer calls (*out_managed)->deleter once; it frees the wrapper and then calls
 * release(release_user_data) when `release` is not NULL, so the caller can free the data then.
 * Thread-safe.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL tensor or out_managed, an unknown dtype, a rank above
 * INT32_MAX, NULL shape with rank > 0), KILN_ERROR_OUT_OF_MEMORY. */
KILN_API kiln_status kiln_tensor_to_dlpack(const kiln_tensor* tensor, void (*release)(void* release_user_data),
                                           void* release_user_data, DLManagedTensor** out_managed);

/* ---- Symbolic shapes --------------------------------------------------------------------------- */

/* A symbolic plan has variables: sizes known only at run time (a batch, a sequence length), each
 * with a range, that a run reads off its inputs' shapes (an input dimension that is exactly the
 * variable gives its value). Its other sizes are expressions over them: "2 * sequence". A plan
 * made for fixed shapes has none. See docs/plan-format.md, "Symbolic plans". */

/* The number of variables of the plan; 0 for a fixed-shape plan and for a NULL plan. Thread-safe.
 * Since 0.2.0. */
KILN_API size_t kiln_plan_variable_count(const kiln_plan* plan);

/* Describes variable `index` (the variables are sorted by name): its name and the range
 * [min, max] a run accepts. Every out-pointer may be NULL. *out_name points into the plan and stays
 * valid until kiln_plan_free. Thread-safe. Since 0.2.0.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan, index out of range). */
KILN_API kiln_status kiln_plan_variable_info(const kiln_plan* plan, size_t index, const char** out_name,
                                             int64_t* out_min, int64_t* out_max);

/* Where a run takes a variable's value from. */
typedef enum kiln_variable_source KILN_ENUM_TYPE {
  KILN_VARIABLE_FROM_SHAPES = 0, /* an input dimension that is exactly the variable */
  KILN_VARIABLE_FROM_RUN = 1     /* a value the run computes or reads from an input's data (a NonZero
                                    count, TopK's k): known only during the run */
} kiln_variable_source;

/* Where variable `index` gets its value (docs/symbolic-shapes.md, stage 6). A variable the run
 * decides has the range of the op that decides it (0..n for a NonZero over n elements); an output
 * whose shape names it is sized at its maximum before the run (kiln_plan_output_shape) and its real
 * shape comes back through kiln_run_options.output_shapes. Thread-safe. Since 0.2.0.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan or out_source, index out of range). */
KILN_API kiln_status kiln_plan_variable_source(const kiln_plan* plan, size_t index, kiln_variable_source* out_source);

/* kiln_plan_input_info / kiln_plan_output_info with each dimension's symbolic form. *out_shape
 * has -1 where a dimension is symbolic. *out_dims (*out_rank strings): NULL for a fixed
 * dimension, else its text: a variable's name where the dimension is exactly that variable
 * ("batch"), else an expression over the variables ("2 * sequence"; operators + - * // % and
 * min(a, b), max(a, b), // truncating). *out_variables (*out_rank entries): the index of that
 * variable (kiln_plan_variable_info) where the dimension is exactly one, else -1. Every
 * out-pointer may be NULL; the arrays and strings point into the plan and stay valid until
 * kiln_plan_free. For a fixed-shape plan every entry of *out_dims is NULL and of *out_variables
 * -1. Thread-safe. Since 0.2.0.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan, index out of range). */
KILN_API kiln_status kiln_plan_input_info_v2(const kiln_plan* plan, size_t index, const char** out_name,
                                             kiln_dtype* out_dtype, size_t* out_rank, const int64_t** out_shape,
                                             const char* const** out_dims, const int64_t** out_variables);
KILN_API kiln_status kiln_plan_output_info_v2(const kiln_plan* plan, size_t index, const char** out_name,
                                              kiln_dtype* out_dtype, size_t* out_rank, const int64_t** out_shape,
                                              const char* const** out_dims, const int64_t** out_variables);

/* The shape output `output_index` has when the plan runs on inputs of these shapes, so that the
 * caller can size the output buffers before kiln_plan_run. `inputs` (input_count of them) are
 * given as to kiln_plan_run and checked as it checks them (count, names, dtypes, ranks, shapes and
 * every variable's range and agreement), but only their name, dtype, rank and shape are read: data
 * may be NULL and byte_size 0. Writes the output's rank to *out_rank (may be NULL) and its
 * dimensions to out_shape[0 .. rank), which has room for `capacity` (the rank is fixed:
 * kiln_plan_output_info reports it). For a fixed-shape plan it checks the inputs and gives the
 * stored shape. An output whose shape the run decides (a dimension over a KILN_VARIABLE_FROM_RUN
 * variable) gets its upper bound: those variables at their maxima, the shape of a buffer that holds
 * any run. Thread-safe. Since 0.2.0.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan; output_index out of range; NULL out_shape with
 * capacity > 0; capacity below the output's rank; an input error of kiln_plan_run, with its
 * message); KILN_ERROR_INVALID_PLAN (the plan's size program fails at these shapes: overflow or a
 * negative size; only a plan whose sizes are not monotone in its variables can do that). */
KILN_API kiln_status kiln_plan_output_shape(const kiln_plan* plan, const kiln_tensor* inputs, size_t input_count,
                                            size_t output_index, int64_t* out_shape, size_t capacity,
                                            size_t* out_rank);

/* Where a plan runs, for callers that pass device memory (kiln_run_options.tensors_on_device).
 * *out_device (may be NULL) is "cpu" for a CPU plan, else the device's name as libkiln opened it
 * ("cuda:NVIDIA H200 (sm_90)", "opencl:..."), valid until kiln_plan_free. *out_context and
 * *out_queue (may be NULL) are the API's own handles that device tensors must belong to: for an
 * OpenCL plan the cl_context and cl_command_queue libkiln uses (create buffers and queues in that
 * context; libkiln's runs finish all their work on its queue before they return), for a CUDA plan the
 * device's primary CUcontext and NULL (the default stream); NULL and NULL for a CPU plan.
 * Thread-safe. Since 0.2.0.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan). */
KILN_API kiln_status kiln_plan_device(const kiln_plan* plan, const char** out_device, void** out_context,
                                      void** out_queue);

/* Plan facts for tools (`kiln inspect`). Every out-pointer may be NULL. Strings point into the plan
 * and stay valid until kiln_plan_free. Thread-safe.
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan). Unstable: may change before 1.0. */
KILN_API kiln_status kiln_plan_describe(const kiln_plan* plan, const char** out_target_triple,
                                        const char** out_cpu_name, uint64_t* out_arena_bytes,
                                        uint64_t* out_weights_bytes, size_t* out_kernel_count);

/* The symbol of kernel `index` in launch order and its parallel extent (either out-pointer may be
 * NULL; a symbolic kernel's extent with every variable at its maximum).
 * Errors: KILN_ERROR_INVALID_ARGUMENT (NULL plan, index out of range). Unstable. */
KILN_API kiln_status kiln_plan_kernel_info(const kiln_plan* plan, size_t index, const char** out_symbol,
                                           int64_t* out_parallel_extent);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H */
