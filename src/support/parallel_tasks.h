// Independent pieces of a compile (each distinct kernel's opts, lowering and code generation) run
// on several threads. The IR is built for it: the intern table is sharded under locks, nodes are
// immutable with atomic reference counts, and every code generation has its own LLVM context.
#pragma once

#include <cstddef>

#include "support/function_ref.h"

namespace kiln {

// The threads a compile uses for per-kernel work: KILN_COMPILE_THREADS when it is set to a positive
// number, otherwise the machine's hardware threads, at most kMaxCompileThreads (a few hundred
// kernels give no more threads work, and each LLVM code generation holds its own memory).
constexpr unsigned kMaxCompileThreads = 16;
unsigned compile_thread_count();

// Runs task(0), …, task(count - 1), each once, on up to `threads` threads with large stacks
// (support/large_stack.h) while the caller waits. Indices are handed out in increasing order;
// after a task throws, no further index starts, and once the running tasks end, the exception of
// the lowest failing index is rethrown: the one a loop in index order would have thrown. With one
// thread, or one task, the tasks run in order on the calling thread.
void run_tasks_in_parallel(size_t count, unsigned threads, FunctionRef<void(size_t)> task);

}  // namespace kiln
