// A loaded, runnable plan (libkiln): the verified bytes, the code section loaded with dlopen from
// a memfd, one function per kernel, and a pool of run contexts (arena + argument tables), so that
// many threads can run one plan at once and a run allocates nothing once the pool is warm.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "plan/plan_reader.h"
#include "runtime/cpu/plan_shapes.h"

namespace kiln {

struct PlanValue {
  std::string name;
  kiln_dtype dtype;
  std::vector<int64_t> shape;
  uint64_t byte_size;
  int same_as_output;  // outputs: the output this one copies, or -1
};

class ThreadPool;
class DevicePlan;

// What a plan is loaded with (kiln_plan_options, checked by the C shim).
struct PlanRunnerOptions {
  kiln_allocator allocator{};  // both NULL: aligned_alloc/free
  kiln_log_callback log = nullptr;
  void* log_user_data = nullptr;
  kiln_log_level log_level = KILN_LOG_INFO;
  int thread_count = 0;  // > 0: a pool of its own
  kiln_parallel_for_function parallel_for = nullptr;
  void* parallel_for_user_data = nullptr;
  uint64_t max_memory_bytes = 0;  // > 0: refuse plans whose run context is larger (OUT_OF_MEMORY)
};

// Told the start and end of every launch, and of every chunk of it, for `kiln bench --trace`
// (internal, like RunSettings::kernel_seconds; docs/profiling.md). `kernel` indexes
// metadata().kernels(). chunk() is called on the thread that ran the chunk, so several threads may
// call it at once; chunks run through a caller's parallel_for hook are not reported.
class RunTracer {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~RunTracer() = default;
  virtual void launch(size_t kernel, Clock::time_point start, Clock::time_point end) = 0;
  virtual void chunk(size_t kernel, int64_t begin, int64_t end, Clock::time_point start, Clock::time_point stop) = 0;
};

// What one run is given (kiln_run_options).
struct RunSettings {
  int thread_count = 0;                       // 0: every thread the plan has
  const std::atomic<int>* cancel = nullptr;   // non-zero: stop at the next kernel or chunk
  bool tensors_on_device = false;             // device plans: the tensors' data is device memory
  void* queue = nullptr;                      // device plans: the caller's queue (DevicePlan::run)
  // Non-null: the wall time of launch k (seconds, the chunks' threads included) is added to
  // kernel_seconds[k], one per metadata().kernels(). Internal, for `kiln bench --profile`: libkiln's
  // C API has no such option (docs/profiling.md says why).
  double* kernel_seconds = nullptr;
  RunTracer* tracer = nullptr;  // non-null: told every launch and chunk (internal, `kiln bench --trace`)
  // kiln_run_options.output_shapes: non-null, the sum of the outputs' ranks, which a successful run
  // fills with every output's shape. Required for a plan with outputs whose shape the run decides.
  int64_t* output_shapes = nullptr;
};

class PlanRunner {
 public:
  // The device half of a device plan; null for a CPU plan.
  const DevicePlan* device_plan() const { return device_plan_.get(); }
  // Verifies `bytes` (verify_plan) and only then loads its code. Throws PlanError.
  explicit PlanRunner(PlanBytes bytes, const PlanRunnerOptions& options = {});
  ~PlanRunner();
  PlanRunner(const PlanRunner&) = delete;
  PlanRunner& operator=(const PlanRunner&) = delete;

  const std::vector<PlanValue>& inputs() const { return inputs_; }
  const std::vector<PlanValue>& outputs() const { return outputs_; }
  // Variables and symbolic dims (docs/plan-format.md, "Symbolic plans"); a fixed-shape plan has none.
  const PlanShapes& shapes() const { return shapes_; }
  const plan_fb::Plan& metadata() const { return *plan_.metadata; }
  uint64_t weights_bytes() const { return plan_.weights_size; }

  // Checks the tensors against the plan (PlanError KILN_ERROR_INVALID_ARGUMENT naming what is
  // wrong) and runs the launch list. A cancelled run throws PlanError KILN_ERROR_CANCELLED.
  // Thread-safe.
  void run(const kiln_tensor* inputs, size_t input_count, const kiln_tensor* outputs, size_t output_count,
           const RunSettings& settings = {}) const;

  // The shape of output `index` (out has room for its rank) for inputs of these shapes: the inputs
  // are checked as run() checks them, except that their data and byte sizes are not read. Throws
  // PlanError KILN_ERROR_INVALID_ARGUMENT prefixed with `function`. Thread-safe.
  void output_shape(const kiln_tensor* inputs, size_t input_count, size_t index, int64_t* out,
                    const char* function) const;

 private:
  struct RunContext;
  struct IoSlot {
    size_t argument;  // position in RunContext::arguments
    bool output;
    int index;
  };
  class ContextLease;
  std::unique_ptr<RunContext> new_context() const;
  void load_code();
  void load_launches();
  void lay_out_context();  // context_bytes_ and staging_offsets_, checked against max_memory_bytes
  void unload();
  void log(kiln_log_level level, const std::string& message) const;
  void* allocate_context_memory() const;
  void free_context_memory(void* memory) const;
  // Names, count, dtypes and ranks; for a fixed-shape plan also shapes, byte sizes and data (unless
  // `shapes_only`). The symbolic checks follow in bind_symbolic_inputs / _outputs.
  void bind(const kiln_tensor* given, size_t count, const std::vector<PlanValue>& expected, bool outputs,
            RunContext& context, const char* function, bool shapes_only = false) const;
  // Symbolic plans: the variables read off the inputs, each input's bytes for this run (and with
  // `shapes_only` false, its buffer size and data checked).
  void bind_symbolic_inputs(RunContext& context, const char* function, bool shapes_only) const;
  // Symbolic plans: every output's shape and bytes for this run, checked against the caller's.
  void bind_symbolic_outputs(RunContext& context, const char* function) const;
  // Symbolic plans: each launch's extent, slot sizes (checked against their buffers) and variables,
  // for launches `first` onwards (0: all, skipped when the variables are those last prepared for).
  void prepare_symbolic_launches(RunContext& context, size_t first = 0) const;
  // One launch's extent, slot sizes and variable values for the context's variables.
  void prepare_launch(RunContext& context, size_t k) const;
  // Run-bound variables (format version 6): reads the values bound at point `point` (0: before the
  // first kernel, k + 1: after kernel k), checks them against their ranges (PlanError
  // KILN_ERROR_INVALID_ARGUMENT naming the variable and the node that decided it) and prepares the
  // launches after that point with them.
  void apply_run_bindings(RunContext& context, size_t point) const;
  // After a run: each symbolic output's bytes and, into `shapes` (when non-null), every output's
  // shape, at the values the run decided.
  void finish_output_shapes(RunContext& context, int64_t* shapes) const;
  // Inputs compiled for one value (format version 6): the caller's bytes must be those
  // (PlanError KILN_ERROR_INVALID_ARGUMENT naming the input and both values).
  void check_pinned_inputs(const RunContext& context) const;
  void check_overlaps(const RunContext& context, bool device_memory) const;  // PlanError naming the two tensors
  void copy_same_outputs(const RunContext& context) const;  // outputs that are copies of earlier ones
  void run_on_device(RunContext& context, const RunSettings& settings) const;  // a device plan's run

  PlanBytes bytes_;
  VerifiedPlan plan_;
  // A device plan's kernels and memory (runtime/device_plan.h); null for a CPU plan.
  std::unique_ptr<DevicePlan> device_plan_;
  std::vector<PlanValue> inputs_, outputs_;
  std::vector<std::string> input_names_;
  PlanShapes shapes_;
  int code_fd_ = -1;
  void* library_ = nullptr;
  using KernelFunction = void (*)(void* const* buffers, int64_t begin, int64_t end);
  struct Launch {
    KernelFunction function;
    size_t first_argument;
    int64_t parallel_extent;  // a symbolic kernel's: at the maxima (each run computes its own)
    int64_t minimum_chunk;
    const plan_fb::Kernel* kernel;
    // Kernels that read variables: their values' place in RunContext::kernel_variables, which
    // buffers[slot count] points at.
    size_t variables_at = 0;
  };
  std::vector<Launch> launches_;
  size_t argument_count_ = 0;
  size_t kernel_variable_count_ = 0;  // the values all kernels read, one array per kernel
  std::vector<IoSlot> io_slots_;
  // Run bindings by point: bindings_at_[0] before the first kernel, [k + 1] after kernel k; empty
  // for a plan without them.
  std::vector<std::vector<const plan_fb::RunBinding*>> bindings_at_;
  // Per launch, in a plan with run bindings: whether a variable the run decides sizes it or is read
  // by it. Such a launch is prepared right before it runs (every binding before it has been read),
  // once per run: preparing every later launch at each binding cost ssdlite's 2,419-launch plan
  // 200 bindings × 2,419 evaluations of programs up to 730 instructions long, ~50 ms a run.
  std::vector<bool> prepare_before_launch_;
  // Pinned inputs: (input position, the bytes every run must give), from the verified metadata.
  std::vector<std::pair<size_t, const flatbuffers::Vector<uint8_t>*>> pinned_;
  // Staging space after the plan's arena, for inputs and outputs whose buffers are not 64-byte
  // aligned (kernels assume 64-byte alignment): offsets per input, then per output.
  std::vector<uint64_t> staging_offsets_;
  uint64_t context_bytes_ = 0;

  PlanRunnerOptions options_;
  std::unique_ptr<ThreadPool> own_threads_;  // when options_.thread_count > 0
  int hook_threads_ = 1;  // the threads the caller's parallel_for is assumed to have (chunking)

  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<RunContext>> pool_;
};

}  // namespace kiln
