#!/usr/bin/env python3
"""A model as exporters write it over [batch, sequence]: its shapes come from Shape → Gather →
Unsqueeze → Concat chains (head split and merge by Reshape), Range(0, sequence) position ids,
ConstantOfShape and Expand over computed shapes (one through torch's Equal/Where for a -1), and Size
used as data. Compiled once with the
dims symbolic, those chains fold into size expressions (docs/symbolic-shapes.md, decision 9), and
the plan runs at six shapes against onnxruntime. A shape value that a node needs as constants
(Slice's ends) is refused with an error naming the node.

Run by meson (test 'symbolic-shape-subgraph'); skipped (77) without numpy, onnx or onnxruntime.
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
rng = np.random.default_rng(7)
VOCAB, WIDTH, POSITIONS = 50, 16, 64


def weight(*shape):
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


def ints(*values):
    return np.array(values, np.int64)


initializers = [
    ("emb", weight(VOCAB, WIDTH)), ("positions", weight(POSITIONS, WIDTH)), ("wq", weight(WIDTH, WIDTH)),
    ("i0", np.array(0, np.int64)), ("i1", np.array(1, np.int64)), ("axis0", ints(0)), ("heads", ints(2)),
    ("head_width", ints(8)), ("minus1", ints(-1)), ("zero", np.array(0, np.int64)), ("one", np.array(1, np.int64)),
    ("width", ints(WIDTH)), ("row", weight(1, 1, WIDTH)),
]
node = helper.make_node
nodes = [
    node("Gather", ["emb", "ids"], ["tokens"], name="embed"),
    node("Shape", ["ids"], ["ids_shape"], name="ids_shape"),
    node("Gather", ["ids_shape", "i0"], ["batch"], name="batch"),
    node("Gather", ["ids_shape", "i1"], ["sequence"], name="sequence"),
    node("Unsqueeze", ["batch", "axis0"], ["batch_1d"], name="batch_1d"),
    node("Unsqueeze", ["sequence", "axis0"], ["sequence_1d"], name="sequence_1d"),
    node("Range", ["zero", "sequence", "one"], ["position_ids"], name="position_ids"),
    node("Gather", ["positions", "position_ids"], ["placed"], name="place"),
    node("Add", ["tokens", "placed"], ["x"], name="add_positions"),
    node("MatMul", ["x", "wq"], ["q"], name="query"),
    node("Concat", ["batch_1d", "sequence_1d", "heads", "head_width"], ["head_shape"], axis=0, name="head_shape"),
    node("Reshape", ["q", "head_shape"], ["q_heads"], name="split_heads"),
    node("Transpose", ["q_heads"], ["q_t"], perm=[0, 2, 1, 3], name="q_t"),
    node("Transpose", ["q_heads"], ["k_t"], perm=[0, 2, 3, 1], name="k_t"),
    node("MatMul", ["q_t", "k_t"], ["scores"], name="scores"),
    node("Softmax", ["scores"], ["probs"], axis=-1, name="softmax"),
    node("MatMul", ["probs", "q_t"], ["context"], name="context"),
    node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3], name="context_t"),
    node("Concat", ["batch_1d", "sequence_1d", "minus1"], ["merged_shape"], axis=0, name="merged_shape"),
    node("Reshape", ["context_t", "merged_shape"], ["attended"], name="merge_heads"),
    node("Concat", ["batch_1d", "sequence_1d"], ["token_shape"], axis=0, name="token_shape"),
    node("ConstantOfShape", ["token_shape"], ["ones"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
         name="ones"),
    node("Unsqueeze", ["ones", "minus1"], ["ones_3d"], name="ones_3d"),
    node("Shape", ["attended"], ["attended_shape"], name="attended_shape"),
    node("Expand", ["ones_3d", "attended_shape"], ["weights"], name="weights"),
    node("Mul", ["attended", "weights"], ["weighted"], name="weighted"),
    node("ReduceMean", ["weighted"], ["pooled"], axes=[1], keepdims=0, name="pool"),
    node("Size", ["ids"], ["token_count"], name="token_count"),
    node("Cast", ["token_count"], ["token_count_f"], to=TensorProto.FLOAT, name="token_count_f"),
    node("Mul", ["pooled", "token_count_f"], ["summed"], name="summed"),
    # torch's x.expand(batch, -1, 16): the -1 replaced by 1 through Equal and Where, then Expand.
    node("Concat", ["batch_1d", "minus1", "width"], ["wanted"], axis=0, name="wanted"),
    node("Equal", ["wanted", "minus1"], ["is_kept"], name="is_kept"),
    node("Shape", ["wanted"], ["wanted_rank"], name="wanted_rank"),
    node("ConstantOfShape", ["wanted_rank"], ["all_ones"], value=helper.make_tensor("o", TensorProto.INT64, [1], [1]),
         name="all_ones"),
    node("Where", ["is_kept", "all_ones", "wanted"], ["expand_shape"], name="expand_shape"),
    node("Expand", ["row", "expand_shape"], ["rows"], name="rows"),
    node("Mul", ["attended", "rows"], ["scaled_rows"], name="scaled_rows"),
]
inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "sequence"])]
outputs = [helper.make_tensor_value_info("attended", TensorProto.FLOAT, ["batch", "sequence", WIDTH]),
           helper.make_tensor_value_info("summed", TensorProto.FLOAT, ["batch", WIDTH]),
           helper.make_tensor_value_info("scaled_rows", TensorProto.FLOAT, ["batch", "sequence", WIDTH])]

with tempfile.TemporaryDirectory() as folder:
    model_path = os.path.join(folder, "exported.onnx")
    plan_path = os.path.join(folder, "exported.kiln")
    python_test_env.save_model(model_path, nodes, inputs, outputs, initializers, opset=13)
    compiled = checks.kiln("compile", model_path, "-o", plan_path, "--shape", "batch=1..4", "--shape", "sequence=1..64")
    check(compiled.returncode == 0, "kiln compile folds the shape subgraphs with batch=1..4 and sequence=1..64")
    if compiled.returncode != 0:
        checks.finish()
    reference = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    with kiln.Plan(plan_path) as plan:
        for batch, sequence in [(1, 1), (1, 7), (2, 16), (3, 33), (4, 64), (2, 9)]:
            feed = {"ids": rng.integers(0, VOCAB, size=(batch, sequence), dtype=np.int64)}
            got = plan.run(feed)
            names = ["attended", "summed", "scaled_rows"]
            for name, want in zip(names, reference.run(names, feed)):
                shape_ok = got[name].shape == want.shape
                # `summed` is a mean times batch·sequence: its error grows with the token count.
                scale = max(1.0, float(np.max(np.abs(want))))
                difference = float(np.max(np.abs(got[name] - want))) / scale if shape_ok else float("inf")
                check(shape_ok and difference <= 1e-5,
                      f"batch={batch} sequence={sequence}: {name} {got[name].shape} against onnxruntime, "
                      f"max |difference| / max(1, max |value|) {difference:.2e}")

    # Slice's ends computed from a symbolic shape: a view of a known start up to that size (a table
    # of positions cut to the sequence's length; here the whole axis, so y is x).
    slice_nodes = [node("Shape", ["x"], ["x_shape"], name="x_shape"),
                   node("Gather", ["x_shape", "axis1"], ["length"], name="length"),
                   node("Slice", ["x", "start", "length", "axis1"], ["y"], name="cut")]
    slice_path = os.path.join(folder, "slice.onnx")
    python_test_env.save_model(slice_path, slice_nodes,
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence"])],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", None])],
                               [("axis1", ints(1)), ("start", ints(0))], opset=13)
    cut = checks.kiln("compile", slice_path, "-o", slice_path + ".kiln", "--shape", "batch=1..4", "--shape",
                      "sequence=1..64")
    check(cut.returncode == 0, "a Slice whose end is a symbolic size compiles")
    if cut.returncode == 0:
        with kiln.Plan(slice_path + ".kiln") as plan:
            x = rng.standard_normal((3, 7)).astype(np.float32)
            check(np.array_equal(plan.run({"x": x})["y"], x), "and cuts x[:, 0:sequence] at (3, 7)")

    # A start computed from a symbolic shape (the last two elements): needed as a constant, refused
    # by name.
    tail_nodes = [node("Shape", ["x"], ["x_shape"], name="x_shape"),
                  node("Gather", ["x_shape", "axis1"], ["length"], name="length"),
                  node("Sub", ["length", "two"], ["start"], name="start"),
                  node("Slice", ["x", "start", "length", "axis1"], ["y"], name="tail")]
    tail_path = os.path.join(folder, "tail.onnx")
    python_test_env.save_model(tail_path, tail_nodes,
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence"])],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])],
                               [("axis1", ints(1)), ("two", ints(2))], opset=13)
    refused = checks.kiln("compile", tail_path, "-o", tail_path + ".kiln", "--shape", "batch=1..4", "--shape",
                          "sequence=2..64")
    check(refused.returncode == 1 and "node 'tail' (Slice, opset 13)" in refused.stderr and
          "known only when the plan runs" in refused.stderr,
          "a Slice whose start comes from a symbolic shape is refused, naming the node")

checks.finish()
