// run_on_large_stack and start_large_stack_thread: pthreads with an explicit stack size
// (std::thread cannot set one).
#include "support/large_stack.h"

#include <exception>

namespace kiln {
namespace {

// Set on the threads started here, so a nested call (an in-process run that realizes tensors,
// each realize asking for a large stack again) runs in place instead of starting another.
thread_local bool on_large_stack = false;

// The thread's entry: `argument` is a FunctionRef that start_large_stack_thread allocated.
void* run_body(void* argument) {
  on_large_stack = true;
  auto* body = static_cast<FunctionRef<void()>*>(argument);
  FunctionRef<void()> call = *body;
  delete body;
  call();
  return nullptr;
}

}  // namespace

bool start_large_stack_thread(pthread_t* thread, FunctionRef<void()> body, size_t stack_bytes) {
  auto* call = new FunctionRef<void()>(body);  // freed by run_body, or below when no thread starts
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  int error = pthread_attr_setstacksize(&attributes, stack_bytes);
  if (error == 0) error = pthread_create(thread, &attributes, run_body, call);
  pthread_attr_destroy(&attributes);
  if (error != 0) delete call;
  return error == 0;
}

void run_on_large_stack(FunctionRef<void()> body, size_t stack_bytes) {
  if (on_large_stack) {
    body();
    return;
  }
  std::exception_ptr failure;
  auto guarded = [&] {
    try {
      body();
    } catch (...) {
      failure = std::current_exception();
    }
  };
  pthread_t thread;
  if (!start_large_stack_thread(&thread, guarded, stack_bytes)) {
    body();  // no thread: run here, with the caller's stack
    return;
  }
  pthread_join(thread, nullptr);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace kiln
