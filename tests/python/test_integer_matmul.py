"""8-bit integer matrix products (MatMulInteger, QLinearMatMul), seen from outside: models built
with onnx.helper, compiled with `kiln compile` (the host's own target: 8-bit dot-product
instructions where it has them), run with `kiln run`, against numpy's exact integer results.

Covered: every pair of operand types (u8/s8 x u8/s8: kiln moves one operand by 128 so that the
product reads one unsigned and one signed operand), zero points absent, scalar, per row of A,
per column of B and given at run time, a batched A, reduction lengths that are and are not
multiples of 4, and a symbolic row count. A constant B is stored in 8 bits (the plan's weights
are about K*N bytes, not 4*K*N).

usage: test_integer_matmul.py --source-root DIR --kiln KILN_CLI [--python VENV_PYTHON]
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
save_model = python_test_env.save_model
check, kiln = checks.check, checks.kiln
rng = np.random.default_rng(11)

ONNX_TYPES = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8, np.int32: TensorProto.INT32}


def random_8bit(dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape, dtype=np.int64).astype(dtype)


def compile_and_run(work, name, feeds, shape_args=()):
    """Compiles work/name.onnx and runs it; returns (weight bytes, {output name: array})."""
    model, plan = os.path.join(work, name + ".onnx"), os.path.join(work, name + ".kiln")
    compiled = kiln("compile", model, "-o", plan, *shape_args)
    check(compiled.returncode == 0, f"kiln compile {name}: {compiled.stderr.strip()[-400:]}")
    if compiled.returncode != 0:
        return 0, {}
    weights = int(re.search(r"weights: (\d+) bytes", kiln("inspect", plan).stdout).group(1))
    out_dir = os.path.join(work, name)
    run_args = ["run", plan, "--output-dir", out_dir, "--output-format", "npy"]
    for input_name, array in feeds.items():
        path = os.path.join(work, f"{name}_{input_name}.npy")
        np.save(path, array)
        run_args += ["--input", f"{input_name}={path}"]
    ran = kiln(*run_args)
    check(ran.returncode == 0, f"kiln run {name}: {ran.stderr.strip()[-400:]}")
    if ran.returncode != 0:
        return weights, {}
    return weights, {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir) if f.endswith(".npy")}


def reference(a, b, a_zero, b_zero):
    """Σk (a - za)(b - zb) in int64 (exact), with za per row of a and zb per column of b."""
    a64 = a.astype(np.int64) - np.asarray(a_zero, np.int64).reshape(-1, 1)
    b64 = b.astype(np.int64) - np.asarray(b_zero, np.int64).reshape(1, -1)
    return np.matmul(a64, b64)


with tempfile.TemporaryDirectory(prefix="kiln_integer_matmul_test_") as work:
    cases = [
        # name, a dtype, b dtype, a shape, k, n, a zero point kind, b zero point kind
        ("u8_s8_plain", np.uint8, np.int8, (9,), 256, 64, None, None),
        ("u8_s8_scalar_zero_points", np.uint8, np.int8, (2, 7), 64, 48, "scalar", "scalar"),
        ("u8_u8_per_row_column", np.uint8, np.uint8, (12,), 40, 32, "row", "column"),
        ("s8_s8", np.int8, np.int8, (5,), 128, 16, "scalar", None),
        ("s8_u8", np.int8, np.uint8, (6,), 64, 80, None, "column"),
        ("u8_s8_ragged_k", np.uint8, np.int8, (4,), 37, 24, "scalar", "scalar"),
        ("u8_s8_run_time_zero_point", np.uint8, np.int8, (3, 9), 96, 64, "input", None),
        # 40 columns: whole vectors of 8, not of 16 (the 256-bit form on AVX-512 VNNI hosts).
        ("u8_s8_columns_of_8", np.uint8, np.int8, (3, 20), 64, 40, "scalar", None),
    ]
    for name, a_type, b_type, a_lead, k, n, a_zero_kind, b_zero_kind in cases:
        m = a_lead[-1]
        a = random_8bit(a_type, a_lead + (k,))
        b = random_8bit(b_type, (k, n))
        inputs = [helper.make_tensor_value_info("a", ONNX_TYPES[a_type], list(a.shape))]
        initializers = [("b", b)]
        node_inputs = ["a", "b"]
        feeds = {"a": a}
        a_zero, b_zero = 0, 0
        if a_zero_kind is not None:
            a_zero = random_8bit(a_type, (m,) if a_zero_kind == "row" else ())
            if a_zero_kind == "input":
                inputs.append(helper.make_tensor_value_info("a_zero", ONNX_TYPES[a_type], []))
                feeds["a_zero"] = np.asarray(a_zero, a_type)
            else:
                initializers.append(("a_zero", np.asarray(a_zero, a_type)))
            node_inputs.append("a_zero")
        if b_zero_kind is not None:
            if a_zero_kind is None:
                node_inputs.append("")
            b_zero = random_8bit(b_type, (n,) if b_zero_kind == "column" else ())
            initializers.append(("b_zero", np.asarray(b_zero, b_type)))
            node_inputs.append("b_zero")
        out_shape = list(a_lead) + [n]
        save_model(os.path.join(work, name + ".onnx"),
                   [helper.make_node("MatMulInteger", node_inputs, ["y"], name="matmul_integer")], inputs,
                   [helper.make_tensor_value_info("y", TensorProto.INT32, out_shape)], initializers)
        weights, outputs = compile_and_run(work, name, feeds)
        if "y" not in outputs:
            continue
        # Per (M, K) matrix of the batch: za per row (or one), zb per column (or one).
        rows = a.reshape(-1, m, k).astype(np.int64) - np.asarray(a_zero, np.int64).reshape(-1, 1)
        expected = np.matmul(rows, b.astype(np.int64) - np.asarray(b_zero, np.int64).reshape(1, -1)).reshape(out_shape)
        got = outputs["y"]
        check(got.dtype == np.int32 and got.shape == tuple(out_shape), f"{name}: int32 {out_shape} (got {got.dtype} {got.shape})")
        check(np.array_equal(got.astype(np.int64), expected), f"{name}: exact, max difference "
              f"{int(np.max(np.abs(got.astype(np.int64) - expected))) if got.shape == expected.shape else 'n/a'}")
        # The weight is stored in 8 bits (moved by 128 where its signedness changed), plus at most
        # its column sums and small vectors: far below the 4·K·N bytes of an i32 weight.
        check(weights < 2 * k * n + 4096, f"{name}: weight stored in 8 bits ({weights} bytes for {k}x{n})")

    # A zero point of another type than its operand (u8 a, s8 zero point) is refused by name.
    save_model(os.path.join(work, "mismatched.onnx"),
               [helper.make_node("MatMulInteger", ["a", "b", "a_zero"], ["y"], name="mismatched_zero")],
               [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, 16])],
               [helper.make_tensor_value_info("y", TensorProto.INT32, [4, 8])],
               [("b", random_8bit(np.int8, (16, 8))), ("a_zero", np.asarray(3, np.int8))])
    refused = kiln("compile", os.path.join(work, "mismatched.onnx"), "-o", os.path.join(work, "mismatched.kiln"))
    check(refused.returncode != 0 and "mismatched_zero" in refused.stderr and "differs" in refused.stderr,
          f"a zero point of the wrong type is an error naming the node: {refused.stderr.strip()[-300:]}")
    # One per row, but not as many as the rows.
    save_model(os.path.join(work, "short_zero.onnx"),
               [helper.make_node("MatMulInteger", ["a", "b", "a_zero"], ["y"], name="short_zero")],
               [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, 16])],
               [helper.make_tensor_value_info("y", TensorProto.INT32, [4, 8])],
               [("b", random_8bit(np.int8, (16, 8))), ("a_zero", np.arange(5, dtype=np.uint8))])
    refused = kiln("compile", os.path.join(work, "short_zero.onnx"), "-o", os.path.join(work, "short_zero.kiln"))
    check(refused.returncode != 0 and "short_zero" in refused.stderr and "5 values for the 4" in refused.stderr,
          f"a per-row zero point of the wrong length is an error naming the node: {refused.stderr.strip()[-200:]}")

    # QLinearMatMul: the same product, requantized to u8.
    k, n, m = 64, 32, 8
    a = random_8bit(np.uint8, (m, k))
    b = random_8bit(np.int8, (k, n))
    a_scale, b_scale, y_scale = np.float32(0.02), np.float32(0.01), np.float32(0.5)
    a_zero, b_zero, y_zero = np.uint8(128), np.int8(0), np.uint8(100)
    save_model(os.path.join(work, "qlinear.onnx"),
               [helper.make_node("QLinearMatMul", ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale",
                                                   "y_zero"], ["y"], name="qlinear_matmul")],
               [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
               [helper.make_tensor_value_info("y", TensorProto.UINT8, [m, n])],
               [("a_scale", np.asarray(a_scale)), ("a_zero", np.asarray(a_zero)), ("b", b),
                ("b_scale", np.asarray(b_scale)), ("b_zero", np.asarray(b_zero)), ("y_scale", np.asarray(y_scale)),
                ("y_zero", np.asarray(y_zero))])
    _, outputs = compile_and_run(work, "qlinear", {"a": a})
    if "y" in outputs:
        accumulator = reference(a, b, a_zero, b_zero).astype(np.float64)
        real = (accumulator * (np.float64(a_scale) * np.float64(b_scale))).astype(np.float32).astype(np.float64)
        expected = np.clip(np.rint(real / np.float64(y_scale)) + 100, 0, 255).astype(np.uint8)
        difference = np.abs(outputs["y"].astype(np.int64) - expected.astype(np.int64))
        check(int(difference.max()) == 0, f"QLinearMatMul matches numpy (max difference {int(difference.max())})")

    # A symbolic row count (a dynamic batch of tokens): one plan at two sizes.
    k, n = 128, 64
    b = random_8bit(np.int8, (k, n))
    save_model(os.path.join(work, "symbolic.onnx"),
               [helper.make_node("MatMulInteger", ["a", "b", "a_zero"], ["y"], name="matmul_integer")],
               [helper.make_tensor_value_info("a", TensorProto.UINT8, ["rows", k]),
                helper.make_tensor_value_info("a_zero", TensorProto.UINT8, [])],
               [helper.make_tensor_value_info("y", TensorProto.INT32, ["rows", n])], [("b", b)])
    model, plan = os.path.join(work, "symbolic.onnx"), os.path.join(work, "symbolic.kiln")
    check(kiln("compile", model, "-o", plan, "--shape", "rows=1..40").returncode == 0, "kiln compile symbolic")
    for rows in (1, 23, 40):
        a = random_8bit(np.uint8, (rows, k))
        a_zero = np.uint8(rng.integers(0, 256))
        out_dir = os.path.join(work, f"symbolic_{rows}")
        np.save(os.path.join(work, "sa.npy"), a)
        np.save(os.path.join(work, "sz.npy"), np.asarray(a_zero))
        ran = kiln("run", plan, "--output-dir", out_dir, "--output-format", "npy", "--input",
                   f"a={os.path.join(work, 'sa.npy')}", "--input", f"a_zero={os.path.join(work, 'sz.npy')}")
        check(ran.returncode == 0, f"kiln run symbolic at {rows} rows: {ran.stderr.strip()[-300:]}")
        if ran.returncode == 0:
            got = np.load(os.path.join(out_dir, "y.npy")).astype(np.int64)
            check(np.array_equal(got, reference(a, b, a_zero, 0)), f"symbolic plan at {rows} rows: exact")

checks.finish()
