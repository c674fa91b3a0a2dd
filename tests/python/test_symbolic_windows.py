"""Window ops over symbolic image sizes (issue 49): a CNN over images of any height and width, as
torchvision's classifiers and detectors are exported with dynamic height and width. One model holds
a strided stem conv, a max pool (padded, and in ceil_mode), same-padded convs (explicit and
auto_pad SAME_UPPER at stride 1), a depthwise conv, average pools that count per window (padding
left out, a ceil_mode tail) or count the padding, an LpPool, a global average pool and strided
transposed convs (grouped, dilated, with output padding); it is
compiled once over a batch, height and width range and run at several sizes against onnxruntime.
Refused forms (a stride-2 SAME pad, which depends on the size; a kernel larger than the smallest
image) must name the node.

Run by meson (test 'symbolic-windows'); skipped (77) without numpy, onnx or onnxruntime.
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
rng = np.random.default_rng(5)
SIZES = [(1, 16, 16), (2, 17, 23), (1, 40, 19), (2, 64, 64)]  # (batch, height, width)


def weight(*shape):
    return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)


constants = [("stem_w", weight(8, 3, 7, 7)), ("stem_b", weight(8)),
             ("same_w", weight(8, 8, 3, 3)), ("auto_w", weight(8, 8, 3, 3)),
             ("depthwise_w", weight(8, 1, 3, 3)), ("up_w", weight(8, 4, 4, 4)), ("up_b", weight(4)),
             ("up_group_w", weight(8, 2, 3, 2))]
nodes = [
    node("Conv", ["x", "stem_w", "stem_b"], ["stem"], name="stem", strides=[2, 2], pads=[3, 3, 3, 3]),
    node("Relu", ["stem"], ["stem_relu"]),
    node("MaxPool", ["stem_relu"], ["max"], name="max", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    node("Conv", ["max", "same_w"], ["same"], name="same", pads=[1, 1, 1, 1]),
    node("Conv", ["same", "auto_w"], ["auto"], name="auto", auto_pad="SAME_UPPER"),
    node("Conv", ["auto", "depthwise_w"], ["depthwise"], name="depthwise", group=8, pads=[1, 1, 1, 1], strides=[2, 1]),
    node("MaxPool", ["stem_relu"], ["max_ceil"], name="max_ceil", kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1),
    node("AveragePool", ["same"], ["avg_ceil"], name="avg_ceil", kernel_shape=[3, 3], strides=[2, 2],
         pads=[1, 0, 1, 1], ceil_mode=1),
    node("AveragePool", ["same"], ["avg_counted"], name="avg_counted", kernel_shape=[2, 3], strides=[1, 2],
         pads=[1, 1, 0, 1], count_include_pad=1),
    node("LpPool", ["same"], ["lp"], name="lp", kernel_shape=[2, 2], strides=[2, 2], p=2),
    node("GlobalAveragePool", ["depthwise"], ["pooled"]),
    # Transposed convs (a decoder's upsampling): stride 2 with padding, and grouped with an output
    # padding, uneven strides and a dilation.
    node("ConvTranspose", ["same", "up_w", "up_b"], ["up"], name="up", strides=[2, 2], pads=[1, 1, 1, 1]),
    node("ConvTranspose", ["same", "up_group_w"], ["up_group"], name="up_group", group=2, strides=[3, 2],
         output_padding=[1, 0], dilations=[1, 2]),
]
output_names = ["max", "auto", "depthwise", "max_ceil", "avg_ceil", "avg_counted", "lp", "pooled", "up", "up_group"]
outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [None] * 4) for name in output_names]
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "height", "width"])]
RANGES = ["--shape", "batch=1..2", "--shape", "height=16..64", "--shape", "width=16..64"]

with tempfile.TemporaryDirectory(prefix="kiln_symbolic_windows_") as folder:
    model_path = os.path.join(folder, "windows.onnx")
    plan_path = os.path.join(folder, "windows.kiln")
    python_test_env.save_model(model_path, nodes, inputs, outputs, constants, opset=18)
    compiled = checks.kiln("compile", model_path, "-o", plan_path, *RANGES)
    check(compiled.returncode == 0, "kiln compile: convs and pools over symbolic batch, height and width, one plan"
          + ("" if compiled.returncode == 0 else f": {compiled.stderr.strip()}"))
    if compiled.returncode != 0:
        checks.finish()
    reference = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    with kiln.Plan(plan_path) as plan:
        for batch, height, width in SIZES:
            feed = {"x": rng.standard_normal((batch, 3, height, width)).astype(np.float32)}
            got = plan.run(feed)
            for name, want in zip(output_names, reference.run(output_names, feed)):
                shape_ok = got[name].shape == want.shape
                difference = float(np.max(np.abs(got[name] - want))) if shape_ok else float("inf")
                check(shape_ok and difference <= 2e-5,
                      f"{batch}x{height}x{width}: {name} {got[name].shape} against onnxruntime {want.shape}, "
                      f"max |difference| {difference:.2e}")

    def refused(what, refused_node, text):
        path = os.path.join(folder, "refused.onnx")
        python_test_env.save_model(path, [refused_node], inputs,
                                   [helper.make_tensor_value_info("r", TensorProto.FLOAT, [None] * 4)], constants, opset=18)
        result = checks.kiln("compile", path, "-o", os.path.join(folder, "refused.kiln"), *RANGES)
        op = refused_node.op_type
        named = result.returncode == 1 and f"node 'r' ({op}, opset 18)" in result.stderr and text in result.stderr
        check(named, f"{what} is refused, naming the node: {text!r}" + ("" if named else f"\n  stderr: {result.stderr.strip()}"))

    refused("a SAME pad at stride 2, which depends on the image size",
            node("MaxPool", ["x"], ["r"], name="r", kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
            "the symbolic dimension height")
    refused("a window larger than the smallest image",
            node("AveragePool", ["x"], ["r"], name="r", kernel_shape=[20, 3]),
            "may be smaller than the kernel")

checks.finish()
