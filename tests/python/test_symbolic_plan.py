"""One plan for every batch size and sequence length (issue 14): a sentence-embedding model over
inputs [batch, sequence] is compiled once with `kiln compile --shape batch=1..8 --shape
sequence=1..64` and run through libkiln (the Python binding) at six shapes, each against
onnxruntime running the same model. Then the misuse cases of the C API: a size out of range, a
wrong rank, two inputs that give `batch` different values; each is a kiln.Error naming the input,
and the plan still runs correctly afterwards.

The model, built with onnx.helper: an embedding (Gather), single-head attention (three MatMuls, a
Transpose, a scaled and masked Softmax, a MatMul) and masked mean pooling over the sequence
(ReduceSum of the masked values over ReduceSum of the mask). Outputs: the pooled embedding
[batch, 16] and the attended values [batch, sequence, 16].

With --target opencl or cuda the same plan is compiled for that device (its kernels take the
variables as integer parameters, docs/backends.md) and held to the same checks; --probe names the
program that says whether the device is there (exit 77, skipped, where it is not).

usage: test_symbolic_plan.py --source-root DIR --kiln KILN_CLI --libkiln LIBKILN [--python VENV_PYTHON]
                             [--target cpu|opencl|cuda --probe PROBE]
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
rng = np.random.default_rng(5)
VOCAB, WIDTH = 50, 16


def weight(*shape):
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


initializers = [
    ("emb", weight(VOCAB, WIDTH)), ("wq", weight(WIDTH, WIDTH)), ("wk", weight(WIDTH, WIDTH)),
    ("wv", weight(WIDTH, WIDTH)), ("scale", np.array(0.25, np.float32)), ("one", np.array(1.0, np.float32)),
    ("masked_out", np.array(-1e4, np.float32)), ("axis1", np.array([1], np.int64)), ("axis2", np.array([2], np.int64)),
]
nodes = [
    helper.make_node("Gather", ["emb", "ids"], ["h"], name="embed"),
    helper.make_node("MatMul", ["h", "wq"], ["q"], name="query"),
    helper.make_node("MatMul", ["h", "wk"], ["k"], name="key"),
    helper.make_node("MatMul", ["h", "wv"], ["v"], name="value"),
    helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="key_t"),
    helper.make_node("MatMul", ["q", "kt"], ["s0"], name="scores"),
    helper.make_node("Mul", ["s0", "scale"], ["s1"], name="scaled"),
    helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT, name="mask_float"),
    helper.make_node("Unsqueeze", ["maskf", "axis1"], ["mask_keys"], name="mask_keys"),
    helper.make_node("Sub", ["one", "mask_keys"], ["padding"], name="padding"),
    helper.make_node("Mul", ["padding", "masked_out"], ["bias"], name="bias"),
    helper.make_node("Add", ["s1", "bias"], ["s2"], name="masked"),
    helper.make_node("Softmax", ["s2"], ["p"], axis=-1, name="softmax"),
    helper.make_node("MatMul", ["p", "v"], ["attended"], name="attend"),
    helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask_values"], name="mask_values"),
    helper.make_node("Mul", ["attended", "mask_values"], ["kept"], name="keep"),
    helper.make_node("ReduceSum", ["kept", "axis1"], ["total"], keepdims=0, name="pool_total"),
    helper.make_node("ReduceSum", ["mask_values", "axis1"], ["count"], keepdims=0, name="pool_count"),
    helper.make_node("Div", ["total", "count"], ["pooled"], name="pool"),
]
inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "sequence"]),
          helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "sequence"])]
outputs = [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", WIDTH]),
           helper.make_tensor_value_info("attended", TensorProto.FLOAT, ["batch", "sequence", WIDTH])]


def batch_inputs(batch, sequence):
    ids = rng.integers(0, VOCAB, size=(batch, sequence), dtype=np.int64)
    # Each sentence has 1..sequence real tokens, the rest padding.
    lengths = rng.integers(1, sequence + 1, size=batch)
    mask = (np.arange(sequence)[None, :] < lengths[:, None]).astype(np.int64)
    return {"ids": ids, "mask": mask}


def expect_error(what, run, *fragments):
    try:
        run()
    except kiln.Error as error:
        message = str(error)
        missing = [fragment for fragment in fragments if fragment not in message]
        check(not missing and error.status == "KILN_ERROR_INVALID_ARGUMENT",
              f"{what}: {error.status} {message!r}" + (f" (missing {missing})" if missing else ""))
        return
    check(False, f"{what}: no error")


with tempfile.TemporaryDirectory() as folder:
    model_path = os.path.join(folder, "sentence_embedding.onnx")
    plan_path = os.path.join(folder, "sentence_embedding.kiln")
    python_test_env.save_model(model_path, nodes, inputs, outputs, initializers)
    target = ["--target", args.target]
    compiled = checks.kiln("compile", model_path, "-o", plan_path, "--shape", "batch=1..8", "--shape", "sequence=1..64",
                           *target)
    check(compiled.returncode == 0, f"kiln compile --target {args.target} with batch=1..8 and sequence=1..64")
    if compiled.returncode != 0:
        checks.finish()
    unbound = checks.kiln("compile", model_path, "-o", plan_path + ".unbound", *target)
    check(unbound.returncode != 0 and "'batch=MIN..MAX' to keep it symbolic" in unbound.stderr,
          "kiln compile without --shape names the unbound dims and suggests a range")
    on_input = checks.kiln("compile", model_path, "-o", plan_path + ".bad", "--shape", "ids=1..4", *target)
    check(on_input.returncode != 0 and "'ids' is an input" in on_input.stderr, "a range for an input's name is refused")
    inspected = checks.kiln("inspect", plan_path)
    check("batch" in inspected.stdout and "sequence" in inspected.stdout and "1..64" in inspected.stdout,
          "kiln inspect shows the variables and their ranges")

    reference = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    with kiln.Plan(plan_path) as plan:
        check(plan.variables == {"batch": (1, 8), "sequence": (1, 64)}, f"the plan's variables: {plan.variables}")
        # A shape twice in a row and again after others: a run context keeps what it prepared for
        # the last shape (plan_runner.cpp, prepared_for) and must prepare again when it changes.
        shapes = [(1, 1), (1, 7), (1, 7), (2, 16), (3, 33), (8, 64), (5, 2), (1, 7), (8, 64)]
        for batch, sequence in shapes:
            feed = batch_inputs(batch, sequence)
            got = plan.run(feed)
            want = dict(zip(["pooled", "attended"], reference.run(["pooled", "attended"], feed)))
            for name in ("pooled", "attended"):
                same_shape = got[name].shape == want[name].shape
                error = float(np.max(np.abs(got[name] - want[name]))) if same_shape and want[name].size else 0.0
                check(same_shape and error <= 1e-4,
                      f"batch={batch} sequence={sequence}: {name} {got[name].shape} against onnxruntime, "
                      f"max |difference| {error:.2e}")

        good = batch_inputs(2, 5)
        expect_error("a sequence longer than the range", lambda: plan.run(batch_inputs(1, 65)),
                     "ids", "sequence", "65", "1..64")
        expect_error("a batch above the range", lambda: plan.run(batch_inputs(9, 3)), "batch", "9", "1..8")
        expect_error("a wrong rank", lambda: plan.run({"ids": good["ids"][0], "mask": good["mask"]}), "ids", "rank")
        expect_error("two inputs giving batch different values",
                     lambda: plan.run({"ids": batch_inputs(2, 5)["ids"], "mask": batch_inputs(3, 5)["mask"]}),
                     "'ids' gives batch=2", "'mask' gives batch=3")
        again = plan.run(good)
        want = reference.run(["pooled"], good)[0]
        check(float(np.max(np.abs(again["pooled"] - want))) <= 1e-4, "after the errors the plan still runs correctly")

checks.finish()
