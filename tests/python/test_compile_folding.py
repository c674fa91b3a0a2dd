"""Compile-time folding, seen from outside: models built with onnx.helper, compiled with `kiln
compile`, described with `kiln inspect` and run with `kiln run`, against numpy references.

  - Conv -> BatchNormalization -> Relu is one kernel (after the copy of the zero-padded input that
    a padded conv reads), and the plan stores only the folded weight and
    bias (W' = W*gamma/sqrt(var+eps), b' = (b-mean)*gamma/sqrt(var+eps)+beta), not the BN vectors;
  - a depthwise conv whose one reader is a 1x1 conv stores its output channels-last, the order that
    conv reads (no copy kernel between them);
  - MatMul by a constant (K, N) weight is one kernel: the transposed weight is stored, not made
    on every run;
  - Gather with negative and out-of-range indices: negative ones wrap once, ones still out of range
    give zeros (the documented result);
  - Pow by a constant 2 or 0.5 is a multiplication or a square root, with pow's values;
  - a bilinear Resize reads its taps directly (its one-hot tap selection is not folded);
  - a matrix-vector product by a dequantized int8 weight stores the int8 bytes.

usage: test_compile_folding.py --source-root DIR --kiln KILN_CLI [--python VENV_PYTHON]
"""
import math
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args = python_test_env.cli_arguments()
python_test_env.require_numpy_and_onnx(args.python)

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

checks = python_test_env.Checks(args.kiln)
save_model = python_test_env.save_model
check, kiln = checks.check, checks.kiln
rng = np.random.default_rng(7)



def compile_and_run(work, name, feeds):
    """Compiles work/name.onnx, returns (kernel count, weight bytes, outputs by file name)."""
    model, plan = os.path.join(work, name + ".onnx"), os.path.join(work, name + ".kiln")
    check(kiln("compile", model, "-o", plan).returncode == 0, f"kiln compile {name}")
    inspect = kiln("inspect", plan).stdout
    kernels = int(re.search(r"kernels: (\d+)", inspect).group(1))
    weights = int(re.search(r"weights: (\d+) bytes", inspect).group(1))
    run_args = ["run", plan, "--output-dir", os.path.join(work, name), "--output-format", "npy"]
    for input_name, array in feeds.items():
        path = os.path.join(work, f"{name}_{input_name}.npy")
        np.save(path, array)
        run_args += ["--input", f"{input_name}={path}"]
    check(kiln(*run_args).returncode == 0, f"kiln run {name}")
    return kernels, weights, os.path.join(work, name)


def c99_pow(base, exponent):
    """C99's pow (math.pow raises where C returns NaN: a negative base, a non-integer exponent)."""
    try:
        return math.pow(base, exponent)
    except ValueError:
        return math.nan


def aligned(size):
    return (size + 63) // 64 * 64


def conv2d_same3x3(x, w, b):
    n, c, h, width = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, width), np.float64)
    for ky in range(3):
        for kx in range(3):
            window = padded[:, :, ky:ky + h, kx:kx + width]
            out += np.einsum("nchw,fc->nfhw", window, w[:, :, ky, kx])
    return out + b.reshape(1, -1, 1, 1)


with tempfile.TemporaryDirectory(prefix="kiln_folding_test_") as work:
    # Conv + BatchNormalization + Relu.
    f, c = 8, 3
    w = rng.standard_normal((f, c, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(f).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, f).astype(np.float32)
    beta = rng.standard_normal(f).astype(np.float32)
    mean = rng.standard_normal(f).astype(np.float32)
    var = rng.uniform(0.5, 2.0, f).astype(np.float32)
    save_model(os.path.join(work, "conv_bn.onnx"),
               [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], name="conv"),
                helper.make_node("BatchNormalization", ["y", "gamma", "beta", "mean", "var"], ["z"], epsilon=1e-3,
                                 name="bn"),
                helper.make_node("Relu", ["z"], ["out"], name="relu")],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])],
               [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, f, 8, 8])],
               [("w", w), ("b", bias), ("gamma", gamma), ("beta", beta), ("mean", mean), ("var", var)])
    x = rng.standard_normal((1, c, 8, 8)).astype(np.float32)
    kernels, weights, out_dir = compile_and_run(work, "conv_bn", {"x": x})
    # Two kernels: the input copied into a zero-padded buffer (pads=1), then the conv with the BN
    # and the Relu in its epilogue.
    check(kernels == 2, f"padded input copy + Conv + BatchNormalization + Relu are two kernels (got {kernels})")
    expected_weights = aligned(w.nbytes) + bias.nbytes  # W' then b', nothing else
    check(weights == expected_weights, f"the plan stores W' and b' only: {weights} == {expected_weights} bytes")
    reference = conv2d_same3x3(x.astype(np.float64), w.astype(np.float64), bias.astype(np.float64))
    reference = (reference - mean.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + 1e-3)
    reference = np.maximum(reference * gamma.reshape(1, -1, 1, 1) + beta.reshape(1, -1, 1, 1), 0)
    produced = np.load(os.path.join(out_dir, "out.npy"))
    error = float(np.max(np.abs(produced - reference)))
    check(error < 1e-4, f"Conv + BN + Relu matches numpy (max abs error {error:.2e})")

    # Depthwise 3x3 -> Relu -> pointwise 1x1 at 14x14 (a MobileNetV2 block's tail). The importer
    # sees that the depthwise conv's one reader is a 1x1 conv, so the depthwise conv computes
    # channels-last: three kernels (the input's channels-last padded copy, the depthwise conv with
    # its Relu storing in the order the 1x1 conv reads, the 1x1 conv). Without the hint there were
    # four (an NCHW padded copy, the depthwise conv, the 1x1 conv's channels-last copy of its
    # output, the 1x1 conv), as there still are, plus the second output, where the Relu's output is
    # also a graph output (read twice: no hint).
    channels, side = 32, 14
    depthwise_w = rng.standard_normal((channels, 1, 3, 3)).astype(np.float32)
    depthwise_b = rng.standard_normal(channels).astype(np.float32)
    pointwise_w = rng.standard_normal((channels, channels, 1, 1)).astype(np.float32)
    x = rng.standard_normal((1, channels, side, side)).astype(np.float32)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    depthwise = np.zeros((1, channels, side, side))
    for ky in range(3):
        for kx in range(3):
            depthwise += padded[:, :, ky:ky + side, kx:kx + side] * depthwise_w[:, 0, ky, kx].reshape(1, -1, 1, 1)
    relu = np.maximum(depthwise + depthwise_b.reshape(1, -1, 1, 1), 0)
    pointwise = np.einsum("nchw,fc->nfhw", relu, pointwise_w[:, :, 0, 0])
    counts = {}
    for variant, outputs in (("hinted", ["out"]), ("read_twice", ["out", "relu"])):
        value_infos = {"out": [1, channels, side, side], "relu": [1, channels, side, side]}
        save_model(os.path.join(work, f"depthwise_{variant}.onnx"),
                   [helper.make_node("Conv", ["x", "dw", "db"], ["y"], pads=[1, 1, 1, 1], group=channels, name="dw"),
                    helper.make_node("Relu", ["y"], ["relu"], name="relu"),
                    helper.make_node("Conv", ["relu", "pw"], ["out"], name="pw")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, side, side])],
                   [helper.make_tensor_value_info(name, TensorProto.FLOAT, value_infos[name]) for name in outputs],
                   [("dw", depthwise_w), ("db", depthwise_b), ("pw", pointwise_w)])
        counts[variant], _, out_dir = compile_and_run(work, f"depthwise_{variant}", {"x": x})
        error = float(np.max(np.abs(np.load(os.path.join(out_dir, "out.npy")) - pointwise)))
        check(error < 1e-3, f"depthwise -> Relu -> 1x1 ({variant}) matches numpy (max abs error {error:.2e})")
    check(counts["hinted"] == 3 and counts["read_twice"] > 3,
          f"a depthwise conv whose one reader is a 1x1 conv stores channels-last: {counts['hinted']} kernels "
          f"(3 expected), {counts['read_twice']} when its output is read twice")

    # MatMul by a constant (K, N) weight.
    k, n = 48, 40
    weight = rng.standard_normal((k, n)).astype(np.float32)
    save_model(os.path.join(work, "matmul.onnx"),
               [helper.make_node("MatMul", ["a", "weight"], ["out"], name="matmul")],
               [helper.make_tensor_value_info("a", TensorProto.FLOAT, [16, k])],
               [helper.make_tensor_value_info("out", TensorProto.FLOAT, [16, n])],
               [("weight", weight)])
    a = rng.standard_normal((16, k)).astype(np.float32)
    kernels, weights, out_dir = compile_and_run(work, "matmul", {"a": a})
    check(kernels == 1, f"MatMul by a constant weight is one kernel, its transpose folded (got {kernels})")
    check(weights == weight.nbytes, f"the plan stores the transposed weight once ({weights} bytes)")
    error = float(np.max(np.abs(np.load(os.path.join(out_dir, "out.npy")) - a.astype(np.float64) @ weight)))
    check(error < 1e-4, f"MatMul matches numpy (max abs error {error:.2e})")

    # Gather from a 30,522-row table: negative indices wrap once; still out of range gives zeros.
    rows, width = 30522, 16
    table = rng.standard_normal((rows, width)).astype(np.float32)
    save_model(os.path.join(work, "gather.onnx"),
               [helper.make_node("Gather", ["table", "ids"], ["out"], axis=0, name="embed")],
               [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6])],
               [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 6, width])],
               [("table", table)])
    ids = np.array([[101, -1, 30521, -30522, 30522, -30523]], np.int64)
    kernels, weights, out_dir = compile_and_run(work, "gather", {"ids": ids})
    produced = np.load(os.path.join(out_dir, "out.npy"))
    expected = np.zeros((1, 6, width), np.float32)
    for i, index in enumerate(ids[0]):
        wrapped = index + rows if index < 0 else index
        if 0 <= wrapped < rows:
            expected[0, i] = table[wrapped]
    check(np.array_equal(produced, expected), "Gather: in-range rows exact, negative wrap once, out of range is 0")

    # Pow by a constant exponent (a Constant node: RMSNorm's x^2; an initializer: a square root):
    # one multiplication per element, or a square root and the selects that give pow's values at
    # -0 and -inf, instead of exp2(y*log2|x|) with its special cases (6 ops per element).
    x = np.concatenate([rng.standard_normal(4093), [-0.0, -np.inf, np.inf]]).astype(np.float32)
    for label, exponent, expected_ops in [("square", 2.0, 1), ("root", 0.5, 3)]:
        e = np.array(exponent, np.float32)
        nodes = [helper.make_node("Pow", ["x", "e"], ["y"], name="pow")]
        initializers = [("e", e)]
        if label == "square":
            nodes.insert(0, helper.make_node("Constant", [], ["e"], value=numpy_helper.from_array(e)))
            initializers = []
        save_model(os.path.join(work, f"pow_{label}.onnx"), nodes,
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x.size])], initializers)
        kernels, weights, out_dir = compile_and_run(work, f"pow_{label}", {"x": x})
        inspect = kiln("inspect", os.path.join(work, f"pow_{label}.kiln")).stdout
        mflop = float(re.search(r"~([0-9.]+) MFLOP", inspect).group(1))
        check(abs(mflop - expected_ops * x.size / 1e6) < 0.00051,
              f"Pow by {exponent}: {expected_ops} ops per element, not the general pow ({mflop} MFLOP)")
        produced = np.load(os.path.join(out_dir, "y.npy"))
        # C99's pow, as kiln's general pow (numpy's power takes sqrt for 0.5: -0 at -0, NaN at -inf).
        reference = np.array([c99_pow(v, exponent) for v in x.astype(np.float64)]).astype(np.float32)
        numbers = ~np.isnan(reference)  # a NaN's sign is not pow's to decide
        check(np.array_equal(produced, reference, equal_nan=True) and
              np.array_equal(np.signbit(produced[numbers]), np.signbit(reference[numbers])),
              f"Pow by {exponent}: pow's values, -0 and infinities included")

    # Bilinear upsampling by 8 (a segmentation head's): each output reads its two taps per axis
    # directly. The taps' constant indices compared with an arange are a one-hot selection that
    # rangeify collapses into a load; folded into a mask at compile time, each tap summed every
    # input column (16 here): about 17x the multiply-adds.
    image = rng.standard_normal((1, 2, 16, 16)).astype(np.float32)
    scales = np.array([1, 1, 8, 8], np.float32)
    save_model(os.path.join(work, "resize.onnx"),
               [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", name="resize")],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(image.shape))],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 128, 128])], [("scales", scales)])
    kernels, weights, out_dir = compile_and_run(work, "resize", {"x": image})
    inspect = kiln("inspect", os.path.join(work, "resize.kiln")).stdout
    mflop = sum(float(value) for value in re.findall(r"~([0-9.]+) MFLOP", inspect))
    # Two taps per axis, a multiply and an add each: 0.22 MFLOP; summing all 16 columns per tap: 2.5.
    check(mflop < 0.5, f"Resize reads its taps directly, not through one-hot sums ({mflop:.3f} MFLOP)")
    from onnx.reference import ReferenceEvaluator  # noqa: E402
    reference_model = ReferenceEvaluator(os.path.join(work, "resize.onnx"))
    expected = reference_model.run(None, {"x": image})[0]
    error = float(np.max(np.abs(np.load(os.path.join(out_dir, "y.npy")) - expected)))
    check(error < 1e-5, f"Resize matches onnx.reference (max abs error {error:.2e})")

    # A matrix-vector product by a dequantized int8 weight (a QDQ classifier): the plan stores the
    # weight's bytes as they are, and the kernel dequantizes them; in f32 panels it was 4x.
    k_in, n_out = 512, 256  # large enough that no size rule folds it anyway
    quantized = rng.integers(-128, 128, size=(k_in, n_out), dtype=np.int64).astype(np.int8)
    column_scales = rng.uniform(0.001, 0.01, n_out).astype(np.float32)
    row = rng.standard_normal((1, k_in)).astype(np.float32)
    save_model(os.path.join(work, "dq_matvec.onnx"),
               [helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"], axis=1, name="dequantize"),
                helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k_in])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n_out])],
               [("wq", quantized), ("ws", column_scales)])
    kernels, weights, out_dir = compile_and_run(work, "dq_matvec", {"x": row})
    check(weights < 2 * quantized.nbytes, f"the dequantized weight is stored as int8 ({weights} bytes for {quantized.nbytes})")
    dequantized = quantized.astype(np.float64) * column_scales.astype(np.float64)
    expected = row.astype(np.float64) @ dequantized
    error = float(np.max(np.abs(np.load(os.path.join(out_dir, "y.npy")) - expected)))
    check(error < 1e-4, f"MatMul by a dequantized int8 weight matches numpy (max abs error {error:.2e})")

checks.finish()
