#!/usr/bin/env python3
"""Cold start: kiln plan load + first run against onnxruntime session creation + first run.

For each model (a folder with model.onnx, or an .onnx file), one thread:

  kiln  `kiln compile MODEL -o PLAN` once (not timed here: that is the offline step), then
        `kiln bench PLAN --iterations 1 --warmup 0` in a fresh process --repeats times; the figure
        is load_ms + first_run_ms as `kiln bench` prints them (kiln_plan_load_file, then the first
        kiln_plan_run on seeded random inputs, both through libkiln's C API).
  ort   in a fresh Python process --repeats times, after `import onnxruntime` and the inputs are
        ready: InferenceSession(model) (intra/inter-op threads 1), then the first session.run.

Medians over the repeats are printed. Both processes start cold in the sense of a new process; the
model files are in the page cache for both (each is read once before timing).

    python bench/cold_start.py [--repeats R] MODEL...
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ORT_CHILD = r"""
import json, sys, time
import numpy as np, onnxruntime as ort
path = sys.argv[1]
dtypes = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
          "tensor(double)": np.float64, "tensor(bool)": np.bool_, "tensor(uint8)": np.uint8}
options = ort.SessionOptions()
options.intra_op_num_threads = 1
options.inter_op_num_threads = 1
start = time.perf_counter()
session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
created = time.perf_counter()
rng = np.random.default_rng(0)
feeds = {}
for i in session.get_inputs():
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    feeds[i.name] = (rng.random(shape) * (1 if "int" not in i.type else 2)).astype(dtypes[i.type])
ready = time.perf_counter()
session.run(None, feeds)
done = time.perf_counter()
print(json.dumps({"create_ms": (created - start) * 1e3, "first_run_ms": (done - ready) * 1e3}))
"""


def model_file(path):
    return os.path.join(path, "model.onnx") if os.path.isdir(path) else path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kiln", default=os.path.join(REPO_ROOT, "build", "tools", "kiln"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for model in args.models:
            path = model_file(model)
            name = os.path.basename(os.path.dirname(path)) if path.endswith("model.onnx") else os.path.basename(path)
            plan = os.path.join(work, name + ".kiln")
            subprocess.run([args.kiln, "compile", path, "-o", plan], check=True, capture_output=True)
            kiln_load, kiln_first, ort_create, ort_first = [], [], [], []
            for _ in range(args.repeats):
                out = subprocess.run([args.kiln, "bench", plan, "--threads", "1", "--iterations", "1", "--warmup", "0"],
                                     check=True, capture_output=True, text=True).stdout
                figures = dict(re.findall(r"^\s*(\w+)\s+([-+0-9.eE]+)\s*$", out, re.M))
                kiln_load.append(float(figures["load_ms"]))
                kiln_first.append(float(figures["first_run_ms"]))
                child = subprocess.run([sys.executable, "-c", ORT_CHILD, path], check=True, capture_output=True,
                                       text=True).stdout
                figures = json.loads(child.strip().splitlines()[-1])
                ort_create.append(figures["create_ms"])
                ort_first.append(figures["first_run_ms"])
            med = statistics.median
            row = (name, med(kiln_load), med(kiln_first), med(kiln_load) + med(kiln_first), med(ort_create),
                   med(ort_first), med(ort_create) + med(ort_first))
            rows.append(row)
            print("  " + json.dumps(row), file=sys.stderr, flush=True)
    header = ("model", "kiln_load_ms", "kiln_first_run_ms", "kiln_total_ms", "ort_session_ms", "ort_first_run_ms",
              "ort_total_ms")
    print(f"cold start, 1 thread, median of {args.repeats} fresh processes")
    width = max([len(header[0])] + [len(row[0]) for row in rows])
    print("  ".join([f"{header[0]:<{width}}"] + list(header[1:])))
    for row in rows:
        cells = [f"{row[0]:<{width}}"] + [f"{v:>{len(h)}.1f}" for v, h in zip(row[1:], header[1:])]
        print("  ".join(cells))


if __name__ == "__main__":
    main()
