// `kiln test-onnx --via-plan`: runs an ONNX model the way an embedding application does — compiled
// by the `kiln compile` path (compile_onnx_plan) into plan bytes, loaded and run through libkiln's C
// API — so a test checks the plan writer, the plan reader and the runtime, not only the in-process
// JIT path.
//
// Plans have fixed shapes today, so one plan is compiled per distinct set of input shapes and kept
// for the data sets that share it; a model's data sets usually share one. When plans carry symbolic
// shapes (issue 14) a model compiles once.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/kiln.hpp"

namespace kiln::tools {

class ViaPlanRunner {
 public:
  // `target`: "cpu" or "opencl" (kiln compile --target).
  explicit ViaPlanRunner(std::string model_path, std::string target = "cpu");
  ~ViaPlanRunner();
  ViaPlanRunner(const ViaPlanRunner&) = delete;
  ViaPlanRunner& operator=(const ViaPlanRunner&) = delete;

  // Compiles (or reuses) the plan for these inputs' shapes, runs it once through kiln_plan_run and
  // returns its outputs in plan order, named as the plan names them. Throws UserError with the C
  // API's message (and the status name) when compiling, loading or running fails.
  std::vector<std::pair<std::string, Tensor>> run(const std::vector<std::pair<std::string, Tensor>>& inputs);

  // How many plans run() has compiled so far.
  size_t plans_compiled() const { return plans_.size(); }

 private:
  struct PlanFree {
    void operator()(kiln_plan* plan) const { kiln_plan_free(plan); }
  };
  kiln_plan* plan_for(const std::vector<std::pair<std::string, Tensor>>& inputs);

  std::string model_path_;
  std::string target_;
  std::map<std::string, std::unique_ptr<kiln_plan, PlanFree>> plans_;  // by input shapes (shape_key)
};

}  // namespace kiln::tools
