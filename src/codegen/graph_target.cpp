// The target graph construction picks layouts for; see target.h.
#include "codegen/target.h"

#include <cstdlib>
#include <string>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/c_style/opencl_codegen.h"

namespace kiln {

namespace {
thread_local const TargetCaps* scoped_graph_target = nullptr;
}  // namespace

const TargetCaps& graph_target_caps() {
  if (scoped_graph_target != nullptr) return *scoped_graph_target;
  // In process, realize() runs where KILN_DEVICE says (driver/run_on_device.h); its graphs are built
  // before it, so they take their layouts from the same variable. Other values are the CPU here:
  // realize_device() names them in its error.
  const char* device = std::getenv("KILN_DEVICE");
  if (device != nullptr && std::string(device) == "cuda") return cuda_target_caps();
  if (device != nullptr && std::string(device) == "opencl") return opencl_target_caps();
  return host_cpu_caps();
}

ScopedGraphTarget::ScopedGraphTarget(const TargetCaps* caps) : previous_(scoped_graph_target) {
  if (caps != nullptr) scoped_graph_target = caps;
}

ScopedGraphTarget::~ScopedGraphTarget() { scoped_graph_target = previous_; }

}  // namespace kiln
