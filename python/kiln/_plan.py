"""kiln.Plan: a loaded plan file run on numpy arrays (and DLPack producers), with TensorInfo and
aligned_empty, over libkiln's kiln_plan_* calls."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _library
from ._errors import Error
from ._library import _Tensor

# kiln_dtype values (kiln.h) and their numpy dtypes. bfloat16 has no numpy dtype: its bits travel
# as uint16.
_DTYPES = {
    1: np.dtype(np.bool_), 2: np.dtype(np.int8), 3: np.dtype(np.int16), 4: np.dtype(np.int32),
    5: np.dtype(np.int64), 6: np.dtype(np.uint8), 7: np.dtype(np.uint16), 8: np.dtype(np.uint32),
    9: np.dtype(np.uint64), 10: np.dtype(np.float16), 11: np.dtype(np.uint16), 12: np.dtype(np.float32),
    13: np.dtype(np.float64),
}
_KILN_DTYPE_OF = {dtype: code for code, dtype in _DTYPES.items() if code != 11}

PlanSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]
"""What Plan() loads: a plan file's path, or the plan's bytes."""
Inputs = Union[Mapping[str, Any], Sequence[Any]]
"""Plan.run's inputs: {name: array-like or DLPack producer}, or a list in the plan's input order."""
Outputs = Union[Mapping[str, np.ndarray], Sequence[np.ndarray]]
"""Plan.run's optional caller-owned output arrays: {name: ndarray}, or a list in output order."""


class TensorInfo(NamedTuple):
    """One plan input or output: its name, numpy dtype and shape."""

    name: str
    dtype: np.dtype
    shape: Tuple[int, ...]


def aligned_empty(shape: Union[int, Sequence[int]], dtype: npt.DTypeLike, alignment: int = 64) -> np.ndarray:
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
    from many threads at once (ctypes releases the GIL during the call).

    Attributes: `inputs` and `outputs`, lists of TensorInfo in the plan's order; `variables`,
    {name: (min, max)} of a symbolic plan's run-time sizes (empty for a fixed-shape plan), whose
    symbolic dimensions are -1 in the TensorInfo shapes: run() then takes inputs of any shapes in
    range and makes outputs of the shapes libkiln computes (kiln_plan_output_shape). `run_bound`:
    the names of the variables the run itself decides (a NonZero count; docs/symbolic-shapes.md,
    stage 6): outputs over them are allocated at their upper bound and returned as views of the
    real shape the run reports."""

    inputs: List[TensorInfo]
    outputs: List[TensorInfo]
    variables: Dict[str, Tuple[int, int]]

    def __init__(self, source: PlanSource) -> None:
        lib = _library.runtime()
        handle = ctypes.c_void_p()
        if isinstance(source, (bytes, bytearray, memoryview)):
            buffer = bytes(source)
            _library.check(lib.kiln_plan_load_buffer(buffer, len(buffer), ctypes.byref(handle)), lib)
        else:
            _library.check(lib.kiln_plan_load_file(os.fsencode(source), ctypes.byref(handle)), lib)
        self._lib = lib
        self._handle: Optional[ctypes.c_void_p] = handle
        self.inputs = self._infos(lib.kiln_plan_input_count, lib.kiln_plan_input_info)
        self.outputs = self._infos(lib.kiln_plan_output_count, lib.kiln_plan_output_info)
        self.variables = {}
        self.run_bound: Set[str] = set()
        for index in range(lib.kiln_plan_variable_count(handle)):
            name, low, high = ctypes.c_char_p(), ctypes.c_int64(), ctypes.c_int64()
            _library.check(lib.kiln_plan_variable_info(handle, index, ctypes.byref(name), ctypes.byref(low),
                                                       ctypes.byref(high)), lib)
            self.variables[(name.value or b"").decode()] = (low.value, high.value)
            source = ctypes.c_int()
            _library.check(lib.kiln_plan_variable_source(handle, index, ctypes.byref(source)), lib)
            if source.value == 1:  # KILN_VARIABLE_FROM_RUN
                self.run_bound.add((name.value or b"").decode())
        # Per thread, kiln_tensor arrays filled in once with the plan's own names, dtypes and shapes:
        # a run whose arrays match them only sets the data pointers (see run()). Per thread because
        # ctypes releases the GIL during kiln_plan_run, so threads may run one plan at once.
        self._prepared = threading.local()

    def _infos(self, count_function: Any, info_function: Any) -> List[TensorInfo]:
        infos = []
        for index in range(count_function(self._handle)):
            name, dtype, rank = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_size_t()
            shape = ctypes.POINTER(ctypes.c_int64)()
            _library.check(info_function(self._handle, index, ctypes.byref(name), ctypes.byref(dtype),
                                         ctypes.byref(rank), ctypes.byref(shape)), self._lib)
            infos.append(TensorInfo((name.value or b"").decode(), _DTYPES[dtype.value],
                                    tuple(shape[d] for d in range(rank.value))))
        return infos

    def close(self) -> None:
        """Frees the plan now (otherwise when the object is collected). No run may be in progress."""
        if getattr(self, "_handle", None):
            self._lib.kiln_plan_free(self._handle)
            self._handle = None

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "Plan":
        """`with kiln.Plan(path) as plan:` closes the plan when the block ends."""
        return self

    def __exit__(self, *exception: object) -> None:
        """Closes the plan."""
        self.close()

    def __repr__(self) -> str:
        return f"kiln.Plan(inputs={self.inputs}, outputs={self.outputs})"

    def empty_outputs(self) -> Dict[str, np.ndarray]:
        """{name: array}: 64-byte aligned output arrays to pass as `run(..., outputs=...)`."""
        if self.variables:
            raise Error("empty_outputs: the plan is symbolic (its output shapes follow from the inputs' "
                        "shapes); call run() without outputs", "KILN_ERROR_INVALID_ARGUMENT")
        return {info.name: aligned_empty(info.shape, info.dtype) for info in self.outputs}

    def _prepared_tensors(self) -> Tuple[Any, Any, List[Any]]:
        """(input kiln_tensors, output kiln_tensors, the shape arrays they point to) for this thread."""
        prepared = getattr(self._prepared, "tensors", None)
        if prepared is None:
            keep: List[Any] = []

            def build(infos: List[TensorInfo]) -> Any:
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

    def _run_prepared(self, inputs: List[Any], outputs: List[np.ndarray]) -> Optional[bool]:
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
        _library.check(self._lib.kiln_plan_run(self._handle, input_tensors, len(self.inputs), output_tensors,
                                               len(self.outputs)), self._lib)
        return True

    @staticmethod
    def _tensor(name: str, array: np.ndarray) -> Tuple[_Tensor, Any]:
        code = _KILN_DTYPE_OF.get(array.dtype)
        if code is None:
            raise Error(f"tensor '{name}': numpy dtype {array.dtype} has no kiln equivalent",
                        "KILN_ERROR_INVALID_ARGUMENT")
        shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        tensor = _Tensor(name.encode(), code, array.ndim, shape, array.ctypes.data, array.nbytes)
        return tensor, shape

    def run(self, inputs: Inputs, outputs: Optional[Outputs] = None) -> Dict[str, np.ndarray]:
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
        if (not self.variables and isinstance(inputs, dict) and len(inputs) == len(self.inputs)
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
        if not isinstance(inputs, Mapping):
            inputs = {info.name: value for info, value in zip(self.inputs, inputs)}
        keep = []  # arrays and shape buffers that must outlive the call
        input_tensors = (_Tensor * max(len(inputs), 1))()
        for k, (name, value) in enumerate(inputs.items()):
            # np.ascontiguousarray would make a 0-d array 1-d (numpy returns ndim >= 1): a scalar
            # input would reach libkiln as rank 1.
            array = np.asarray(_from_dlpack(name, value))
            if not array.flags.c_contiguous:
                array = np.ascontiguousarray(array)
            tensor, shape = self._tensor(name, array)
            input_tensors[k] = tensor
            keep += [array, shape, tensor]
        if outputs is None:
            outputs = {info.name: np.empty(self._output_shape(k, input_tensors, len(inputs)), info.dtype)
                       for k, info in enumerate(self.outputs)}
        elif not isinstance(outputs, Mapping):
            outputs = {info.name: value for info, value in zip(self.outputs, outputs)}
        output_tensors = (_Tensor * max(len(outputs), 1))()
        for k, (name, array) in enumerate(outputs.items()):
            if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or not array.flags.writeable:
                raise Error(f"output '{name}': outputs= takes writeable C-contiguous numpy arrays",
                            "KILN_ERROR_INVALID_ARGUMENT")
            tensor, shape = self._tensor(name, array)
            output_tensors[k] = tensor
            keep += [shape, tensor]
        if not self.run_bound:
            _library.check(self._lib.kiln_plan_run(self._handle, input_tensors, len(inputs), output_tensors,
                                                   len(outputs)), self._lib)
            return {info.name: outputs[info.name] for info in self.outputs if info.name in outputs}
        # The run reports every output's shape; each array (at its upper bound) is cut to it: its
        # first elements hold the output row-major.
        shapes = (ctypes.c_int64 * max(sum(len(info.shape) for info in self.outputs), 1))()
        options = _library._RunOptions(ctypes.sizeof(_library._RunOptions), 0, None, 0, None, shapes)
        _library.check(self._lib.kiln_plan_run_with_options(self._handle, input_tensors, len(inputs), output_tensors,
                                                            len(outputs), ctypes.byref(options)), self._lib)
        results, at = {}, 0
        for info in self.outputs:
            shape = tuple(shapes[at + d] for d in range(len(info.shape)))
            at += len(info.shape)
            if info.name in outputs:
                array = outputs[info.name]
                results[info.name] = array.reshape(-1)[:int(np.prod(shape))].reshape(shape)
        return results


    def _output_shape(self, index: int, input_tensors: Any, input_count: int) -> Tuple[int, ...]:
        """Output `index`'s shape for these inputs: the stored one, or libkiln's computation for a
        symbolic plan (its errors name the input at fault)."""
        info = self.outputs[index]
        if not self.variables:
            return info.shape
        shape = (ctypes.c_int64 * max(len(info.shape), 1))()
        _library.check(self._lib.kiln_plan_output_shape(self._handle, input_tensors, input_count, index, shape,
                                                        len(info.shape), None), self._lib)
        return tuple(shape[d] for d in range(len(info.shape)))


def _from_dlpack(name: str, value: Any) -> Any:
    """`value` as an ndarray: DLPack producers (other than ndarrays) go through np.from_dlpack, a
    zero-copy view of the producer's memory; a producer on another device is refused clearly."""
    if isinstance(value, np.ndarray) or not hasattr(value, "__dlpack__"):
        return value
    try:
        return np.from_dlpack(value)
    except (BufferError, RuntimeError, TypeError, ValueError) as failure:
        raise Error(f"input '{name}': cannot read it through DLPack ({failure})",
                    "KILN_ERROR_INVALID_ARGUMENT") from failure
