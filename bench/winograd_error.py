#!/usr/bin/env python3
"""Numerical error of kiln's Winograd F(2x2, 3x3) convolution on a model's real 3x3 weights.

For every 3x3 stride-1 Conv of MODEL (an ONNX file), builds a one-Conv model with that node's
weight and bias, compiles it with the kiln tool twice (KILN_WINOGRAD=2: Winograd; KILN_WINOGRAD=0:
direct), runs both on the same input and compares each with a float64 reference computed here.
The input is uniform in [0, 1) (post-ReLU activations are non-negative), seeded.

    .venv/bin/python bench/winograd_error.py --kiln build/tools/kiln /tmp/kiln-models/resnet50/model.onnx

Prints, per conv: the shape, max |error| / max |reference| for each path, and the Winograd error
over the direct error (docs/winograd.md has a run).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper


def reference_conv(x, w, b, pads):
    """float64 direct convolution, stride 1: x (N, C, H, W), w (F, C, 3, 3), pads (t, l, b, r)."""
    t, l, bottom, r = pads
    padded = np.pad(x, ((0, 0), (0, 0), (t, bottom), (l, r)))
    n, _, h, wd = padded.shape
    out = np.zeros((n, w.shape[0], h - 2, wd - 2))
    for a in range(3):
        for c in range(3):
            window = padded[:, :, a:a + h - 2, c:c + wd - 2]
            out += np.einsum("nchw,fc->nfhw", window, w[:, :, a, c])
    return out + b.reshape(1, -1, 1, 1)


def run_kiln(kiln, model_path, x, mode, workdir):
    env = dict(os.environ, KILN_WINOGRAD=str(mode))
    plan = os.path.join(workdir, f"conv{mode}.plan")
    subprocess.run([kiln, "compile", model_path, "-o", plan], check=True, env=env, capture_output=True)
    np.save(os.path.join(workdir, "x.npy"), x)
    out = os.path.join(workdir, f"out{mode}")
    subprocess.run([kiln, "run", plan, "--input", "x=" + os.path.join(workdir, "x.npy"), "--output-dir", out,
                    "--output-format", "npy"], check=True, env=env, capture_output=True)
    return np.load(os.path.join(out, "y.npy")).astype(np.float64)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--kiln", default="build/tools/kiln")
    parser.add_argument("--size", type=int, default=0, help="image size (default: 224 / the conv's stage)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model = onnx.load(args.model)
    initializers = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    # Spatial size per channel count: ResNet's stages (64 @ 56, 128 @ 28, 256 @ 14, 512 @ 7).
    stage_size = {64: 56, 128: 28, 256: 14, 512: 7}
    rng = np.random.default_rng(args.seed)
    print(f"{'conv':32s} {'weight':>18s} {'size':>5s} {'winograd':>10s} {'direct':>10s} {'ratio':>6s}")
    for node in model.graph.node:
        if node.op_type != "Conv" or node.input[1] not in initializers:
            continue
        w = initializers[node.input[1]].astype(np.float32)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if w.shape[2:] != (3, 3) or list(attrs.get("strides", [1, 1])) != [1, 1] or attrs.get("group", 1) != 1:
            continue
        if list(attrs.get("dilations", [1, 1])) != [1, 1]:
            continue
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        b = initializers[node.input[2]].astype(np.float32) if len(node.input) > 2 and node.input[2] else \
            np.zeros(w.shape[0], np.float32)
        size = args.size or stage_size.get(w.shape[1], 28)
        x = rng.random((1, w.shape[1], size, size), dtype=np.float32)
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=pads, kernel_shape=[3, 3])], "conv",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
            [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
        one_conv = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        expected = reference_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                                  (pads[0], pads[1], pads[2], pads[3]))
        scale = np.abs(expected).max()
        with tempfile.TemporaryDirectory() as workdir:
            path = os.path.join(workdir, "conv.onnx")
            onnx.save(one_conv, path)
            errors = [np.abs(run_kiln(args.kiln, path, x, mode, workdir) - expected).max() / scale for mode in (2, 0)]
        ratio = errors[0] / errors[1] if errors[1] > 0 else float("inf")
        print(f"{node.name:32s} {str(w.shape):>18s} {size:5d} {errors[0]:10.2e} {errors[1]:10.2e} {ratio:6.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
