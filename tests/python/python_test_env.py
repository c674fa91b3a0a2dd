"""Shared start-up of the Python tests: pick an interpreter with numpy, find the shared models.

Meson runs these tests with the system python3; when it lacks numpy (or onnx) the test re-runs
itself with the project's .venv python (scripts/lib/python_env.sh) or $KILN_TEST_PYTHON, and exits
77 (skipped) when neither has them."""
import argparse
import os
import subprocess
import sys


def require_numpy_and_onnx(venv_python):
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
        return
    except ImportError:
        pass
    candidate = os.environ.get("KILN_TEST_PYTHON") or venv_python
    if candidate and os.access(candidate, os.X_OK) and not os.environ.get("KILN_TEST_REEXEC"):
        os.environ["KILN_TEST_REEXEC"] = "1"
        os.execv(candidate, [candidate] + sys.argv)
    print("skip: no Python with numpy and onnx (create .venv: scripts/lib/python_env.sh)")
    sys.exit(77)


def shared_model(source_root, name):
    """The folder of ../shared/data/models/NAME, or exit 77 when it is absent."""
    folder = os.path.join(source_root, "..", "shared", "data", "models", name)
    if not os.path.isfile(os.path.join(folder, "model.onnx")):
        print(f"skip: {folder} is absent")
        sys.exit(77)
    return folder


def read_tensor(path):
    from onnx import TensorProto, numpy_helper

    tensor = TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


def save_model(path, nodes, inputs, outputs, initializers, opset=17):
    """Writes a checked single-graph ONNX model; `initializers` is a list of (name, numpy array)."""
    import onnx
    from onnx import helper, numpy_helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def cli_arguments():
    """The arguments meson passes to the CLI tests: --source-root, --kiln and --python."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-root", required=True)
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--python")
    return parser.parse_args()


def binding_test_setup():
    """The start of the tests that run plans through the Python binding against onnxruntime: parses
    --source-root, --kiln, --libkiln, --python, --target and --probe (run first: its exit status,
    77 where the target's device is absent, ends the test when it is not 0), re-runs under a Python with numpy and onnx (or
    exits 77), exits 77 without onnxruntime, and points the binding at the build's libkiln and CLI.
    Returns (args, onnxruntime module, kiln module)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-root", required=True)
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--libkiln", required=True)
    parser.add_argument("--python")
    # Plans for a device (tests that run on every backend): --target opencl|cuda and a probe
    # program (tests/opencl/opencl-probe, tests/cuda/cuda-probe) that exits 77 where there is none.
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--probe")
    parser.add_argument("--probe-arg", action="append", default=[])  # cuda-probe --device: a GPU, not NVRTC alone
    args = parser.parse_args()
    if args.probe:
        probe = subprocess.run([args.probe, *args.probe_arg], capture_output=True, text=True)
        print(probe.stdout.strip())
        if probe.returncode != 0:
            sys.exit(probe.returncode)
    require_numpy_and_onnx(args.python)
    try:
        import onnxruntime
    except ImportError:
        print("skip: onnxruntime is not installed (scripts/lib/python_env.sh installs it)")
        sys.exit(77)
    os.environ["KILN_LIBRARY"] = args.libkiln
    os.environ["KILN_CLI"] = args.kiln
    sys.path.insert(0, os.path.join(args.source_root, "python"))
    import kiln

    return args, onnxruntime, kiln


def cpu_flags():
    """The CPU's flags as /proc/cpuinfo lists them (a set), or None where it does not say."""
    try:
        with open("/proc/cpuinfo") as f:
            line = next(l for l in f if l.startswith("flags"))
    except (OSError, StopIteration):
        return None
    return set(line.split(":", 1)[1].split())


def amx_bf16_target():
    """Whether kiln's CPU target here has AMX bf16 tiles (codegen/llvm/llvm_target.cpp): the CPU's
    flags unless KILN_CPU_TARGET or KILN_AMX switch them off; None where /proc/cpuinfo does not say."""
    if os.environ.get("KILN_AMX") == "0" or (os.environ.get("KILN_CPU_TARGET") or "host") != "host":
        return False
    flags = cpu_flags()
    if flags is None:
        return None
    return {"amx_tile", "amx_bf16", "avx512f"} <= flags


def round_to_bf16(values):
    """float32 values rounded to the nearest bf16 (ties to even), as float64 (numpy)."""
    import numpy as np

    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


class Checks:
    """Named checks that print ok/FAIL and are counted, and a runner for the kiln CLI."""

    def __init__(self, kiln_path):
        self.kiln_path = kiln_path
        self.failures = []

    def check(self, condition, what):
        print(("ok    " if condition else "FAIL  ") + what)
        if not condition:
            self.failures.append(what)

    def kiln(self, *arguments, env_extra=None):
        env = dict(os.environ, **env_extra) if env_extra else None
        completed = subprocess.run([self.kiln_path, *arguments], capture_output=True, text=True, env=env)
        print(f"$ kiln {' '.join(arguments)}  -> {completed.returncode}\n{completed.stdout}{completed.stderr}")
        return completed

    def finish(self):
        """Prints the failure count and exits 1 when any check failed."""
        print(f"{len(self.failures)} failure(s)")
        sys.exit(1 if self.failures else 0)
