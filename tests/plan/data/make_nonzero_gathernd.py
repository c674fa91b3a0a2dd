#!/usr/bin/env python3
"""Writes nonzero_gathernd.onnx beside this script: NonZero of a float32 [3, 5] input, transposed to
coordinates and gathered back with GatherND (opset 13) — a model whose output shapes the run decides
(docs/symbolic-shapes.md, stage 6), for test_run_bound.c, which needs no Python at test time.
Run with the project's .venv: .venv/bin/python3 tests/plan/data/make_nonzero_gathernd.py"""
import os

import onnx
from onnx import TensorProto, helper

nodes = [
    helper.make_node("NonZero", ["x"], ["where"], name="nz"),
    helper.make_node("Transpose", ["where"], ["coordinates"], perm=[1, 0], name="coordinates"),
    helper.make_node("GatherND", ["x", "coordinates"], ["picked"], name="picked"),
]
graph = helper.make_graph(nodes, "nonzero_gathernd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                          [helper.make_tensor_value_info("where", TensorProto.INT64, [2, "count"]),
                           helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["count"])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln tests")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "nonzero_gathernd.onnx"))
