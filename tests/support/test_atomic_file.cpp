// write_file_atomically (src/support/atomic_file.h): a regular file is replaced through a
// temporary; a FIFO or device is written in place and stays what it is.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "support/atomic_file.h"

using namespace kiln;

namespace {

std::filesystem::path fresh_directory() {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln-atomic-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_SUITE("support") {

TEST_CASE("a regular file is replaced whole, and the temporary is gone") {
  std::filesystem::path dir = fresh_directory();
  std::filesystem::path target = dir / "plan.kiln", temporary = dir / "plan.kiln.tmp";
  std::ofstream(target) << "old";
  CHECK_FALSE(write_file_atomically(target.string(), temporary.string(), "new contents").has_value());
  CHECK(read_all(target) == "new contents");
  CHECK_FALSE(std::filesystem::exists(temporary));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a FIFO is written in place, not replaced by a regular file (as /dev/null must not be)") {
  std::filesystem::path dir = fresh_directory();
  std::filesystem::path fifo = dir / "pipe", temporary = dir / "pipe.tmp";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto received = std::make_shared<std::string>();
  std::thread reader([received, fifo] { *received = read_all(fifo); });
  bool failed = write_file_atomically(fifo.string(), temporary.string(), "through the pipe").has_value();
  struct stat info {};
  REQUIRE(stat(fifo.c_str(), &info) == 0);
  bool still_a_pipe = S_ISFIFO(info.st_mode);
  CHECK(still_a_pipe);
  if (!still_a_pipe) {
    reader.detach();  // it waits for a writer on the replaced pipe, which will never come
    return;
  }
  reader.join();
  CHECK_FALSE(failed);
  CHECK(*received == "through the pipe");
  CHECK_FALSE(std::filesystem::exists(temporary));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a write that fails names the file it could not write") {
  std::filesystem::path dir = fresh_directory();
  std::filesystem::path target = dir / "missing-dir" / "plan.kiln";
  std::string temporary = target.string() + ".tmp";
  auto failure = write_file_atomically(target.string(), temporary, "x");
  REQUIRE(failure.has_value());
  CHECK(failure->step == AtomicWriteFailure::Step::Write);
  CHECK(failure->file == temporary);
  std::filesystem::remove_all(dir);
}

}  // TEST_SUITE
