#!/usr/bin/env python3
"""Writes the benchmark's large ONNX models, with seeded random weights, built with onnx.helper only.

usage:
    python3 bench/export_models.py OUTDIR [--models resnet50,mobilenetv2,bert_base,bert_base_symbolic] [--seed N]

needs: numpy, onnx, onnxruntime. For each model it writes OUTDIR/<model>/model.onnx and
OUTDIR/<model>/test_data_set_0/{input_K,output_K}.pb, the outputs computed by onnxruntime from seeded
random inputs, so that
    build/tools/kiln test-onnx --atol 1e-3 --timeout 900 --timings OUTDIR/<model>
checks kiln against onnxruntime, and bench/compare_onnxruntime.py can time both on the same model.

The models (opset 17, batch 1, every shape fixed):
    resnet50     torchvision's ResNet-50 v1.5 layout: 7x7 stem, max pool, bottleneck blocks [3, 4, 6, 3]
                 (stride on the 3x3 conv), Conv + BatchNormalization + Relu, GlobalAveragePool, Gemm.
                 input "input" float32 [1, 3, 224, 224], output "logits" [1, 1000]; 25.6 M weights
    mobilenetv2  torchvision's MobileNetV2: inverted residuals (1x1 expand, 3x3 depthwise, 1x1 project),
                 ReLU6 written as Clip(0, 6), BatchNormalization kept unfolded, Gemm classifier.
                 input "input" float32 [1, 3, 224, 224], output "logits" [1, 1000]; 3.5 M weights
    bert_base    a BERT-base encoder: word/position/token-type embeddings by Gather, LayerNormalization,
                 12 layers of hidden 768, 12 heads, FFN 3072, attention as MatMul/Add, Reshape/Transpose
                 and Softmax with an additive padding mask, GELU written with Erf, then a Tanh pooler.
                 inputs "input_ids", "token_type_ids", "attention_mask" int64 [1, 128]; outputs
                 "last_hidden_state" [1, 128, 768] and "pooler_output" [1, 768]; 109 M weights (~440 MB)
    bert_base_symbolic  the same encoder and weights over inputs [batch, sequence] (dim_params), with
                 "position_ids" a fourth input (its test data: batch 1, sequence 128), for symbolic
                 plans (docs/symbolic-shapes.md); not written unless --models names it
    resnet50_fp16, bert_base_fp16  the same models in float16 (weights rounded, float inputs and
                 outputs float16, every op on float16 values): for GPU fp16 latency; not written
                 unless --models names them. Check them with a looser tolerance
                 (kiln test-onnx --atol 0.05): onnxruntime and kiln round at different places.
    resnet50_b32, mobilenetv2_b32, bert_base_b32  the fp32 models at batch 32 (same weights), for GPU
                 throughput; not written unless --models names them.

Weights are random, not trained: the models are for timing and for checking kiln's numbers against
onnxruntime's. They are scaled so that activations stay of order one through every layer (He
initialisation for convolutions, BERT's std 0.02 for dense layers, small gamma on each residual
branch's last BatchNormalization), so the comparison is not dominated by huge or vanishing values.
The same seed gives byte-identical model files.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization is in the default domain from 17 on


class GraphBuilder:
    """Collects nodes and initializers; every helper returns the name of the value it produces."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.initializers = []
        self.counter = 0

    def fresh(self, hint):
        self.counter += 1
        return f"{hint}_{self.counter}"

    def constant(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def normal(self, name, shape, std):
        return self.constant(name, (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)))

    def uniform(self, name, shape, low, high):
        return self.constant(name, self.rng.uniform(low, high, size=shape).astype(np.float32))

    def node(self, op, inputs, hint, outputs=None, **attributes):
        outputs = outputs or [self.fresh(hint)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=self.fresh(f"{hint}/{op}"), **attributes))
        return outputs[0]

    def model(self, graph_name, inputs, outputs, doc):
        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs, initializer=self.initializers)
        model = helper.make_model(graph, producer_name="kiln bench/export_models.py",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        model.doc_string = doc
        return model


# ---------------------------------------------------------------------------------------------------
# Convolutional networks

def conv_bn(g, x, prefix, in_channels, out_channels, kernel, stride=1, groups=1, gamma_scale=1.0,
            conv_name="conv", bn_name="bn"):
    """Conv (no bias) followed by BatchNormalization in inference mode, torchvision-style names."""
    fan_in = in_channels // groups * kernel * kernel
    weight = g.normal(f"{prefix}{conv_name}.weight", (out_channels, in_channels // groups, kernel, kernel),
                      np.sqrt(2.0 / fan_in))
    pad = kernel // 2
    y = g.node("Conv", [x, weight], f"{prefix}{conv_name}", kernel_shape=[kernel, kernel], strides=[stride, stride],
               pads=[pad, pad, pad, pad], group=groups, dilations=[1, 1])
    scale = g.uniform(f"{prefix}{bn_name}.weight", (out_channels,), 0.8 * gamma_scale, 1.2 * gamma_scale)
    bias = g.normal(f"{prefix}{bn_name}.bias", (out_channels,), 0.05)
    mean = g.normal(f"{prefix}{bn_name}.running_mean", (out_channels,), 0.05)
    var = g.uniform(f"{prefix}{bn_name}.running_var", (out_channels,), 0.8, 1.2)
    return g.node("BatchNormalization", [y, scale, bias, mean, var], f"{prefix}{bn_name}", epsilon=1e-5)


def classifier(g, x, in_features, prefix="fc"):
    """GlobalAveragePool, Flatten, Gemm to 1000 logits (torch's export of avgpool + Linear)."""
    pooled = g.node("GlobalAveragePool", [x], "avgpool")
    flat = g.node("Flatten", [pooled], "flatten", axis=1)
    weight = g.normal(f"{prefix}.weight", (1000, in_features), np.sqrt(1.0 / in_features))
    bias = g.normal(f"{prefix}.bias", (1000,), 0.01)
    return g.node("Gemm", [flat, weight, bias], prefix, outputs=["logits"], alpha=1.0, beta=1.0, transB=1)


def image_io(batch=1):
    return ([helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 1000])])


def build_resnet50(rng, batch=1):
    g = GraphBuilder(rng)
    x = conv_bn(g, "input", "", 3, 64, 7, stride=2, conv_name="conv1", bn_name="bn1")
    x = g.node("Relu", [x], "relu")
    x = g.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    in_channels = 64
    for layer, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1):
        for block in range(blocks):
            prefix = f"layer{layer}.{block}."
            block_stride = stride if block == 0 else 1
            out_channels = width * 4
            y = conv_bn(g, x, prefix, in_channels, width, 1, conv_name="conv1", bn_name="bn1")
            y = g.node("Relu", [y], f"{prefix}relu1")
            y = conv_bn(g, y, prefix, width, width, 3, stride=block_stride, conv_name="conv2", bn_name="bn2")
            y = g.node("Relu", [y], f"{prefix}relu2")
            # A small gamma on the branch's last BN keeps the residual sum from growing block by block.
            y = conv_bn(g, y, prefix, width, out_channels, 1, conv_name="conv3", bn_name="bn3", gamma_scale=0.3)
            shortcut = x
            if block == 0:
                shortcut = conv_bn(g, x, prefix, in_channels, out_channels, 1, stride=block_stride,
                                   conv_name="downsample.0", bn_name="downsample.1")
            x = g.node("Relu", [g.node("Add", [y, shortcut], f"{prefix}add")], f"{prefix}relu3")
            in_channels = out_channels
    classifier(g, x, 2048)
    inputs, outputs = image_io(batch)
    return g.model("resnet50", inputs, outputs, "ResNet-50 v1.5 (torchvision layout), random weights")


def build_mobilenetv2(rng, batch=1):
    g = GraphBuilder(rng)
    zero = g.constant("relu6.min", np.array(0.0, dtype=np.float32))
    six = g.constant("relu6.max", np.array(6.0, dtype=np.float32))

    def relu6(value, hint):
        return g.node("Clip", [value, zero, six], hint)

    x = relu6(conv_bn(g, "input", "features.0.", 3, 32, 3, stride=2, conv_name="0", bn_name="1"), "features.0.2")
    in_channels, index = 32, 1
    # (expansion t, output channels c, repeats n, first stride s), torchvision's table.
    for expansion, channels, repeats, first_stride in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for repeat in range(repeats):
            prefix = f"features.{index}.conv."
            stride = first_stride if repeat == 0 else 1
            hidden = in_channels * expansion
            y, layer = x, 0
            if expansion != 1:
                y = relu6(conv_bn(g, y, prefix, in_channels, hidden, 1, conv_name=f"{layer}.0", bn_name=f"{layer}.1"),
                          f"{prefix}{layer}.2")
                layer += 1
            y = relu6(conv_bn(g, y, prefix, hidden, hidden, 3, stride=stride, groups=hidden, conv_name=f"{layer}.0",
                              bn_name=f"{layer}.1"), f"{prefix}{layer}.2")
            layer += 1
            residual = stride == 1 and in_channels == channels
            y = conv_bn(g, y, prefix, hidden, channels, 1, conv_name=f"{layer}", bn_name=f"{layer + 1}",
                        gamma_scale=0.3 if residual else 1.0)
            x = g.node("Add", [x, y], f"features.{index}.add") if residual else y
            in_channels, index = channels, index + 1
    x = relu6(conv_bn(g, x, f"features.{index}.", in_channels, 1280, 1, conv_name="0", bn_name="1"),
              f"features.{index}.2")
    classifier(g, x, 1280, prefix="classifier.1")
    inputs, outputs = image_io(batch)
    return g.model("mobilenetv2", inputs, outputs, "MobileNetV2 (torchvision layout), random weights")


# ---------------------------------------------------------------------------------------------------
# BERT-base encoder

BERT = dict(vocab=30522, positions=512, token_types=2, hidden=768, heads=12, layers=12, ffn=3072, seq=128)


def build_bert_base(rng, symbolic=False, batch=1):
    """symbolic: inputs of shape [batch, sequence] (dim_params), head reshapes that copy those dims
    (Reshape's 0), the positions an input, and the pooler's first token by Slice: one model that a
    symbolic plan runs at every batch and sequence length (docs/symbolic-shapes.md)."""
    g = GraphBuilder(rng)
    hidden, heads, seq = BERT["hidden"], BERT["heads"], BERT["seq"]
    head_size = hidden // heads

    def dense(x, prefix, in_features, out_features):
        weight = g.normal(f"{prefix}.weight", (in_features, out_features), 0.02)  # stored [in, out] for MatMul
        bias = g.normal(f"{prefix}.bias", (out_features,), 0.02)
        return g.node("Add", [g.node("MatMul", [x, weight], f"{prefix}.matmul"), bias], f"{prefix}.add")

    def layer_norm(x, prefix):
        scale = g.uniform(f"{prefix}.weight", (hidden,), 0.9, 1.1)
        bias = g.normal(f"{prefix}.bias", (hidden,), 0.02)
        return g.node("LayerNormalization", [x, scale, bias], prefix, axis=-1, epsilon=1e-12)

    # Embeddings: three Gathers summed, then LayerNormalization.
    words = g.node("Gather", [g.normal("embeddings.word_embeddings.weight", (BERT["vocab"], hidden), 0.02),
                              "input_ids"], "embeddings.word", axis=0)
    position_ids = "position_ids" if symbolic else \
        g.constant("embeddings.position_ids", np.arange(seq, dtype=np.int64).reshape(1, seq))
    positions = g.node("Gather", [g.normal("embeddings.position_embeddings.weight", (BERT["positions"], hidden), 0.02),
                                  position_ids], "embeddings.position", axis=0)
    types = g.node("Gather", [g.normal("embeddings.token_type_embeddings.weight", (BERT["token_types"], hidden), 0.02),
                              "token_type_ids"], "embeddings.token_type", axis=0)
    x = g.node("Add", [g.node("Add", [words, positions], "embeddings.add1"), types], "embeddings.add2")
    x = layer_norm(x, "embeddings.LayerNorm")

    # Additive mask: 0 where attention_mask is 1, -10000 where it is 0, broadcast over heads and queries.
    mask = g.node("Unsqueeze", ["attention_mask", g.constant("mask.axes", np.array([1, 2], dtype=np.int64))], "mask")
    mask = g.node("Cast", [mask], "mask.cast", to=TensorProto.FLOAT)
    mask = g.node("Sub", [g.constant("mask.one", np.array(1.0, dtype=np.float32)), mask], "mask.invert")
    mask = g.node("Mul", [mask, g.constant("mask.fill", np.array(-10000.0, dtype=np.float32))], "mask.scale")

    batch_and_seq = [0, 0] if symbolic else [batch, seq]  # 0: Reshape copies the input's dimension
    split_heads = g.constant("attention.split_shape", np.array(batch_and_seq + [heads, head_size], dtype=np.int64))
    merge_heads = g.constant("attention.merge_shape", np.array(batch_and_seq + [hidden], dtype=np.int64))
    score_scale = g.constant("attention.scale", np.array(1.0 / np.sqrt(head_size), dtype=np.float32))
    sqrt_half = g.constant("gelu.rsqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    one = g.constant("gelu.one", np.array(1.0, dtype=np.float32))
    half = g.constant("gelu.half", np.array(0.5, dtype=np.float32))

    for layer in range(BERT["layers"]):
        p = f"encoder.layer.{layer}."

        def heads_of(name, perm):
            projected = dense(x, f"{p}attention.self.{name}", hidden, hidden)
            return g.node("Transpose", [g.node("Reshape", [projected, split_heads], f"{p}{name}.reshape")],
                          f"{p}{name}.transpose", perm=perm)

        query = heads_of("query", [0, 2, 1, 3])  # [1, heads, seq, head_size]
        key = heads_of("key", [0, 2, 3, 1])  # [1, heads, head_size, seq]
        value = heads_of("value", [0, 2, 1, 3])
        scores = g.node("MatMul", [query, key], f"{p}scores")
        scores = g.node("Add", [g.node("Mul", [scores, score_scale], f"{p}scores.scale"), mask], f"{p}scores.mask")
        probabilities = g.node("Softmax", [scores], f"{p}softmax", axis=-1)
        context = g.node("MatMul", [probabilities, value], f"{p}context")
        context = g.node("Transpose", [context], f"{p}context.transpose", perm=[0, 2, 1, 3])
        context = g.node("Reshape", [context, merge_heads], f"{p}context.reshape")
        attention = dense(context, f"{p}attention.output.dense", hidden, hidden)
        x = layer_norm(g.node("Add", [attention, x], f"{p}attention.residual"), f"{p}attention.output.LayerNorm")

        intermediate = dense(x, f"{p}intermediate.dense", hidden, BERT["ffn"])
        # GELU(x) = 0.5 * x * (1 + erf(x / sqrt(2))), as torch exports it below opset 20.
        erf = g.node("Erf", [g.node("Mul", [intermediate, sqrt_half], f"{p}gelu.div")], f"{p}gelu.erf")
        gelu = g.node("Mul", [g.node("Mul", [intermediate, g.node("Add", [erf, one], f"{p}gelu.add")], f"{p}gelu.mul"),
                              half], f"{p}gelu.half")
        output = dense(gelu, f"{p}output.dense", BERT["ffn"], hidden)
        x = layer_norm(g.node("Add", [output, x], f"{p}output.residual"), f"{p}output.LayerNorm")

    g.node("Identity", [x], "last_hidden_state", outputs=["last_hidden_state"])
    if symbolic:
        first_token = g.node("Slice", [x, g.constant("pooler.start", np.array([0], dtype=np.int64)),
                                       g.constant("pooler.end", np.array([1], dtype=np.int64)),
                                       g.constant("pooler.axis", np.array([1], dtype=np.int64))], "pooler.slice")
        first_token = g.node("Reshape", [first_token, g.constant("pooler.shape", np.array([0, hidden], dtype=np.int64))],
                             "pooler.first")
    else:
        first_token = g.node("Gather", [x, g.constant("pooler.index", np.array(0, dtype=np.int64))], "pooler.first",
                             axis=1)
    g.node("Tanh", [dense(first_token, "pooler.dense", hidden, hidden)], "pooler.tanh", outputs=["pooler_output"])

    dims = ["batch", "sequence"] if symbolic else [batch, seq]
    names = ("input_ids", "token_type_ids", "attention_mask") + (("position_ids",) if symbolic else ())
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, dims) for name in names]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, dims + [hidden]),
               helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, dims[:1] + [hidden])]
    if symbolic:
        return g.model("bert_base_symbolic", inputs, outputs,
                       "BERT-base encoder (12 x 768), inputs [batch, sequence], random weights")
    return g.model("bert_base", inputs, outputs, "BERT-base encoder (12 x 768, seq 128), random weights")


def bert_inputs(rng, batch=1):
    seq = BERT["seq"]
    input_ids = rng.integers(0, BERT["vocab"], size=(batch, seq), dtype=np.int64)
    input_ids[:, 0] = 101  # [CLS], as a tokenizer would write it
    token_type_ids = np.zeros((batch, seq), dtype=np.int64)
    token_type_ids[:, seq // 2:] = 1  # a sentence pair
    attention_mask = np.ones((batch, seq), dtype=np.int64)
    attention_mask[:, seq - 16:] = 0  # the last 16 positions are padding
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}


def bert_symbolic_inputs(rng):
    inputs = bert_inputs(rng)
    inputs["position_ids"] = np.arange(BERT["seq"], dtype=np.int64).reshape(1, BERT["seq"])
    return inputs


def image_inputs(rng, batch=1):
    return {"input": rng.standard_normal((batch, 3, 224, 224), dtype=np.float32)}


def to_float16(model):
    """The same model in float16: every float32 initializer rounded to float16, float32 graph inputs
    and outputs declared float16, and every Cast to float32 made a Cast to float16, so that each op
    runs on float16 values (as a GPU engine's fp16 model does; onnxruntime computes the reference)."""
    graph = model.graph
    for k, tensor in enumerate(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT:
            graph.initializer[k].CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float16), tensor.name))
    for value in list(graph.input) + list(graph.output):
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
    for node in graph.node:
        for attribute in node.attribute:
            if node.op_type == "Cast" and attribute.name == "to" and attribute.i == TensorProto.FLOAT:
                attribute.i = TensorProto.FLOAT16
    model.doc_string += " Converted to float16 by to_float16()."
    return model


def float16_inputs(make_inputs):
    def make(rng):
        return {name: array.astype(np.float16) if array.dtype == np.float32 else array
                for name, array in make_inputs(rng).items()}
    return make


MODELS = {
    "resnet50": (build_resnet50, image_inputs),
    "mobilenetv2": (build_mobilenetv2, image_inputs),
    "bert_base": (build_bert_base, bert_inputs),
    "bert_base_symbolic": (lambda rng: build_bert_base(rng, symbolic=True), bert_symbolic_inputs),
    "resnet50_fp16": (lambda rng: to_float16(build_resnet50(rng)), float16_inputs(image_inputs)),
    "bert_base_fp16": (lambda rng: to_float16(build_bert_base(rng)), float16_inputs(bert_inputs)),
    # Batch 32 (throughput on a GPU): the same weights as the batch-1 models.
    "resnet50_b32": (lambda rng: build_resnet50(rng, batch=32), lambda rng: image_inputs(rng, batch=32)),
    "mobilenetv2_b32": (lambda rng: build_mobilenetv2(rng, batch=32), lambda rng: image_inputs(rng, batch=32)),
    "bert_base_b32": (lambda rng: build_bert_base(rng, batch=32), lambda rng: bert_inputs(rng, batch=32)),
}
# Each model's stream of random numbers (the symbolic BERT shares BERT-base's weights, each fp16
# model its fp32 model's, rounded).
SEED_OFFSET = {"bert_base": 0, "bert_base_symbolic": 0, "mobilenetv2": 1, "resnet50": 2, "resnet50_fp16": 2,
               "bert_base_fp16": 0, "resnet50_b32": 2, "mobilenetv2_b32": 1, "bert_base_b32": 0}


def write_model(name, outdir, seed):
    build, make_inputs = MODELS[name]
    # Each model draws from its own stream, so exporting one model alone gives the same file.
    model_seed = seed + SEED_OFFSET[name]
    model = build(np.random.default_rng(model_seed))
    onnx.checker.check_model(model)
    folder = os.path.join(outdir, name)
    data_folder = os.path.join(folder, "test_data_set_0")
    os.makedirs(data_folder, exist_ok=True)
    model_path = os.path.join(folder, "model.onnx")
    onnx.save(model, model_path)
    weights = sum(int(np.prod(t.dims)) for t in model.graph.initializer)

    import onnxruntime

    inputs = make_inputs(np.random.default_rng(model_seed + 1000))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # one thread: the reference outputs do not depend on the machine's cores
    session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    output_names = [o.name for o in session.get_outputs()]
    outputs = session.run(output_names, inputs)
    for k, (input_name, array) in enumerate(inputs.items()):
        with open(os.path.join(data_folder, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(array, input_name).SerializeToString())
    for k, (output_name, array) in enumerate(zip(output_names, outputs)):
        with open(os.path.join(data_folder, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(array, output_name).SerializeToString())
    summary = ", ".join(f"{n} {list(a.shape)} |max| {np.abs(a).max():.3g}" for n, a in zip(output_names, outputs))
    print(f"{name}: {len(model.graph.node)} nodes, {weights / 1e6:.1f} M weights, "
          f"{os.path.getsize(model_path) / 2**20:.0f} MiB -> {folder}; onnxruntime: {summary}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", help="folder to write OUTDIR/<model>/ into (created if missing)")
    parser.add_argument("--models", default="resnet50,mobilenetv2,bert_base",
                        help=f"comma-separated subset of {', '.join(MODELS)} (default: all)")
    parser.add_argument("--seed", type=int, default=1234, help="seed of weights and inputs (default 1234)")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    for name in names:
        write_model(name, args.outdir, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
