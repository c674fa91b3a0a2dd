// The per-kernel profile table, one place for both of its users: `kiln bench --profile` (a plan's
// launches timed over many runs) and KILN_DEBUG=2 on the in-process path (each realize's launches).
// One row per kernel name, slowest first, so the next kernel worth optimising is the first line.
#pragma once

#include <string>
#include <vector>

namespace kiln {

// One kernel launch of a run (or its average over several runs).
struct KernelLaunchTiming {
  std::string name;         // the kernel's symbol; launches with equal names are one row
  double milliseconds = 0;  // wall time of this launch, per run
  double flops = 0;         // the compiler's estimates for this launch (0: unknown)
  double bytes = 0;
  std::vector<std::string> sources;  // provenance tags (ScheduledKernel::sources)
};

// The table, one line per element, no trailing newlines: a header, one row per distinct name
// (launches per run, ms per run, share of the kernels' total, GFLOP/s, GB/s, the first three
// sources, shortened by short_source_label, then "…" when there are more), sorted by time (then
// name), and a total row. Shares are of the sum of the rows' times, so they add up to 100%.
std::vector<std::string> format_kernel_profile(const std::vector<KernelLaunchTiming>& launches);

// The short form of a provenance tag for a table: the ONNX importer's "node 'conv1' (Conv, opset
// 13)" → "conv1" and "unnamed node producing 'y' (Conv, opset 13)" → "Conv→y"; any other tag is
// returned unchanged.
std::string short_source_label(const std::string& tag);

}  // namespace kiln
