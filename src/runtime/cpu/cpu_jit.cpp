// The process-wide JIT for CPU kernels; see cpu_jit.h.
#include "runtime/cpu/cpu_jit.h"

#include <memory>
#include <mutex>

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/MemoryBuffer.h>

#include "codegen/llvm/llvm_target.h"
#include "support/error.h"

namespace kiln {

namespace {

std::string message_of(llvm::Error error) { return llvm::toString(std::move(error)); }

struct Jit {
  std::mutex mutex;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  uint64_t libraries = 0;
};

Jit& process_jit() {
  static Jit instance;
  return instance;
}

}  // namespace

KernelFunction jit_load_kernel(const std::string& object, const std::string& symbol) {
  Jit& state = process_jit();
  std::lock_guard lock(state.mutex);
  if (!state.jit) {
    initialize_llvm_native_target();
    auto created = llvm::orc::LLJITBuilder().create();
    if (!created) throw_internal_error("cannot start the LLVM JIT: " + message_of(created.takeError()));
    state.jit = std::move(*created);
  }
  // One library per object: kernels of different models may share a name, and a library that
  // does not link in the process's symbols makes any external reference fail here, loudly.
  std::string library_name = "kiln.kernels." + std::to_string(state.libraries++);
  auto library = state.jit->createJITDylib(library_name);
  if (!library) throw_internal_error("JIT: cannot create a library: " + message_of(library.takeError()));
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, library_name + ".o");
  if (llvm::Error error = state.jit->addObjectFile(*library, std::move(buffer)))
    throw_internal_error("JIT: cannot add the object for '" + symbol + "': " + message_of(std::move(error)));
  auto address = state.jit->lookup(*library, symbol);
  if (!address) throw_internal_error("JIT: cannot link '" + symbol + "': " + message_of(address.takeError()));
  return address->toPtr<KernelFunction>();
}

}  // namespace kiln
