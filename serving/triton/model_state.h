// What the kiln backend holds per model and per instance. One model (one kiln_plan, immutable and
// thread-safe once loaded) is shared by all its instances; each instance has its own run options
// and staging memory, so instances run the plan concurrently without locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "triton_api.h"

namespace kiln::serving {

// A plan input or output as the plan declares it: -1 for a symbolic dimension.
struct TensorSpec {
  std::string name;
  kiln_dtype dtype = KILN_DTYPE_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<int64_t> variables;  // per dimension: the variable index where it is exactly one, else -1
};

struct Variable {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
};

// A plan's interface, read once at load.
struct PlanInterface {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<Variable> variables;
};

struct PlanDeleter {
  void operator()(kiln_plan* plan) const { kiln_plan_free(plan); }
};

struct ModelState {
  std::string name;
  uint64_t version = 0;
  std::unique_ptr<kiln_plan, PlanDeleter> plan;
  PlanInterface interface;
  // > 0: requests carry a leading batch dimension that the plan's batch variable takes; the
  // backend concatenates requests along it. 0: each request is run alone, at its own shape.
  int64_t max_batch_size = 0;
  int threads_per_instance = 0;  // the `threads` parameter; 0 = cores / instances
  int instance_count = 1;        // instances of the whole model, from instance_group
};

// 64-byte aligned memory that grows and is kept between runs (kiln uses aligned buffers in place).
class StagingBuffer {
public:
  std::byte* reserve(size_t bytes);

private:
  struct Free {
    void operator()(std::byte* pointer) const;
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t capacity_ = 0;
};

struct InstanceState {
  ModelState* model = nullptr;
  TRITONBACKEND_ModelInstance* instance = nullptr;
  std::string name;
  kiln_run_options run_options{};
  std::vector<StagingBuffer> input_staging;   // one per plan input
  std::vector<StagingBuffer> output_staging;  // one per plan output
};

}  // namespace kiln::serving
