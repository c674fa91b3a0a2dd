// What a plan file holds, before it is bytes (compiler side): write_plan lays a schedule out into
// a PlanContents and serialize_plan writes it (docs/plan-format.md). Sizes are Dims, so the same
// structure describes fixed-shape plans and symbolic ones; tests build it by hand.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plan/plan_generated.h"
#include "tensor/dim.h"

namespace kiln {

// A run-time size (a DEFINE_VAR of the kernels, by name) and its bounds.
struct PlanVariableContents {
  std::string name;
  int64_t min = 1, max = 1;
};

struct PlanValueContents {
  std::string name;
  int dtype = 0;           // a kiln_dtype
  std::vector<Dim> shape;  // each known, or an expression over the plan's variables
  int same_as_output = -1;  // outputs only: a copy of this earlier output
};

// One kernel argument: Slot's kind, index and offset, and the bytes the kernel may touch there.
struct PlanSlotContents {
  plan_fb::SlotKind kind = plan_fb::SlotKind_Arena;
  int index = 0;
  int64_t offset = 0;
  Dim size = 0;
};

struct PlanKernelContents {
  std::string symbol;
  std::vector<PlanSlotContents> slots;
  Dim parallel_extent = 1;
  int64_t minimum_chunk = 1;
  double estimated_flops = 0, estimated_bytes = 0;
  std::vector<std::string> sources;
  // The DEFINE_VARs the kernel reads (any order; written in name order, the order of its values
  // array at buffers[slots.size()]).
  std::vector<std::string> variables;
  // Device plans only: the kernel's program in the device's language, its entry point and its
  // buffer parameters (the first device_arguments slots).
  std::string device_source, device_entry;
  int device_arguments = 0;
  // Device plans: the work-group size the kernel needs (a multiple of it is the parallel extent);
  // 0: the device chooses. Non-zero anywhere makes the plan format version 4.
  int64_t device_local_size = 0;
};

// A variable the run decides (format version 6; docs/symbolic-shapes.md, stage 6): after kernel
// `after_kernel` (-1: before the first) the runtime reads the int32/int64 element at `source` (an
// Arena, GraphInput or GraphOutput slot whose offset is the element's byte offset and whose size
// is the element's bytes) as the value of `variable`.
struct PlanRunBindingContents {
  std::string variable;
  PlanSlotContents source;
  int dtype = 0;  // KILN_DTYPE_INT32 or KILN_DTYPE_INT64
  int after_kernel = -1;
  std::string origin;  // the model node that decides it ("node 'nz' (NonZero, opset 13)")
};

// An input compiled for one value (format version 6): runs must give exactly these bytes.
struct PlanPinnedInputContents {
  int input = 0;
  std::string bytes;
};

struct PlanContents {
  std::string target_triple, cpu_name;
  std::vector<std::string> cpu_features;  // the enabled ones, sorted
  std::vector<PlanVariableContents> variables;  // any order; written sorted by name
  std::vector<PlanValueContents> inputs, outputs;
  std::string weights;  // the weights section
  std::vector<std::pair<uint64_t, uint64_t>> weight_ranges;  // (offset, size) of each weight in it
  std::vector<PlanKernelContents> kernels;
  int64_t arena_bytes = 0;  // laid out with every variable at its maximum
  std::string code;         // the linked shared object; empty when there are no kernels
  // Empty: a CPU plan. "opencl": the kernels are OpenCL C in device_source, there is no code, and the
  // plan is format version 3; device_requirements names what the device must offer ("f16", "f64").
  std::string device;
  std::vector<std::string> device_requirements;
  // Variables the run decides; any makes the plan format version 6 (CPU plans only).
  std::vector<PlanRunBindingContents> run_bindings;
  // Inputs compiled for one value; any makes the plan format version 6 (CPU plans only).
  std::vector<PlanPinnedInputContents> pinned_inputs;
};

class CpuTarget;  // codegen/llvm/llvm_target.h

// The triple, CPU name and enabled features of `target` (null: the host CPU), as write_plan
// records them.
void set_cpu_target(PlanContents& contents, const CpuTarget* target);
// set_cpu_target(contents, nullptr): the host CPU's (what hand-made test plans use).
inline void set_host_target(PlanContents& contents) { set_cpu_target(contents, nullptr); }

// The plan file. A plan without variables is format version 1, byte for byte what the first
// writer wrote; one with variables is version 2, its symbolic sizes written as size programs
// (write_size_program) and their maxima where version 1 has plain numbers. Throws UserError for
// contents the reader would refuse that the compiler could have produced: a variable named twice
// or with a bad range, a symbolic size over a variable the plan does not define, a variable no
// input dimension is exactly.
std::string serialize_plan(const PlanContents& contents);

}  // namespace kiln
