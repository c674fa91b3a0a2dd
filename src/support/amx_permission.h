// Linux hands out the state of Intel AMX's tile registers (8 KiB a thread) only to processes that
// ask for it: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), kernel 5.16 and newer. A tile
// instruction before that raises SIGILL. Both the compiler (which emits tile code only when this
// process may run it) and libkiln (which loads plans holding it) ask here.
#pragma once

namespace kiln {

// Asks once per process and returns the answer, which then holds for all of its threads. True on
// systems other than Linux, which enable the state with XCR0 alone. The caller checks the CPU
// (cpuid) and XCR0 first.
bool request_amx_permission();

}  // namespace kiln
