#!/usr/bin/env python3
"""Per-run overhead of a tiny plan: kiln's C API against onnxruntime's Run on the same tiny model.

The model is a single Add of two float32[4] inputs (written with onnx.helper), so a run does almost
no arithmetic and its time is the engine's fixed cost per call. Reported, all with one thread:

  kiln C API          `kiln bench PLAN`: kiln_plan_run called from C++ (no interpreter in the loop)
  kiln Python         the Python binding python/kiln: plan.run(inputs, outputs=preallocated), ctypes
  kiln ctypes (bare)  kiln_plan_run through ctypes with the kiln_tensor structs built once: the
                      binding's own per-call Python work removed, ctypes' call cost kept
  ort Python          onnxruntime InferenceSession.run(None, feeds) (its Python binding, pybind11)
  ort Python iobind   onnxruntime run_with_iobinding with inputs and outputs bound once

onnxruntime has no C entry point reachable from Python, so its figures always include the Python
call overhead: compare them with kiln's Python rows for a like-for-like figure, and read
"kiln C API" as what an application embedding libkiln pays.

    python bench/tiny_overhead.py [--iterations N] [--repeats R] [--kiln build/tools/kiln]

Each figure is the median over --repeats timed batches of the per-call mean of --iterations calls
(`kiln bench` reports its own median of --iterations single calls, printed in ms to four decimals:
its resolution is 0.1 us).
"""

import argparse
import ctypes
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_model(path):
    x = helper.make_tensor_value_info("a", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])
    z = helper.make_tensor_value_info("sum", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["sum"])], "tiny_add", [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def per_call_us(function, iterations, repeats):
    for _ in range(min(iterations, 1000)):  # warm-up
        function()
    batches = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iterations):
            function()
        batches.append((time.perf_counter() - start) / iterations * 1e6)
    return statistics.median(batches)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kiln", default=os.path.join(REPO_ROOT, "build", "tools", "kiln"))
    args = parser.parse_args()
    os.environ["KILN_THREADS"] = "1"  # before libkiln is loaded
    sys.path.insert(0, os.path.join(REPO_ROOT, "python"))
    import kiln
    import onnxruntime as ort

    rows = []
    with tempfile.TemporaryDirectory() as work:
        model, plan_path = os.path.join(work, "tiny_add.onnx"), os.path.join(work, "tiny_add.kiln")
        tiny_model(model)
        subprocess.run([args.kiln, "compile", model, "-o", plan_path], check=True, capture_output=True)

        # kiln through the C API, from C++: `kiln bench` (median of single timed calls).
        bench = subprocess.run([args.kiln, "bench", plan_path, "--threads", "1", "--iterations",
                                str(args.iterations), "--warmup", "1000"], check=True, capture_output=True, text=True)
        figures = dict(re.findall(r"^\s*(\w+)\s+([-+0-9.eE]+)\s*$", bench.stdout, re.M))
        rows.append(("kiln C API (kiln bench, median)", float(figures["median_ms"]) * 1e3))

        a = np.arange(4, dtype=np.float32)
        b = np.ones(4, dtype=np.float32)
        feeds = {"a": a, "b": b}

        # kiln through the Python binding.
        plan = kiln.Plan(plan_path)
        out = plan.empty_outputs()
        inputs = {"a": kiln.aligned_empty((4,), np.float32), "b": kiln.aligned_empty((4,), np.float32)}
        inputs["a"][:], inputs["b"][:] = a, b
        result = plan.run(inputs, outputs=out)
        assert np.array_equal(result["sum"], a + b), result
        rows.append(("kiln Python (plan.run, outputs=)", per_call_us(lambda: plan.run(inputs, outputs=out),
                                                                      args.iterations, args.repeats)))
        rows.append(("kiln Python (plan.run, new outputs)", per_call_us(lambda: plan.run(inputs),
                                                                         args.iterations, args.repeats)))
        # The bare ctypes call: tensors built once.
        lib = plan._lib
        shape = (ctypes.c_int64 * 1)(4)
        T = kiln._Tensor
        ins = (T * 2)(T(b"a", 12, 1, shape, inputs["a"].ctypes.data, 16),
                      T(b"b", 12, 1, shape, inputs["b"].ctypes.data, 16))
        outs = (T * 1)(T(b"sum", 12, 1, shape, out["sum"].ctypes.data, 16))
        handle, run = plan._handle, lib.kiln_plan_run
        assert run(handle, ins, 2, outs, 1) == 0
        rows.append(("kiln ctypes (bare kiln_plan_run)", per_call_us(lambda: run(handle, ins, 2, outs, 1),
                                                                      args.iterations, args.repeats)))
        plan.close()

        # onnxruntime, one thread, through its Python binding.
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        assert np.array_equal(session.run(None, feeds)[0], a + b)
        rows.append(("ort Python (session.run)", per_call_us(lambda: session.run(None, feeds),
                                                              args.iterations, args.repeats)))
        binding = session.io_binding()
        ort_out = np.empty(4, np.float32)
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        binding.bind_output("sum", "cpu", 0, np.float32, [4], ort_out.ctypes.data)
        rows.append(("ort Python (run_with_iobinding)", per_call_us(lambda: session.run_with_iobinding(binding),
                                                                     args.iterations, args.repeats)))

    print(f"tiny Add float32[4] + float32[4], 1 thread, onnxruntime {ort.__version__}, kiln {kiln.version()}")
    width = max(len(name) for name, _ in rows)
    print(f"{'path':<{width}}  us/run")
    print(f"{'-' * width}  ------")
    for name, us in rows:
        print(f"{name:<{width}}  {us:6.2f}")


if __name__ == "__main__":
    main()
