"""kiln for Python: load and run kiln plans with numpy, through libkiln's C API (ctypes, no extension).

    import numpy as np, kiln
    kiln.compile("model.onnx", "model.kiln", shapes=["N=1"])
    plan = kiln.Plan("model.kiln")            # or kiln.Plan(open("model.kiln", "rb").read())
    print(plan.inputs, plan.outputs)           # [TensorInfo(name, dtype, shape), ...]
    results = plan.run({"x": np.zeros((1, 64), np.float32)})   # {output name: ndarray}

Zero copy: pass `outputs=` arrays (C-contiguous, writeable, the plan's dtype and shape; see
`Plan.empty_outputs`, which allocates them 64-byte aligned so that libkiln writes into them in place).
DLPack: inputs may be any CPU DLPack producer (read through `np.from_dlpack`, no copy), and the
returned numpy arrays are DLPack producers.
Errors from the C library are raised as `kiln.Error`, carrying libkiln's message and status name.

Libraries are found in this order: the KILN_LIBRARY / KILN_COMPILER_LIBRARY environment variables,
the build folder of the repository this package sits in (build/capi, build/src), then the system's
library path. See `compile` for how models are compiled when libkiln-compiler is absent.
"""
import ctypes
import ctypes.util
import os
import shutil
import subprocess
import threading
from collections import namedtuple

import numpy as np

__all__ = ["Error", "Plan", "TensorInfo", "compile", "version", "aligned_empty"]

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BUILD = os.environ.get("KILN_BUILD_DIR", os.path.join(_REPO_ROOT, "build"))


class Error(RuntimeError):
    """A failed libkiln call: str(error) is the C library's message; .status its status name."""

    def __init__(self, message, status="KILN_ERROR"):
        super().__init__(message)
        self.status = status


TensorInfo = namedtuple("TensorInfo", "name dtype shape")
TensorInfo.__doc__ = "One plan input or output: its name, numpy dtype and shape (a tuple of ints)."

# kiln_dtype values (kiln.h) and their numpy dtypes. bfloat16 has no numpy dtype: its bits travel
# as uint16.
_DTYPES = {
    1: np.dtype(np.bool_), 2: np.dtype(np.int8), 3: np.dtype(np.int16), 4: np.dtype(np.int32),
    5: np.dtype(np.int64), 6: np.dtype(np.uint8), 7: np.dtype(np.uint16), 8: np.dtype(np.uint32),
    9: np.dtype(np.uint64), 10: np.dtype(np.float16), 11: np.dtype(np.uint16), 12: np.dtype(np.float32),
    13: np.dtype(np.float64),
}
_KILN_DTYPE_OF = {dtype: code for code, dtype in _DTYPES.items() if code != 11}


class _Tensor(ctypes.Structure):  # struct kiln_tensor
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_size_t),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p),
                ("byte_size", ctypes.c_size_t)]


class _CompileOptions(ctypes.Structure):  # struct kiln_compile_options (include/kiln/compiler.h)
    _fields_ = [("size", ctypes.c_size_t), ("shapes", ctypes.POINTER(ctypes.c_char_p)),
                ("shape_count", ctypes.c_size_t), ("verbose", ctypes.c_int)]


def _find_library(variable, file_names, folders, system_name):
    path = os.environ.get(variable)
    if path:
        return path
    for folder in folders:
        for name in file_names:
            candidate = os.path.join(_BUILD, folder, name)
            if os.path.exists(candidate):
                return candidate
    return ctypes.util.find_library(system_name)


_lib = None


def _library():
    """libkiln, loaded on first use, with the argument and result types of the calls used here."""
    global _lib
    if _lib is not None:
        return _lib
    path = _find_library("KILN_LIBRARY", ["libkiln.so"], ["capi"], "kiln")
    if not path:
        raise Error("libkiln not found: build it (ninja -C build) or set KILN_LIBRARY to libkiln.so's path")
    lib = ctypes.CDLL(path)
    size_p, int64_pp = ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))
    signatures = {
        "kiln_version": (ctypes.c_char_p, []),
        "kiln_status_string": (ctypes.c_char_p, [ctypes.c_int]),
        "kiln_error_message": (ctypes.c_char_p, []),
        "kiln_plan_load_file": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
        "kiln_plan_load_buffer": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
        "kiln_plan_free": (None, [ctypes.c_void_p]),
        "kiln_plan_input_count": (ctypes.c_size_t, [ctypes.c_void_p]),
        "kiln_plan_output_count": (ctypes.c_size_t, [ctypes.c_void_p]),
        "kiln_plan_input_info": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                                ctypes.POINTER(ctypes.c_int), size_p, int64_pp]),
        "kiln_plan_output_info": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                                 ctypes.POINTER(ctypes.c_int), size_p, int64_pp]),
        "kiln_plan_run": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                         ctypes.POINTER(_Tensor), ctypes.c_size_t]),
    }
    for name, (result, arguments) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = result, arguments
    _lib = lib
    return lib


def _check(status, lib=None):
    """Raises Error with the calling thread's libkiln message when `status` is not KILN_OK."""
    if status != 0:
        lib = lib or _library()
        message = lib.kiln_error_message().decode("utf-8", "replace")
        raise Error(message, lib.kiln_status_string(status).decode())


def version():
    """The version of the libkiln actually loaded, "MAJOR.MINOR.PATCH"."""
    return _library().kiln_version().decode()


def aligned_empty(shape, dtype, alignment=64):
    """An uninitialised C-contiguous array whose data is `alignment`-byte aligned (libkiln uses
    64-byte aligned buffers in place and copies others)."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(size + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset:offset + size].view(dtype).reshape(shape)


class Plan:
    """A loaded plan (libkiln's kiln_plan): `Plan(path)` or `Plan(bytes)`.

    Loading verifies the file (magic, version, hash, metadata, CPU features) and raises Error with
    libkiln's message when it fails. A plan is code: load only plans you trust. `run` may be called
    from many threads at once (ctypes releases the GIL during the call)."""

    def __init__(self, source):
        lib = _library()
        handle = ctypes.c_void_p()
        if isinstance(source, (bytes, bytearray, memoryview)):
            buffer = bytes(source)
            _check(lib.kiln_plan_load_buffer(buffer, len(buffer), ctypes.byref(handle)), lib)
        else:
            _check(lib.kiln_plan_load_file(os.fsencode(source), ctypes.byref(handle)), lib)
        self._lib, self._handle = lib, handle
        self.inputs = self._infos(lib.kiln_plan_input_count, lib.kiln_plan_input_info)
        self.outputs = self._infos(lib.kiln_plan_output_count, lib.kiln_plan_output_info)
        # Per thread, kiln_tensor arrays filled in once with the plan's own names, dtypes and shapes:
        # a run whose arrays match them only sets the data pointers (see run()). Per thread because
        # ctypes releases the GIL during kiln_plan_run, so threads may run one plan at once.
        self._prepared = threading.local()

    def _infos(self, count_function, info_function):
        infos = []
        for index in range(count_function(self._handle)):
            name, dtype, rank = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_size_t()
            shape = ctypes.POINTER(ctypes.c_int64)()
            _check(info_function(self._handle, index, ctypes.byref(name), ctypes.byref(dtype), ctypes.byref(rank),
                                 ctypes.byref(shape)), self._lib)
            infos.append(TensorInfo(name.value.decode(), _DTYPES[dtype.value],
                                    tuple(shape[d] for d in range(rank.value))))
        return infos

    def close(self):
        """Frees the plan now (otherwise when the object is collected). No run may be in progress."""
        if getattr(self, "_handle", None):
            self._lib.kiln_plan_free(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def __repr__(self):
        return f"kiln.Plan(inputs={self.inputs}, outputs={self.outputs})"

    def empty_outputs(self):
        """{name: array}: 64-byte aligned output arrays to pass as `run(..., outputs=...)`."""
        return {info.name: aligned_empty(info.shape, info.dtype) for info in self.outputs}

    def _prepared_tensors(self):
        """(input kiln_tensors, output kiln_tensors, the shape arrays they point to) for this thread."""
        prepared = getattr(self._prepared, "tensors", None)
        if prepared is None:
            keep = []
            def build(infos):
                tensors = (_Tensor * max(len(infos), 1))()
                for k, info in enumerate(infos):
                    shape = (ctypes.c_int64 * max(len(info.shape), 1))(*info.shape)
                    code = _KILN_DTYPE_OF.get(np.dtype(info.dtype))
                    if code is None:  # bfloat16 has no numpy dtype: such plans take the general path
                        return None
                    keep.append(shape)
                    tensors[k] = _Tensor(info.name.encode(), code, len(info.shape), shape, None, 0)
                return tensors
            prepared = (build(self.inputs), build(self.outputs), keep)
            self._prepared.tensors = prepared
        return prepared

    def _run_prepared(self, inputs, outputs):
        """The fast path of run(): every array has the plan's dtype and shape and is C-contiguous,
        given in plan order. Returns None (nothing run) when any is not."""
        input_tensors, output_tensors, _ = self._prepared_tensors()
        if input_tensors is None or output_tensors is None:
            return None
        for k, (info, array) in enumerate(zip(self.inputs, inputs)):
            if (type(array) is not np.ndarray or array.dtype != info.dtype or array.shape != info.shape
                    or not array.flags.c_contiguous):
                return None
            address = array.__array_interface__["data"][0]
            input_tensors[k].data = address
            input_tensors[k].byte_size = array.nbytes
        for k, array in enumerate(outputs):
            output_tensors[k].data = array.__array_interface__["data"][0]
            output_tensors[k].byte_size = array.nbytes
        _check(self._lib.kiln_plan_run(self._handle, input_tensors, len(self.inputs), output_tensors,
                                       len(self.outputs)), self._lib)
        return True

    @staticmethod
    def _tensor(name, array):
        code = _KILN_DTYPE_OF.get(array.dtype)
        if code is None:
            raise Error(f"tensor '{name}': numpy dtype {array.dtype} has no kiln equivalent",
                        "KILN_ERROR_INVALID_ARGUMENT")
        shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        tensor = _Tensor(name.encode(), code, array.ndim, shape, array.ctypes.data, array.nbytes)
        return tensor, shape

    def run(self, inputs, outputs=None):
        """Runs the plan; returns {output name: ndarray} in the plan's output order.

        inputs: {name: array-like} with every plan input (or a list in the plan's input order).
        Any DLPack producer on the CPU (an object with __dlpack__: torch, jax, cupy's host arrays…)
        is read through DLPack without a copy when it is C-contiguous. The returned numpy arrays
        are DLPack producers in turn (numpy's own __dlpack__).
        Arrays of the plan's dtype are used as they are (non-contiguous ones are copied first);
        libkiln checks names, dtypes and shapes and its message is raised as Error.
        outputs: optional {name: ndarray} (or a list in output order) that libkiln writes into
        directly, with no copy; each must be C-contiguous, writeable, of the plan's dtype and shape.
        These same arrays are returned."""
        if self._handle is None:
            raise Error("the plan is closed", "KILN_ERROR_INVALID_ARGUMENT")
        # The common case (the plan's inputs by name, in order, as matching arrays; outputs new or
        # given as matching writeable arrays) reuses prepared kiln_tensors; anything else takes the
        # general path below, where libkiln's checks name what is wrong.
        if (isinstance(inputs, dict) and len(inputs) == len(self.inputs)
                and all(name == info.name for name, info in zip(inputs, self.inputs))):
            if outputs is None:
                output_arrays = [np.empty(info.shape, info.dtype) for info in self.outputs]
            elif (isinstance(outputs, dict) and len(outputs) == len(self.outputs)
                  and all(name == info.name and type(array) is np.ndarray and array.dtype == info.dtype
                          and array.shape == info.shape and array.flags.c_contiguous and array.flags.writeable
                          for (name, array), info in zip(outputs.items(), self.outputs))):
                output_arrays = list(outputs.values())
            else:
                output_arrays = None
            if output_arrays is not None and self._run_prepared(list(inputs.values()), output_arrays):
                return {info.name: array for info, array in zip(self.outputs, output_arrays)}
        if not isinstance(inputs, dict):
            inputs = {info.name: value for info, value in zip(self.inputs, inputs)}
        keep = []  # arrays and shape buffers that must outlive the call
        input_tensors = (_Tensor * max(len(inputs), 1))()
        for k, (name, value) in enumerate(inputs.items()):
            array = np.ascontiguousarray(_from_dlpack(name, value))
            tensor, shape = self._tensor(name, array)
            input_tensors[k] = tensor
            keep += [array, shape, tensor]
        if outputs is None:
            outputs = {info.name: np.empty(info.shape, info.dtype) for info in self.outputs}
        elif not isinstance(outputs, dict):
            outputs = {info.name: value for info, value in zip(self.outputs, outputs)}
        output_tensors = (_Tensor * max(len(outputs), 1))()
        for k, (name, array) in enumerate(outputs.items()):
            if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or not array.flags.writeable:
                raise Error(f"output '{name}': outputs= takes writeable C-contiguous numpy arrays",
                            "KILN_ERROR_INVALID_ARGUMENT")
            tensor, shape = self._tensor(name, array)
            output_tensors[k] = tensor
            keep += [shape, tensor]
        _check(self._lib.kiln_plan_run(self._handle, input_tensors, len(inputs), output_tensors, len(outputs)),
               self._lib)
        return {info.name: outputs[info.name] for info in self.outputs if info.name in outputs}


def _from_dlpack(name, value):
    """`value` as an ndarray: DLPack producers (other than ndarrays) go through np.from_dlpack, a
    zero-copy view of the producer's memory; a producer on another device is refused clearly."""
    if isinstance(value, np.ndarray) or not hasattr(value, "__dlpack__"):
        return value
    try:
        return np.from_dlpack(value)
    except (BufferError, RuntimeError, TypeError, ValueError) as failure:
        raise Error(f"input '{name}': cannot read it through DLPack ({failure})",
                    "KILN_ERROR_INVALID_ARGUMENT") from failure


# ---------------------------------------------------------------------------------------------------
# Compiling

def _compiler_library():
    """libkiln-compiler with kiln_compile_onnx_file, or None when it is not found."""
    path = _find_library("KILN_COMPILER_LIBRARY", ["libkiln-compiler.so"], ["capi", "src", "compiler"],
                         "kiln-compiler")
    if not path:
        return None
    try:
        lib = ctypes.CDLL(path)
        lib.kiln_compile_onnx_file  # noqa: B018 (probe the symbol)
    except (OSError, AttributeError):
        return None
    lib.kiln_compile_options_init.restype = None
    lib.kiln_compile_options_init.argtypes = [ctypes.POINTER(_CompileOptions)]
    lib.kiln_compile_onnx_file.restype = ctypes.c_int
    lib.kiln_compile_onnx_file.argtypes = [ctypes.c_char_p, ctypes.POINTER(_CompileOptions), ctypes.c_char_p]
    # The error text: the compiler library's own kiln_error_message when it exports one (dlsym on
    # its handle also finds libkiln's, when it links libkiln), else libkiln's.
    for name, result, arguments in (("kiln_error_message", ctypes.c_char_p, []),
                                    ("kiln_status_string", ctypes.c_char_p, [ctypes.c_int])):
        try:
            function = getattr(lib, name)
            function.restype, function.argtypes = result, arguments
        except AttributeError:
            setattr(lib, name, getattr(_library(), name))
    return lib


def _kiln_cli():
    path = os.environ.get("KILN_CLI")
    if path:
        return path
    built = os.path.join(_BUILD, "tools", "kiln")
    return built if os.access(built, os.X_OK) else shutil.which("kiln")


def compile(model_path, plan_path, shapes=(), verbose=False):
    """Compiles the ONNX model at `model_path` into a plan file at `plan_path` for this CPU.

    shapes: bindings for symbolic or unknown dimensions, as for `kiln compile --shape`:
    "INPUT=D1,D2,..." (a whole input shape) or "SYMBOL=N" (one dim_param everywhere).

    Uses libkiln-compiler's kiln_compile_onnx_file (include/kiln/compiler.h) when that library is
    found (KILN_COMPILER_LIBRARY, the repository's build folder, or the system library path);
    otherwise it runs the `kiln compile` command-line tool (KILN_CLI, build/tools/kiln, or `kiln`
    on PATH) and raises Error with the tool's message when it fails. Returns `plan_path`."""
    shapes = [str(s) for s in shapes]
    lib = _compiler_library()
    if lib is not None:
        options = _CompileOptions()
        lib.kiln_compile_options_init(ctypes.byref(options))
        encoded = (ctypes.c_char_p * max(len(shapes), 1))(*[s.encode() for s in shapes])
        options.shapes, options.shape_count, options.verbose = encoded, len(shapes), int(bool(verbose))
        status = lib.kiln_compile_onnx_file(os.fsencode(model_path), ctypes.byref(options), os.fsencode(plan_path))
        _check(status, lib)
        return plan_path
    cli = _kiln_cli()
    if not cli:
        raise Error("neither libkiln-compiler nor the kiln CLI was found (build kiln: ninja -C build)")
    arguments = [cli, "compile", os.fspath(model_path), "-o", os.fspath(plan_path)]
    if shapes:
        arguments += ["--shape"] + shapes
    completed = subprocess.run(arguments, capture_output=True, text=True)
    if verbose and completed.stderr:
        print(completed.stderr, end="")
    if completed.returncode != 0:
        lines = [line for line in completed.stderr.splitlines() if not line.startswith("kiln compile: [")]
        raise Error("\n".join(lines) or f"kiln compile exited with status {completed.returncode}",
                    "KILN_ERROR_INVALID_ARGUMENT")
    return plan_path
