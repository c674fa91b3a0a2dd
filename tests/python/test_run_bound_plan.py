#!/usr/bin/env python3
"""Sizes the run decides (docs/symbolic-shapes.md, stage 6) through `kiln compile`, the Python
binding and `kiln run`: a model whose NonZero count is known only when the plan runs (NonZero of a
graph input, then a Transpose and a Gather of the input at those coordinates, as detectors use
it) compiles to ONE plan, and runs at inputs with no, some and all elements non-zero against
onnxruntime: the binding returns numpy arrays of the real shapes (Plan.run_bound names the
variable), `kiln run` writes outputs of those shapes. Then a parameter fed as a graph input (a
ReduceSum's axes): refused by `kiln compile` with a message naming it as a parameter, and with
`--value axes=1` compiled for that value, which every run checks (decision 19).

Run by meson (test 'run-bound-plan'); skipped (77) without numpy, onnx or onnxruntime.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args, onnxruntime, kiln = python_test_env.binding_test_setup()

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

checks = python_test_env.Checks(args.kiln)
check = checks.check
rng = np.random.default_rng(53)
node = helper.make_node
nodes = [
    node("NonZero", ["x"], ["where"], name="nz"),
    node("Transpose", ["where"], ["coordinates"], perm=[1, 0], name="coordinates"),
    node("GatherND", ["x", "coordinates"], ["picked"], name="picked"),
]
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])]
outputs = [helper.make_tensor_value_info("where", TensorProto.INT64, [2, None]),
           helper.make_tensor_value_info("picked", TensorProto.FLOAT, [None])]

cases = {
    "none": np.zeros((3, 5), np.float32),
    "all": rng.uniform(1, 2, (3, 5)).astype(np.float32),
    "some": np.where(rng.uniform(size=(3, 5)) < 0.4, rng.standard_normal((3, 5)), 0).astype(np.float32),
    "one": np.pad(np.array([[7.0]], np.float32), ((2, 0), (4, 0))),
}

with tempfile.TemporaryDirectory() as folder:
    model_path = os.path.join(folder, "nonzero.onnx")
    plan_path = os.path.join(folder, "nonzero.kiln")
    python_test_env.save_model(model_path, nodes, inputs, outputs, [], opset=13)
    compiled = checks.kiln("compile", model_path, "-o", plan_path)
    check(compiled.returncode == 0, f"kiln compile makes one plan of a NonZero over a graph input {compiled.stderr[-400:]}")
    if compiled.returncode != 0:
        checks.finish()
    with open(plan_path, "rb") as plan_file:
        version = int.from_bytes(plan_file.read(12)[8:12], "little")
    check(version == 6, f"the plan is format version 6 (has a run binding): {version}")
    reference = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    with kiln.Plan(plan_path) as plan:
        check(plan.run_bound == {"NonZero(where)"} and plan.variables["NonZero(where)"] == (0, 15),
              f"the binding names the run-bound count and its range 0..15: {plan.run_bound} {plan.variables}")
        for label, x in cases.items():
            got = plan.run({"x": x})
            for name, want in zip(["where", "picked"], reference.run(["where", "picked"], {"x": x})):
                check(got[name].shape == want.shape and np.array_equal(got[name], want),
                      f"{label}: {name} {got[name].shape} equals onnxruntime's {want.shape}")

    # A detector's per-class top scores (torchvision's SSD): TopK over the NonZero-picked scores,
    # k = min(3, their count) built from their shape (Shape, Gather, Unsqueeze, Concat,
    # ReduceMin), so that k folds into a size expression of the run-bound count.
    top_nodes = nodes + [
        node("Shape", ["picked"], ["picked_shape"], name="shape"),
        node("Gather", ["picked_shape", "zero"], ["count"], axis=0, name="count"),
        node("Unsqueeze", ["count", "zero_axis"], ["count_1d"], name="count_1d"),
        node("Concat", ["three", "count_1d"], ["candidates"], axis=0, name="candidates"),
        node("ReduceMin", ["candidates"], ["k"], keepdims=1, name="k"),
        node("TopK", ["picked", "k"], ["top", "top_index"], axis=0, name="top"),
    ]
    constants = [("zero", np.array(0, np.int64)), ("zero_axis", np.array([0], np.int64)),
                 ("three", np.array([3], np.int64))]
    top_outputs = [helper.make_tensor_value_info("top", TensorProto.FLOAT, [None]),
                   helper.make_tensor_value_info("top_index", TensorProto.INT64, [None])]
    topk_path = os.path.join(folder, "topk.onnx")
    python_test_env.save_model(topk_path, top_nodes, inputs, top_outputs, constants, opset=13)
    compiled = checks.kiln("compile", topk_path, "-o", topk_path + ".kiln")
    check(compiled.returncode == 0, f"a TopK over a NonZero-sized axis, k = min(3, count), compiles {compiled.stderr[-400:]}")
    if compiled.returncode == 0:
        top_reference = onnxruntime.InferenceSession(topk_path, providers=["CPUExecutionProvider"])
        with kiln.Plan(topk_path + ".kiln") as plan:
            for label, x in cases.items():
                got = plan.run({"x": x})
                for name, want in zip(["top", "top_index"], top_reference.run(["top", "top_index"], {"x": x})):
                    check(got[name].shape == want.shape and np.array_equal(got[name], want),
                          f"TopK of {label}: {name} {got[name].tolist()} equals onnxruntime's {want.tolist()}")

    # kiln run: outputs written at the shapes the run reports.
    for label in ["some", "none"]:
        input_path = os.path.join(folder, f"{label}.pb")
        tensor = numpy_helper.from_array(cases[label], "x")
        with open(input_path, "wb") as out:
            out.write(tensor.SerializeToString())
        out_dir = os.path.join(folder, f"out_{label}")
        ran = checks.kiln("run", plan_path, "--input", f"x={input_path}", "--output-dir", out_dir)
        check(ran.returncode == 0, f"kiln run on '{label}' {ran.stderr[-300:]}")
        if ran.returncode == 0:
            want = reference.run(["where"], {"x": cases[label]})[0]
            got = python_test_env.read_tensor(os.path.join(out_dir, "where.pb"))
            check(got.shape == want.shape and np.array_equal(got, want),
                  f"kiln run '{label}': where.pb {got.shape} equals onnxruntime's {want.shape}")

    # A reduction whose axes are a graph input: a parameter, pinned with --value.
    reduce_path = os.path.join(folder, "reduce.onnx")
    python_test_env.save_model(reduce_path, [node("ReduceSum", ["x", "axes"], ["y"], keepdims=0, name="sum")],
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5]),
                                helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [], opset=13)
    refused = checks.kiln("compile", reduce_path, "-o", reduce_path + ".kiln")
    check(refused.returncode != 0 and "the value of graph input 'axes' is needed at compile time as a parameter" in
          refused.stderr and "--value axes=" in refused.stderr,
          "without --value, the axes input is refused as a parameter, naming --value")
    pinned = checks.kiln("compile", reduce_path, "-o", reduce_path + ".kiln", "--value", "axes=1")
    check(pinned.returncode == 0, f"with --value axes=1 it compiles {pinned.stderr[-300:]}")
    # The same through kiln.compile (compiler.h's kiln_compile_options.values): the same bytes.
    kiln.compile(reduce_path, reduce_path + ".api.kiln", values=["axes=1"])
    with open(reduce_path + ".kiln", "rb") as cli_plan, open(reduce_path + ".api.kiln", "rb") as api_plan:
        check(cli_plan.read() == api_plan.read(), "kiln.compile(values=['axes=1']) writes the CLI's plan byte for byte")
    if pinned.returncode == 0:
        reduce_reference = onnxruntime.InferenceSession(reduce_path, providers=["CPUExecutionProvider"])
        x = rng.standard_normal((3, 5)).astype(np.float32)
        with kiln.Plan(reduce_path + ".kiln") as plan:
            got = plan.run({"x": x, "axes": np.array([1], np.int64)})["y"]
            want = reduce_reference.run(["y"], {"x": x, "axes": np.array([1], np.int64)})[0]
            check(got.shape == want.shape and np.allclose(got, want, atol=1e-5), f"axes=1: {got.shape} as onnxruntime")
            try:
                plan.run({"x": x, "axes": np.array([0], np.int64)})
                check(False, "a run with axes=0 is refused")
            except kiln.Error as error:
                check("input 'axes' holds (0); this plan was compiled for (1) only (kiln compile --value axes=...)"
                      in str(error), f"a run with axes=0 is refused, naming both values: {error}")
            again = plan.run({"x": x, "axes": np.array([1], np.int64)})["y"]
            check(np.array_equal(again, got), "and the plan runs correctly afterwards")

    # TopK with k from a graph input: k is decided by the run, in 0..5.
    top_path = os.path.join(folder, "top_k.onnx")
    python_test_env.save_model(top_path, [node("TopK", ["x", "k"], ["values", "indices"], axis=1, name="top")],
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5]),
                                helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
                               [helper.make_tensor_value_info("values", TensorProto.FLOAT, [3, None]),
                                helper.make_tensor_value_info("indices", TensorProto.INT64, [3, None])], [], opset=13)
    top = checks.kiln("compile", top_path, "-o", top_path + ".kiln")
    check(top.returncode == 0, f"a TopK with k from an input compiles to one plan, no --value {top.stderr[-300:]}")
    if top.returncode == 0:
        top_reference = onnxruntime.InferenceSession(top_path, providers=["CPUExecutionProvider"])
        x = rng.standard_normal((3, 5)).astype(np.float32)
        with kiln.Plan(top_path + ".kiln") as plan:
            check(plan.run_bound == {"TopK(values)"} and plan.variables["TopK(values)"] == (0, 5),
                  f"k is decided by the run, in 0..5: {plan.variables}")
            for k in [0, 2, 5, 1]:
                feed = {"x": x, "k": np.array([k], np.int64)}
                got = plan.run(feed)
                for name, want in zip(["values", "indices"], top_reference.run(["values", "indices"], feed)):
                    check(got[name].shape == want.shape and np.array_equal(got[name], want),
                          f"k={k}: {name} {got[name].shape} equals onnxruntime's {want.shape}")
            for k, text in [([6], "node 'top' (TopK, opset 13) decided TopK(values)=6 in this run; the plan allows 0..5"),
                            ([-1], "node 'top' (TopK, opset 13) decided TopK(values)=-1 in this run; the plan allows 0..5"),
                            ([2, 3], "input 'k' axis 0 is 2; the plan expects 1")]:
                try:
                    plan.run({"x": x, "k": np.array(k, np.int64)})
                    check(False, f"k={k} is refused")
                except kiln.Error as error:
                    check(text in str(error) and error.status == "KILN_ERROR_INVALID_ARGUMENT",
                          f"k={k} is refused: {error}")
            got = plan.run({"x": x, "k": np.array([3], np.int64)})
            check(got["values"].shape == (3, 3), "and the plan runs correctly afterwards")

    # A shape read from an input at run time: --value shape=0..6 (each element a size in 0..6).
    shape_path = os.path.join(folder, "shape.onnx")
    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5])
    python_test_env.save_model(shape_path, [node("ConstantOfShape", ["shape"], ["y"], value=fill, name="fill"),
                                            node("Expand", ["row", "shape"], ["z"], name="spread")],
                               [helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
                                helper.make_tensor_value_info("row", TensorProto.FLOAT, [1, 1])],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None]),
                                helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, None])], [], opset=13)
    shaped = checks.kiln("compile", shape_path, "-o", shape_path + ".kiln", "--value", "shape=0..6")
    check(shaped.returncode == 0, f"--value shape=0..6 compiles ConstantOfShape and Expand to one plan {shaped.stderr[-300:]}")
    if shaped.returncode == 0:
        shape_reference = onnxruntime.InferenceSession(shape_path, providers=["CPUExecutionProvider"])
        row = np.array([[1.5]], np.float32)
        with kiln.Plan(shape_path + ".kiln") as plan:
            check(plan.run_bound == {"shape[0]", "shape[1]"}, f"both elements are decided by the run: {plan.run_bound}")
            for dims in [(2, 3), (0, 4), (6, 6), (1, 1)]:
                feed = {"shape": np.array(dims, np.int64), "row": row}
                got = plan.run(feed)
                for name, want in zip(["y", "z"], shape_reference.run(["y", "z"], feed)):
                    check(got[name].shape == want.shape and np.array_equal(got[name], want),
                          f"shape {dims}: {name} {got[name].shape} equals onnxruntime's {want.shape}")
            for dims, text in [((7, 1), "input 'shape' decided shape[0]=7 in this run; the plan allows 0..6"),
                               ((2, -1), "input 'shape' decided shape[1]=-1 in this run; the plan allows 0..6"),
                               ((2, 3, 4), "input 'shape' axis 0 is 3; the plan expects 2")]:
                try:
                    plan.run({"shape": np.array(dims, np.int64), "row": row})
                    check(False, f"shape {dims} is refused")
                except kiln.Error as error:
                    check(text in str(error) and error.status == "KILN_ERROR_INVALID_ARGUMENT",
                          f"shape {dims} is refused: {error}")
            check(plan.run({"shape": np.array([3, 2], np.int64), "row": row})["z"].shape == (3, 2),
                  "and the plan runs correctly afterwards")

    # Range(1, limit, 2) with a scalar limit read at run time (--value limit=0..10); the scalar input
    # also checks the binding's 0-d arrays.
    range_path = os.path.join(folder, "range.onnx")
    python_test_env.save_model(range_path, [node("Range", ["start", "limit", "delta"], ["r"], name="positions")],
                               [helper.make_tensor_value_info("limit", TensorProto.INT64, [])],
                               [helper.make_tensor_value_info("r", TensorProto.INT64, [None])],
                               [("start", np.array(1, np.int64)), ("delta", np.array(2, np.int64))], opset=13)
    ranged = checks.kiln("compile", range_path, "-o", range_path + ".kiln", "--value", "limit=0..10")
    check(ranged.returncode == 0, f"--value limit=0..10 compiles Range to one plan {ranged.stderr[-300:]}")
    if ranged.returncode == 0:
        with kiln.Plan(range_path + ".kiln") as plan:
            for limit in [0, 1, 2, 7, 10]:
                got = plan.run({"limit": np.array(limit, np.int64)})["r"]
                check(np.array_equal(got, np.arange(1, limit, 2)), f"limit={limit}: {got}")
            try:
                plan.run({"limit": np.array(11, np.int64)})
                check(False, "limit=11 is refused")
            except kiln.Error as error:
                check("input 'limit' decided limit=11 in this run; the plan allows 0..10" in str(error),
                      f"limit=11 is refused: {error}")

    # Slice's ends and Resize's sizes read at run time (--value ends=0..10 --value sizes=1..8).
    cut_path = os.path.join(folder, "cut.onnx")
    python_test_env.save_model(cut_path, [node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="cut"),
                                          node("Resize", ["img", "", "", "sizes"], ["z"], mode="nearest", name="resize")],
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [10]),
                                helper.make_tensor_value_info("ends", TensorProto.INT64, [1]),
                                helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 1, 4, 4]),
                                helper.make_tensor_value_info("sizes", TensorProto.INT64, [4])],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None]),
                                helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, None, None, None])],
                               [("starts", np.array([0], np.int64)), ("axes", np.array([0], np.int64))], opset=13)
    cut = checks.kiln("compile", cut_path, "-o", cut_path + ".kiln", "--value", "ends=0..10", "--value", "sizes=1..8")
    check(cut.returncode == 0, f"Slice's ends and Resize's sizes read at run time compile {cut.stderr[-300:]}")
    if cut.returncode == 0:
        cut_reference = onnxruntime.InferenceSession(cut_path, providers=["CPUExecutionProvider"])
        x = np.arange(10, dtype=np.float32)
        img = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
        with kiln.Plan(cut_path + ".kiln") as plan:
            for end, sizes in [(3, (1, 1, 8, 8)), (0, (1, 1, 2, 3)), (10, (1, 1, 4, 4)), (7, (1, 1, 5, 7))]:
                feed = {"x": x, "ends": np.array([end], np.int64), "img": img, "sizes": np.array(sizes, np.int64)}
                got = plan.run(feed)
                for name, want in zip(["y", "z"], cut_reference.run(["y", "z"], feed)):
                    check(got[name].shape == want.shape and np.allclose(got[name], want, atol=1e-6),
                          f"ends={end} sizes={sizes}: {name} {got[name].shape} as onnxruntime's {want.shape}")

    # Unique without an axis: the group count is decided by the run (1..n); sorted and unsorted.
    for sorted_flag in (1, 0):
        unique_path = os.path.join(folder, f"unique_{sorted_flag}.onnx")
        python_test_env.save_model(unique_path, [node("Unique", ["x"], ["y", "indices", "inverse", "counts"],
                                                      sorted=sorted_flag, name="unique")],
                                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None]),
                                    helper.make_tensor_value_info("indices", TensorProto.INT64, [None]),
                                    helper.make_tensor_value_info("inverse", TensorProto.INT64, [8]),
                                    helper.make_tensor_value_info("counts", TensorProto.INT64, [None])], [], opset=13)
        made = checks.kiln("compile", unique_path, "-o", unique_path + ".kiln")
        check(made.returncode == 0, f"Unique (sorted={sorted_flag}) over a graph input compiles {made.stderr[-300:]}")
        if made.returncode != 0:
            continue
        unique_reference = onnxruntime.InferenceSession(unique_path, providers=["CPUExecutionProvider"])
        names = ["y", "indices", "inverse", "counts"]
        with kiln.Plan(unique_path + ".kiln") as plan:
            for label, x in [("distinct", np.arange(8, dtype=np.float32).reshape(2, 4)[:, ::-1].copy()),
                             ("one value", np.full((2, 4), 3.5, np.float32)),
                             ("repeats", np.array([[2, 1, 1, 3], [4, 3, -0.0, 0.0]], np.float32))]:
                got = plan.run({"x": x})
                for name, want in zip(names, unique_reference.run(names, {"x": x})):
                    check(got[name].shape == want.shape and np.array_equal(got[name], want),
                          f"sorted={sorted_flag} {label}: {name} {got[name].tolist()} equals onnxruntime's {want.tolist()}")

checks.finish()
