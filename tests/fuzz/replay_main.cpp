// A main() for the fuzz targets that needs no libFuzzer: it feeds every file named on the command
// line (a directory: each file in it, in name order) to LLVMFuzzerTestOneInput once. The default
// suite builds each target with it and the normal compiler, so seeds and saved crash inputs are
// replayed on every test run; a target aborts on a bug, which fails the test.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional in a target, as with libFuzzer.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

// Files whose names start with '.' or are README.md describe a folder; they are not inputs.
bool is_input(const std::filesystem::path& path) {
  std::string name = path.filename().string();
  return !name.empty() && name[0] != '.' && name != "README.md";
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path path = argv[i];
    // A missing path is an error, so that a renamed corpus folder cannot make the test pass empty.
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "replay: '%s' does not exist\n", argv[i]);
      return 1;
    }
    if (!std::filesystem::is_directory(path)) {
      inputs.push_back(path);
      continue;
    }
    std::vector<std::filesystem::path> found;
    for (const auto& entry : std::filesystem::directory_iterator(path))
      if (entry.is_regular_file() && is_input(entry.path())) found.push_back(entry.path());
    std::sort(found.begin(), found.end());
    inputs.insert(inputs.end(), found.begin(), found.end());
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs\n");
    return 1;
  }
  for (const auto& path : inputs) {
    std::ifstream stream(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
    // Printed before the call, so that the log of a crash names the input that caused it.
    std::printf("replay %s (%zu bytes)\n", path.c_str(), bytes.size());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu inputs\n", inputs.size());
  return 0;
}
