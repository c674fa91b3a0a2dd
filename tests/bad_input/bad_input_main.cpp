// Runs one area of the bad-input catalogue (catalogue.h):
//   test-bad-input AREA WORK_DIR DOC        AREA: onnx | plan | capi
// Each case prints "ok   NAME: STATUS: message" or "FAIL NAME: why". DOC (docs/bad-input.md) must
// list every case with its status on one line, so that the documentation cannot drift from the
// table. Exit status 0 only when every case and every still-works check passed.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "catalogue.h"

namespace bad_input {

Outcome outcome_of(kiln_status status) { return {status, kiln_error_message()}; }

void require(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error(what);
}

std::string read_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  require(static_cast<bool>(stream), "cannot read " + path);
  std::ostringstream bytes;
  bytes << stream.rdbuf();
  return bytes.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  require(static_cast<bool>(stream), "cannot write " + path);
}

}  // namespace bad_input

namespace {

using namespace bad_input;

// Why the case failed, or "" when it passed.
std::string judge(const Case& test, const Outcome& got) {
  std::string problems;
  if (got.status != test.status)
    problems += std::string("status ") + kiln_status_string(got.status) + ", expected " + kiln_status_string(test.status) + "; ";
  for (const std::string& fragment : test.fragments)
    if (got.message.find(fragment) == std::string::npos) problems += "missing '" + fragment + "'; ";
  return problems;
}

// The doc line of every case: "| `NAME` | STATUS | ...".
std::string doc_problems(const Area& area, const std::string& doc_path) {
  std::string doc = read_file(doc_path), problems;
  for (const Case& test : area.cases) {
    size_t at = doc.find("`" + test.name + "`");
    size_t line_end = at == std::string::npos ? at : doc.find('\n', at);
    if (at == std::string::npos || doc.substr(at, line_end - at).find(kiln_status_string(test.status)) == std::string::npos)
      problems += "  " + test.name + " (" + kiln_status_string(test.status) + ")\n";
  }
  return problems;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: test-bad-input onnx|plan|capi WORK_DIR DOC\n");
    return 2;
  }
  std::string area_name = argv[1], work = argv[2];
  std::filesystem::remove_all(work);
  std::filesystem::create_directories(work);
  int failures = 0;
  try {
    Area area = area_name == "onnx" ? onnx_area(work) : area_name == "plan" ? plan_area(work) : capi_area(work);
    std::string before = area.still_works();
    require(before.empty(), "the good input does not work before any case: " + before);
    for (const Case& test : area.cases) {
      Outcome got{KILN_ERROR_INTERNAL, ""};
      std::string problems;
      try {
        got = test.run();
        problems = judge(test, got);
      } catch (const std::exception& error) {
        problems = std::string("the case's fixture failed: ") + error.what();
      }
      std::string after = area.still_works();
      if (!after.empty()) problems += "afterwards the good input fails: " + after;
      if (problems.empty()) {
        std::printf("ok   %s: %s: %s\n", test.name.c_str(), kiln_status_string(got.status), got.message.c_str());
      } else {
        ++failures;
        std::printf("FAIL %s: %s\n     got %s: %s\n", test.name.c_str(), problems.c_str(), kiln_status_string(got.status),
                    got.message.c_str());
      }
    }
    std::string undocumented = doc_problems(area, argv[3]);
    if (!undocumented.empty()) {
      ++failures;
      std::printf("FAIL %s lacks a line with these cases and their status:\n%s", argv[3], undocumented.c_str());
    }
    std::printf("%s: %zu cases, %d failed\n", area_name.c_str(), area.cases.size(), failures);
  } catch (const std::exception& error) {
    std::printf("FAIL %s: %s\n", area_name.c_str(), error.what());
    return 1;
  }
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}
