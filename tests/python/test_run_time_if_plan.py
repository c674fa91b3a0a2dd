#!/usr/bin/env python3
"""Run-time If through one plan (docs/symbolic-shapes.md, decisions 20 and 21), through `kiln
compile` and the Python binding, against onnxruntime:

- branches that reshape differently ((3, 4) and (4, 3) of the same 12 values), selected by a bool
  input: the output's shape is chosen by the run;
- a branch that cannot be built at the plan's shapes (a Reshape to (5, -1) of 12 values): the plan
  holds the other branch, and a run whose condition needs the missing one is refused, naming the
  node and why; a correct run afterwards (against numpy: onnxruntime will not load that model);
- a detector's tail (torchvision's batched NMS as exported): candidates picked by NonZero, an If on
  "no candidates?" whose else branch is a NonMaxSuppression, then the first 3 kept; at no, one,
  some and all candidates;
- a NonMaxSuppression whose greedy selection does not settle in the plan's fixed rounds (a chain of
  boxes, each overlapping the next): refused by kiln_plan_run, naming the node, never wrong.

Run by meson (test 'run-time-if-plan'); skipped (77) without numpy, onnx or onnxruntime.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args, onnxruntime, kiln = python_test_env.binding_test_setup()

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

checks = python_test_env.Checks(args.kiln)
check = checks.check
rng = np.random.default_rng(53)
node = helper.make_node


def constant(name, value):
    return node("Constant", [], [name], value=numpy_helper.from_array(value))


def branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


def compile_model(folder, name, nodes, inputs, outputs):
    model_path = os.path.join(folder, name + ".onnx")
    plan_path = os.path.join(folder, name + ".kiln")
    python_test_env.save_model(model_path, nodes, inputs, outputs, [], opset=17)
    compiled = checks.kiln("compile", model_path, "-o", plan_path)
    check(compiled.returncode == 0, f"{name}: kiln compile makes one plan {compiled.stderr[-400:]}")
    if compiled.returncode != 0:
        checks.finish()
    return model_path, plan_path


def same_as_onnxruntime(plan, reference, feeds, label):
    names = [output.name for output in reference.get_outputs()]
    got = plan.run(feeds)
    for name, want in zip(names, reference.run(names, feeds)):
        check(got[name].shape == want.shape and np.array_equal(got[name], want),
              f"{label}: {name} {got[name].shape} equals onnxruntime's {want.shape}")


def refused(plan, feeds, texts, label):
    try:
        plan.run(feeds)
        check(False, f"{label}: the run is refused")
    except kiln.Error as error:
        check(all(text in str(error) for text in texts), f"{label}: refused, naming {texts}: {error}")


x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
flag_info = helper.make_tensor_value_info("flag", TensorProto.BOOL, [])
y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])


def reshape_branch(name, shape):
    # The shape goes through a Cast, so that onnxruntime's load-time shape inference leaves it alone:
    # a branch invalid at these shapes fails only when it runs, as a real model's other-rate branch.
    return branch(name, [constant(name + "_float_shape", np.array(shape, np.float32)),
                         node("Cast", [name + "_float_shape"], [name + "_shape"], to=TensorProto.INT64),
                         node("Reshape", ["x", name + "_shape"], [name + "_y"])],
                  [helper.make_tensor_value_info(name + "_y", TensorProto.FLOAT, [None, None])])


with tempfile.TemporaryDirectory() as folder:
    # Two branches that reshape differently: (3, 4) or (4, 3), chosen by the run.
    model, plan_path = compile_model(
        folder, "reshapes",
        [node("If", ["flag"], ["y"], name="by_flag", then_branch=reshape_branch("wide", [3, 4]),
              else_branch=reshape_branch("tall", [4, 3]))],
        [x_info, flag_info], [y_info])
    reference = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = rng.standard_normal((2, 6)).astype(np.float32)
    with kiln.Plan(plan_path) as plan:
        check(plan.run_bound == {"If(y)[0]", "If(y)[1]"}, f"each axis that differs is decided by the run: {plan.run_bound}")
        for flag in [True, False, True]:
            same_as_onnxruntime(plan, reference, {"x": x, "flag": np.array(flag)}, f"flag={flag}")

    # A branch that cannot be built: 12 values do not reshape to (5, -1).
    model, plan_path = compile_model(
        folder, "one_branch",
        [node("If", ["flag"], ["y"], name="by_flag", then_branch=reshape_branch("wide", [3, 4]),
              else_branch=reshape_branch("bad", [5, -1]))],
        [x_info, flag_info], [y_info])
    # (onnxruntime refuses to load this model: its shape inference folds the Cast; numpy is the
    # reference.)
    with kiln.Plan(plan_path) as plan:
        got = plan.run({"x": x, "flag": np.array(True)})["y"]
        check(np.array_equal(got, x.reshape(3, 4)), f"the built branch: {got.shape}")
        refused(plan, {"x": x, "flag": np.array(False)},
                ["node 'by_flag' (If, opset 17), whose else branch was not built", "Reshape",
                 "decided If(y).condition=0 in this run; the plan allows 1..1"], "the branch not built")
        got = plan.run({"x": x, "flag": np.array(True)})["y"]
        check(np.array_equal(got, x.reshape(3, 4)), "a correct run afterwards")

    # A detector's tail: candidates above a threshold, "none?" decides between an empty result and
    # a NonMaxSuppression over them (max_output_boxes_per_class INT64_MAX, as torchvision exports
    # it), then the first 3 kept and their scores.
    else_nodes = [node("Unsqueeze", ["boxes", "zero_axis"], ["boxes_3d"]),
                  node("Unsqueeze", ["scores", "two_axes"], ["scores_3d"]),
                  node("NonMaxSuppression", ["boxes_3d", "scores_3d", "limit", "iou"], ["selected"], name="nms"),
                  constant("box_column", np.array([2], np.int64)),
                  node("Gather", ["selected", "box_column"], ["column"], axis=1),
                  constant("one_axis", np.array([1], np.int64)),
                  node("Squeeze", ["column", "one_axis"], ["kept_boxes"])]
    nodes = [constant("threshold", np.array(0.3, np.float32)),
             node("Greater", ["s", "threshold"], ["above"]),
             node("NonZero", ["above"], ["where"], name="candidates"),
             constant("zero_axis", np.array([0], np.int64)),
             constant("two_axes", np.array([0, 1], np.int64)),
             node("Squeeze", ["where", "zero_axis"], ["picked"]),
             node("Gather", ["b", "picked"], ["boxes"], axis=0),
             node("Gather", ["s", "picked"], ["scores"], axis=0),
             constant("limit", np.array([np.iinfo(np.int64).max], np.int64)),
             constant("iou", np.array([0.5], np.float32)),
             node("Shape", ["boxes"], ["boxes_shape"]),
             node("ReduceProd", ["boxes_shape"], ["numel"], keepdims=0),
             constant("zero", np.array(0, np.int64)),
             node("Equal", ["numel", "zero"], ["none"]),
             node("If", ["none"], ["kept"], name="any_boxes",
                  then_branch=branch("empty", [constant("nothing", np.zeros((0,), np.int64))],
                                     [helper.make_tensor_value_info("nothing", TensorProto.INT64, [0])]),
                  else_branch=branch("suppress", else_nodes,
                                     [helper.make_tensor_value_info("kept_boxes", TensorProto.INT64, [None])])),
             constant("start", np.array([0], np.int64)),
             constant("stop", np.array([3], np.int64)),
             node("Slice", ["kept", "start", "stop"], ["first"]),
             node("Gather", ["scores", "first"], ["top_scores"], axis=0)]
    model, plan_path = compile_model(
        folder, "detector_tail", nodes,
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [10, 4]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [10])],
        [helper.make_tensor_value_info("kept", TensorProto.INT64, [None]),
         helper.make_tensor_value_info("top_scores", TensorProto.FLOAT, [None])])
    reference = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    corners = rng.uniform(0, 3, (10, 2)).astype(np.float32)  # crowded: NMS suppresses some
    boxes = np.concatenate([corners, corners + rng.uniform(1, 5, (10, 2)).astype(np.float32)], 1)
    scores = rng.permutation(np.linspace(0.05, 0.95, 10)).astype(np.float32)
    with kiln.Plan(plan_path) as plan:
        for label, s in [("none", np.zeros(10, np.float32)), ("all", scores + 0.3),
                         ("some", scores), ("one", np.where(np.arange(10) == 4, 0.9, 0.1).astype(np.float32))]:
            same_as_onnxruntime(plan, reference, {"b": boxes, "s": s}, f"{label} above the threshold")

    # A chain of 40 boxes, each overlapping the next (IoU 1/3 > 0.2) and not the one after it, in
    # falling scores: greedy NMS keeps every other one, which takes the plan's rounds 40 steps to
    # reach. The plan refuses the run rather than answer wrongly; a short chain runs.
    nms_nodes = [constant("limit", np.array([100], np.int64)), constant("iou", np.array([0.2], np.float32)),
                 constant("min_score", np.array([0.05], np.float32)),
                 node("NonMaxSuppression", ["b", "s", "limit", "iou", "min_score"], ["selected"], name="nms")]
    model, plan_path = compile_model(
        folder, "chain", nms_nodes,
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 40, 4]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1, 40])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3])])
    reference = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    left = np.arange(40, dtype=np.float32) * 0.5
    chain = np.stack([np.zeros(40, np.float32), left, np.ones(40, np.float32), left + 1], 1)[None]
    falling = np.linspace(0.99, 0.5, 40, dtype=np.float32)[None, None]
    with kiln.Plan(plan_path) as plan:
        refused(plan, {"b": chain, "s": falling},
                ["node 'nms' (NonMaxSuppression, opset 17), whose greedy selection had not settled after",
                 "NonMaxSuppression(selected).unsettled="], "a chain longer than the plan's rounds")
        spread = chain.copy()
        spread[0, :, 1] *= 4  # far apart: nothing overlaps, every box is kept
        spread[0, :, 3] = spread[0, :, 1] + 1
        same_as_onnxruntime(plan, reference, {"b": spread, "s": falling}, "boxes that do not overlap")
        short = np.where(np.arange(40) < 6, falling, 0.01).astype(np.float32)  # 6 above min_score
        same_as_onnxruntime(plan, reference, {"b": chain, "s": short}, "a chain that settles")

checks.finish()
