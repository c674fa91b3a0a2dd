// Replacing a file so that readers see either the old contents or the new, never half of them:
// write a temporary next to it, then rename it over the target. Plans and tuning databases are
// saved this way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln {

struct AtomicWriteFailure {
  enum class Step { Write, Rename } step;
  std::string reason;  // the system's message for a failed rename; empty for a failed write
  std::string file;    // Write: the file that could not be written (the temporary, or `path`)
};

// Writes `contents` to `temporary`, then renames it to `path`. On failure the temporary is removed
// and the failing step is returned; `path` is then untouched.
// A `path` that exists and is neither a regular file nor a directory (/dev/null, /dev/stdout, a
// FIFO) is written in place instead: renaming over it would replace the device or pipe with a
// regular file (`kiln compile -o /dev/null` turned /dev/null into a plan).
std::optional<AtomicWriteFailure> write_file_atomically(const std::string& path, const std::string& temporary,
                                                        std::string_view contents);

}  // namespace kiln
