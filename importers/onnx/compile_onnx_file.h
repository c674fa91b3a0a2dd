// The compile driver for ONNX files: model + shape specs → plan bytes or a plan file. `kiln compile`
// (tools/plan_commands.cpp) and kiln_compile_onnx_file (capi/compiler.cpp) both call it, so the two
// give the same plan and the same progress lines; each keeps only its own argument parsing and error
// mapping.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "onnx_model.h"
#include "tensor/matmul_precision.h"
#include "support/error.h"

namespace kiln::onnx_import {

using CompileProgress = std::function<void(const std::string&)>;

// `kiln compile --value NAME=V[,V...]`: graph input NAME is compiled for this one value (its
// elements in row-major order, as text: integers, or decimal numbers for float inputs); the plan
// refuses runs that give it another (docs/symbolic-shapes.md, decision 19).
// `--value NAME=MIN..MAX`: each element of NAME (an int64 scalar or 1-D input, a shape or a count)
// is a size the run reads from the caller's input, in that range (decision 14): ConstantOfShape,
// Expand, Range's limit, Slice's ends and Resize's sizes take it as a symbolic size.
struct PinnedValueSpec {
  std::string name;
  std::vector<std::string> elements;
  std::optional<std::pair<int64_t, int64_t>> range;
};
// "axes=0,2" → {"axes", {"0", "2"}}; "shape=1..8" → {"shape", {}, (1, 8)}; a UserError for text
// without '=', with an empty name, or a bad range.
PinnedValueSpec parse_value_spec(const std::string& text);

struct OnnxCompileOptions {
  std::vector<ShapeSpec> shapes;  // --shape values (parse_shape_spec)
  std::vector<PinnedValueSpec> values;  // --value values (parse_value_spec)

  // A tuning database written by `kiln tune` (--tuning; src/opt/tuning_db.h): its kernels get its
  // Opts. Only read. Empty: the heuristics choose every kernel's Opts.
  std::string tuning_path;
  // Empty (or "cpu"): a plan for this CPU. "opencl" / "cuda": a device plan of OpenCL C or PTX
  // kernels, built when libkiln loads it (PlanWriteOptions::device; docs/backends.md).
  std::string device;
  int cuda_architecture = 75;  // "cuda": the compute capability of the PTX (PlanWriteOptions)
  // CPU plans for another machine (`kiln compile --target aarch64 --cpu neoverse-n1`): the
  // architecture ("aarch64", "x86_64") and LLVM CPU name (empty: the architecture's baseline;
  // CpuTarget::cross). An empty cpu_architecture: the host CPU.
  std::string cpu_architecture;
  std::string cpu_name;
  // --precision bf16: f32 matmuls by a weight take bf16 operands, summed in f32
  // (src/tensor/matmul_precision.h); kFloat32 computes every op in the model's own types.
  MatmulPrecision precision = MatmulPrecision::kFloat32;
  CompileProgress progress;       // one line per stage ("loading M", the plan writer's, "wrote P"); may be empty
};

// The progress printer of `kiln compile` and a verbose kiln_compile_onnx_file: each line goes to
// stderr as "kiln compile: [  1.23s] LINE", with the seconds since the printer was made.
CompileProgress stderr_compile_progress();

// The model's graph on graph_input placeholders, as compile_onnx_plan builds it (progress: "loading
// M", "building the graph"). `kiln tune` schedules the same graph.
struct OnnxGraph {
  std::vector<std::pair<std::string, Tensor>> inputs, outputs;
  // Inputs compiled for one value (--value): name and the value's bytes. The graph was built with
  // the value as a constant; `inputs` still holds the placeholder, which the plan checks.
  std::vector<std::pair<std::string, std::string>> pinned;
  // The run-time checks the build made (run_bound.h): a run-time If with one branch built.
  std::vector<std::string> run_time_checks;
};
OnnxGraph build_onnx_graph(const std::string& model_path, const OnnxCompileOptions& options);

// Loads the model, binds the input shapes (an input the model leaves untyped is Float32), builds the
// graph on graph_input placeholders and writes the plan (write_plan), with the tuning database when
// options name one (a TuningDbError names the database). A UserError from binding or building is
// prefixed with `model_path`; one from loading names the file already.
std::string compile_onnx_plan(const std::string& model_path, const OnnxCompileOptions& options);

// A plan that could not be stored. what() is "cannot write the plan to 'T'" or "cannot rename 'T'
// to 'P': REASON"; the fields let a caller word it its own way.
class PlanFileError : public UserError {
 public:
  enum class Step { Write, Rename };
  PlanFileError(Step step, std::string temporary, std::string target, std::string reason);
  Step step;
  std::string temporary, target, reason;  // reason: the system's, for Rename (empty for Write)
};

// Writes `plan` beside `plan_path` (as PLAN.tmp) and renames it into place, so that a failed compile
// never leaves half a plan; the temporary is removed when either step fails (PlanFileError).
void save_plan_file(const std::string& plan_path, const std::string& plan);

// compile_onnx_plan, then save_plan_file, then the progress line "wrote P (N bytes)".
void compile_onnx_file(const std::string& model_path, const std::string& plan_path, const OnnxCompileOptions& options);

}  // namespace kiln::onnx_import
