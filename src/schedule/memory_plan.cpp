// Memory planning: intermediate buffers share one arena. A buffer lives from the kernel that writes
// it to the last kernel that reads it; two buffers whose lifetimes overlap get disjoint byte
// ranges. Placement is greedy: the largest buffers first, each at the lowest aligned offset that
// does not collide with a placed buffer of overlapping lifetime. Inputs and outputs live outside
// the arena (the caller owns them).
#include <algorithm>
#include <numeric>

#include "schedule/schedule.h"
#include "support/error.h"

namespace kiln {
namespace {

constexpr int64_t kArenaAlignment = 64;

int64_t align_up(int64_t value) { return (value + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

struct Lifetime {
  int first = -1, last = -1;
  bool overlaps(const Lifetime& other) const { return first <= other.last && other.first <= last; }
};

}  // namespace

void plan_memory(Schedule& schedule) {
  std::vector<Lifetime> lifetimes(schedule.buffers.size());
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    for (int buffer : schedule.kernels[k].buffers) {
      Lifetime& life = lifetimes[static_cast<size_t>(buffer)];
      if (life.first < 0) life.first = static_cast<int>(k);
      life.last = static_cast<int>(k);
    }
  }
  std::vector<size_t> order;
  schedule.intermediate_bytes = 0;
  for (size_t b = 0; b < schedule.buffers.size(); ++b) {
    if (schedule.buffers[b].kind != ScheduledBuffer::Kind::Intermediate) continue;
    order.push_back(b);
    schedule.intermediate_bytes += align_up(schedule.buffers[b].bytes());
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return schedule.buffers[a].bytes() > schedule.buffers[b].bytes();
  });
  struct Placed {
    int64_t offset, end;
    Lifetime life;
  };
  std::vector<Placed> placed;
  schedule.arena_bytes = 0;
  for (size_t b : order) {
    int64_t size = align_up(std::max<int64_t>(schedule.buffers[b].bytes(), 1));
    // Candidate offsets: 0 and the end of every placed buffer; take the lowest that fits.
    std::vector<int64_t> candidates{0};
    for (const Placed& p : placed) candidates.push_back(p.end);
    std::sort(candidates.begin(), candidates.end());
    int64_t chosen = -1;
    for (int64_t offset : candidates) {
      bool fits = std::none_of(placed.begin(), placed.end(), [&](const Placed& p) {
        return p.life.overlaps(lifetimes[b]) && offset < p.end && p.offset < offset + size;
      });
      if (fits) {
        chosen = offset;
        break;
      }
    }
    KILN_ASSERT(chosen >= 0, "memory plan: no offset fits (the end of the last buffer always does)");
    schedule.buffers[b].arena_offset = chosen;
    placed.push_back({chosen, chosen + size, lifetimes[b]});
    schedule.arena_bytes = std::max(schedule.arena_bytes, chosen + size);
  }
}

std::string describe_schedule(const Schedule& schedule) {
  static const char* kinds[] = {"input", "intermediate", "output"};
  std::string text;
  for (size_t b = 0; b < schedule.buffers.size(); ++b) {
    const ScheduledBuffer& buffer = schedule.buffers[b];
    text += str_cat("buffer ", b, ": ", kinds[static_cast<int>(buffer.kind)], " ", buffer.dtype.name(), "[",
                    buffer.count, "]");
    if (buffer.arena_offset >= 0) text += str_cat(" at arena+", buffer.arena_offset);
    text += "\n";
  }
  for (const ScheduledKernel& kernel : schedule.kernels) {
    text += str_cat("kernel ", kernel.name(), " (");
    for (size_t i = 0; i < kernel.buffers.size(); ++i) text += str_cat(i ? ", " : "", "buffer ", kernel.buffers[i]);
    text += str_cat(") parallel ", kernel.parallel_extent, "\n");
  }
  text += str_cat("arena ", schedule.arena_bytes, " bytes for ", schedule.intermediate_bytes,
                  " bytes of intermediates\n");
  return text;
}

}  // namespace kiln
