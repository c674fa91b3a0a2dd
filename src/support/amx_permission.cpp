// AMX tile state for this process; see amx_permission.h.
#include "support/amx_permission.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kiln {

bool request_amx_permission() {
#if defined(__linux__) && defined(__x86_64__)
  static const bool granted = [] {
    constexpr long kArchRequestComponentPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kTileDataComponent = 18;                   // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kArchRequestComponentPermission, kTileDataComponent) == 0;
  }();
  return granted;
#else
  return true;
#endif
}

}  // namespace kiln
