// `kiln test-onnx --via-plan`: runs an ONNX model the way an embedding application does — compiled
// by the `kiln compile` path (compile_onnx_plan) into plan bytes, loaded and run through libkiln's C
// API — so a test checks the plan writer, the plan reader and the runtime, not only the in-process
// JIT path.
//
// A model whose inputs have named symbolic dimensions (dim_params) that the data sets give different
// sizes compiles once, as an application's plan would: compile_once_over() names each symbol's range
// (the data sets' smallest to largest size), and every data set runs through that one symbolic plan.
// Otherwise one fixed-shape plan is compiled per distinct set of input shapes and kept for the data
// sets that share it. An input a compile needs as a parameter is first read as sizes at run time
// (`kiln compile --value NAME=0..MAX`, where the graph can take it so: a shape, a limit), else
// pinned to the data set's value (`kiln compile --value NAME=V`, which the plan checks), so there
// is one plan per distinct set of shapes and pinned values; sizes the run decides (a NonZero count)
// need neither.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/kiln.hpp"
#include "onnx_model.h"

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

  // Compiles one symbolic plan over `symbols` (each a dim_param with its size or MIN..MAX range,
  // as `kiln compile --shape`) for every later run, whatever its shapes.
  void compile_once_over(std::vector<onnx_import::ShapeSpec> symbols) { symbols_ = std::move(symbols); }
  const std::vector<onnx_import::ShapeSpec>& symbols() const { return symbols_; }

  // The inputs pinned so far (each plan compiled for its data set's value of them), and those read
  // as sizes at run time.
  const std::vector<std::string>& pinned() const { return pinned_; }
  std::vector<std::string> read_as_sizes() const {
    std::vector<std::string> names;
    for (const auto& entry : ranged_) names.push_back(entry.first);
    return names;
  }

  // How many plans run() has compiled so far.
  size_t plans_compiled() const { return plans_.size(); }

 private:
  struct PlanFree {
    void operator()(kiln_plan* plan) const { kiln_plan_free(plan); }
  };
  kiln_plan* plan_for(const std::vector<std::pair<std::string, Tensor>>& inputs);

  std::string model_path_;
  std::string target_;
  std::vector<onnx_import::ShapeSpec> symbols_;  // non-empty: one symbolic plan
  // Inputs a compile needed as parameters. First each is tried as sizes the run reads (kiln compile
  // --value NAME=0..MAX, ranged_: one plan for every value in range); where that fails, or the
  // graph needs constants (a reduction's axes), each plan is compiled for the data set's value
  // (--value NAME=V, pinned_), which the plan checks on every run.
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> ranged_;
  std::vector<std::string> pinned_;
  std::map<std::string, std::unique_ptr<kiln_plan, PlanFree>> plans_;  // by input shapes (shape_key)
};

}  // namespace kiln::tools
