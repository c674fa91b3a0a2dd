// The hand-coded optimisation heuristics; see heuristics.h.
#include "opt/heuristics.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <unordered_set>

#include "ir/build.h"
#include "ir/substitute.h"
#include "opt/expand.h"
#include "passes/symbolic.h"
#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

struct Access {
  const UOp* index;     // the INDEX node
  bool in_reduction;    // read inside a REDUCE's value (once per reduction step)
  bool is_store;
};

// Every LOAD and STORE of global memory, with whether it happens inside a reduction.
std::vector<Access> global_accesses(const UOpPtr& kernel) {
  std::vector<Access> accesses;
  std::unordered_set<const UOp*> inside;  // nodes under some REDUCE's value
  std::vector<const UOp*> order = toposort(kernel);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const UOp* node = *it;
    bool under = inside.count(node) != 0;
    if (node->op() == Ops::REDUCE || under)
      for (size_t i = 0; i < (node->op() == Ops::REDUCE ? 1 : node->src_count()); ++i) inside.insert(node->src(i).get());
  }
  for (const UOp* node : order) {
    if (node->op() != Ops::LOAD && node->op() != Ops::STORE) continue;
    const UOp* index = node->src(0).get();
    if (index->op() != Ops::INDEX || index->src(0)->op() != Ops::DEFINE_GLOBAL) continue;
    accesses.push_back({index, inside.count(node) != 0, node->op() == Ops::STORE});
  }
  return accesses;
}

// How far the element index moves when `range` grows by one: a constant, or nullopt when it is not
// affine in the range (a division, a gather).
std::optional<int64_t> stride_of(const UOp* index, const UOp* range) {
  const UOpPtr& offset = index->src(1);
  UOpPtr next = substitute(offset, {{range, range->self() + 1}});
  UOpPtr step = simplify(next - offset);
  if (!step->is_const()) return std::nullopt;
  return static_cast<int64_t>(step->const_int());
}

bool depends_on(const UOp* node, const UOp* range) {
  std::vector<const UOp*> nodes = toposort(node->self());
  return std::find(nodes.begin(), nodes.end(), range) != nodes.end();
}

int64_t extent_of(const UOp* range) { return static_cast<int64_t>(range->src(0)->const_int()); }

// The lanes a vector can hold for the widest value the kernel computes.
int kernel_lanes(const UOpPtr& kernel, const TargetCaps& caps) {
  int widest = 1;
  for (const UOp* node : toposort(kernel)) {
    DType dtype = node->dtype();
    if (dtype.is_pointer() || dtype == dtypes::void_ || dtype.is_index()) continue;
    if (!vectorizable_dtype(dtype)) return 1;  // f16/bf16 math stays scalar
    widest = std::max(widest, dtype.scalar_bytes());
  }
  return caps.vector_bytes / widest;
}

}  // namespace

int64_t parallel_extent_of(const UOpPtr& kernel) {
  for (const UOp* range : kernel_ranges(kernel))
    if (range->arg_int() == 0) return extent_of(range);
  return 1;
}

std::vector<Opt> hand_coded_opts(const UOpPtr& kernel, const TargetCaps& caps) {
  std::vector<Opt> opts;
  if (!caps.supports_vector_ops) return opts;
  std::vector<const UOp*> ranges = kernel_ranges(kernel);
  std::vector<const UOp*> outputs;
  bool reduces = false;
  for (const UOp* range : ranges) {
    if (!range->src(0)->is_const()) return opts;  // symbolic extents: not yet
    AxisKind kind = axis_kind(range->arg_int());
    if (kind == AxisKind::Loop) outputs.push_back(range);
    else if (kind == AxisKind::Reduce) reduces = true;
    else return opts;  // already optimised
  }
  int lanes = kernel_lanes(kernel, caps);
  if (lanes < 4 || outputs.empty()) return opts;
  std::vector<Access> accesses = global_accesses(kernel);

  // 1. The vector axis.
  const UOp* vector_axis = nullptr;
  int64_t width = 0;
  for (const UOp* range : outputs) {
    bool fits = true;
    for (const Access& access : accesses) {
      std::optional<int64_t> stride = stride_of(access.index, range);
      if (access.is_store) fits = fits && stride == 1;
      else if (access.in_reduction && depends_on(access.index, range)) fits = fits && stride == 1;
    }
    if (!fits) continue;
    for (int64_t w = lanes; w >= 4; w /= 2)
      if (extent_of(range) % w == 0) {
        vector_axis = range;
        width = w;
        break;
      }
    if (vector_axis != nullptr) break;
  }
  if (vector_axis == nullptr) return opts;
  opts.push_back({OptOp::Upcast, vector_axis->arg_int(), width});
  if (!reduces) return opts;

  // 2. The register tile: rows whose loads inside the reduction do not vary with the vector axis,
  // and whose vector loads do not vary with the rows.
  const UOp* row_axis = nullptr;
  for (const UOp* range : outputs) {
    if (range == vector_axis) continue;
    bool shares_vector_loads = true, has_row_loads = false;
    for (const Access& access : accesses) {
      if (access.is_store || !access.in_reduction) continue;
      bool on_vector = depends_on(access.index, vector_axis), on_rows = depends_on(access.index, range);
      if (on_vector && on_rows) shares_vector_loads = false;
      if (on_rows && !on_vector) has_row_loads = true;
    }
    if (shares_vector_loads && has_row_loads) {
      row_axis = range;
      break;
    }
  }
  // Accumulators + one vector load per column + a broadcast must fit in the register file.
  int64_t budget = caps.vector_registers - 4;
  int64_t columns = (extent_of(vector_axis) / width) % 2 == 0 && budget >= 16 ? 2 : 1;
  if (columns > 1) opts.push_back({OptOp::Unroll, vector_axis->arg_int(), columns});
  if (row_axis != nullptr) {
    for (int64_t rows : {6, 4, 8, 3, 2}) {
      if (rows * columns > budget || extent_of(row_axis) % rows != 0) continue;
      opts.push_back({OptOp::Unroll, row_axis->arg_int(), rows});
      break;
    }
  }
  return opts;
}

void optimize_schedule(Schedule& schedule, const TargetCaps& caps) {
  const char* setting = std::getenv("KILN_OPT");
  bool enabled = setting == nullptr || std::string(setting) != "0";
  for (ScheduledKernel& kernel : schedule.kernels) {
    std::vector<Opt> opts = enabled ? hand_coded_opts(kernel.ast, caps) : std::vector<Opt>{};
    if (debug_level() >= 3) {
      std::string text;
      for (const Opt& opt : opts) text += (text.empty() ? "" : ", ") + opt.text();
      debug_print(str_cat("opts ", kernel.name(), " (", caps.name, "): ", text.empty() ? "none" : text));
    }
    if (opts.empty()) continue;
    kernel.ast = apply_opts(kernel.ast, opts);
    kernel.opts = opts;
    kernel.parallel_extent = parallel_extent_of(kernel.ast);
  }
}

}  // namespace kiln
