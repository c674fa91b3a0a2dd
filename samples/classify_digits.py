#!/usr/bin/env python3
"""classify_digits.py: the Python twin of classify_digits.c, with the kiln binding (python/kiln).

Compiles samples/models/make_digits_model.py's digits classifier into a plan (once, batch 300: all
the test images in one call), loads it, classifies the held-out test images, and prints a few
predictions, the accuracy and the latency per image. Runs zero-copy: the logits land in an array
allocated once (64-byte aligned) and reused.

usage (after `ninja -C build` and `python3 samples/models/make_digits_model.py build/demo`):
    PYTHONPATH=python .venv/bin/python3 samples/classify_digits.py build/demo
or with the package installed (`pip install ./python`, python/README.md), without PYTHONPATH.
"""
import os
import sys
import time

import numpy as np

import kiln


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "demo")
    pixels = np.load(os.path.join(folder, "digits_test_pixels.npy"))  # float32 [300, 64], values 0..16
    labels = np.load(os.path.join(folder, "digits_test_labels.npy"))  # int64 [300]
    plan_path = os.path.join(folder, f"digits_batch{len(labels)}.kiln")
    # The model's batch dimension is the symbol N; a plan fixes it.
    kiln.compile(os.path.join(folder, "digits.onnx"), plan_path, shapes=[f"N={len(labels)}"])

    with kiln.Plan(plan_path) as plan:
        print(f"kiln {kiln.version()}: {plan}")
        outputs = plan.empty_outputs()  # {"logits": aligned float32 [300, 10]}, reused by every run
        inputs = {"pixels": kiln.aligned_empty(pixels.shape, np.float32)}
        inputs["pixels"][...] = pixels  # aligned inputs are read in place, too
        plan.run(inputs, outputs=outputs)  # the first run sets up the plan's scratch arena
        runs = 20
        start = time.perf_counter()
        for _ in range(runs):
            plan.run(inputs, outputs=outputs)
        seconds = (time.perf_counter() - start) / runs
    predictions = outputs["logits"].argmax(axis=1)
    for image in range(8):
        mark = "" if predictions[image] == labels[image] else "   <- wrong"
        print(f"image {image:3d}: predicted {predictions[image]}, true {labels[image]}{mark}")
    correct = int((predictions == labels).sum())
    print(f"accuracy: {100.0 * correct / len(labels):.1f}% ({correct} of {len(labels)} test images)")
    print(f"latency: {seconds * 1e3 / len(labels):.4f} ms per image ({seconds * 1e3:.3f} ms per batch of "
          f"{len(labels)}, Python call overhead included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
