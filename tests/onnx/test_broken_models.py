#!/usr/bin/env python3
"""Every broken or hostile model of make_broken_models.py gets the error a user can act on.

usage: test_broken_models.py [--python VENV_PYTHON] KILN [CASE...]

Writes the corpus into a temporary folder, runs `KILN check-onnx CASE/model.onnx [--shape ...]` on
each case and checks the exit status (1: a clear error; 0: the model is fine) and that stderr (on
error) or stdout (on success) holds every expected fragment. A crash, an internal error (status 3)
or a missing fragment fails the test. Every case in the corpus must have an expectation here and
every expectation a case, so the two files cannot drift apart.

This is a Python script rather than a doctest program because the corpus itself needs the `onnx`
package to be written, and because it tests what a user actually sees: the CLI's message and status.
--python names the interpreter that has `onnx` (the project's .venv): the script runs itself again
with it, and exits 77 (skip) when it does not exist. Without --python, the running interpreter must
have `onnx`.
"""
import os
import pathlib
import subprocess
import sys
import tempfile


def use_python(argv):
    """Re-runs this script under the interpreter that --python names; returns the other arguments."""
    if len(argv) < 2 or argv[0] != "--python":
        return argv
    python, rest = argv[1], argv[2:]
    if not os.path.exists(python):
        print(f"skipped: {python} does not exist (scripts/lib/python_env.sh creates it)")
        sys.exit(77)
    if os.path.abspath(sys.executable) != os.path.abspath(python):
        os.execv(python, [python, __file__, "--python", python, *rest])
    return rest


ARGUMENTS = use_python(sys.argv[1:])
try:
    import onnx  # noqa: F401  (the corpus script needs it)
except ImportError:
    sys.exit(f"{sys.executable} has no `onnx` package: rerun scripts/lib/python_env.sh's kiln_ensure_python_env")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_broken_models  # noqa: E402


class Expect:
    def __init__(self, *fragments, shape=(), ok=False):
        self.fragments = fragments
        self.shape = list(shape)
        self.ok = ok


UNBOUND = "unbound input dimension"

EXPECTATIONS = {
    # Not ONNX at all, or cut short.
    "not_onnx_text": Expect("not an ONNX model"),
    "not_onnx_png": Expect("not an ONNX model"),
    "not_onnx_json": Expect("not an ONNX model"),
    "empty_file": Expect("not an ONNX model: the data is empty"),
    "truncated": Expect("the model is truncated"),
    "no_graph": Expect("holds no graph"),
    "empty_graph": Expect("graph is empty"),
    # Graph structure.
    "cycle": Expect("the graph has a cycle", "node 'first' (Add, opset 17)", "'b'", "node 'second' (Relu, opset 17)"),
    "self_loop": Expect("the graph has a cycle", "node 'loop' (Add, opset 17)", "'y'"),
    "dangling_input": Expect("node 'add' (Add, opset 17)", "input 'ghost'", "dangling input"),
    "duplicate_output": Expect("node 'two' (Neg, opset 17)", "output 'y' is also produced by",
                               "node 'one' (Relu, opset 17)"),
    "duplicate_output_same_node": Expect("node 'split' (Split, opset 18)", "output 'y' is listed twice"),
    "output_shadows_input": Expect("node 'relu' (Relu, opset 17)", "output 'x' has the name of a graph input"),
    "output_from_nowhere": Expect("graph output 'z' is not produced by any node"),
    "duplicate_graph_input": Expect("graph input 'x' is listed twice"),
    "duplicate_graph_output": Expect("graph output 'y' is listed twice"),
    "unnamed_input": Expect("a graph input has no name"),
    # Initializers.
    "init_raw_too_short": Expect("initializer 'w'", "20 bytes of raw_data", "need 24"),
    "init_raw_too_long": Expect("initializer 'w'", "28 bytes of raw_data", "need 24"),
    "init_typed_count_wrong": Expect("initializer 'w'", "stores 5 values but its shape needs 6"),
    "init_negative_dim": Expect("initializer 'w'", "negative dimension (-2)"),
    "init_huge_dims": Expect("initializer 'w' has 4 bytes of raw_data", "(f32, 1099511627776 elements) need 4398046511104"),
    "init_overflow_dims": Expect("initializer 'w'", "more elements than fit in 64 bits"),
    "init_twice": Expect("initializer 'w' is defined twice"),
    "init_string": Expect("initializer 'w'", "unsupported ONNX data type STRING"),
    "init_unknown_dtype": Expect("initializer 'w'", "unsupported ONNX data type 99 (not an ONNX data type)"),
    # float8 values exist only as carriers for Cast and the quantization ops: Add names the input.
    "init_float8": Expect("node 'add' (Add, opset 17)", "unsupported: input 1 has ONNX type FLOAT8E4M3FN"),
    "init_segmented": Expect("initializer 'w'", "segmented"),
    "init_sparse": Expect("sparse initializers are not supported"),
    # External data: only inside the model's directory, only inside the file.
    "external_ok": Expect("outputs:", "y: f32 (2, 3)", ok=True),
    "external_symlink_inside": Expect("outputs:", "y: f32 (2, 3)", ok=True),
    "external_absolute": Expect("initializer 'w'", "is an absolute path", "relative to the model's directory"),
    "external_dotdot": Expect("initializer 'w'", "'../outside.bin' contains '..'"),
    "external_dotdot_inner": Expect("initializer 'w'", "'sub/../../outside.bin' contains '..'"),
    "external_symlink_file": Expect("initializer 'w'", "'link.bin' resolves to", "outside the model's directory"),
    "external_symlink_dir": Expect("initializer 'w'", "'up/outside.bin' resolves to", "outside the model's directory"),
    "external_offset_past_end": Expect("initializer 'w'", "offset 100 is past the end of 'weights.bin' (24 bytes)"),
    "external_length_past_end": Expect("initializer 'w'", "range [8, 8 + 24) lies outside 'weights.bin' (24 bytes)"),
    "external_length_wrong": Expect("initializer 'w'", "holds 20 bytes but the tensor's shape and type need 24"),
    "external_offset_negative": Expect("initializer 'w'", "offset '-4' is not a number"),
    "external_offset_garbage": Expect("initializer 'w'", "offset '12abc' is not a number"),
    "external_missing_file": Expect("initializer 'w'", "'nowhere.bin' cannot be opened"),
    "external_no_location": Expect("initializer 'w'", "external data has no 'location'"),
    "external_is_directory": Expect("initializer 'w'", "'sub' is not a regular file"),
    # Ops, attributes, dtypes.
    "unsupported_op": Expect("node 'mystery' (FrobnicateXYZ, opset 17)", "unsupported op 'FrobnicateXYZ'",
                             "domain 'ai.onnx'", "opset 17"),
    "unsupported_op_unnamed": Expect("unnamed node producing 'y' (FrobnicateXYZ, opset 17)",
                                     "unsupported op 'FrobnicateXYZ'", "domain 'ai.onnx'"),
    "unsupported_custom_domain": Expect("node 'custom' (com.example.Frob, opset 3)", "unsupported op 'Frob'",
                                        "domain 'com.example'", "opset 3"),
    "missing_opset_import": Expect("node 'custom' (com.unknown.Frob, no opset)", "imports no opset for domain 'com.unknown'"),
    "no_opset_imports": Expect("node 'relu' (Relu, no opset)", "imports no opset for domain 'ai.onnx'"),
    "string_input": Expect("graph value 'text'", "unsupported ONNX data type STRING"),
    "complex_input": Expect("graph value 'z'", "unsupported ONNX data type COMPLEX64"),
    "sequence_input": Expect("input 'seq' is not a tensor"),
    "constant_no_value": Expect("node 'const' (Constant, opset 17)", "exactly one value attribute, it has 0"),
    "constant_two_values": Expect("node 'const' (Constant, opset 17)", "exactly one value attribute, it has 2"),
    "constant_string": Expect("node 'const' (Constant, opset 17)", "string constants are not supported"),
    "constant_bad_tensor": Expect("node 'const' (Constant, opset 17)", "attribute 'value'",
                                  "stores 1 values but its shape needs 6"),
    "wrong_attribute_type": Expect("node 'transpose' (Transpose, opset 17)", "attribute 'perm' must be INTS, not FLOATS"),
    "wrong_attribute_type_string": Expect("node 'softmax' (Softmax, opset 17)", "attribute 'axis' must be INT, not STRING"),
    "too_few_inputs": Expect("node 'lonely_add' (Add, opset 17)", "input 1 is required but missing"),
    "missing_required_attribute": Expect("node 'cast' (Cast, opset 17)", "required attribute 'to' is missing"),
    "reshape_impossible": Expect("node 'bad_reshape' (Reshape, opset 17)", "(2, 3)", "(4, 5)"),
    "reshape_negative": Expect("node 'neg_reshape' (Reshape, opset 17)", "-2"),
    "reshape_two_minus_one": Expect("node 'mm_reshape' (Reshape, opset 17)", "-1"),
    "constant_of_shape_huge": Expect("node 'huge' (ConstantOfShape, opset 17)", "output 'y' would have shape",
                                     "more elements than fit in 64 bits"),
    "add_shapes_mismatch": Expect("node 'bad_add' (Add, opset 17)", "(2, 3)", "(4, 5)"),
    # Subgraphs, nesting, values nobody computes.
    "subgraph_dangling": Expect("node 'choose' (If, opset 17), subgraph 'then_branch': node 'then_relu' (Relu, opset 17)",
                                "input 'ghost'", "dangling input"),
    "nested_too_deep": Expect("not a valid ONNX model", "nested deeper than the parser's limit"),
    "output_op_never_makes": Expect("graph output 'extra' was not produced"),
    "constant_external_dotdot": Expect("node 'const' (Constant, opset 17)", "attribute 'value'",
                                       "'../outside.bin' contains '..'"),
    # Symbolic dimensions bound at compile time (dim_param).
    "symbolic_image": Expect(UNBOUND, "input 'image' dimension 0 ('batch')", "dimension 2 ('height')",
                             "dimension 3 ('width')", "give 'batch=N'"),
    "symbolic_image.whole": Expect("image: f32 (1, 3, 224, 200)", "y: f32 (1, 3, 224, 200)",
                                   shape=["image=1,3,224,200"], ok=True),
    "symbolic_image.symbols": Expect("image: f32 (2, 3, 8, 9)", "y: f32 (2, 3, 8, 9)",
                                     shape=["batch=2", "height=8", "width=9"], ok=True),
    "symbolic_image.partly": Expect(UNBOUND, "input 'image' dimension 3 ('width')", shape=["batch=2", "height=8"]),
    "symbolic_image.fixed_conflict": Expect("shape for input 'image' is (1, 4, 8, 8)", "fixes dimension 1 to 3",
                                            "(batch, 3, height, width)", shape=["image=1,4,8,8"]),
    "symbolic_image.rank_conflict": Expect("shape for input 'image' is (1, 3, 8)", "rank 4", shape=["image=1,3,8"]),
    "symbolic_image.unknown_name": Expect("shape for 'batchsize'", "no input or symbolic dimension of that name",
                                          "'image'", "'batch', 'height', 'width'", shape=["batchsize=1"]),
    "symbolic_image.symbol_two_sizes": Expect("'batch' is a symbolic dimension: give one size", shape=["batch=1,2"]),
    "symbolic_image.given_twice": Expect("shape for 'batch' is given twice", shape=["batch=1", "batch=1"]),
    "symbolic_image.symbol_vs_whole": Expect("dimension 'batch' is 2 from 'batch=2' but 1 from the shape of input 'image'",
                                             shape=["batch=2", "image=1,3,4,4"]),
    "symbolic_image.bad_syntax": Expect("shape 'image' has no '='", shape=["--shape=image"]),
    "symbolic_image.bad_size": Expect("shape 'image=1,x,3,3': 'x' is not a size", shape=["image=1,x,3,3"]),
    "symbolic_image.negative_size": Expect("shape 'batch=-1': '-1' is not a size", shape=["batch=-1"]),
    "symbolic_image.empty_size": Expect("shape 'image=1,,3,3': '' is not a size", shape=["image=1,,3,3"]),
    "symbolic_image.too_large": Expect("size 99999999999999999999 is too large", shape=["batch=99999999999999999999"]),
    "symbolic_shared": Expect(UNBOUND, "input 'a' dimension 0 ('batch')", "input 'b' dimension 0 ('batch')"),
    "symbolic_shared.from_other_input": Expect("a: f32 (5, 4)", "b: f32 (5, 4)", "y: f32 (5, 4)",
                                               shape=["a=5,4"], ok=True),
    "symbolic_shared.inputs_disagree": Expect("dimension 'batch' is 5 from the shape of input 'a'",
                                              "but 6 from the shape of input 'b'", shape=["a=5,4", "b=6,4"]),
    "symbolic_anonymous": Expect(UNBOUND, "input 'x' dimension 0 has no size or name", "give 'x[0]=N'",
                                 "or 'x=D1,D2,...'"),
    "symbolic_anonymous.whole": Expect("x: f32 (7, 8)", shape=["x=7,8"], ok=True),
    "symbolic_anonymous.axis": Expect("x: f32 (7, 8)", shape=["x[0]=7"], ok=True),
    "symbolic_anonymous.fixed_axis": Expect("shape for 'x[1]': dimension 1 of input 'x'", "is fixed to 8",
                                            shape=["x[1]=3"]),
    "symbolic_anonymous.no_axis": Expect("shape for 'x[5]': input 'x' has shape", "with no dimension 5",
                                         shape=["x[5]=3"]),
    "symbolic_anonymous.range": Expect("'x[0]=1..4': a range keeps a dimension symbolic, and this needs fixed shapes",
                                       shape=["x[0]=1..4"]),
    "symbolic_no_shape": Expect(UNBOUND, "input 'x' has no shape in the model"),
    "symbolic_no_shape.scalar": Expect("x: f32 ()", "y: f32 ()", shape=["x="], ok=True),
    "symbolic_huge_dim": Expect("input 'x' would have shape (1099511627776, 1099511627776, 1099511627776)",
                                "more elements than fit in 64 bits"),
}


def run_case(kiln, folder, expect):
    shape_args = []
    for spec in expect.shape:
        shape_args += [spec] if spec.startswith("--") else ["--shape", spec]
    command = [kiln, "check-onnx", str(folder / "model.onnx"), *shape_args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    text = result.stdout if expect.ok else result.stderr
    problems = []
    wanted_status = 0 if expect.ok else 1
    if result.returncode != wanted_status:
        problems.append(f"exit status {result.returncode}, expected {wanted_status}")
    problems += [f"missing {fragment!r}" for fragment in expect.fragments if fragment not in text]
    return problems, result


def main():
    if not ARGUMENTS:
        sys.exit(__doc__)
    kiln, only = ARGUMENTS[0], set(ARGUMENTS[1:])
    failures = ran = 0
    with tempfile.TemporaryDirectory(prefix="kiln-broken-models-") as root:
        corpus = make_broken_models.Corpus(root)
        make_broken_models.write_all(corpus)
        cases = sorted(p.name for p in pathlib.Path(root).iterdir() if (p / "model.onnx").exists())
        base_names = {name.split(".")[0] for name in EXPECTATIONS}
        for case in sorted(set(cases) - base_names):
            print(f"FAIL {case}: the corpus has this case but the test expects nothing of it")
            failures += 1
        for name, expect in EXPECTATIONS.items():
            if only and name not in only and name.split(".")[0] not in only:
                continue
            case = name.split(".")[0]
            if case not in cases:
                print(f"FAIL {name}: no such case in the corpus")
                failures += 1
                continue
            ran += 1
            problems, result = run_case(kiln, pathlib.Path(root) / case, expect)
            if problems:
                failures += 1
                print(f"FAIL {name}: {'; '.join(problems)}\n  stdout: {result.stdout.strip()}\n"
                      f"  stderr: {result.stderr.strip()}")
            else:
                print(f"ok   {name}: {(result.stdout if expect.ok else result.stderr).strip().splitlines()[-1]}")
    print(f"{ran - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
