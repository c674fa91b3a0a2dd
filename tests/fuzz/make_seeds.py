#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

Run it with a Python that has onnx and numpy (the .venv of scripts/lib/python_env.sh) and the kiln
tool of a normal build, which compiles the plan seeds:

    .venv/bin/python3 tests/fuzz/make_seeds.py build/tools/kiln

Every seed is tiny and made here; nothing is copied from ../shared/data. The plans are compiled with
KILN_CPU_TARGET=avx2 so that the replay test loads them on any x86-64 machine with AVX2.
"""
import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as out:
        out.write(data)


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "seed", inputs, outputs, initializer=list(initializers))
    result = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    result.ir_version = 8
    return result


def value(name, elem_type, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def constant(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def onnx_seeds():
    """Small models covering the importer's main paths: elementwise, initializers, shape inputs
    read at build time, attributes, symbolic dimensions and a subgraph."""
    seeds = {}
    seeds["add"] = model([helper.make_node("Add", ["x", "y"], ["z"])],
                         [value("x", F, [2, 3]), value("y", F, [2, 3])], [value("z", F, [2, 3])])
    seeds["add_relu"] = model(
        [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Relu", ["s"], ["z"])],
        [value("x", F, [2, 3])], [value("z", F, [2, 3])], [constant("w", np.array([1, -2, 3], np.float32))])
    seeds["matmul_bias"] = model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["z"])],
        [value("x", F, [2, 4])], [value("z", F, [2, 3])],
        [constant("w", np.arange(12, dtype=np.float32).reshape(4, 3)), constant("b", np.ones(3, np.float32))])
    seeds["reshape_transpose"] = model(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("Transpose", ["r"], ["z"], perm=[1, 0])],
        [value("x", F, [2, 3])], [value("z", F, [2, 3])], [constant("shape", np.array([3, 2], np.int64))])
    seeds["conv"] = model(
        [helper.make_node("Conv", ["x", "w"], ["z"], pads=[1, 1, 1, 1], strides=[1, 1])],
        [value("x", F, [1, 1, 4, 4])], [value("z", F, [1, 1, 4, 4])],
        [constant("w", np.ones((1, 1, 3, 3), np.float32))])
    seeds["softmax_symbolic"] = model([helper.make_node("Softmax", ["x"], ["z"], axis=-1)],
                                      [value("x", F, ["N", 3])], [value("z", F, ["N", 3])])
    seeds["reduce_sum"] = model(
        [helper.make_node("ReduceSum", ["x", "axes"], ["z"], keepdims=0)],
        [value("x", F, [2, 3, 4])], [value("z", F, [2, 4])], [constant("axes", np.array([1], np.int64))])
    seeds["slice_concat"] = model(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["s"]),
         helper.make_node("Concat", ["s", "s"], ["z"], axis=0)],
        [value("x", F, [4, 3])], [value("z", F, [4, 3])],
        [constant("starts", np.array([1], np.int64)), constant("ends", np.array([3], np.int64)),
         constant("axes", np.array([0], np.int64))])
    seeds["gather_cast"] = model(
        [helper.make_node("Gather", ["x", "indices"], ["g"], axis=0),
         helper.make_node("Cast", ["g"], ["z"], to=I64)],
        [value("x", F, [3, 2])], [value("z", I64, [2, 2])], [constant("indices", np.array([2, 0], np.int64))])
    seeds["where_less"] = model(
        [helper.make_node("Less", ["x", "y"], ["c"]), helper.make_node("Where", ["c", "x", "y"], ["z"])],
        [value("x", I64, [3]), value("y", I64, [3])], [value("z", I64, [3])])
    seeds["constant_expand"] = model(
        [helper.make_node("Constant", [], ["shape"], value=constant("v", np.array([2, 3], np.int64))),
         helper.make_node("ConstantOfShape", ["shape"], ["c"], value=constant("f", np.array([1.5], np.float32))),
         helper.make_node("Expand", ["x", "shape"], ["e"]), helper.make_node("Mul", ["e", "c"], ["z"])],
        [value("x", F, [1, 3])], [value("z", F, [2, 3])])
    branch = lambda number: helper.make_graph(
        [helper.make_node("Constant", [], ["out"], value=constant("c", np.array([number], np.float32)))],
        "branch", [], [value("out", F, [1])])
    seeds["if_subgraph"] = model(
        [helper.make_node("If", ["cond"], ["z"], then_branch=branch(1.0), else_branch=branch(2.0))],
        [value("cond", B, [])], [value("z", F, [1])])
    for name, seed in seeds.items():
        onnx.checker.check_model(seed)
        write("onnx", name + ".onnx", seed.SerializeToString())
    return seeds


def plan_sections(plan):
    metadata_offset, metadata_size = struct.unpack_from("<QQ", plan, 32)
    return plan[metadata_offset:metadata_offset + metadata_size]


def plan_seeds(kiln, models):
    environment = dict(os.environ, KILN_CPU_TARGET="avx2", KILN_CACHE="0")
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("add", "add_relu", "matmul_bias"):
            model_path = os.path.join(scratch, name + ".onnx")
            plan_path = os.path.join(scratch, name + ".kiln")
            onnx.save(models[name], model_path)
            subprocess.run([kiln, "compile", model_path, "-o", plan_path], check=True, env=environment,
                           stderr=subprocess.DEVNULL)
            with open(plan_path, "rb") as plan_file:
                plan = plan_file.read()
            write("plan", name + ".kiln", plan)
            # fuzz_plan_metadata pairs any metadata with add_relu's weights and code (its base plan).
            write("plan_metadata", name + ".fbs", plan_sections(plan))
            if name == "add_relu":
                symbolic_metadata_seed(plan_sections(plan))
                run_bound_metadata_seed(plan_sections(plan))


# Size program opcodes (src/plan/size_program.h).
PUSH, VARIABLE, MUL = 1, 2, 5


def edited_metadata_seed(metadata, name, edit):
    """Writes plan_metadata/NAME.fbs: `metadata` turned into JSON with flatc
    (flatbuffers-compiler, so no flatbuffers Python package is needed), changed by `edit(plan)`,
    and turned back into a binary flatbuffer."""
    schema = os.path.join(HERE, "..", "..", "src", "plan", "plan.fbs")
    with tempfile.TemporaryDirectory() as scratch:
        base = os.path.join(scratch, "base.bin")
        with open(base, "wb") as out:
            out.write(metadata)
        subprocess.run(["flatc", "--json", "--strict-json", "--raw-binary", "-o", scratch, schema, "--", base], check=True)
        with open(os.path.join(scratch, "base.json")) as source:
            plan = json.load(source)
        edit(plan)
        edited = os.path.join(scratch, name + ".json")
        with open(edited, "w") as out:
            json.dump(plan, out)
        subprocess.run(["flatc", "--binary", "-o", scratch, schema, edited], check=True)
        with open(os.path.join(scratch, name + ".bin"), "rb") as built:
            write("plan_metadata", name + ".fbs", built.read())


def symbolic_metadata_seed(metadata):
    """add_relu's metadata made symbolic (format version 2): x and z become [rows, 3] with rows in
    1..2, the kernel reads rows and its extent and input/output slot sizes are programs. Every size
    at the maximum is add_relu's, so the plan loads with add_relu's code, and the fuzzer starts from
    metadata that reaches the checks of the version-2 fields (docs/plan-format.md)."""
    def edit(plan):
        plan["format_version"] = 2
        plan["variables"] = [{"name": "rows", "min": 1, "max": 2}]
        for value in plan["inputs"] + plan["outputs"]:
            inner = value["shape"][1]
            value["shape"][0] = -1
            value["dims"] = [{"code": [VARIABLE, 0]}, {"code": [PUSH, inner]}]
            value["byte_size_program"] = {"code": [VARIABLE, 0, PUSH, inner * 4, MUL, 0]}
        for kernel in plan["kernels"]:
            kernel["variables"] = [0]
            kernel["parallel_extent_program"] = {"code": [VARIABLE, 0]}
            kernel["slot_sizes"] = [
                {"code": [VARIABLE, 0, PUSH, slot["size"] // 2, MUL, 0] if slot["kind"] != "Weight" else [PUSH, slot["size"]]}
                for slot in kernel["slots"]]
    edited_metadata_seed(metadata, "add_relu_symbolic", edit)


def npy_seeds():
    arrays = {
        "f4_2x3": np.arange(6, dtype="<f4").reshape(2, 3),
        "i8_scalar": np.array(7, dtype="<i8"),
        "b1_4": np.array([True, False, True, True]),
        "u2_empty": np.zeros((0, 3), dtype="<u2"),
        "f8_1x2x2": np.ones((1, 2, 2), dtype="<f8"),
        "i1_fortran_1d": np.asfortranarray(np.arange(5, dtype="i1")),
    }
    for name, array in arrays.items():
        buffer = io.BytesIO()
        np.save(buffer, array)
        write("npy", name + ".npy", buffer.getvalue())
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.arange(3, dtype="<i4"), version=(2, 0))
    write("npy", "i4_v2.npy", buffer.getvalue())


def tensor_seeds():
    """The first byte picks the kind the target parses: 0 tensor, 1 sequence, 2 optional."""
    tensors = {
        "f32_raw": numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "x"),
        "i64_raw": numpy_helper.from_array(np.array([1, -2, 3], np.int64), "i"),
        "f32_typed": helper.make_tensor("t", F, [2], [1.5, -2.0]),
        "i8_typed": helper.make_tensor("q", TensorProto.INT8, [3], [1, -1, 127]),
        "f16_raw": numpy_helper.from_array(np.array([1, 2], np.float16), "h"),
        "bool_typed": helper.make_tensor("b", B, [2], [True, False]),
        "f64_scalar": helper.make_tensor("d", TensorProto.DOUBLE, [], [3.25]),
    }
    external = helper.make_tensor("e", F, [2], [0.0, 0.0])
    external.ClearField("float_data")
    external.data_location = TensorProto.EXTERNAL
    external.external_data.add(key="location", value="weights.bin")
    tensors["external"] = external
    for name, tensor in tensors.items():
        write("tensor_proto", name + ".pb", b"\x00" + tensor.SerializeToString())
    sequence = numpy_helper.from_list([np.ones(2, np.float32), np.zeros(3, np.float32)], "s")
    write("tensor_proto", "sequence.pb", b"\x01" + sequence.SerializeToString())
    optional = numpy_helper.from_optional(np.ones(2, np.float32), "o")
    write("tensor_proto", "optional.pb", b"\x02" + optional.SerializeToString())
    empty = numpy_helper.from_optional(None, "n", dtype=onnx.OptionalProto.TENSOR)
    write("tensor_proto", "optional_empty.pb", b"\x02" + empty.SerializeToString())


def symbolic_seeds():
    """Byte programs for fuzz_symbolic.cpp: a header byte (dtype, variable count), two bytes of
    bounds per variable, then stack operations (code % 13: 0-1 variable, 2 constant, 3 negate,
    4 +, 5 -, 6 *, 7 /, 8 %, 9 max, 10 min, 11 and 12 selects)."""
    handmade = {
        # (a*4 + b) / 4 and (a*4 + b) % 4 over index variables a in [0, 9], b in [0, 3]
        "divmod_index": bytes([4, 32, 9, 32, 3, 0, 0, 2, 68, 6, 0, 1, 4, 2, 68, 7]),
        "mod_index": bytes([4, 32, 9, 32, 3, 0, 0, 2, 68, 6, 0, 1, 4, 2, 68, 8]),
        "max_min_i32": bytes([1, 0, 40, 0, 0, 2, 70, 9, 2, 60, 10]),
        "select_u32": bytes([3, 5, 20, 0, 0, 2, 74, 11, 0, 0, 12]),
    }
    for name, program in handmade.items():
        write("symbolic", name, program)
    generator = random.Random(16)
    for number in range(6):
        write("symbolic", f"random_{number}", bytes(generator.randrange(256) for _ in range(40)))


def run_bound_metadata_seed(metadata):
    """add_relu's metadata with a size the run decides and a pinned input (format version 6): a
    variable 'count' in 0..4 that no kernel reads, bound from x's first 8 bytes before the first
    kernel, and x pinned to its bytes at zero. Its sizes are add_relu's, so it loads with add_relu's
    code, and the fuzzer starts inside the checks of the version-6 fields (check_run_bindings,
    check_pinned_inputs)."""
    def edit(plan):
        plan["format_version"] = 6
        plan["variables"] = [{"name": "count", "min": 0, "max": 4}]
        plan["run_bindings"] = [{"variable": 0, "source": {"kind": "GraphInput", "index": 0, "offset": 0, "size": 8},
                                 "dtype": 5, "after_kernel": -1, "origin": "node 'count' (NonZero, opset 13)"}]
        plan["pinned_inputs"] = [{"input": 0, "bytes": [0] * plan["inputs"][0]["byte_size"]}]
    edited_metadata_seed(metadata, "add_relu_run_bound", edit)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py PATH/TO/kiln")
    for target in ("onnx", "plan", "plan_metadata", "npy", "tensor_proto", "symbolic"):
        shutil.rmtree(os.path.join(CORPUS, target), ignore_errors=True)
    models = onnx_seeds()
    plan_seeds(sys.argv[1], models)
    npy_seeds()
    tensor_seeds()
    symbolic_seeds()


if __name__ == "__main__":
    main()
