"""The Python binding (python/kiln) end to end: kiln.compile mnist_8, load the plan from a path and
from bytes, check its inputs/outputs, run it on the model's four test data sets against their
reference outputs, run zero-copy into caller arrays, and check that C errors arrive as kiln.Error.

Two modes:
  test_python_binding.py --source-root DIR --kiln KILN_CLI --libkiln LIBKILN [--python VENV_PYTHON]
      the package of the source tree (python/), with KILN_LIBRARY=LIBKILN and KILN_CLI=KILN_CLI;
  test_python_binding.py --source-root DIR --installed SITE_PACKAGES --compiler bundled|cli --expect-version V
      the package installed from a wheel (test_wheel.py runs it in a fresh venv, from a temporary
      folder, with no PYTHONPATH and no KILN_* variables): kiln must come from SITE_PACKAGES, load
      its bundled libkiln, and compile through its bundled libkiln-compiler or through the CLI.
"""
import argparse
import glob
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--source-root", required=True)
parser.add_argument("--kiln")
parser.add_argument("--libkiln")
parser.add_argument("--python")
parser.add_argument("--installed", metavar="SITE_PACKAGES")
parser.add_argument("--compiler", choices=["bundled", "cli"])
parser.add_argument("--expect-version")
args = parser.parse_args()
if args.installed is None and (args.kiln is None or args.libkiln is None):
    parser.error("--kiln and --libkiln are needed unless --installed")
python_test_env.require_numpy_and_onnx(args.python)
model_folder = python_test_env.shared_model(args.source_root, "mnist_8")

import numpy as np  # noqa: E402

if args.installed is None:
    os.environ["KILN_LIBRARY"] = args.libkiln
    os.environ["KILN_CLI"] = args.kiln
    sys.path.insert(0, os.path.join(args.source_root, "python"))
import kiln  # noqa: E402

failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def inside(path, folder):
    return os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) == os.path.realpath(folder)


def mapped_files():
    """The files this process has mapped (what the dynamic loader really loaded)."""
    with open("/proc/self/maps") as maps:
        return {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}


# Every public name is documented, and every public function's type hints resolve.
import inspect  # noqa: E402
import typing  # noqa: E402

undocumented, unresolved = [], []
for public_name in kiln.__all__:
    value = getattr(kiln, public_name)
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        continue  # type aliases
    members = [value] + [member for name, member in vars(value).items()
                         if inspect.isclass(value) and inspect.isfunction(member) and not name.startswith("_")]
    for member in members:
        if not (member.__doc__ or "").strip():
            undocumented.append(member.__qualname__)
        try:
            hints = typing.get_type_hints(member)
        except Exception as failure:  # noqa: BLE001 (any failure to resolve is the finding)
            unresolved.append(f"{member.__qualname__}: {failure}")
            continue
        if inspect.isfunction(member) and "return" not in hints:
            unresolved.append(f"{member.__qualname__}: no return annotation")
check(not undocumented, f"every public class and function has a docstring (missing: {undocumented})")
check(not unresolved, f"every public function has type hints that resolve (bad: {unresolved})")

if args.installed is None:
    check(kiln.library_path() == args.libkiln, f"KILN_LIBRARY is loaded: {kiln.library_path()}")
else:
    site_packages = args.installed
    package_folder = os.path.join(site_packages, "kiln")
    check(inside(kiln.__file__, package_folder), f"kiln is imported from the venv: {kiln.__file__}")
    check(inside(kiln.library_path(), os.path.join(package_folder, "_lib")),
          f"the bundled libkiln is loaded: {kiln.library_path()}")
    check(os.path.realpath(kiln.library_path()) in mapped_files(), "the bundled libkiln is mapped into the process")
    check(kiln.__version__ == args.expect_version == kiln.version(),
          f"kiln.__version__ {kiln.__version__} = meson's {args.expect_version} = libkiln's {kiln.version()}")
    compiler = kiln.compiler_library_path()
    if args.compiler == "bundled":
        check(compiler is not None and inside(compiler, os.path.join(package_folder, "_lib")),
              f"kiln.compile uses the bundled libkiln-compiler: {compiler}")
    else:
        check(compiler is None, f"a runtime-only wheel compiles through the CLI (compiler library: {compiler})")
    for typed_file in ("py.typed", "__init__.py"):
        check(os.path.isfile(os.path.join(package_folder, typed_file)), f"kiln/{typed_file} is installed")


def expect_error(function, status, fragment, what):
    try:
        function()
    except kiln.Error as error:
        check(error.status == status and fragment in str(error), f"{what}: {error.status}: {error}")
        return
    check(False, f"{what}: no kiln.Error raised")


with tempfile.TemporaryDirectory(prefix="kiln_python_test_") as work:
    plan_path = os.path.join(work, "mnist.kiln")
    check(kiln.compile(os.path.join(model_folder, "model.onnx"), plan_path) == plan_path and
          os.path.getsize(plan_path) > 0, "kiln.compile writes the plan")
    check(kiln.version().count(".") == 2, f"kiln.version() = {kiln.version()}")
    plan = kiln.Plan(plan_path)
    print(plan)
    check(len(plan.inputs) == 1 and plan.inputs[0].dtype == np.float32 and plan.inputs[0].shape == (1, 1, 28, 28),
          "plan.inputs: one float32 (1, 1, 28, 28)")
    check(len(plan.outputs) == 1 and plan.outputs[0].dtype == np.float32 and plan.outputs[0].shape == (1, 10),
          "plan.outputs: one float32 (1, 10)")
    input_name, output_name = plan.inputs[0].name, plan.outputs[0].name

    data_sets = sorted(glob.glob(os.path.join(model_folder, "test_data_set_*")))
    for data_set in data_sets:
        x = python_test_env.read_tensor(os.path.join(data_set, "input_0.pb"))
        expected = python_test_env.read_tensor(os.path.join(data_set, "output_0.pb"))
        result = plan.run({input_name: x})
        error = float(np.max(np.abs(result[output_name] - expected)))
        check(list(result) == [output_name] and error <= 1e-4,
              f"{os.path.basename(data_set)}: max abs error {error:.2e} <= 1e-4")

    # Zero copy: the caller's aligned arrays are written in place and returned as they are.
    outputs = plan.empty_outputs()
    x = python_test_env.read_tensor(os.path.join(data_sets[0], "input_0.pb"))
    expected = python_test_env.read_tensor(os.path.join(data_sets[0], "output_0.pb"))
    result = plan.run({input_name: x}, outputs=outputs)
    check(result[output_name] is outputs[output_name] and outputs[output_name].ctypes.data % 64 == 0 and
          np.allclose(outputs[output_name], expected, atol=1e-4), "run(outputs=...) writes the caller's array")
    check(np.allclose(plan.run([x])[output_name], expected, atol=1e-4), "inputs as a list, by position")

    with open(plan_path, "rb") as f:
        from_bytes = kiln.Plan(f.read())
    check(np.allclose(from_bytes.run({input_name: x})[output_name], expected, atol=1e-4), "Plan(bytes) runs")

    # Errors carry libkiln's status and message.
    expect_error(lambda: kiln.Plan(os.path.join(work, "missing.kiln")), "KILN_ERROR_IO", "missing.kiln",
                 "a missing plan file")
    expect_error(lambda: kiln.Plan(b"not a plan at all, just some bytes" * 4), "KILN_ERROR_INVALID_PLAN", "",
                 "a buffer that is not a plan")
    expect_error(lambda: plan.run({input_name: np.zeros((1, 1, 28, 27), np.float32)}), "KILN_ERROR_INVALID_ARGUMENT",
                 input_name, "an input of the wrong shape")
    expect_error(lambda: plan.run({input_name: x.astype(np.float64)}), "KILN_ERROR_INVALID_ARGUMENT", input_name,
                 "an input of the wrong dtype")
    expect_error(lambda: plan.run({"no_such_input": x}), "KILN_ERROR_INVALID_ARGUMENT", "no_such_input",
                 "an unknown input name")
    expect_error(lambda: plan.run({input_name: x}, outputs={output_name: np.zeros((1, 20), np.float32)[:, ::2]}),
                 "KILN_ERROR_INVALID_ARGUMENT", "C-contiguous", "a non-contiguous output array")
    expect_error(lambda: kiln.compile(os.path.join(work, "missing.onnx"), os.path.join(work, "x.kiln")),
                 "KILN_ERROR_IO", "missing.onnx", "compiling a missing model")
    # DLPack in: a producer that is not an ndarray is read through __dlpack__ (zero copy), and the
    # results are DLPack producers in turn.
    class Producer:
        def __init__(self, array):
            self.array = array
            self.exported = 0
        def __dlpack__(self, **kwargs):
            self.exported += 1
            return self.array.__dlpack__(**kwargs)
        def __dlpack_device__(self):
            return self.array.__dlpack_device__()
    x0 = python_test_env.read_tensor(os.path.join(data_sets[0], "input_0.pb"))
    # (a writeable copy: numpy 1.x, which nvidia-pytriton pins, exports no read-only array via DLPack)
    producer = Producer(np.array(x0))
    via_dlpack = plan.run({input_name: producer})[output_name]
    direct = plan.run({input_name: x0})[output_name]
    check(producer.exported == 1 and np.array_equal(via_dlpack, direct),
          "an input given as a DLPack producer gives the same result")
    check(np.array_equal(np.from_dlpack(via_dlpack), direct), "an output is a DLPack producer")
    plan.close()
    expect_error(lambda: plan.run({input_name: x}), "KILN_ERROR_INVALID_ARGUMENT", "closed", "running a closed plan")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
