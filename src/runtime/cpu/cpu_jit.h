// Loads CPU kernel object files into this process, for the compiler's JIT path (Tensor::realize and
// the tests): an ORC LLJIT that lives as long as the process. Plans do not use this; they are linked
// into a shared object instead.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

// The signature of every CPU kernel (docs/kernel-ast.md): `buffers[slot]` is the base of DEFINE_GLOBAL
// `slot`; the loop of RANGE axis 0 runs over [begin, end).
using KernelFunction = void (*)(void* const* buffers, int64_t begin, int64_t end);

// Links `object` (a relocatable object file in memory, as cpu_compile returns) into the process and
// returns the address of its function `symbol`. Each call gets its own JIT library, so two objects may
// define the same symbol. The object may reference no external symbol: nothing from the process or
// libc is visible to it (kernels never call anything; see cpu_codegen.h). Code stays loaded until the
// process exits. Thread-safe. Throws InternalError when the object cannot be linked or lacks `symbol`.
KernelFunction jit_load_kernel(const std::string& object, const std::string& symbol);

}  // namespace kiln
