"""A dimension the model leaves unnamed ('?', as Keras/tf2onnx and some torch exports write it) kept
symbolic from the command line: `kiln compile --shape 'x[0]=1..8'` makes one plan with a size
variable named x[0], which `kiln inspect` shows and `kiln run` takes at any size in its range (a
ReLU and a conv over a batch of any size, checked against numpy at three sizes).

usage: test_unnamed_dims.py --source-root DIR --kiln KILN_CLI [--python VENV_PYTHON]
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

rng = np.random.default_rng(7)
weight = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)


def reference(x):
    """relu(x) and the 1x1 conv of x with `weight`, then its global average."""
    conv = np.einsum("fc,nchw->nfhw", weight[:, :, 0, 0], x)
    return np.maximum(x, 0), conv.mean(axis=(2, 3))


with tempfile.TemporaryDirectory(prefix="kiln_unnamed_") as work:
    model = os.path.join(work, "model.onnx")
    python_test_env.save_model(
        model,
        [helper.make_node("Relu", ["x"], ["relu"], name="relu"),
         helper.make_node("Conv", ["x", "w"], ["conv"], name="conv"),
         helper.make_node("GlobalAveragePool", ["conv"], ["pooled"], name="pool"),
         helper.make_node("Flatten", ["pooled"], ["features"], name="flatten")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, 5, 5])],
        [helper.make_tensor_value_info("relu", TensorProto.FLOAT, [None, 3, 5, 5]),
         helper.make_tensor_value_info("features", TensorProto.FLOAT, [None, 4])],
        [("w", weight)])
    plan = os.path.join(work, "model.kiln")

    unbound = kiln("compile", model, "-o", plan)
    check(unbound.returncode == 1 and "give 'x[0]=N', or 'x[0]=MIN..MAX' to keep it symbolic" in unbound.stderr,
          "an unnamed dimension's error gives the flag that names it")
    compiled = kiln("compile", model, "-o", plan, "--shape", "x[0]=1..8")
    check(compiled.returncode == 0, "kiln compile --shape 'x[0]=1..8'")
    inspect = kiln("inspect", plan).stdout
    check(re.search(r"x\[0\]: 1\.\.8", inspect) is not None and "(x[0], 3, 5, 5)" in inspect,
          "kiln inspect shows the variable x[0] and the input's shape over it")
    for batch in (1, 3, 8):
        x = rng.standard_normal((batch, 3, 5, 5)).astype(np.float32)
        np.save(os.path.join(work, "x.npy"), x)
        out = os.path.join(work, f"out{batch}")
        run = kiln("run", plan, "--input", f"x={work}/x.npy", "--output-dir", out, "--output-format", "npy")
        relu, features = reference(x)
        ok = run.returncode == 0
        if ok:
            got_relu, got_features = np.load(f"{out}/relu.npy"), np.load(f"{out}/features.npy")
            ok = (got_relu.shape == relu.shape and np.array_equal(got_relu, relu) and
                  got_features.shape == features.shape and np.allclose(got_features, features, atol=1e-5))
        check(ok, f"the plan runs at batch {batch} as numpy computes")
    too_big = np.zeros((9, 3, 5, 5), np.float32)
    np.save(os.path.join(work, "big.npy"), too_big)
    refused = kiln("run", plan, "--input", f"x={work}/big.npy", "--output-dir", work)
    check(refused.returncode == 1 and "x[0]" in refused.stderr and "1..8" in refused.stderr,
          "a batch of 9 is refused, naming x[0] and its range")

checks.finish()
