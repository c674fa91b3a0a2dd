// Running a schedule on an accelerator in process: which device realize() uses (KILN_DEVICE, or a
// scoped override for tests), and the runner for the OpenCL and CUDA devices, the device half of
// realize() (src/tensor/realize.cpp). The CPU path is unchanged when no device is asked for.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/target.h"
#include "schedule/schedule.h"

namespace kiln {

enum class ExecutionDevice { Cpu, OpenCL, Cuda };

// The device realize() runs on: the innermost ScopedRealizeDevice of this thread, else KILN_DEVICE
// ("cpu" or unset: the CPU; "opencl"; "cuda"). Any other value is a UserError naming the choices.
ExecutionDevice realize_device();
const char* execution_device_name(ExecutionDevice device);

// Makes realize() on this thread use `device` while it lives (the parity tests run every backend in
// one process this way). With `caps`, the optimisation layer plans the kernels for those
// capabilities instead of the device's own: the parity test runs OpenCL kernels optimised for the
// host CPU too (vector lanes, unrolled register tiles), which the OpenCL defaults never produce.
// Graphs built in the scope take their layouts for the same target (graph_target_caps below).
class ScopedRealizeDevice {
 public:
  explicit ScopedRealizeDevice(ExecutionDevice device, const TargetCaps* caps = nullptr);
  ~ScopedRealizeDevice();
  ScopedRealizeDevice(const ScopedRealizeDevice&) = delete;
  ScopedRealizeDevice& operator=(const ScopedRealizeDevice&) = delete;

 private:
  int previous_;
  const TargetCaps* previous_caps_;
};

// The capabilities the optimisation layer sees for kernels that run on `device`: the scope's
// override if there is one, else opencl_target_caps(), cuda_target_caps(the GPU's architecture)
// or host_cpu_caps().
const TargetCaps& execution_target_caps(ExecutionDevice device);

// The target whose kernels a graph under construction will become: the innermost
// ScopedGraphTarget of this thread, else where realize() would run it
// (execution_target_caps(realize_device())). Graph construction consults it where a layout choice
// only pays on one kind of target: channels-last conv inputs and Winograd help a CPU's register
// tiles and cost a GPU's one-thread-per-output kernels extra passes and launches. Compiling a plan
// scopes the plan's target, so KILN_DEVICE only steers in-process realize().
const TargetCaps& graph_target_caps();

// Makes graph_target_caps() return `caps` on this thread while it lives (null: no change).
class ScopedGraphTarget {
 public:
  explicit ScopedGraphTarget(const TargetCaps* caps);
  ~ScopedGraphTarget();
  ScopedGraphTarget(const ScopedGraphTarget&) = delete;
  ScopedGraphTarget& operator=(const ScopedGraphTarget&) = delete;

 private:
  const TargetCaps* previous_;
};

// Runs `schedule` (already optimised for execution_target_caps(device)) on the OpenCL or CUDA device:
// builds its kernels (each distinct source once per process: OpenCL C by the OpenCL driver; CUDA C
// by NVRTC to PTX for the GPU's compute capability, loaded by the CUDA driver), uploads the Input
// buffers, launches the kernels in order with one work-item (thread) per index of axis 0, and
// downloads the Output buffers. host[b] is the host memory of schedule buffer b for Inputs (read)
// and Outputs (written), unused for intermediates, which live on the device only (each its own
// allocation, from the device's caching allocator, released after its last reader). Throws the
// device's UserError when there is no such device.
void run_schedule_on_device(ExecutionDevice device, const Schedule& schedule, const std::vector<void*>& host);

// Kernels launched on a device by run_schedule_on_device in this process (tests check that a
// realize really ran there).
uint64_t device_kernel_launches();

}  // namespace kiln
