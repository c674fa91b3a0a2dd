"""The serving tests' harness: a real `tritonserver` (from the nvidia-pytriton wheel) on free ports
of 127.0.0.1, with a temporary model repository and a backend directory holding the built
libtriton_kiln.so, started in explicit model-control mode and always stopped at the end.

Also installs nvidia-pytriton and tritonclient[http,grpc] into the running (the project's .venv)
Python on first use, and exits 77 (skipped) naming what is missing when pip cannot reach them.
nvidia-pytriton goes in without its dependencies: it pins numpy<2, which would downgrade the numpy
every other test of the .venv uses, and only its tritonserver executable is used here (the
executable's libraries come in its wheel)."""
import argparse
import atexit
import glob
import importlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import python_test_env  # noqa: E402

PACKAGES = ["nvidia-pytriton", "tritonclient[http,grpc]"]
# What pip installs for them, in order: pytriton without dependencies (see above).
PIP_INSTALLS = [["--no-deps", "nvidia-pytriton"], ["tritonclient[http,grpc]"]]


def arguments():
    """--source-root, --kiln, --backend (libtriton_kiln.so), --libkiln, --compiler-library, --python."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-root", required=True)
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--libkiln", required=True)
    parser.add_argument("--compiler-library", required=True)
    parser.add_argument("--python")
    args = parser.parse_args()
    python_test_env.require_numpy_and_onnx(args.python)
    return args


def require_triton():
    """Returns the tritonserver executable, installing the packages into this Python if needed."""
    def present():
        importlib.invalidate_caches()
        if importlib.util.find_spec("pytriton") is None:  # located, not imported: its dependencies are not installed
            return False
        try:
            import tritonclient.grpc  # noqa: F401
            import tritonclient.http  # noqa: F401
            return True
        except ImportError:
            return False

    if not present():
        print(f"installing {' '.join(PACKAGES)} into {sys.prefix}", flush=True)
        for install in PIP_INSTALLS:
            pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                  *install], capture_output=True, text=True)
            if pip.returncode != 0:
                break
        if pip.returncode != 0 or not present():
            print(pip.stdout + pip.stderr)
            print(f"skip: cannot install {' and '.join(PACKAGES)} with pip (no network?)")
            sys.exit(77)
    package = importlib.util.find_spec("pytriton").submodule_search_locations[0]

    server = os.path.join(package, "tritonserver", "bin", "tritonserver")
    if not os.access(server, os.X_OK):
        print(f"skip: nvidia-pytriton has no tritonserver at {server}")
        sys.exit(77)
    return server


def shared_folder(source_root, *parts):
    folder = os.path.join(source_root, "..", "shared", "data", *parts)
    if not os.path.isfile(os.path.join(folder, "model.onnx")):
        print(f"skip: {folder} is absent")
        sys.exit(77)
    return os.path.realpath(folder)


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def write_model(repository, name, config, files, version=1):
    """A model folder: config.pbtxt and version/<file> for each (file name, source path or bytes);
    a path is linked, not copied."""
    folder = os.path.join(repository, name)
    os.makedirs(os.path.join(folder, str(version)), exist_ok=True)
    with open(os.path.join(folder, "config.pbtxt"), "w") as f:
        f.write(config)
    for file_name, source in files.items():
        target = os.path.join(folder, str(version), file_name)
        if isinstance(source, bytes):
            with open(target, "wb") as f:
                f.write(source)
        else:
            os.symlink(source, target)


class TritonServer:
    """One tritonserver process; use as a context manager (it is stopped on exit, also on failure,
    and at interpreter exit or SIGTERM if the test dies first)."""

    def __init__(self, executable, repository, args, work, extra=(), env=None, with_compiler=True, name="backends"):
        # The backend folder as docs/serving.md lays it out: the backend with libkiln beside it
        # (found through its $ORIGIN run path) and libkiln-compiler there too (found beside libkiln).
        self.backend_directory = os.path.join(work, name)
        folder = os.path.join(self.backend_directory, "kiln")
        os.makedirs(folder, exist_ok=True)
        for source, name in ((args.backend, "libtriton_kiln.so"), (args.libkiln, "libkiln.so.0")):
            if not os.path.exists(os.path.join(folder, name)):
                shutil.copy(os.path.realpath(source), os.path.join(folder, name))
        if with_compiler and not os.path.lexists(os.path.join(folder, "libkiln-compiler.so.0")):
            os.symlink(os.path.realpath(args.compiler_library), os.path.join(folder, "libkiln-compiler.so.0"))
        self.env = env
        self.clients = []  # closed before the server stops, which otherwise waits for their connections
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.log_path = os.path.join(work, f"tritonserver-{self.http_port}.log")
        self.command = [executable, f"--model-repository={repository}",
                        f"--backend-directory={self.backend_directory}",
                        "--http-address=127.0.0.1", f"--http-port={self.http_port}",
                        "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc_port}",
                        "--metrics-address=127.0.0.1", f"--metrics-port={self.metrics_port}",
                        "--model-control-mode=explicit", "--exit-on-error=false", "--exit-timeout-secs=5", *extra]
        self.process = None

    def __enter__(self):
        log = open(self.log_path, "w")
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                        env={**os.environ, **(self.env or {})})
        atexit.register(self.stop)
        signal.signal(signal.SIGTERM, lambda *_: (self.stop(), sys.exit(1)))
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.process.returncode}:\n{self.log()}")
            try:
                if urllib.request.urlopen(self.url("/v2/health/live"), timeout=1).status == 200:
                    return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"tritonserver did not become live in 60 s:\n{self.log()}")

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        for client in self.clients:
            try:
                client.close()
            except Exception:  # a client already broken by a failing test must not stop the shutdown
                pass
        self.clients = []
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def alive(self):
        return self.process.poll() is None

    def url(self, path):
        return f"http://127.0.0.1:{self.http_port}{path}"

    def get_json(self, path):
        with urllib.request.urlopen(self.url(path), timeout=10) as response:
            return json.loads(response.read())

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as response:
            return response.read().decode()

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def rss_kib(self):
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def http(self, **options):
        import tritonclient.http as http

        self.clients.append(http.InferenceServerClient(f"127.0.0.1:{self.http_port}", **options))
        return self.clients[-1]

    def grpc(self):
        import tritonclient.grpc as grpc

        self.clients.append(grpc.InferenceServerClient(f"127.0.0.1:{self.grpc_port}"))
        return self.clients[-1]


def infer(client, module, model, inputs, outputs=None):
    """One inference through a tritonclient (module: tritonclient.http or .grpc): inputs is a dict of
    name -> numpy array; returns dict name -> numpy array."""
    from tritonclient.utils import np_to_triton_dtype

    request = []
    for name, array in inputs.items():
        item = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        item.set_data_from_numpy(array)
        request.append(item)
    wanted = [module.InferRequestedOutput(name) for name in outputs] if outputs else None
    result = client.infer(model, request, outputs=wanted)
    names = outputs or [o["name"] for o in (result.get_response()["outputs"] if module.__name__.endswith("http")
                                            else result.get_response(as_json=True)["outputs"])]
    return {name: result.as_numpy(name) for name in names}


def read_test_set(folder):
    """{name: array} for the inputs and outputs of a test_data_set folder (TensorProto names)."""
    from onnx import TensorProto, numpy_helper

    inputs, outputs = {}, {}
    for path in sorted(glob.glob(os.path.join(folder, "*.pb"))):
        tensor = TensorProto()
        with open(path, "rb") as f:
            tensor.ParseFromString(f.read())
        (inputs if os.path.basename(path).startswith("input") else outputs)[tensor.name] = numpy_helper.to_array(tensor)
    return inputs, outputs


def close(actual, expected, atol, rtol=1e-3):
    import numpy as np

    return (actual is not None and actual.shape == expected.shape and
            bool(np.all(np.abs(actual.astype(np.float64) - expected) <= atol + rtol * np.abs(expected))))
