// Runs a function on a thread with a large stack and waits for it. The scheduler and the rewrite
// passes walk the lazy graph recursively; a model at kiln's graph-depth limit (support/limits.h)
// needs more stack than a default 8 MiB thread has, so compiles run here. Exceptions the
// function throws are rethrown on the calling thread.
#pragma once

#include <cstddef>

#include "support/function_ref.h"

namespace kiln {

// The stack the compile thread gets: reserved address space, committed only as it is touched.
constexpr size_t kCompileStackBytes = size_t{1} << 30;

void run_on_large_stack(FunctionRef<void()> body, size_t stack_bytes = kCompileStackBytes);

}  // namespace kiln
