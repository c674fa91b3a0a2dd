"""Resize over symbolic image sizes (issue 49): each model resizes an image of symbolic height and
width, to sizes computed from another input's shape (DeepLab's upsampling to the input size), by
scales (a whole fraction of the length), or to fixed sizes (SSD's input transform); one plan per
model, run at several sizes within its ranges against onnxruntime. Modes: nearest under each
nearest_mode, linear and cubic under the coordinate transforms, exclude_outside, and a length-1
input. Refused forms (antialias on a size known only at run time, a scale that is no whole
fraction of the length) must name the node.

Run by meson (test 'symbolic-resize'); skipped (77) without numpy, onnx or onnxruntime.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args, onnxruntime, kiln = python_test_env.binding_test_setup()

import numpy as np  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

checks = python_test_env.Checks(args.kiln)
check = checks.check
node = helper.make_node
rng = np.random.default_rng(11)
SIZES = [(5, 7), (8, 8), (13, 6), (16, 16)]  # (height, width) of the image; the guide is twice that


def to_guide_size(prefix):
    """Nodes computing int64 [N, C, H2, W2] from x's batch and channels and guide's height and width."""
    return [node("Shape", ["x"], [f"{prefix}x_shape"]),
            node("Slice", [f"{prefix}x_shape", "zero", "two"], [f"{prefix}nc"]),
            node("Shape", ["guide"], [f"{prefix}g_shape"]),
            node("Slice", [f"{prefix}g_shape", "two", "four"], [f"{prefix}hw"]),
            node("Concat", [f"{prefix}nc", f"{prefix}hw"], [f"{prefix}sizes"], axis=0)]


def resize_to_guide(name, **attributes):
    nodes = to_guide_size(name)
    nodes.append(node("Resize", ["x", "", "", f"{name}sizes"], [name], name=name, **attributes))
    return nodes


constants = [("zero", np.array([0], np.int64)), ("two", np.array([2], np.int64)),
             ("four", np.array([4], np.int64)),
             ("scales", np.array([1, 1, 2, 0.5], np.float32)),
             ("fixed", np.array([1, 3, 9, 11], np.int64))]
cases = {
    "nearest_floor": dict(mode="nearest", nearest_mode="floor", coordinate_transformation_mode="asymmetric"),
    "nearest_prefer_floor": dict(mode="nearest", nearest_mode="round_prefer_floor"),
    "nearest_prefer_ceil": dict(mode="nearest", nearest_mode="round_prefer_ceil",
                                coordinate_transformation_mode="tf_half_pixel_for_nn"),
    "nearest_ceil": dict(mode="nearest", nearest_mode="ceil", coordinate_transformation_mode="align_corners"),
    "linear_half_pixel": dict(mode="linear"),
    "linear_align_corners": dict(mode="linear", coordinate_transformation_mode="align_corners"),
    "linear_pytorch": dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    "cubic_asymmetric": dict(mode="cubic", coordinate_transformation_mode="asymmetric"),
    "cubic_exclude_outside": dict(mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5),
}
nodes, outputs = [], []
for name, attributes in cases.items():
    nodes += resize_to_guide(name, **attributes)
    outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [None] * 4))
nodes += to_guide_size("pooled")
nodes += [node("Resize", ["x", "", "scales"], ["by_scales"], name="by_scales", mode="linear"),
          node("Resize", ["x", "", "", "fixed"], ["to_fixed"], name="to_fixed", mode="linear"),
          node("ReduceMean", ["x"], ["pooled"], axes=[2, 3], keepdims=1),
          node("Resize", ["pooled", "", "", "pooledsizes"], ["from_one"], name="from_one", mode="linear")]
outputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT, [None] * 4) for name in ("by_scales", "to_fixed", "from_one")]
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "height", "width"]),
          helper.make_tensor_value_info("guide", TensorProto.FLOAT, [1, 1, "guide_height", "guide_width"])]

with tempfile.TemporaryDirectory(prefix="kiln_symbolic_resize_") as folder:
    model_path = os.path.join(folder, "resize.onnx")
    plan_path = os.path.join(folder, "resize.kiln")
    python_test_env.save_model(model_path, nodes, inputs, outputs, constants, opset=13)
    compiled = checks.kiln("compile", model_path, "-o", plan_path, "--shape", "height=4..16", "--shape", "width=4..16",
                           "--shape", "guide_height=8..32", "--shape", "guide_width=8..32")
    check(compiled.returncode == 0, "kiln compile: every Resize over symbolic heights and widths, one plan")
    if compiled.returncode != 0:
        checks.finish()
    reference = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [output.name for output in outputs]
    with kiln.Plan(plan_path) as plan:
        for height, width in SIZES:
            feed = {"x": rng.standard_normal((1, 3, height, width)).astype(np.float32),
                    "guide": np.zeros((1, 1, 2 * height, 2 * width), np.float32)}
            got = plan.run(feed)
            for name, want in zip(names, reference.run(names, feed)):
                shape_ok = got[name].shape == want.shape
                difference = float(np.max(np.abs(got[name] - want))) if shape_ok else float("inf")
                check(shape_ok and difference <= 1e-5,
                      f"{height}x{width}: {name} {got[name].shape} against onnxruntime {want.shape}, "
                      f"max |difference| {difference:.2e}")

    def refused(what, resize_nodes, text):
        path = os.path.join(folder, "refused.onnx")
        python_test_env.save_model(path, resize_nodes, inputs, [helper.make_tensor_value_info("r", TensorProto.FLOAT, [None] * 4)],
                                   constants + [("odd", np.array([1.37], np.float32))], opset=18)
        result = checks.kiln("compile", path, "-o", os.path.join(folder, "refused.kiln"), "--shape", "height=4..4096",
                             "--shape", "width=4..16", "--shape", "guide_height=8..32", "--shape", "guide_width=8..32")
        check(result.returncode == 1 and "node 'r' (Resize, opset 18)" in result.stderr and text in result.stderr,
              f"{what} is refused, naming the node: {text!r}")

    # (Over 4..16 some p/q with q <= 64 floors as 1.37 does at every length; over 4..4096 none.)
    refused("a scale that is no whole fraction of the length",
            [node("Resize", ["x", "", "odd"], ["r"], name="r", mode="linear", axes=[2])],
            "is not a whole fraction of the length")
    refused("antialias to a size known only when the plan runs",
            to_guide_size("a") + [node("Resize", ["x", "", "", "asizes"], ["r"], name="r", mode="linear", antialias=1)],
            "unsupported: antialias")

checks.finish()
