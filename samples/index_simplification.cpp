// What kiln's compiler core does today: it takes the index arithmetic that a kernel generator
// writes naively and simplifies it with the symbolic rule tables. This program builds the indexing
// of two common kernels, prints each expression before and after, and the rewrite statistics.
// (It uses internal headers from src/; the public API samples arrive with the Tensor API and plans.)
#include <chrono>
#include <cstdio>
#include <string>

#include "ir/build.h"
#include "ir/printer.h"
#include "passes/symbolic.h"
#include "rewrite/graph_rewrite.h"

using namespace kiln;

namespace {

size_t node_count(const UOpPtr& node) { return toposort(node).size(); }

void show(const char* title, const UOpPtr& expression) {
  RewriteStats stats;
  auto start = std::chrono::steady_clock::now();
  UOpPtr simplified = graph_rewrite(expression, symbolic(), {.pass_name = "symbolic", .stats = &stats});
  double microseconds = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s\n  before (%zu nodes): %s\n  after  (%zu nodes): %s\n  %llu rewrites in %.0f us\n\n", title,
              node_count(expression), render_expr(expression).c_str(), node_count(simplified),
              render_expr(simplified).c_str(), static_cast<unsigned long long>(stats.rules_fired), microseconds);
}

}  // namespace

int main() {
  // 1. A 3x3 convolution with padding 1 over a 1x8x32x32 image. The loop variables are ranges;
  //    the input pixel it reads is (oy + ky - 1, ox + kx - 1), valid only inside the image.
  const int64_t channels = 8, height = 32, width = 32;
  UOpPtr c = range(channels, 0), oy = range(height, 1), ox = range(width, 2);
  UOpPtr ky = range(3, 3), kx = range(3, 4);
  UOpPtr row = oy + ky - 1, column = ox + kx - 1;
  UOpPtr minus_one = const_int(dtypes::index, -1);
  UOpPtr inside = lt(minus_one, row) & lt(row, height) & lt(minus_one, column) & lt(column, width);
  UOpPtr flat = (c * height + row) * width + column;
  show("convolution input offset, guarded by the padding mask:", where(inside, flat, 0));

  // 2. A tensor of shape (4, 6) viewed as (2, 2, 6), permuted to (6, 2, 2), then read back through
  //    a flat index over the permuted shape: the reshapes turn into div/mod chains that fold away.
  UOpPtr i = range(6, 0), j = range(2, 1), k = range(2, 2);
  UOpPtr permuted_flat = i * 4 + j * 2 + k;           // flat index in the (6, 2, 2) view
  UOpPtr d0 = permuted_flat / 4, d1 = (permuted_flat / 2) % 2, d2 = permuted_flat % 2;
  UOpPtr source = d1 * 12 + d2 * 6 + d0;              // the same element in the (2, 2, 6) source
  show("permuted view, unflattened and re-flattened:", source);

  // 3. A strided loop split in two and joined again: (r*4 + s) with s < 4 divided back.
  UOpPtr r = range(16, 0), s = range(4, 1);
  show("split loop joined back:", ((r * 4 + s) / 4) * 4 + (r * 4 + s) % 4);
  std::printf("Run with KILN_DEBUG=5 to see the IR after each named rewrite.\n");
  return 0;
}
