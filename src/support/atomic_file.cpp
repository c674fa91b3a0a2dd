#include "support/atomic_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

namespace kiln {

std::optional<AtomicWriteFailure> write_file_atomically(const std::string& path, const std::string& temporary,
                                                        std::string_view contents) {
  std::error_code ignored;
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(temporary, ignored);
      return AtomicWriteFailure{AtomicWriteFailure::Step::Write, ""};
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, ignored);
    return AtomicWriteFailure{AtomicWriteFailure::Step::Rename, error.message()};
  }
  return std::nullopt;
}

}  // namespace kiln
