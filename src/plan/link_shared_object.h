// Links relocatable object files into one ELF shared object, in process, with LLD (no subprocess,
// no system linker): the code section of a plan.
#pragma once

#include <string>
#include <vector>

namespace kiln {

// The bytes of a shared object (-shared, no build id, no soname, symbol table stripped except the
// dynamic one) that exports every global symbol of `objects`. Undefined symbols are an error
// (-z defs): kernels call nothing. Deterministic: equal inputs give equal bytes. Thread-safe (LLD is
// not reentrant, so calls take turns). Throws InternalError with LLD's messages on failure.
std::string link_shared_object(const std::vector<std::string>& objects);

}  // namespace kiln
