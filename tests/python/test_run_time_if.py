"""An ONNX If whose condition is an input's value, compiled into one plan (issue 14, item 4).

The model mirrors a voice-activity detector's switch on its sample-rate input: the condition is
Equal(sr, 16000); the then branch scales and offsets x through a weight, the else branch uses
another weight and a reduction, both giving float32 (2, 4). The plan is compiled once (`kiln
compile`) and run (`kiln run`) with sr = 16000 and sr = 8000, each against numpy. A model
whose branches give different output shapes is one plan too: the run decides the output's shape
(test_run_time_if_plan.py has the rest: branches that cannot be built, NMS in a branch).

usage: test_run_time_if.py --source-root DIR --kiln KILN_CLI [--python VENV_PYTHON]
"""
import os
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
rng = np.random.default_rng(11)



def branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
sr_info = helper.make_tensor_value_info("sr", TensorProto.INT64, [])
y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
scale = rng.standard_normal((2, 4)).astype(np.float32)
offset = rng.standard_normal((4,)).astype(np.float32)
equal_16k = [helper.make_node("Constant", [], ["k16"], value=numpy_helper.from_array(np.array(16000, np.int64))),
             helper.make_node("Equal", ["sr", "k16"], ["is_16k"])]

with tempfile.TemporaryDirectory(prefix="kiln_run_time_if_") as work:
    # then: x * scale + offset; else: x - mean(x, axis 1) (a reduction in the branch).
    then_branch = branch("then", [helper.make_node("Mul", ["x", "scale"], ["xs"]),
                                  helper.make_node("Add", ["xs", "offset"], ["then_y"])],
                         [helper.make_tensor_value_info("then_y", TensorProto.FLOAT, [2, 4])])
    else_branch = branch("else", [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
                                  helper.make_node("Sub", ["x", "m"], ["else_y"])],
                         [helper.make_tensor_value_info("else_y", TensorProto.FLOAT, [2, 4])])
    model = os.path.join(work, "switch.onnx")
    save_model(model, equal_16k + [helper.make_node("If", ["is_16k"], ["y"], name="by_rate",
                                                    then_branch=then_branch, else_branch=else_branch)],
               [x_info, sr_info], [y_info], [("scale", scale), ("offset", offset)])
    plan = os.path.join(work, "switch.kiln")
    check(kiln("compile", model, "-o", plan).returncode == 0, "an If on an input's value compiles to a plan")

    x = rng.standard_normal((2, 4)).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    expected = {16000: x * scale + offset, 8000: x - x.mean(axis=1, keepdims=True)}
    for rate, want in expected.items():
        np.save(os.path.join(work, "sr.npy"), np.array(rate, np.int64))
        out = os.path.join(work, f"out_{rate}")
        ran = kiln("run", plan, "--input", f"x={work}/x.npy", "--input", f"sr={work}/sr.npy",
                   "--output-dir", out, "--output-format", "npy")
        check(ran.returncode == 0, f"the plan runs with sr={rate}")
        if ran.returncode == 0:
            got = np.load(os.path.join(out, "y.npy"))
            check(np.allclose(got, want, rtol=1e-5, atol=1e-6),
                  f"sr={rate} takes the {'then' if rate == 16000 else 'else'} branch (max error "
                  f"{np.abs(got - want).max():.2e})")

    # Branches of different shapes: the output's length along axis 1 is decided by the run (4 or
    # 8; docs/symbolic-shapes.md, decision 20), and each run gives its branch's shape.
    wide_else = branch("else", [helper.make_node("Concat", ["x", "x"], ["wide"], axis=1)],
                       [helper.make_tensor_value_info("wide", TensorProto.FLOAT, [2, 8])])
    model = os.path.join(work, "shapes.onnx")
    save_model(model, equal_16k + [helper.make_node("If", ["is_16k"], ["y"], name="by_rate",
                                                    then_branch=then_branch, else_branch=wide_else)],
               [x_info, sr_info], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", "cols"])],
               [("scale", scale), ("offset", offset)])
    compiled = kiln("compile", model, "-o", os.path.join(work, "shapes.kiln"))
    check(compiled.returncode == 0, "branches with different shapes compile to one plan")
    expected = {16000: x * scale + offset, 8000: np.concatenate([x, x], axis=1)}
    for rate, want in expected.items():
        np.save(os.path.join(work, "sr.npy"), np.array(rate, np.int64))
        out = os.path.join(work, f"shapes_{rate}")
        ran = kiln("run", os.path.join(work, "shapes.kiln"), "--input", f"x={work}/x.npy", "--input",
                   f"sr={work}/sr.npy", "--output-dir", out, "--output-format", "npy")
        check(ran.returncode == 0, f"the plan runs with sr={rate}")
        if ran.returncode == 0:
            got = np.load(os.path.join(out, "y.npy"))
            check(got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6),
                  f"sr={rate} gives its branch's shape {want.shape}: {got.shape}")

checks.finish()
