// run_on_large_stack: a pthread with an explicit stack size (std::thread cannot set one).
#include "support/large_stack.h"

#include <pthread.h>

#include <exception>


namespace kiln {
namespace {

// Set on the threads run_on_large_stack starts, so a nested call (an in-process run that realizes
// tensors, each realize asking for a large stack again) runs in place instead of starting another.
thread_local bool on_large_stack = false;

struct LargeStackCall {
  FunctionRef<void()> body;
  std::exception_ptr failure;
};

void* run_call(void* argument) {
  auto* call = static_cast<LargeStackCall*>(argument);
  on_large_stack = true;
  try {
    call->body();
  } catch (...) {
    call->failure = std::current_exception();
  }
  return nullptr;
}

}  // namespace

void run_on_large_stack(FunctionRef<void()> body, size_t stack_bytes) {
  if (on_large_stack) {
    body();
    return;
  }
  LargeStackCall call{body, nullptr};
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_t thread;
  int error = pthread_attr_setstacksize(&attributes, stack_bytes);
  if (error == 0) error = pthread_create(&thread, &attributes, run_call, &call);
  pthread_attr_destroy(&attributes);
  // No thread (address space or thread limits): run here, with the caller's stack.
  if (error != 0) {
    body();
    return;
  }
  pthread_join(thread, nullptr);
  if (call.failure) std::rethrow_exception(call.failure);
}

}  // namespace kiln
