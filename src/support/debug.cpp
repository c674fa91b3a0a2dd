// KILN_DEBUG plumbing: parses the variable once and serialises output lines.
#include "support/debug.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace kiln {

long env_integer(const char* name, long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  return (end != nullptr && *end == '\0') ? value : fallback;
}

static std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(env_integer("KILN_DEBUG", 0))};
  return level;
}

int debug_level() { return level_storage().load(std::memory_order_relaxed); }

void set_debug_level(int level) { level_storage().store(level, std::memory_order_relaxed); }

void debug_print(std::string_view line) {
  static std::mutex output_mutex;
  std::lock_guard lock(output_mutex);
  std::fprintf(stderr, "kiln: %.*s\n", static_cast<int>(line.size()), line.data());
}

}  // namespace kiln
