#!/usr/bin/env python3
"""Runs one symbolic BERT plan at several (batch, sequence) shapes and compares each run with
onnxruntime (its CPU provider) on the same inputs: the check that a plan compiled once with
`--shape batch=MIN..MAX --shape sequence=MIN..MAX` is right at shapes it was not compiled for, on
whichever device the plan is for (CPU, OpenCL or CUDA). The runs go through `kiln run` (libkiln),
with NumPy files in and out, so nothing but the kiln tool, numpy and onnxruntime is needed.

usage: check_symbolic_bert.py KILN MODEL.onnx PLAN BATCHxSEQUENCE... [--atol A]
  MODEL  bench/export_models.py's bert_base_symbolic (inputs input_ids, token_type_ids,
         attention_mask, position_ids over [batch, sequence])
Prints one line per shape (the largest difference and kiln run's time) and exits 1 when any
difference exceeds --atol (default 1e-4) or a run fails.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime

VOCABULARY = 30522  # BERT-base's; export_models.py's embedding has as many rows


def bert_inputs(rng, batch, sequence):
    lengths = rng.integers(1, sequence + 1, size=(batch, 1))
    return {
        "input_ids": rng.integers(0, VOCABULARY, size=(batch, sequence), dtype=np.int64),
        "token_type_ids": rng.integers(0, 2, size=(batch, sequence), dtype=np.int64),
        "attention_mask": (np.arange(sequence)[None, :] < lengths).astype(np.int64),
        "position_ids": np.tile(np.arange(sequence, dtype=np.int64), (batch, 1)),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kiln")
    parser.add_argument("model")
    parser.add_argument("plan")
    parser.add_argument("shapes", nargs="+")
    parser.add_argument("--atol", type=float, default=1e-4)
    args = parser.parse_args()
    reference = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    input_names = [i.name for i in reference.get_inputs()]
    output_names = [o.name for o in reference.get_outputs()]
    rng = np.random.default_rng(11)
    failed = False
    for shape in args.shapes:
        try:
            batch, sequence = (int(v) for v in shape.lower().split("x"))
        except ValueError:
            sys.exit(f"check_symbolic_bert.py: shape '{shape}' is not BATCHxSEQUENCE")
        feed = {name: value for name, value in bert_inputs(rng, batch, sequence).items() if name in input_names}
        with tempfile.TemporaryDirectory() as folder:
            command = [args.kiln, "run", args.plan, "--output-dir", folder, "--output-format", "npy"]
            for name, value in feed.items():
                path = os.path.join(folder, f"in_{name}.npy")
                np.save(path, value)
                command += ["--input", f"{name}={path}"]
            run = subprocess.run(command, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"batch={batch} sequence={sequence}: kiln run failed: {run.stderr.strip()}")
                failed = True
                continue
            got = {name: np.load(os.path.join(folder, f"{name}.npy")) for name in output_names}
        want = dict(zip(output_names, reference.run(output_names, feed)))
        worst = 0.0
        for name in output_names:
            if got[name].shape != want[name].shape:
                print(f"batch={batch} sequence={sequence}: {name} has shape {got[name].shape}, "
                      f"onnxruntime's {want[name].shape}")
                failed = True
                worst = float("inf")
            elif want[name].size:
                worst = max(worst, float(np.max(np.abs(got[name].astype(np.float64) - want[name]))))
        took = next((line.strip() for line in run.stdout.splitlines() if "ms" in line), "")
        print(f"batch={batch} sequence={sequence}: max |kiln - onnxruntime| {worst:.2e} ({took})", flush=True)
        failed = failed or not worst <= args.atol
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
