"""QuantizeLinear followed by DequantizeLinear with the same parameters (the QDQ form of
onnxruntime's quantizer), which kiln builds as one rounding step (importers/onnx/qdq_pairs.h):
each model is compiled twice, once with the pair adjacent (fused) and once with an Identity between
Q and DQ (the pair is then built op by op), run with `kiln run`, and the two outputs compared bit for
bit; finite results are also checked against numpy's ONNX semantics (f32 quotient, round half to
even, + zero point, saturation, (q - zero point) * scale).

Covered: u8, i8, u16 and i16; zero points absent, scalar and per channel (axis 1); per-channel
scales; a pair whose scales differ (not fused, still right); inputs at exact halves, at both ends
of the range and far beyond, infinities and NaN (which the conversion to the integer type turns
into 0, so the pair gives -zero point * scale); the Q output also read as a graph output.

usage: test_quantize_dequantize.py --source-root DIR --kiln KILN_CLI [--python VENV_PYTHON]
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args = python_test_env.cli_arguments()
python_test_env.require_numpy_and_onnx(args.python)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

checks = python_test_env.Checks(args.kiln)
check, kiln = checks.check, checks.kiln
rng = np.random.default_rng(5)

TYPES = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8, np.uint16: TensorProto.UINT16,
         np.int16: TensorProto.INT16}
CHANNELS, PIXELS = 4, 64


def inputs_for(scale):
    """x (1, CHANNELS, PIXELS): random values over about twice the range, exact halves of the
    scale, huge values, infinities and NaN."""
    x = (rng.standard_normal((1, CHANNELS, PIXELS)) * 300 * scale.max()).astype(np.float32)
    s = np.broadcast_to(scale.reshape(1, -1, 1), x.shape)
    x[0, :, :8] = (np.arange(-4, 4) + 0.5).astype(np.float32) * s[0, :, :8]  # k + 1/2 steps
    x[0, :, 8] = 3e38
    x[0, :, 9] = -3e38
    x[0, :, 10] = np.inf
    x[0, :, 11] = -np.inf
    x[0, :, 12] = np.nan
    x[0, :, 13] = 0.0
    x[0, :, 14] = -0.0
    return x


def reference(x, scale, zero_point, dtype):
    """ONNX QuantizeLinear then DequantizeLinear in numpy, for the finite elements."""
    info = np.iinfo(dtype)
    s = scale.reshape(1, -1, 1).astype(np.float32)
    z = zero_point.reshape(1, -1, 1).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        q = np.clip(np.rint(x / s).astype(np.float64) + z, info.min, info.max)
        return ((q - z).astype(np.float32) * s).astype(np.float32), q.astype(dtype)


def build(work, name, dtype, scale, zero_point, dq_scale, separated):
    """Q -> (Identity ->) DQ; outputs the dequantized value and the quantized one."""
    onnx_type = TYPES[dtype]
    per_channel = scale.size > 1
    q_inputs = ["x", "scale"] + (["zero_point"] if zero_point is not None else [])
    dq_scale_name = "scale" if dq_scale is None else "dq_scale"
    dq_inputs = ["q_kept" if separated else "q", dq_scale_name] + (["zero_point"] if zero_point is not None else [])
    axis = {"axis": 1} if per_channel else {}
    nodes = [helper.make_node("QuantizeLinear", q_inputs, ["q"], **axis)]
    if separated:
        nodes.append(helper.make_node("Identity", ["q"], ["q_kept"]))
    nodes.append(helper.make_node("DequantizeLinear", dq_inputs, ["y"], **axis))
    initializers = [("scale", scale)]
    if zero_point is not None:
        initializers.append(("zero_point", zero_point))
    if dq_scale is not None:
        initializers.append(("dq_scale", dq_scale))
    path = os.path.join(work, name + ".onnx")
    python_test_env.save_model(
        path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, PIXELS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CHANNELS, PIXELS]),
         helper.make_tensor_value_info("q", onnx_type, [1, CHANNELS, PIXELS])], initializers)
    return path


def run(work, name, model, x):
    plan = os.path.join(work, name + ".kiln")
    compiled = kiln("compile", model, "-o", plan)
    check(compiled.returncode == 0, f"kiln compile {name}: {compiled.stderr.strip()[-400:]}")
    if compiled.returncode != 0:
        return None
    x_path = os.path.join(work, name + "_x.npy")
    np.save(x_path, x)
    out_dir = os.path.join(work, name)
    ran = kiln("run", plan, "--input", f"x={x_path}", "--output-dir", out_dir, "--output-format", "npy")
    check(ran.returncode == 0, f"kiln run {name}: {ran.stderr.strip()[-400:]}")
    if ran.returncode != 0:
        return None
    return np.load(os.path.join(out_dir, "y.npy")), np.load(os.path.join(out_dir, "q.npy"))


with tempfile.TemporaryDirectory(prefix="kiln_qdq_test_") as work:
    cases = []
    for dtype in TYPES:
        info = np.iinfo(dtype)
        middle = (int(info.min) + int(info.max) + 1) // 2
        if dtype is np.uint8:  # (without a zero point the type is u8)
            cases.append((f"{dtype.__name__}_no_zero_point", dtype, np.array(0.05, np.float32), None, None))
        cases += [
            (f"{dtype.__name__}_scalar", dtype, np.array(0.0371, np.float32), np.array(middle + 3, dtype), None),
            (f"{dtype.__name__}_per_channel", dtype, np.array([0.02, 0.5, 0.013, 1.7], np.float32),
             np.array([info.min, middle, info.max, middle - 7], dtype), None),
        ]
    # Different scales: the DequantizeLinear does not undo the QuantizeLinear, and is built alone.
    cases.append(("u8_other_scale", np.uint8, np.array(0.05, np.float32), np.array(128, np.uint8),
                  np.array(0.07, np.float32)))
    for name, dtype, scale, zero_point, dq_scale in cases:
        x = inputs_for(np.atleast_1d(scale))
        fused = run(work, name, build(work, name, dtype, scale, zero_point, dq_scale, False), x)
        apart = run(work, name + "_apart", build(work, name + "_apart", dtype, scale, zero_point, dq_scale, True), x)
        if fused is None or apart is None:
            continue
        check(np.array_equal(fused[0].view(np.uint32), apart[0].view(np.uint32)),
              f"{name}: fused Q->DQ bit-identical to Q, Identity, DQ (differing at "
              f"{np.argwhere(fused[0].view(np.uint32) != apart[0].view(np.uint32))[:4].tolist()})")
        check(np.array_equal(fused[1], apart[1]), f"{name}: the quantized output the same")
        zp = np.zeros(np.atleast_1d(scale).size, dtype) if zero_point is None else np.atleast_1d(zero_point)
        want_y, want_q = reference(x, np.atleast_1d(scale), zp, dtype)
        if dq_scale is not None:
            want_y = ((want_q.astype(np.float64) - zp.reshape(1, -1, 1)).astype(np.float32) *
                      np.float32(dq_scale)).astype(np.float32)
        finite = np.isfinite(x)
        check(np.array_equal(fused[0][finite], want_y[finite]),
              f"{name}: finite elements equal numpy's QuantizeLinear + DequantizeLinear (max |diff| "
              f"{np.abs(fused[0][finite] - want_y[finite]).max()})")
        check(np.array_equal(fused[1][finite], want_q[finite]), f"{name}: quantized values equal numpy's")
        # NaN: the conversion gives 0, so the pair gives (0 - zero point) * scale.
        nan_want = (-zp.astype(np.float32) * (np.float32(dq_scale) if dq_scale is not None else np.atleast_1d(scale)))
        check(np.array_equal(fused[0][0, :, 12], np.broadcast_to(nan_want, (CHANNELS,)).astype(np.float32)),
              f"{name}: NaN gives (0 - zero point) * scale ({fused[0][0, :, 12]}, want {nan_want})")

    # The fused pair converts to no integer type: with the quantized value not an output, the plan's
    # kernel reads x and writes y in f32 only (KILN_DEBUG=5 prints each kernel's AST).
    for separated in (False, True):
        name = "u8_y_only" + ("_apart" if separated else "")
        path = build(work, name, np.uint8, np.array(0.05, np.float32), np.array(7, np.uint8), None, separated)
        model = onnx.load(path)
        del model.graph.output[1]
        onnx.save(model, path)
        env = dict(os.environ, KILN_DEBUG="5")
        compiled = subprocess.run([args.kiln, "compile", path, "-o", os.path.join(work, name + ".kiln")],
                                  capture_output=True, text=True, env=env)
        converts = "CAST u8" in compiled.stderr
        check(compiled.returncode == 0 and converts == separated,
              f"{name}: the kernel converts to u8 {'(Q, Identity, DQ)' if separated else 'nowhere (fused)'}")

sys.exit(checks.finish())
