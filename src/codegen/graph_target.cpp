// The target graph construction picks layouts for; see target.h.
#include "codegen/target.h"

namespace kiln {

namespace {
thread_local const TargetCaps* scoped_graph_target = nullptr;
}  // namespace

const TargetCaps& graph_target_caps() {
  return scoped_graph_target != nullptr ? *scoped_graph_target : host_cpu_caps();
}

ScopedGraphTarget::ScopedGraphTarget(const TargetCaps* caps) : previous_(scoped_graph_target) {
  if (caps != nullptr) scoped_graph_target = caps;
}

ScopedGraphTarget::~ScopedGraphTarget() { scoped_graph_target = previous_; }

}  // namespace kiln
