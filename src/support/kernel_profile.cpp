// The per-kernel profile table (kernel_profile.h).
#include "support/kernel_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

namespace kiln {
namespace {

struct Row {
  std::string name;
  int launches = 0;
  double milliseconds = 0, flops = 0, bytes = 0;
  std::vector<std::string> sources;  // distinct, in launch order
};

// Work per second, or "-" when the work is unknown (a plan written before the estimates existed).
std::string rate(double amount, double milliseconds) {
  if (amount <= 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", amount / 1e9 / (std::max(milliseconds, 1e-9) / 1000));
  return text;
}

std::string sources_text(const std::vector<std::string>& sources) {
  constexpr size_t kShown = 3;
  std::string text;
  for (size_t i = 0; i < sources.size() && i < kShown; ++i) text += (i ? ", " : "") + short_source_label(sources[i]);
  if (sources.size() > kShown) text += ", …";
  return text;
}

}  // namespace

std::string short_source_label(const std::string& tag) {
  // The importer's format (OnnxNode::describe): WHO " (" OP ", opset N)" or WHO " (" OP ", no opset)".
  size_t open = tag.rfind(" (");
  if (open == std::string::npos || tag.back() != ')') return tag;
  size_t comma = tag.find(", ", open);
  if (comma == std::string::npos) return tag;
  std::string op = tag.substr(open + 2, comma - open - 2);
  std::string who = tag.substr(0, open);
  auto quoted = [&](const std::string& prefix) -> std::optional<std::string> {
    if (who.size() < prefix.size() + 1 || who.compare(0, prefix.size(), prefix) != 0 || who.back() != '\'')
      return std::nullopt;
    return who.substr(prefix.size(), who.size() - prefix.size() - 1);
  };
  if (auto name = quoted("node '")) return *name;
  if (auto output = quoted("unnamed node producing '")) return op + "→" + *output;
  return tag;
}

std::vector<std::string> format_kernel_profile(const std::vector<KernelLaunchTiming>& launches) {
  std::vector<Row> rows;
  std::map<std::string, size_t> row_of;
  for (const KernelLaunchTiming& launch : launches) {
    auto [at, added] = row_of.emplace(launch.name, rows.size());
    if (added) rows.emplace_back().name = launch.name;
    Row& row = rows[at->second];
    ++row.launches;
    row.milliseconds += launch.milliseconds;
    row.flops += launch.flops;
    row.bytes += launch.bytes;
    for (const std::string& source : launch.sources)
      if (std::find(row.sources.begin(), row.sources.end(), source) == row.sources.end()) row.sources.push_back(source);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.milliseconds != b.milliseconds ? a.milliseconds > b.milliseconds : a.name < b.name;
  });
  Row total;
  total.name = "total";
  for (const Row& row : rows) {
    total.launches += row.launches;
    total.milliseconds += row.milliseconds;
    total.flops += row.flops;
    total.bytes += row.bytes;
  }
  int width = 6;  // "kernel"
  for (const Row& row : rows) width = std::max(width, static_cast<int>(row.name.size()));

  std::vector<std::string> lines;
  char line[512];
  std::snprintf(line, sizeof line, "%-*s %8s %10s %7s %9s %9s  %s", width, "kernel", "launches", "ms/run", "share",
                "GFLOP/s", "GB/s", "sources");
  lines.emplace_back(line);
  auto add = [&](const Row& row, bool with_sources) {
    double share = total.milliseconds > 0 ? 100 * row.milliseconds / total.milliseconds : 0;
    std::snprintf(line, sizeof line, "%-*s %8d %10.4f %6.1f%% %9s %9s", width, row.name.c_str(), row.launches,
                  row.milliseconds, share, rate(row.flops, row.milliseconds).c_str(),
                  rate(row.bytes, row.milliseconds).c_str());
    std::string text = line;
    if (with_sources && !row.sources.empty()) text += "  " + sources_text(row.sources);
    lines.push_back(std::move(text));
  };
  for (const Row& row : rows) add(row, true);
  add(total, false);
  return lines;
}

}  // namespace kiln
