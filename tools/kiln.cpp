// The `kiln` command-line tool: one sub-command per job (plans: compile, tune, inspect, run, bench; ONNX: test-onnx,
// check-onnx).
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <llvm/Config/llvm-config.h>

#include "bench_command.h"
#include "check_onnx.h"
#include "gpu_kernels_command.h"
#include "kiln/kiln.h"
#include "plan/plan_format.h"
#include "plan_commands.h"
#include "test_onnx.h"
#include "tune_command.h"

namespace {

void print_usage(std::ostream& out) {
  out << "usage: kiln <command> [arguments]\n"
         "\n"
         "commands:\n"
         "  compile MODEL -o PLAN   compile an ONNX model into one plan file for this CPU\n"
         "                          (--tuning DB: with the optimisations 'kiln tune' chose)\n"
         "  tune MODEL --db DB      search each kernel's optimisations by timing them on this\n"
         "                          machine; record the best in a tuning database\n"
         "  inspect PLAN            describe a plan: target, inputs, outputs, kernels, sizes\n"
         "  run PLAN --input N=F    run a plan with libkiln on .npy/.pb inputs, write the outputs\n"
         "  bench PLAN|MODEL        time a plan (or a model, compiled first) through libkiln\n"
         "  test-onnx DIR...        run ONNX backend-style test folders (model.onnx +\n"
         "                          test_data_set_N/) and compare with the references\n"
         "  check-onnx MODEL        load a model and build its graph (shapes: --shape), or say\n"
         "                          what is wrong with it\n"
         "  gpu-kernels MODEL       build every kernel of a model for a GPU (--target cuda:\n"
         "                          CUDA C through NVRTC) without running it\n"
         "\n"
         "'kiln COMMAND --help' describes each command.\n"
         "\n"
         "options:\n"
         "  -h, --help              show this help\n"
         "  --version               print the versions of kiln, its LLVM, the plan format and the\n"
         "                          libkiln this tool runs plans with\n";
}

// One line per component, "NAME VERSION", so that scripts can pick a line. The libkiln line is the
// library loaded at run time (kiln_version()), which differs from the first line only when the
// tool finds another installation's libkiln.
void print_version() {
  std::cout << "kiln " << KILN_VERSION_STRING << "\n"
            << "LLVM " << LLVM_VERSION_STRING << "\n"
            << "plan format " << kiln::plan::kPlanFormatVersion << "\n"
            << "libkiln " << kiln_version() << "\n";
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
  if (command == "--version") {
    print_version();
    return 0;
  }
  std::vector<std::string> arguments(argv + 2, argv + argc);
  if (command == "test-onnx") return kiln::tools::test_onnx_command(arguments);
  if (command == "compile") return kiln::tools::compile_command(arguments);
  if (command == "tune") return kiln::tools::tune_command(arguments);
  if (command == "inspect") return kiln::tools::inspect_command(arguments);
  if (command == "run") return kiln::tools::run_command(arguments);
  if (command == "bench") return kiln::tools::bench_command(arguments);
  if (command == "check-onnx") return kiln::tools::check_onnx_command(arguments);
  if (command == "gpu-kernels") return kiln::tools::gpu_kernels_command(arguments);
  std::cerr << "kiln: unknown command '" << command << "' (try 'kiln --help')\n";
  return 2;
}
