// In-process LLD: the objects are written to a private temporary directory (LLD reads inputs from
// files), linked, and the result is read back. Paths never reach the output (-s drops .symtab and
// its file symbols; no build id), so the bytes do not depend on where the directory was.
#include "plan/link_shared_object.h"

#include <fstream>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <system_error>

#include <lld/Common/Driver.h>
#include <llvm/Support/raw_ostream.h>

#include "support/error.h"

LLD_HAS_DRIVER(elf)

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Removes the directory and its files when the link is done, whatever happened.
struct TemporaryDirectory {
  fs::path path;
  TemporaryDirectory() {
    std::string pattern = (fs::temp_directory_path() / "kiln-link-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw UserError(str_cat("cannot create a temporary directory for linking (", pattern, ")"));
    path = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw UserError(str_cat("cannot write ", path.string(), " for linking"));
}

}  // namespace

std::string link_shared_object(const std::vector<std::string>& objects) {
  static std::mutex lld_mutex;  // LLD keeps global state per link
  TemporaryDirectory directory;
  std::vector<std::string> paths;
  for (size_t i = 0; i < objects.size(); ++i) {
    paths.push_back((directory.path / str_cat("k", i, ".o")).string());
    write_file(paths.back(), objects[i]);
  }
  std::string output = (directory.path / "plan.so").string();
  std::vector<const char*> arguments = {"ld.lld", "-shared", "--build-id=none", "-s", "-z", "defs", "-z",
                                        "noexecstack", "-z", "relro", "-z", "now", "--hash-style=gnu",
                                        "-o", output.c_str()};
  for (const std::string& path : paths) arguments.push_back(path.c_str());

  std::string messages;
  llvm::raw_string_ostream out_stream(messages), err_stream(messages);
  lld::Result result;
  {
    std::lock_guard lock(lld_mutex);
    result = lld::lldMain(arguments, out_stream, err_stream, {{lld::Gnu, &lld::elf::link}});
  }
  out_stream.flush();
  err_stream.flush();
  if (result.retCode != 0) throw_internal_error(str_cat("LLD could not link the plan's kernels: ", messages));
  if (!result.canRunAgain) throw_internal_error("LLD cannot be run again in this process");

  std::ifstream in(output, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw UserError(str_cat("cannot read back the linked ", output));
  return bytes;
}

}  // namespace kiln
