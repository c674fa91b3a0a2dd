// The `kiln` command-line tool: one sub-command per job (for now the ONNX conformance runner).
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "check_onnx.h"
#include "test_onnx.h"

namespace {

void print_usage(std::ostream& out) {
  out << "usage: kiln <command> [arguments]\n"
         "\n"
         "commands:\n"
         "  test-onnx DIR...   run ONNX backend-style test folders (model.onnx + test_data_set_N/)\n"
         "                     and compare with the references; see 'kiln test-onnx --help'\n"
         "  check-onnx MODEL   load a model and build its graph (shapes: --shape), or say what is\n"
         "                     wrong with it; see 'kiln check-onnx --help'\n"
         "\n"
         "options:\n"
         "  -h, --help         show this help\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(std::cerr);
    return 2;
  }
  const std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    print_usage(std::cout);
    return 0;
  }
  std::vector<std::string> arguments(argv + 2, argv + argc);
  if (command == "test-onnx") return kiln::tools::test_onnx_command(arguments);
  if (command == "check-onnx") return kiln::tools::check_onnx_command(arguments);
  std::cerr << "kiln: unknown command '" << command << "' (try 'kiln --help')\n";
  return 2;
}
