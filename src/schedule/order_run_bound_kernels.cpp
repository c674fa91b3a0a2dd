// order_run_bound_kernels: a stable topological order over two kinds of edges. Rangeify emits a
// kernel after the kernels whose buffers it reads, but a size read from a run-bound variable is no
// buffer read: a kernel may read the variable (a length chosen by a run-time If) before the value's
// kernel has run. The runtime binds the variable right after that kernel, so those readers move.
#include "schedule/order_run_bound_kernels.h"

#include <functional>
#include <map>
#include <queue>
#include <set>

#include "support/error.h"

namespace kiln {
namespace {

// The variables a size expression reads.
void collect_variables(const Dim& size, std::set<std::string>& names) {
  if (size.is_known()) return;
  for (const UOp* node : toposort(size.expression()))
    if (node->op() == Ops::DEFINE_VAR) names.insert(node->arg_variable().name);
}

}  // namespace

void order_run_bound_kernels(Schedule& schedule, const std::vector<std::pair<std::string, size_t>>& run_bound_outputs) {
  if (run_bound_outputs.empty()) return;
  const size_t count = schedule.kernels.size();
  std::map<std::string, int> value_buffer;  // variable → the buffer holding its value
  for (const auto& [name, output] : run_bound_outputs) value_buffer[name] = schedule.outputs[output];
  std::vector<std::vector<size_t>> after(count);  // edges: kernel → kernels that must follow it
  std::vector<int> waiting(count, 0);
  auto edge = [&](size_t from, size_t to) {
    if (from == to) return;
    after[from].push_back(to);
    ++waiting[to];
  };
  // Buffer hazards in the original order: slot 0 is the one buffer a kernel writes (rangeify's
  // single STORE), the others it reads.
  std::map<int, size_t> last_writer;
  std::map<int, std::vector<size_t>> readers_since;
  std::map<int, std::vector<size_t>> writers;
  for (size_t k = 0; k < count; ++k) {
    const std::vector<int>& buffers = schedule.kernels[k].buffers;
    for (size_t slot = 0; slot < buffers.size(); ++slot) {
      int b = buffers[slot];
      if (auto found = last_writer.find(b); found != last_writer.end()) edge(found->second, k);
      if (slot == 0) {
        for (size_t reader : readers_since[b]) edge(reader, k);
        readers_since[b].clear();
        last_writer[b] = k;
        writers[b].push_back(k);
      } else {
        readers_since[b].push_back(k);
      }
    }
  }
  // Variable hazards: after every writer of the value's buffer.
  bool moved = false;
  for (size_t k = 0; k < count; ++k) {
    const ScheduledKernel& kernel = schedule.kernels[k];
    std::set<std::string> names;
    for (const VariableSpec& spec : kernel.variables) names.insert(spec.name);
    collect_variables(kernel.parallel_extent, names);
    for (int b : kernel.buffers) collect_variables(schedule.buffers[static_cast<size_t>(b)].elements, names);
    for (const std::string& name : names) {
      auto found = value_buffer.find(name);
      if (found == value_buffer.end()) continue;
      for (size_t writer : writers[found->second]) {
        KILN_ASSERT(writer != k, "kernel ", kernel.name(), " is sized by the value it computes (", name, ")");
        edge(writer, k);
        moved = moved || writer > k;
      }
    }
  }
  if (!moved) return;
  // Kahn's algorithm, always taking the ready kernel that came first.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t k = 0; k < count; ++k)
    if (waiting[k] == 0) ready.push(k);
  std::vector<ScheduledKernel> ordered;
  ordered.reserve(count);
  while (!ready.empty()) {
    size_t k = ready.top();
    ready.pop();
    ordered.push_back(std::move(schedule.kernels[k]));
    for (size_t next : after[k])
      if (--waiting[next] == 0) ready.push(next);
  }
  if (ordered.size() != count)
    throw UserError("unsupported: a size the run decides is needed to compute its own value (a cycle between kernels)");
  schedule.kernels = std::move(ordered);
}

}  // namespace kiln
