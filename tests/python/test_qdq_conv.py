"""QDQ 1x1 convs, Gemms and MatMuls as 8-bit integer products (importers/onnx/qdq_pairs.h,
build_integer_pointwise_conv, build_integer_matmul): Conv(DequantizeLinear(u8 x),
DequantizeLinear(int8 weight), bias) as onnxruntime's quantizer writes it, compiled with
`kiln compile` and run with `kiln run`, against numpy's f64 value of the same conv on the
dequantized values; then Gemm (transB, a classifier's matrix-vector product) and MatMul the same way.

On a CPU with 8-bit dot products (AVX-512 VNNI, AVX-VNNI) the conv is an integer product: exact in
i32, then scaled once, so it lies within a few f32 roundings of the f64 value; its plan stores the
weight in 8 bits. Elsewhere it is the float conv on dequantized values, also within a few
roundings. Covered: filters × pixels (an image that fills whole vectors: 16×16) and pixels ×
filters (7×7), filter counts that are and are not whole vectors of 16 (32, 24), a zero point of 0
and of 131, per-filter and per-tensor weight scales, a batch of 2, and a conv that does not qualify
(stride 2: the float path) next to one that does.

usage: test_qdq_conv.py --source-root DIR --kiln KILN_CLI [--python VENV_PYTHON]
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args = python_test_env.cli_arguments()
python_test_env.require_numpy_and_onnx(args.python)

import numpy as np  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

checks = python_test_env.Checks(args.kiln)
check, kiln = checks.check, checks.kiln
rng = np.random.default_rng(23)


def build(path, batch, channels, filters, size, x_zero, per_filter, stride):
    """x (f32) -> QuantizeLinear -> DequantizeLinear -> Conv 1x1 (int8 weight through
    DequantizeLinear, f32 bias) -> y; returns the initializers by name."""
    x_scale = np.array(0.021, np.float32)
    w = rng.integers(-128, 128, size=(filters, channels, 1, 1)).astype(np.int8)
    w_scale = (rng.uniform(0.002, 0.02, size=filters) if per_filter else np.array(0.011)).astype(np.float32)
    bias = rng.standard_normal(filters).astype(np.float32)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["wd"], axis=0),
        helper.make_node("Conv", ["xd", "wd", "bias"], ["y"], kernel_shape=[1, 1], strides=[stride, stride]),
    ]
    out = (size + stride - 1) // stride
    initializers = {"x_scale": x_scale, "x_zero": np.array(x_zero, np.uint8), "w": w, "w_scale": w_scale,
                    "w_zero": np.zeros(w_scale.shape, np.int8), "bias": bias}
    python_test_env.save_model(
        path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, filters, out, out])], list(initializers.items()))
    return initializers


def reference(x, p, stride):
    """The graph in numpy: QuantizeLinear in f32 (round half to even, saturate), then the conv in
    f64 on the dequantized values."""
    q = np.clip(np.rint(x / p["x_scale"]) + float(p["x_zero"]), 0, 255)
    xd = (q - float(p["x_zero"])) * np.float64(p["x_scale"])
    xd = xd[:, :, ::stride, ::stride]
    wd = p["w"][:, :, 0, 0].astype(np.float64) * np.broadcast_to(p["w_scale"].astype(np.float64), (p["w"].shape[0],))[:, None]
    return np.einsum("nchw,fc->nfhw", xd, wd) + p["bias"].astype(np.float64)[None, :, None, None]


def expected_dot_products():
    """Whether kiln's CPU target here has 8-bit dot products (codegen/llvm/llvm_target.cpp): the
    CPU's flags as KILN_CPU_TARGET narrows them; None where /proc/cpuinfo does not say."""
    flags = python_test_env.cpu_flags()
    if flags is None:
        return None
    target = os.environ.get("KILN_CPU_TARGET") or "host"
    if target == "x86-64-v3":
        return False
    if target == "avx2":  # AVX-512 switched off: AVX-VNNI only
        return "avx_vnni" in flags
    if "avx512f" in flags:
        return "avx512_vnni" in flags
    return "avx_vnni" in flags


def compile_and_run(work, name, model, x):
    """Compiles `model` to work/name.kiln and runs it on x; returns (plan path, y as f64) or
    (plan path, None) after a failed check."""
    plan = os.path.join(work, name + ".kiln")
    compiled = kiln("compile", model, "-o", plan)
    check(compiled.returncode == 0, f"kiln compile {name}: {compiled.stderr.strip()[-400:]}")
    if compiled.returncode != 0:
        return plan, None
    x_path, out_dir = os.path.join(work, name + "_x.npy"), os.path.join(work, name)
    np.save(x_path, x)
    ran = kiln("run", plan, "--input", f"x={x_path}", "--output-dir", out_dir, "--output-format", "npy")
    check(ran.returncode == 0, f"kiln run {name}: {ran.stderr.strip()[-400:]}")
    if ran.returncode != 0:
        return plan, None
    return plan, np.load(os.path.join(out_dir, "y.npy")).astype(np.float64)


dot_products = expected_dot_products()
with tempfile.TemporaryDirectory(prefix="kiln_qdq_conv_test_") as work:
    cases = [
        # name, batch, channels, filters, image size, x zero point, per-filter scales, stride
        ("filters_by_pixels", 1, 48, 32, 16, 131, True, 1),
        ("filters_by_pixels_24", 2, 16, 24, 16, 0, False, 1),
        ("pixels_by_filters", 1, 64, 32, 7, 131, True, 1),
        ("pixels_by_filters_24", 2, 32, 24, 7, 7, True, 1),
        ("strided_float_path", 1, 48, 32, 16, 131, True, 2),
    ]
    for name, batch, channels, filters, size, x_zero, per_filter, stride in cases:
        model = os.path.join(work, name + ".onnx")
        params = build(model, batch, channels, filters, size, x_zero, per_filter, stride)
        x = (rng.standard_normal((batch, channels, size, size)) * 2.0).astype(np.float32)
        plan, got = compile_and_run(work, name, model, x)
        if got is None:
            continue
        want = reference(x, params, stride)
        error = np.abs(got - want).max() / np.abs(want).max()
        check(got.shape == want.shape and error < 1e-5, f"{name}: within f32 roundings of the f64 conv (relative {error:.2e})")
        # The weight in 8 bits where the conv is an integer product (its f32 form is 4 bytes a value).
        weights = int(re.search(r"weights: (\d+) bytes", kiln("inspect", plan).stdout).group(1))
        eight_bit = weights < 2 * channels * filters
        if stride == 1:
            if dot_products is None:  # (no /proc/cpuinfo: the first conv decides for the others)
                dot_products = eight_bit
            check(eight_bit == dot_products,
                  f"{name}: the weight in 8 bits exactly where the CPU target has 8-bit dot products ({weights} bytes)")
        else:
            check(not eight_bit, f"{name}: a strided conv keeps the float path ({weights} bytes)")
    print(f"8-bit integer convs on this CPU: {dot_products}")

    # Gemm (transB = 1, bias, one row: a classifier) and MatMul (a batch of rows, per-tensor scale).
    for name, op, rows, k, n, per_column in [("gemm_classifier", "Gemm", 1, 576, 1000, True),
                                             ("matmul_rows", "MatMul", 9, 64, 48, False)]:
        x_scale, x_zero = np.array(0.033, np.float32), np.array(119, np.uint8)
        w = rng.integers(-128, 128, size=(n, k) if op == "Gemm" else (k, n)).astype(np.int8)
        w_scale = (rng.uniform(0.002, 0.02, size=n) if per_column else np.array(0.009)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        product_inputs = ["xd", "wd"] + (["bias"] if op == "Gemm" else [])
        nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
                 helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["xd"]),
                 helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["wd"],
                                  axis=0 if op == "Gemm" else 1),
                 helper.make_node(op, product_inputs, ["y"], **({"transB": 1} if op == "Gemm" else {}))]
        initializers = [("x_scale", x_scale), ("x_zero", x_zero), ("w", w), ("w_scale", w_scale),
                        ("w_zero", np.zeros(w_scale.shape, np.int8))] + ([("bias", bias)] if op == "Gemm" else [])
        model = os.path.join(work, name + ".onnx")
        python_test_env.save_model(model, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, k])],
                                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, n])], initializers)
        x = (rng.standard_normal((rows, k)) * 2.0).astype(np.float32)
        plan, got = compile_and_run(work, name, model, x)
        if got is None:
            continue
        xd = (np.clip(np.rint(x / x_scale) + float(x_zero), 0, 255) - float(x_zero)) * np.float64(x_scale)
        wd = w.astype(np.float64) * (w_scale.astype(np.float64)[:, None] if op == "Gemm" else w_scale.astype(np.float64))
        want = xd @ (wd.T if op == "Gemm" else wd) + (bias.astype(np.float64) if op == "Gemm" else 0)
        error = np.abs(got - want).max() / np.abs(want).max()
        check(got.shape == want.shape and error < 1e-5, f"{name}: within f32 roundings of the f64 product (relative {error:.2e})")
        weights = int(re.search(r"weights: (\d+) bytes", kiln("inspect", plan).stdout).group(1))
        # (Without dot products the float path may keep a matrix-vector product's weight 8-bit too.)
        if dot_products:
            check(weights < 2 * k * n, f"{name}: the weight in 8 bits ({weights} bytes)")

sys.exit(checks.finish())
