// NonMaxSuppression in a plan: boxes and scores known only when the plan runs (docs/symbolic-shapes.md,
// decision 21). The in-process builder (ops_spatial.cpp) selects on the host at build time.
#pragma once

#include <cstdint>
#include <optional>

#include "op_registry.h"

namespace kiln::onnx_import {

// Whether NonMaxSuppression's boxes or scores are known only when the plan runs.
bool non_max_suppression_at_run_time(const OnnxNode& node);

// selected_indices (num_selected, 3) of int64 as the ONNX definition orders them (by batch, class,
// then descending score), num_selected a run-bound size in 0..batches·classes·min(limit, boxes).
Tensor non_max_suppression_in_plan(const OnnxNode& node, int64_t limit, double iou_threshold,
                                   std::optional<double> score_threshold);

}  // namespace kiln::onnx_import
