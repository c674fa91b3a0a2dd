// NonMaxSuppression as kernels: greedy selection without a sequential loop.
//
// Greedy NMS keeps a box when no kept box that comes before it (a higher score, or an equal score at
// a lower index) overlaps it by more than the IoU threshold. `keep` is the unique fixed point of
// keep[i] = valid[i] && !any_j(before(j, i) && overlaps(i, j) && keep[j]): the right side at i reads
// only boxes before i, so by induction along the score order any fixed point is the greedy answer.
// The plan iterates the map from keep = valid a fixed number of rounds (kRounds), each one reduction
// over pairs of boxes that recomputes their IoU (nothing of size boxes² is stored, so the arena
// stays linear in the box count's bound), and checks at run time that the last round changed
// nothing: then the result is the fixed point, exactly the greedy selection. A run whose selection
// has not settled is refused, naming the node (kiln_plan_run; a chain of more than kRounds boxes each
// suppressing the next). Lexicographically-first selection is inherently sequential (P-complete), so
// no fixed depth is exact for every input; the check makes the plan never wrong.
// Work per round: boxes² IoUs per class at the run's box count, not at the bound.
#include "non_max_suppression_plan.h"

#include <algorithm>
#include <optional>
#include <string>

#include "support/error.h"
#include "tensor/run_bound.h"
#include "tensor/tensor_internal.h"

namespace kiln::onnx_import {
namespace {

// Rounds of the fixed-point map. Each settles at least the boxes whose chain of overlapping,
// better-scored boxes is shorter than the round count; detectors' outputs (SSDlite's test sets)
// settle in a few rounds.
constexpr int kRounds = 16;

Tensor i64(int64_t value) { return Tensor::scalar(static_cast<double>(value), ScalarType::Int64); }
Tensor f32(double value) { return Tensor::scalar(value, ScalarType::Float32); }

// Coordinate `k` of every box: boxes (B, N, 4) → (B, N).
Tensor coordinate(const Tensor& boxes, int64_t k) {
  Dims dims = dims_of(boxes);
  return reshape_to(boxes.slice(2, k, k + 1), {dims[0], dims[1]});
}

struct Corners {
  Tensor x_min, x_max, y_min, y_max;  // (B, N) each
};

// The boxes as ONNX's two formats define them: [y1, x1, y2, x2] (any two opposite corners) or
// [x_center, y_center, width, height], computed in f32 as onnxruntime does.
Corners corners_of(const Tensor& boxes, bool center_point) {
  Tensor b = boxes.cast(ScalarType::Float32);
  Tensor c0 = coordinate(b, 0), c1 = coordinate(b, 1), c2 = coordinate(b, 2), c3 = coordinate(b, 3);
  if (center_point) {
    Tensor half_width = c2 / f32(2), half_height = c3 / f32(2);
    return {c0 - half_width, c0 + half_width, c1 - half_height, c1 + half_height};
  }
  return {c1.minimum(c3), c1.maximum(c3), c0.minimum(c2), c0.maximum(c2)};
}

// overlaps[b, i, j]: the IoU of boxes i and j of batch b is above the threshold, with onnxruntime's
// guards (no overlap along an axis, empty boxes and an empty union never suppress). (B, N, N).
Tensor overlaps(const Corners& box, double iou_threshold) {
  auto as_i = [](const Tensor& t) { return t.unsqueeze(2); };  // (B, N, 1)
  auto as_j = [](const Tensor& t) { return t.unsqueeze(1); };  // (B, 1, N)
  Tensor width = as_i(box.x_max).minimum(as_j(box.x_max)) - as_i(box.x_min).maximum(as_j(box.x_min));
  Tensor height = as_i(box.y_max).minimum(as_j(box.y_max)) - as_i(box.y_min).maximum(as_j(box.y_min));
  Tensor area = (box.x_max - box.x_min) * (box.y_max - box.y_min);  // (B, N)
  Tensor intersection = width * height;
  Tensor union_area = as_i(area) + as_j(area) - intersection;
  Tensor zero = f32(0);
  Tensor guarded = width.gt(zero).logical_and(height.gt(zero)).logical_and(intersection.gt(zero))
                       .logical_and(as_i(area).gt(zero)).logical_and(as_j(area).gt(zero)).logical_and(union_area.gt(zero));
  return guarded.logical_and((intersection / union_area).gt(f32(iou_threshold)));
}

// any_j(relation[..., i, j] && flags[..., j]) for flags (…, N): (…, N) bool.
Tensor any_related(const Tensor& relation, const Tensor& flags) {
  return relation.logical_and(flags.unsqueeze(-2)).cast(ScalarType::Int32).max({-1}).gt(Tensor::scalar(0, ScalarType::Int32));
}

// sum_j(relation[..., i, j] && flags[..., j]) as int64: (…, N).
Tensor count_related(const Tensor& relation, const Tensor& flags) {
  return relation.logical_and(flags.unsqueeze(-2)).cast(ScalarType::Int64).sum({-1});
}

}  // namespace

bool non_max_suppression_at_run_time(const OnnxNode& node) {
  return reads_graph_input(node.input(0)) || reads_graph_input(node.input(1)) || !all_known(dims_of(node.input(0)));
}

Tensor non_max_suppression_in_plan(const OnnxNode& node, int64_t limit, double iou_threshold,
                                   std::optional<double> score_threshold) {
  const Tensor& boxes = node.input(0);
  const Tensor& scores_in = node.input(1);
  Dims box_dims = dims_of(boxes), score_dims = dims_of(scores_in);
  if (!box_dims[0].is_known() || !score_dims[1].is_known())
    node.fail(str_cat("unsupported: a symbolic batch or class count (boxes ", dims_string(box_dims), ", scores ",
                      dims_string(score_dims), ") in a plan"));
  if (!(box_dims[1] == score_dims[2]))
    node.fail(str_cat("boxes ", dims_string(box_dims), " and scores ", dims_string(score_dims),
                      " must have the same box count"));
  const int64_t batches = box_dims[0].value(), classes = score_dims[1].value();
  const Dim n = box_dims[1];
  const bool center_point = node.attr_int("center_point_box", 0) == 1;

  // before[b, c, i, j]: box j comes before box i in class c's order and passes the score threshold.
  Tensor scores = scores_in.cast(ScalarType::Float32);  // (B, C, N)
  Tensor valid = score_threshold ? scores.gt(f32(*score_threshold))
                               : expand_to(Tensor::full({}, 1.0, ScalarType::Bool), dims_of(scores));
  Tensor s_i = scores.unsqueeze(3), s_j = scores.unsqueeze(2);
  Tensor position = arange_dim(n, ScalarType::Int64);
  Tensor lower_index = reshape_to(position, {1, n}).lt(reshape_to(position, {n, 1}));  // [i][j] = j < i
  Tensor before = valid.unsqueeze(2).logical_and(s_j.gt(s_i).logical_or(s_j.eq(s_i).logical_and(lower_index)));
  Tensor suppresses = before.logical_and(overlaps(corners_of(boxes, center_point), iou_threshold).unsqueeze(1));

  // The fixed-point rounds, then whether the last one changed anything.
  Tensor keep = valid, previous = valid;
  for (int round = 0; round < kRounds; ++round) {
    previous = keep;
    keep = valid.logical_and(any_related(suppresses, keep).logical_not());
  }
  Tensor unsettled = keep.ne(previous).cast(ScalarType::Int64).sum();
  check_at_run_time(unsettled, str_cat("NonMaxSuppression(", node.output_name(0), ").unsettled"), 0, 0,
                    str_cat(node.describe(), ", whose greedy selection had not settled after ", kRounds,
                            " rounds (a plan computes a fixed number),"));

  // Each class keeps its first `limit` boxes in score order; output row p is the kept box whose
  // place (the counts of the classes before its own, plus its rank in its class) is p.
  Tensor rank = count_related(before, keep);  // kept boxes before each box, (B, C, N)
  // (A limit past the box count limits nothing; clamped, it stays exact as a scalar: torchvision
  // passes INT64_MAX, which a double does not hold.)
  Tensor chosen = keep.logical_and(rank.lt(i64(std::min(limit, n.max()))));
  Tensor per_class = chosen.cast(ScalarType::Int64).sum({-1}).reshape({batches * classes});
  Tensor first_row = (per_class.cumsum(0) - per_class).reshape({batches, classes, 1});
  Tensor total = per_class.sum();
  Dim most = Dim(batches * classes) * min(Dim(limit), n);
  Dim rows = run_bound_size(total, str_cat("NonMaxSuppression(", node.output_name(0), ")"), 0, most.max(),
                            node.describe());
  Tensor place = reshape_to(first_row + rank, {Dim(1), Dim(batches * classes) * n});
  Tensor row = reshape_to(arange_dim(rows, ScalarType::Int64), {rows, 1});
  // Reading the total orders its kernel before the ones it sizes (every row is below it).
  Tensor hit = place.eq(row).logical_and(reshape_to(chosen, {Dim(1), Dim(batches * classes) * n}))
                   .logical_and(row.lt(total)).cast(ScalarType::Int64);  // (rows, B·C·N)
  // The chosen rows' flat positions b·C·N + c·N + i, then split into (b, c, i).
  Tensor flat = reshape_to(arange_dim(Dim(batches * classes) * n, ScalarType::Int64), {Dim(1), Dim(batches * classes) * n});
  Tensor at = (hit * flat).sum({1}, true);  // (rows, 1)
  Tensor count = dim_tensor(n, ScalarType::Int64);
  Tensor box_of = at.fmod(count), group = at.idiv(count);
  Tensor class_of = group.fmod(i64(classes)), batch_of = group.idiv(i64(classes));
  return Tensor::concat({batch_of, class_of, box_of}, 1);
}

}  // namespace kiln::onnx_import
