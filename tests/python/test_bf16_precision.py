"""`kiln compile --precision bf16` (src/tensor/matmul_precision.h, src/opt/amx_tiles.h): f32 MatMul and
Gemm by a weight, compiled with and without the option and run with `kiln run`, against numpy.

On a CPU target with AMX bf16 tiles (the CPU's flags as KILN_CPU_TARGET and KILN_AMX narrow them)
the bf16 plan's products are those of the operands rounded to bf16 (to nearest, ties to even),
summed in f32: within a few f32 roundings of that f64 value, and clearly apart from the fp32 product
(which the plan without the option still gives); its weights are stored in 2 bytes; and every
product that takes the option ran on AMX tiles (KILN_DEBUG=3 says so per kernel). Elsewhere
the option changes nothing: the compile says the matmuls stay fp32 and the results are the fp32
product's. Covered: shapes whose K is and is not a multiple of 32 (24, 96: padded with zero steps),
N that is and is not a whole 32-column panel (33, 72, 80, 128), M that ends mid-block (50), a batch
axis, Gemm with transB, alpha and a bias, a product too short for a block (8 rows: stays fp32), one
row by a large weight (padded to a block of 32 rows),
a product of two 2-D graph inputs (stays fp32 everywhere), and batched products of two activations
(attention's, per head: on the tiles, the right operand copied into pair panels), one whose heads are
merged into rows afterwards.

usage: test_bf16_precision.py --source-root DIR --kiln KILN_CLI [--python VENV_PYTHON]
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
rng = np.random.default_rng(29)
bf16 = python_test_env.round_to_bf16


def compile_and_run(work, name, model, inputs, precision):
    """Compiles `model` with --precision `precision` and runs it; returns (stderr of the compile
    with KILN_DEBUG=3, weight bytes, y as f64), or None after a failed check."""
    plan = os.path.join(work, f"{name}_{precision}.kiln")
    compiled = kiln("compile", model, "-o", plan, "--precision", precision, env_extra={"KILN_DEBUG": "3"})
    check(compiled.returncode == 0, f"kiln compile {name} --precision {precision}: {compiled.stderr.strip()[-400:]}")
    if compiled.returncode != 0:
        return None
    arguments, out_dir = [], os.path.join(work, f"{name}_{precision}")
    for input_name, value in inputs.items():
        path = os.path.join(work, f"{name}_{input_name}.npy")
        np.save(path, value)
        arguments += ["--input", f"{input_name}={path}"]
    ran = kiln("run", plan, *arguments, "--output-dir", out_dir, "--output-format", "npy")
    check(ran.returncode == 0, f"kiln run {name}: {ran.stderr.strip()[-400:]}")
    if ran.returncode != 0:
        return None
    weights = int(re.search(r"weights: (\d+) bytes", kiln("inspect", plan).stdout).group(1))
    return compiled.stderr, weights, np.load(os.path.join(out_dir, "y.npy")).astype(np.float64)


amx = python_test_env.amx_bf16_target()
with tempfile.TemporaryDirectory(prefix="kiln_bf16_test_") as work:
    bad = kiln("compile", "model.onnx", "-o", os.path.join(work, "x.kiln"), "--precision", "fp8")
    check(bad.returncode == 2 and "--precision needs fp32 or bf16" in bad.stderr,
          f"--precision fp8 is a usage error (exit {bad.returncode}: {bad.stderr.strip()[-200:]})")

    cases = [
        # name, op, x shape, K, N
        ("matmul_64x96x80", "MatMul", (1, 64, 96), 96, 80),
        ("matmul_50x128x72", "MatMul", (50, 128), 128, 72),
        ("matmul_batch_k24", "MatMul", (2, 40, 24), 24, 33),
        ("matmul_128x256x128", "MatMul", (128, 256), 256, 128),
        ("gemm_transb", "Gemm", (33, 64), 64, 40),
        ("matmul_8_rows", "MatMul", (8, 64), 64, 48),
        ("gemm_1_row_large_weight", "Gemm", (1, 512), 512, 520),
        ("matmul_of_inputs", "MatMulInputs", (40, 64), 64, 48),
    ]
    for name, op, x_shape, k, n in cases:
        w = (rng.standard_normal((n, k) if op == "Gemm" else (k, n)) * 0.2).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        x = rng.standard_normal(x_shape).astype(np.float32)
        inputs, initializers = {"x": x}, []
        if op == "Gemm":
            nodes = [helper.make_node("Gemm", ["x", "w", "bias"], ["y"], transB=1, alpha=0.5)]
            initializers = [("w", w), ("bias", bias)]
            weight = w.T.astype(np.float64)
        elif op == "MatMul":
            nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "bias"], ["y"])]
            initializers = [("w", w), ("bias", bias)]
            weight = w.astype(np.float64)
        else:  # both operands are graph inputs: no weight to store in bf16
            nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
            inputs["w"] = w
            weight = w.astype(np.float64)
        graph_inputs = [helper.make_tensor_value_info(i, TensorProto.FLOAT, list(v.shape)) for i, v in inputs.items()]
        y_shape = list(x_shape[:-1]) + [n]
        model = os.path.join(work, name + ".onnx")
        python_test_env.save_model(model, nodes, graph_inputs,
                                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], initializers)
        scale = 0.5 if op == "Gemm" else 1.0
        added = bias.astype(np.float64) if op != "MatMulInputs" else 0.0
        fp32_want = scale * (x.astype(np.float64) @ weight) + added
        bf16_want = scale * (bf16(x) @ bf16(weight.astype(np.float32))) + added
        gap = np.abs(fp32_want - bf16_want).max() / np.abs(bf16_want).max()

        fp32_run = compile_and_run(work, name, model, inputs, "fp32")
        bf16_run = compile_and_run(work, name, model, inputs, "bf16")
        if fp32_run is None or bf16_run is None:
            continue
        fp32_error = np.abs(fp32_run[2] - fp32_want).max() / np.abs(fp32_want).max()
        check(fp32_error < 1e-5, f"{name}: the fp32 plan is the fp32 product (relative {fp32_error:.2e})")
        stderr, weights, got = bf16_run
        stays_fp32 = "so its matmuls stay fp32" in stderr
        if amx is None:  # (no /proc/cpuinfo: the compile's own word decides)
            amx = not stays_fp32
        rows = int(np.prod(x_shape[:-1]))
        # (fewer rows stay fp32, unless the weight has 256Ki elements or more: a padded block)
        takes_bf16 = amx and op != "MatMulInputs" and (rows >= 32 or k * n >= 256 * 1024)
        want = bf16_want if takes_bf16 else fp32_want
        error = np.abs(got - want).max() / np.abs(want).max()
        check(error < 1e-5 and error < gap / 20,
              f"{name}: the {'bf16' if takes_bf16 else 'fp32'} product (relative {error:.2e}; bf16 vs fp32 {gap:.2e})")
        check(stays_fp32 == (not amx), f"{name}: the compile says the matmuls stay fp32 exactly without AMX")
        if takes_bf16:
            # K padded to whole tile steps and N to whole 32-column panels, then 2 bytes a value.
            padded = 2 * (-(-k // 32) * 32) * (-(-n // 32) * 32)
            check(padded <= weights <= padded + 4 * n + 256,
                  f"{name}: the weight stored in 2 bytes a value, padded ({weights} bytes; {padded} for the weight)")
            check("on AMX tiles" in stderr, f"{name}: the product ran on AMX tiles")
        if takes_bf16 and "on AMX tiles" in stderr:
            # A plan holding tile code names the feature on a CPU (here: one that hides it) without it.
            plan = os.path.join(work, f"{name}_bf16.kiln")
            refused = kiln("run", plan, *sum([["--input", f"{i}={os.path.join(work, f'{name}_{i}.npy')}"]
                                              for i in inputs], []), "--output-dir", os.path.join(work, "refused"),
                           env_extra={"KILN_HIDE_CPU_FEATURES": "amx-tile"})
            check(refused.returncode != 0 and "amx-tile" in refused.stderr,
                  f"{name}: the plan is refused where amx-tile is absent ({refused.stderr.strip()[-160:]})")

    # Products of two activations with the same batch axes (attention's scores and context, per
    # head) take the tiles too, the right operand copied into pair panels at run time; the second
    # case merges the heads into rows afterwards, as BERT's context does before its projection.
    for name, batch, m, k, n, merge in [("batched_of_inputs", 3, 64, 48, 80, False),
                                         ("batched_then_merged", 2, 40, 64, 32, True)]:
        a = rng.standard_normal((batch, m, k)).astype(np.float32)
        b = rng.standard_normal((batch, k, n)).astype(np.float32)
        nodes = [helper.make_node("MatMul", ["a", "b"], ["p" if merge else "y"])]
        initializers = []
        y_shape = [batch, m, n]
        if merge:
            nodes += [helper.make_node("Transpose", ["p"], ["t"], perm=[1, 0, 2]),
                      helper.make_node("Reshape", ["t", "shape"], ["y"])]
            initializers = [("shape", np.array([m, batch * n], dtype=np.int64))]
            y_shape = [m, batch * n]
        model = os.path.join(work, name + ".onnx")
        python_test_env.save_model(model, nodes,
                                   [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a.shape)),
                                    helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b.shape))],
                                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], initializers)

        def shaped(product):
            return product.transpose(1, 0, 2).reshape(y_shape) if merge else product

        fp32_want = shaped(a.astype(np.float64) @ b.astype(np.float64))
        bf16_want = shaped(bf16(a) @ bf16(b))
        gap = np.abs(fp32_want - bf16_want).max() / np.abs(bf16_want).max()
        bf16_run = compile_and_run(work, name, model, {"a": a, "b": b}, "bf16")
        if bf16_run is None:
            continue
        stderr, _, got = bf16_run
        want = bf16_want if amx else fp32_want
        error = np.abs(got - want).max() / np.abs(want).max()
        check(error < 1e-5 and error < gap / 20,
              f"{name}: the {'bf16' if amx else 'fp32'} product (relative {error:.2e}; bf16 vs fp32 {gap:.2e})")
        check(("on AMX tiles" in stderr) == bool(amx), f"{name}: on AMX tiles exactly where the target has them")
    print(f"AMX bf16 tiles on this CPU target: {amx}")

sys.exit(checks.finish())
