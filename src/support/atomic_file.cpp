#include "support/atomic_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

namespace kiln {

namespace {

bool write_all(const std::string& file, std::string_view contents) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  return static_cast<bool>(out);
}

}  // namespace

std::optional<AtomicWriteFailure> write_file_atomically(const std::string& path, const std::string& temporary,
                                                        std::string_view contents) {
  std::error_code ignored;
  std::filesystem::file_status existing = std::filesystem::status(path, ignored);
  if (std::filesystem::exists(existing) && !std::filesystem::is_regular_file(existing) &&
      !std::filesystem::is_directory(existing)) {
    if (write_all(path, contents)) return std::nullopt;
    return AtomicWriteFailure{AtomicWriteFailure::Step::Write, "", path};
  }
  if (!write_all(temporary, contents)) {
    std::filesystem::remove(temporary, ignored);
    return AtomicWriteFailure{AtomicWriteFailure::Step::Write, "", temporary};
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, ignored);
    return AtomicWriteFailure{AtomicWriteFailure::Step::Rename, error.message(), ""};
  }
  return std::nullopt;
}

}  // namespace kiln
