// Threads with a large stack. The scheduler and the rewrite passes walk the lazy graph recursively;
// a model at kiln's graph-depth limit (support/limits.h) needs more stack than a default 8 MiB
// thread has, so compiles run on such threads: run_on_large_stack for the whole compile, and
// run_tasks_in_parallel (support/parallel_tasks.h) for its per-kernel work.
#pragma once

#include <pthread.h>

#include <cstddef>

#include "support/function_ref.h"

namespace kiln {

// The stack the compile thread gets: reserved address space, committed only as it is touched.
constexpr size_t kCompileStackBytes = size_t{1} << 30;

// Runs `body` on a thread with a large stack and waits for it. Exceptions it throws are rethrown
// on the calling thread. On a thread that already has one (started by either function here), or
// when no thread can be started, `body` runs in place.
void run_on_large_stack(FunctionRef<void()> body, size_t stack_bytes = kCompileStackBytes);

// Starts `body` on a new thread with a stack of `stack_bytes`, on which run_on_large_stack runs in
// place; the caller joins `*thread` (pthread_join) and keeps `body` alive until then. `body` must
// not throw. Returns false, starting nothing, when no thread can be started (address space or
// thread limits).
bool start_large_stack_thread(pthread_t* thread, FunctionRef<void()> body, size_t stack_bytes = kCompileStackBytes);

}  // namespace kiln
