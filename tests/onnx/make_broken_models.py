#!/usr/bin/env python3
"""Writes a corpus of broken, hostile and symbolic-shape ONNX models for the importer's error tests.

usage: make_broken_models.py OUT_DIR

Each case is a folder OUT_DIR/CASE holding model.onnx (and, for the external-data cases, the data
files it points at). OUT_DIR/outside.bin lies next to the case folders, i.e. outside every model's
directory: the escaping external-data cases point at it. test_broken_models.py holds what the
importer must say about each case.

The models are written with onnx.helper but without onnx.checker: most of them are invalid on
purpose, and some are not even ModelProtos.
"""
import os
import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64


def tensor_info(name, elem_type=FLOAT, shape=(2, 3)):
    return helper.make_tensor_value_info(name, elem_type, list(shape) if shape is not None else None)


def model(nodes, inputs, outputs, initializers=(), opsets=(("", OPSET),), ir_version=8):
    graph = helper.make_graph(nodes, "broken", list(inputs), list(outputs), initializer=list(initializers))
    result = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    result.ir_version = ir_version
    return result


def relu_model(**kwargs):
    """x (2,3) → Relu → y: a valid base the cases break in one place each."""
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [tensor_info("x")], [tensor_info("y")],
                 **kwargs)


def add_init_model(initializer):
    """y = x + w, with `w` an initializer the case breaks."""
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [tensor_info("x")], [tensor_info("y")],
                 initializers=[initializer])


def float_init(name="w", values=None, dims=(2, 3)):
    values = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims) if values is None else values
    return numpy_helper.from_array(values, name)


def external_init(location, offset=None, length=None, dims=(2, 3)):
    tensor = TensorProto(name="w", data_type=FLOAT, dims=list(dims), data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
    return tensor


def varint(value):
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def append_field(message, field_name, message_type, payload):
    """`message` (serialized) with one more length-delimited field holding `payload` (protobuf reads
    fields in any order, so appending is the same as setting)."""
    number = message_type.DESCRIPTOR.fields_by_name[field_name].number
    return message + varint(number << 3 | 2) + varint(len(payload)) + payload


class Corpus:
    def __init__(self, root):
        self.root = pathlib.Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def folder(self, case):
        path = self.root / case
        path.mkdir(exist_ok=True)
        return path

    def bytes(self, case, data, name="model.onnx"):
        (self.folder(case) / name).write_bytes(data)

    def model(self, case, proto):
        self.bytes(case, proto.SerializeToString())


# 24 bytes = one float32 (2,3) tensor: the size every external-data case's tensor needs.
WEIGHTS = np.arange(6, dtype=np.float32).tobytes()


def write_not_protobuf(corpus):
    corpus.bytes("not_onnx_text", b"hello, this is a text file and not a model\n")
    corpus.bytes("not_onnx_png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(64)))
    corpus.bytes("not_onnx_json", b'{"graph": {"node": []}}\n')
    corpus.bytes("empty_file", b"")
    full = add_init_model(float_init(values=np.zeros((64, 64), np.float32), dims=(64, 64))).SerializeToString()
    corpus.bytes("truncated", full[: len(full) // 2])
    # A well-formed protobuf that is a ModelProto without a graph.
    corpus.model("no_graph", onnx.ModelProto(ir_version=8))
    corpus.model("empty_graph", model([], [], []))


def write_graph_structure(corpus):
    corpus.model("cycle", model(
        [helper.make_node("Add", ["x", "b"], ["a"], name="first"),
         helper.make_node("Relu", ["a"], ["b"], name="second"),
         helper.make_node("Relu", ["a"], ["y"], name="last")],
        [tensor_info("x")], [tensor_info("y")]))
    corpus.model("self_loop", model([helper.make_node("Add", ["x", "y"], ["y"], name="loop")],
                                    [tensor_info("x")], [tensor_info("y")]))
    corpus.model("dangling_input", model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")],
                                         [tensor_info("x")], [tensor_info("y")]))
    corpus.model("duplicate_output", model(
        [helper.make_node("Relu", ["x"], ["y"], name="one"), helper.make_node("Neg", ["x"], ["y"], name="two")],
        [tensor_info("x")], [tensor_info("y")]))
    corpus.model("duplicate_output_same_node", model([helper.make_node("Split", ["x"], ["y", "y"], name="split", axis=1,
                                                                       num_outputs=2)],
                                                     [tensor_info("x", shape=(2, 4))], [tensor_info("y")],
                                                     opsets=(("", 18),)))
    corpus.model("output_shadows_input", model([helper.make_node("Relu", ["x"], ["x"], name="relu")],
                                               [tensor_info("x")], [tensor_info("x")]))
    corpus.model("output_from_nowhere", model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                                              [tensor_info("x")], [tensor_info("y"), tensor_info("z")]))
    corpus.model("duplicate_graph_input", model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                                                [tensor_info("x"), tensor_info("x")], [tensor_info("y")]))
    corpus.model("duplicate_graph_output", model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                                                 [tensor_info("x")], [tensor_info("y"), tensor_info("y")]))
    corpus.model("unnamed_input", model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                                        [tensor_info("x"), tensor_info("")], [tensor_info("y")]))


def write_initializers(corpus):
    short = float_init()
    short.raw_data = short.raw_data[:-4]
    corpus.model("init_raw_too_short", add_init_model(short))
    long = float_init()
    long.raw_data = long.raw_data + b"\0\0\0\0"
    corpus.model("init_raw_too_long", add_init_model(long))
    corpus.model("init_typed_count_wrong", add_init_model(
        TensorProto(name="w", data_type=FLOAT, dims=[2, 3], float_data=[1.0, 2.0, 3.0, 4.0, 5.0])))
    corpus.model("init_negative_dim", add_init_model(TensorProto(name="w", data_type=FLOAT, dims=[-2, 3])))
    corpus.model("init_huge_dims", add_init_model(
        TensorProto(name="w", data_type=FLOAT, dims=[1 << 20, 1 << 20], raw_data=b"\0" * 4)))
    corpus.model("init_overflow_dims", add_init_model(
        TensorProto(name="w", data_type=FLOAT, dims=[1 << 62, 1 << 62, 4])))
    corpus.model("init_twice", model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [tensor_info("x")],
                                     [tensor_info("y")], initializers=[float_init(), float_init()]))
    corpus.model("init_string", add_init_model(helper.make_tensor("w", TensorProto.STRING, [1], [b"abc"])))
    corpus.model("init_unknown_dtype", add_init_model(TensorProto(name="w", data_type=99, dims=[1], raw_data=b"\0")))
    corpus.model("init_float8", add_init_model(TensorProto(name="w", data_type=17, dims=[1], raw_data=b"\0")))
    segmented = float_init()
    segmented.segment.begin, segmented.segment.end = 0, 3
    corpus.model("init_segmented", add_init_model(segmented))
    sparse = add_init_model(float_init())
    sparse.graph.sparse_initializer.add().values.CopyFrom(float_init("s", dims=(2,)))
    corpus.model("init_sparse", sparse)


def write_external_data(corpus):
    (corpus.root / "outside.bin").write_bytes(WEIGHTS)

    def case(name, initializer, files=("weights.bin",)):
        folder = corpus.folder(name)
        for file in files:
            (folder / file).write_bytes(WEIGHTS)
        corpus.model(name, add_init_model(initializer))
        return folder

    case("external_ok", external_init("weights.bin"))
    case("external_absolute", external_init(str((corpus.root / "outside.bin").resolve())))
    case("external_dotdot", external_init("../outside.bin"))
    case("external_dotdot_inner", external_init("sub/../../outside.bin"))
    folder = case("external_symlink_file", external_init("link.bin"), files=())
    os.symlink("../outside.bin", folder / "link.bin")
    folder = case("external_symlink_dir", external_init("up/outside.bin"), files=())
    os.symlink("..", folder / "up")
    folder = case("external_symlink_inside", external_init("link.bin"))  # a symlink that stays inside: fine
    os.symlink("weights.bin", folder / "link.bin")
    case("external_offset_past_end", external_init("weights.bin", offset=100))
    case("external_length_past_end", external_init("weights.bin", offset=8, length=24))
    case("external_length_wrong", external_init("weights.bin", offset=0, length=20))
    case("external_offset_negative", external_init("weights.bin", offset=-4))
    case("external_offset_garbage", external_init("weights.bin", offset="12abc"))
    case("external_missing_file", external_init("nowhere.bin"), files=())
    case("external_no_location", external_init(None))
    case("external_is_directory", external_init("sub"), files=())
    (corpus.root / "external_is_directory" / "sub").mkdir(exist_ok=True)


def write_ops(corpus):
    x, y = [tensor_info("x")], [tensor_info("y")]
    corpus.model("unsupported_op", model([helper.make_node("FrobnicateXYZ", ["x"], ["y"], name="mystery")], x, y))
    corpus.model("unsupported_op_unnamed", model([helper.make_node("FrobnicateXYZ", ["x"], ["y"])], x, y))
    corpus.model("unsupported_custom_domain", model(
        [helper.make_node("Frob", ["x"], ["y"], name="custom", domain="com.example")], x, y,
        opsets=(("", OPSET), ("com.example", 3))))
    corpus.model("missing_opset_import", model(
        [helper.make_node("Frob", ["x"], ["y"], name="custom", domain="com.unknown")], x, y))
    corpus.model("no_opset_imports", relu_model(opsets=()))
    corpus.model("string_input", model([helper.make_node("Identity", ["text"], ["y"], name="id")],
                                       [tensor_info("text", TensorProto.STRING, (2,))],
                                       [tensor_info("y", TensorProto.STRING, (2,))]))
    corpus.model("complex_input", model([helper.make_node("Identity", ["z"], ["y"], name="id")],
                                        [tensor_info("z", TensorProto.COMPLEX64, (2,))],
                                        [tensor_info("y", TensorProto.COMPLEX64, (2,))]))
    sequence = helper.make_tensor_sequence_value_info("seq", FLOAT, None)
    corpus.model("sequence_input", model([helper.make_node("SequenceLength", ["seq"], ["y"], name="len")],
                                         [sequence], [tensor_info("y", INT64, ())]))
    corpus.model("constant_no_value", model([helper.make_node("Constant", [], ["y"], name="const")], [], y))
    corpus.model("constant_two_values", model(
        [helper.make_node("Constant", [], ["y"], name="const", value_float=1.0, value_int=2)], [], y))
    corpus.model("constant_string", model(
        [helper.make_node("Constant", [], ["y"], name="const", value_string="hello")], [], y))
    corpus.model("constant_bad_tensor", model(
        [helper.make_node("Constant", [], ["y"], name="const",
                          value=TensorProto(name="v", data_type=FLOAT, dims=[2, 3], float_data=[1.0]))], [], y))
    corpus.model("wrong_attribute_type", model(
        [helper.make_node("Transpose", ["x"], ["y"], name="transpose", perm=[1.0, 0.0])], x,
        [tensor_info("y", shape=(3, 2))]))
    corpus.model("wrong_attribute_type_string", model(
        [helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis="last")], x, y))
    corpus.model("too_few_inputs", model([helper.make_node("Add", ["x"], ["y"], name="lonely_add")], x, y))
    corpus.model("missing_required_attribute", model(
        [helper.make_node("Cast", ["x"], ["y"], name="cast")], x, y))
    shape = numpy_helper.from_array(np.array([4, 5], np.int64), "shape")
    corpus.model("reshape_impossible", model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="bad_reshape")],
                                             x, [tensor_info("y", shape=(4, 5))], initializers=[shape]))
    shape = numpy_helper.from_array(np.array([-2, 3], np.int64), "shape")
    corpus.model("reshape_negative", model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="neg_reshape")],
                                           x, y, initializers=[shape]))
    shape = numpy_helper.from_array(np.array([-1, -1], np.int64), "shape")
    corpus.model("reshape_two_minus_one", model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="mm_reshape")],
                                                x, y, initializers=[shape]))
    shape = numpy_helper.from_array(np.array([1 << 40, 1 << 40, 1 << 40], np.int64), "shape")
    corpus.model("constant_of_shape_huge", model(
        [helper.make_node("ConstantOfShape", ["shape"], ["y"], name="huge")], [],
        [tensor_info("y", shape=None)], initializers=[shape]))
    corpus.model("add_shapes_mismatch", model([helper.make_node("Add", ["x", "z"], ["y"], name="bad_add")],
                                              [tensor_info("x"), tensor_info("z", shape=(4, 5))], y))


def write_nesting(corpus):
    """Subgraphs (If) and values that only look produced."""
    cond = numpy_helper.from_array(np.array(True), "cond")

    def branch(name, source):
        return helper.make_graph([helper.make_node("Relu", [source], [name + "_out"], name=name + "_relu")], name, [],
                                 [tensor_info(name + "_out")])
    corpus.model("subgraph_dangling", model(
        [helper.make_node("If", ["cond"], ["y"], name="choose", then_branch=branch("then", "ghost"),
                          else_branch=branch("else", "x"))],
        [tensor_info("x")], [tensor_info("y")], initializers=[cond]))
    # If nested deeper than protobuf's recursion limit (100 messages) lets a parser follow: written
    # at the wire level, since the Python protobuf refuses to build it.
    graph = branch("leaf", "x").SerializeToString()
    for level in range(150):
        attribute = append_field(onnx.AttributeProto(name="then_branch", type=onnx.AttributeProto.GRAPH)
                                 .SerializeToString(), "g", onnx.AttributeProto, graph)
        node = append_field(helper.make_node("If", ["cond"], ["o"]).SerializeToString(), "attribute", onnx.NodeProto,
                            attribute)
        graph = append_field(helper.make_graph([], f"g{level}", [], [tensor_info("o")]).SerializeToString(), "node",
                             onnx.GraphProto, node)
    deep = model([], [tensor_info("x")], [tensor_info("o")], initializers=[cond])
    deep.ClearField("graph")
    corpus.bytes("nested_too_deep", append_field(deep.SerializeToString(), "graph", onnx.ModelProto, graph))
    # A node that declares more outputs than its op has: nobody computes 'extra'.
    corpus.model("output_op_never_makes", model([helper.make_node("Relu", ["x"], ["y", "extra"], name="relu")],
                                                [tensor_info("x")], [tensor_info("y"), tensor_info("extra")]))
    corpus.model("constant_external_dotdot", model(
        [helper.make_node("Constant", [], ["y"], name="const", value=external_init("../outside.bin"))], [],
        [tensor_info("y")]))


def write_symbolic(corpus):
    """Models whose inputs have symbolic dimensions (dim_param), for shape binding at compile time."""
    corpus.model("symbolic_image", model(
        [helper.make_node("Relu", ["image"], ["y"], name="relu")],
        [tensor_info("image", shape=("batch", 3, "height", "width"))],
        [tensor_info("y", shape=("batch", 3, "height", "width"))]))
    corpus.model("symbolic_shared", model(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add")],
        [tensor_info("a", shape=("batch", 4)), tensor_info("b", shape=("batch", 4))],
        [tensor_info("y", shape=("batch", 4))]))
    # A dimension with neither dim_value nor dim_param: a whole-shape spec or INPUT[AXIS] gives it.
    corpus.model("symbolic_anonymous", model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor_info("x", shape=(None, 8))], [tensor_info("y", shape=(None, 8))]))
    corpus.model("symbolic_no_shape", model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor_info("x", shape=None)], [tensor_info("y", shape=None)]))
    corpus.model("symbolic_huge_dim", model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor_info("x", shape=(1 << 40, 1 << 40, 1 << 40))], [tensor_info("y", shape=None)]))


def write_all(corpus):
    for write in (write_not_protobuf, write_graph_structure, write_initializers, write_external_data, write_ops,
                  write_nesting, write_symbolic):
        write(corpus)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    write_all(Corpus(sys.argv[1]))


if __name__ == "__main__":
    main()
