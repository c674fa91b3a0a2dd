#!/usr/bin/env python3
"""Trains the demo's digits classifier and writes it out as ONNX, with test data.

The model is a 64-32-10 multilayer perceptron trained here, with numpy only, on the 8x8 handwritten
digits that ship with scikit-learn (1,797 images, pixel values 0..16, 10 classes). The point is a
small model with real trained weights that the repository rebuilds from source instead of storing.

usage:
    python3 samples/models/make_digits_model.py OUTDIR

needs: numpy, onnx, scikit-learn (for the bundled data set, no download) and onnxruntime (for the
reference outputs of the test folder). Writes, under OUTDIR:

    digits.onnx                 input "pixels" float32 [N, 64] (raw pixel values 0..16, row-major
                                8x8 image), output "logits" float32 [N, 10]; N is symbolic
    digits_test_pixels.npy      float32 [300, 64]: the held-out test images (never trained on)
    digits_test_labels.npy      int64 [300]: their true digits
    digits_test_pixels.pb       the same images as a serialized ONNX TensorProto named "pixels"
                                (what `kiln run --input pixels=FILE` also reads)
    digits_test_labels.pb       the labels as a TensorProto named "labels"
    digits_onnx_test/           model.onnx + test_data_set_0/{input_0,output_0}.pb, the outputs
                                made by onnxruntime, so that
                                `kiln test-onnx --atol 1e-4 OUTDIR/digits_onnx_test` checks kiln

Everything is seeded: two runs on the same machine write byte-identical files. The test accuracy
(both numpy's and onnxruntime's) is printed: 98.3% (295 of 300).
"""
import argparse
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20261122
HIDDEN = 32
TEST_COUNT = 300
EPOCHS = 300
BATCH = 64
LEARNING_RATE = 0.01  # Adam's step size
WEIGHT_DECAY = 1e-4
PIXEL_SCALE = 1.0 / 16.0  # digits' pixels run 0..16; the model scales them itself


def load_digits_split(rng):
    """The bundled digits, shuffled with `rng`, split into (train, test) pairs of (pixels, labels)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = digits.data.astype(np.float32)  # [1797, 64], values 0..16
    labels = digits.target.astype(np.int64)
    order = rng.permutation(len(labels))
    test, train = order[:TEST_COUNT], order[TEST_COUNT:]
    return (pixels[train], labels[train]), (pixels[test], labels[test])


def forward(params, x):
    """Returns (hidden activations, logits) for scaled pixels x, in float64."""
    w1, b1, w2, b2 = params
    hidden = np.maximum(x @ w1 + b1, 0.0)
    return hidden, hidden @ w2 + b2


def train(train_pixels, train_labels, rng):
    """Minibatch Adam on softmax cross-entropy; returns [w1, b1, w2, b2] as float64 arrays."""
    x_all = train_pixels.astype(np.float64) * PIXEL_SCALE
    # He initialisation for the ReLU layer, Glorot-like for the output layer.
    params = [
        rng.standard_normal((64, HIDDEN)) * np.sqrt(2.0 / 64),
        np.zeros(HIDDEN),
        rng.standard_normal((HIDDEN, 10)) * np.sqrt(1.0 / HIDDEN),
        np.zeros(10),
    ]
    first_moment = [np.zeros_like(p) for p in params]
    second_moment = [np.zeros_like(p) for p in params]
    beta1, beta2, epsilon, step = 0.9, 0.999, 1e-8, 0
    count = len(train_labels)
    for epoch in range(EPOCHS):
        order = rng.permutation(count)
        for start in range(0, count, BATCH):
            batch = order[start:start + BATCH]
            x, y = x_all[batch], train_labels[batch]
            hidden, logits = forward(params, x)
            # Gradient of the mean cross-entropy with respect to the logits: softmax - one_hot.
            logits = logits - logits.max(axis=1, keepdims=True)
            probabilities = np.exp(logits)
            probabilities /= probabilities.sum(axis=1, keepdims=True)
            d_logits = probabilities
            d_logits[np.arange(len(y)), y] -= 1.0
            d_logits /= len(y)
            d_hidden = (d_logits @ params[2].T) * (hidden > 0)
            gradients = [
                x.T @ d_hidden + WEIGHT_DECAY * params[0],
                d_hidden.sum(axis=0),
                hidden.T @ d_logits + WEIGHT_DECAY * params[2],
                d_logits.sum(axis=0),
            ]
            step += 1
            for i, gradient in enumerate(gradients):
                first_moment[i] = beta1 * first_moment[i] + (1 - beta1) * gradient
                second_moment[i] = beta2 * second_moment[i] + (1 - beta2) * gradient * gradient
                corrected_first = first_moment[i] / (1 - beta1 ** step)
                corrected_second = second_moment[i] / (1 - beta2 ** step)
                params[i] = params[i] - LEARNING_RATE * corrected_first / (np.sqrt(corrected_second) + epsilon)
        if (epoch + 1) % 100 == 0:
            _, logits = forward(params, x_all)
            accuracy = float((logits.argmax(axis=1) == train_labels).mean())
            print(f"epoch {epoch + 1}: train accuracy {accuracy:.4f}")
    return params


def build_model(params):
    """The trained MLP as an ONNX graph: pixels * 1/16 -> MatMul/Add -> Relu -> MatMul/Add -> logits."""
    w1, b1, w2, b2 = (p.astype(np.float32) for p in params)
    initializers = [
        numpy_helper.from_array(np.array(PIXEL_SCALE, dtype=np.float32), "pixel_scale"),
        numpy_helper.from_array(w1, "fc1.weight"),
        numpy_helper.from_array(b1, "fc1.bias"),
        numpy_helper.from_array(w2, "fc2.weight"),
        numpy_helper.from_array(b2, "fc2.bias"),
    ]
    nodes = [
        helper.make_node("Mul", ["pixels", "pixel_scale"], ["scaled"], name="scale_pixels"),
        helper.make_node("MatMul", ["scaled", "fc1.weight"], ["fc1.matmul"], name="fc1_matmul"),
        helper.make_node("Add", ["fc1.matmul", "fc1.bias"], ["fc1.out"], name="fc1_add"),
        helper.make_node("Relu", ["fc1.out"], ["hidden"], name="fc1_relu"),
        helper.make_node("MatMul", ["hidden", "fc2.weight"], ["fc2.matmul"], name="fc2_matmul"),
        helper.make_node("Add", ["fc2.matmul", "fc2.bias"], ["logits"], name="fc2_add"),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_mlp",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        initializer=initializers,
    )
    graph.doc_string = "64-32-10 MLP trained on scikit-learn's digits; input: raw 8x8 pixels 0..16, row-major"
    model = helper.make_model(graph, producer_name="kiln make_digits_model.py",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by onnxruntime releases from 1.14 on
    onnx.checker.check_model(model, full_check=True)
    return model


def save_tensor(array, name, path):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", help="folder to write the model and test data into (created if missing)")
    args = parser.parse_args()

    rng = np.random.default_rng(SEED)
    (train_pixels, train_labels), (test_pixels, test_labels) = load_digits_split(rng)
    print(f"digits: {len(train_labels)} training images, {len(test_labels)} test images")
    params = train(train_pixels, train_labels, rng)
    _, test_logits = forward(params, test_pixels.astype(np.float64) * PIXEL_SCALE)
    numpy_accuracy = float((test_logits.argmax(axis=1) == test_labels).mean())
    print(f"test accuracy (numpy, float64): {numpy_accuracy:.4f}")

    model = build_model(params)
    os.makedirs(args.outdir, exist_ok=True)
    model_path = os.path.join(args.outdir, "digits.onnx")
    onnx.save(model, model_path)
    np.save(os.path.join(args.outdir, "digits_test_pixels.npy"), test_pixels)
    np.save(os.path.join(args.outdir, "digits_test_labels.npy"), test_labels)
    save_tensor(test_pixels, "pixels", os.path.join(args.outdir, "digits_test_pixels.pb"))
    save_tensor(test_labels, "labels", os.path.join(args.outdir, "digits_test_labels.pb"))

    # The reference outputs come from onnxruntime running the saved file, not from numpy, so the
    # test folder checks kiln against an independent ONNX implementation of exactly this model.
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    (ort_logits,) = session.run(["logits"], {"pixels": test_pixels})
    ort_accuracy = float((ort_logits.argmax(axis=1) == test_labels).mean())
    print(f"test accuracy (onnxruntime, float32): {ort_accuracy:.4f}")
    if np.any(ort_logits.argmax(axis=1) != test_logits.argmax(axis=1)):
        print("note: onnxruntime's float32 predictions differ from numpy's float64 ones on some images")

    test_folder = os.path.join(args.outdir, "digits_onnx_test")
    data_folder = os.path.join(test_folder, "test_data_set_0")
    os.makedirs(data_folder, exist_ok=True)
    shutil.copyfile(model_path, os.path.join(test_folder, "model.onnx"))
    save_tensor(test_pixels, "pixels", os.path.join(data_folder, "input_0.pb"))
    save_tensor(ort_logits, "logits", os.path.join(data_folder, "output_0.pb"))
    print(f"wrote {model_path}, test data and {test_folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
