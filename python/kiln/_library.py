"""Finding and loading libkiln (the runtime) and libkiln-compiler, with the ctypes signatures of the
C calls this package makes (include/kiln/kiln.h, include/kiln/compiler.h).

Search order, for each library: its environment variable (KILN_LIBRARY, KILN_COMPILER_LIBRARY) as
an explicit override; the copy bundled in an installed wheel (kiln/_lib/, named by _build_info);
a meson build folder (KILN_BUILD_DIR, or build/ of the checkout this package sits in when it is not
installed from a wheel); the system library path."""
from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import os
import threading
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

from ._errors import Error

_build_info: Optional[ModuleType]
try:  # written into wheels by python/backend; absent when running from a source checkout
    _build_info = importlib.import_module(f"{__package__}._build_info")
except ImportError:
    _build_info = None

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_BUNDLED_DIR = os.path.join(_PACKAGE_DIR, "_lib")


class _Tensor(ctypes.Structure):
    """struct kiln_tensor (kiln.h)."""
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_size_t),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p),
                ("byte_size", ctypes.c_size_t)]


class _RunOptions(ctypes.Structure):
    """struct kiln_run_options (kiln.h); `size` says how much of it this binding fills in."""
    _fields_ = [("size", ctypes.c_size_t), ("thread_count", ctypes.c_int), ("cancel", ctypes.c_void_p),
                ("tensors_on_device", ctypes.c_int), ("queue", ctypes.c_void_p),
                ("output_shapes", ctypes.POINTER(ctypes.c_int64))]


class _CompileOptions(ctypes.Structure):
    """struct kiln_compile_options (compiler.h)."""
    _fields_ = [("size", ctypes.c_size_t), ("shapes", ctypes.POINTER(ctypes.c_char_p)),
                ("shape_count", ctypes.c_size_t), ("verbose", ctypes.c_int),
                ("values", ctypes.POINTER(ctypes.c_char_p)), ("value_count", ctypes.c_size_t),
                ("precision", ctypes.c_char_p)]


def build_folder() -> Optional[str]:
    """The meson build folder searched for libraries and the kiln CLI: $KILN_BUILD_DIR, else the
    build/ folder of the source checkout this package sits in (None when installed from a wheel)."""
    folder = os.environ.get("KILN_BUILD_DIR")
    if folder:
        return folder
    if _build_info is None:
        return os.path.join(os.path.dirname(os.path.dirname(_PACKAGE_DIR)), "build")
    return None


def _find(variable: str, bundled_name: Optional[str], build_file: str, system_name: str) -> Optional[str]:
    """The path (or, from the system search, the bare file name) of a library, in the module's
    search order; None when no candidate exists."""
    override = os.environ.get(variable)
    if override:
        return override
    if bundled_name:
        bundled = os.path.join(_BUNDLED_DIR, bundled_name)
        if os.path.exists(bundled):
            return bundled
    folder = build_folder()
    if folder:
        built = os.path.join(folder, "capi", build_file)
        if os.path.exists(built):
            return built
    return ctypes.util.find_library(system_name)


_SIZE_P = ctypes.POINTER(ctypes.c_size_t)
_INT64_PP = ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))
_INFO_ARGUMENTS = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int),
                   _SIZE_P, _INT64_PP]
_Signatures = Dict[str, Tuple[Any, List[Any]]]  # C name: (restype, argtypes)
_RUNTIME_SIGNATURES: _Signatures = {
    "kiln_version": (ctypes.c_char_p, []),
    "kiln_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "kiln_error_message": (ctypes.c_char_p, []),
    "kiln_plan_load_file": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "kiln_plan_load_buffer": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
    "kiln_plan_free": (None, [ctypes.c_void_p]),
    "kiln_plan_input_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "kiln_plan_output_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "kiln_plan_input_info": (ctypes.c_int, _INFO_ARGUMENTS),
    "kiln_plan_output_info": (ctypes.c_int, _INFO_ARGUMENTS),
    "kiln_plan_run": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                     ctypes.POINTER(_Tensor), ctypes.c_size_t]),
    # Symbolic plans (kiln.h since 0.2.0).
    "kiln_plan_variable_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "kiln_plan_variable_info": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                               ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]),
    "kiln_plan_output_shape": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                              ctypes.c_size_t, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
                                              _SIZE_P]),
    # Sizes the run decides (docs/symbolic-shapes.md, stage 6): outputs whose shape comes back from the run.
    "kiln_plan_variable_source": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)]),
    "kiln_plan_run_with_options": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                                  ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                                  ctypes.POINTER(_RunOptions)]),
}
_COMPILER_SIGNATURES: _Signatures = {
    "kiln_compile_options_init": (None, [ctypes.POINTER(_CompileOptions)]),
    "kiln_compile_onnx_file": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_CompileOptions), ctypes.c_char_p]),
}


def _declare(lib: ctypes.CDLL, signatures: _Signatures) -> None:
    for name, (result, arguments) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = result, arguments


_lock = threading.Lock()
_runtime: Optional[ctypes.CDLL] = None
_runtime_path: Optional[str] = None
_compiler: Optional[ctypes.CDLL] = None
_compiler_path: Optional[str] = None
_compiler_searched = False
_compiler_problem = ""  # why a found libkiln-compiler was not usable (for compile()'s error)


def runtime() -> ctypes.CDLL:
    """libkiln, loaded on first use (raises Error when it cannot be found or loaded)."""
    global _runtime, _runtime_path
    with _lock:
        if _runtime is not None:
            return _runtime
        bundled = _build_info.LIBKILN if _build_info else None
        path = _find("KILN_LIBRARY", bundled, "libkiln.so", "kiln")
        if not path:
            raise Error("libkiln not found: install the kiln wheel (pip install ./python), build the checkout "
                        "(ninja -C build), or set KILN_LIBRARY to libkiln.so's path", "KILN_ERROR_IO")
        try:
            lib = ctypes.CDLL(path)
            _declare(lib, _RUNTIME_SIGNATURES)
        except (OSError, AttributeError) as failure:
            raise Error(f"cannot load libkiln from {path}: {failure}", "KILN_ERROR_IO") from failure
        _runtime, _runtime_path = lib, path
        return lib


def runtime_path() -> str:
    """The path libkiln was loaded from (loading it first)."""
    runtime()
    assert _runtime_path is not None
    return _runtime_path


def compiler() -> Optional[ctypes.CDLL]:
    """libkiln-compiler, or None when none was found or the one found cannot be loaded (its
    dependencies, LLVM and protobuf, are missing): then compiler_problem() says why. An explicit
    KILN_COMPILER_LIBRARY that does not load raises Error instead."""
    global _compiler, _compiler_path, _compiler_searched, _compiler_problem
    try:
        runtime()  # first, so that libkiln-compiler's libkiln dependency binds to this same libkiln
    except Error:
        pass  # the compiler library may still bring its own
    with _lock:
        if _compiler_searched:
            return _compiler
        _compiler_searched = True
        bundled = _build_info.LIBKILN_COMPILER if _build_info else None
        path = _find("KILN_COMPILER_LIBRARY", bundled, "libkiln-compiler.so", "kiln-compiler")
        if not path:
            return None
        try:
            lib = ctypes.CDLL(path)
            _declare(lib, _COMPILER_SIGNATURES)
            # Its error text comes from the libkiln it links (dlsym on its handle searches its
            # dependencies too), which holds the per-thread message the compiler sets.
            _declare(lib, {name: _RUNTIME_SIGNATURES[name] for name in ("kiln_error_message", "kiln_status_string")})
        except (OSError, AttributeError) as failure:
            if os.environ.get("KILN_COMPILER_LIBRARY"):
                raise Error(f"cannot load KILN_COMPILER_LIBRARY={path}: {failure}", "KILN_ERROR_IO") from failure
            _compiler_problem = f"libkiln-compiler at {path} does not load ({failure})"
            return None
        _compiler, _compiler_path = lib, path
        return lib


def compiler_path() -> Optional[str]:
    """The path libkiln-compiler was loaded from, or None when kiln.compile uses the CLI."""
    compiler()
    return _compiler_path


def compiler_problem() -> str:
    """Why a libkiln-compiler that was found could not be used ("" when none was found)."""
    return _compiler_problem


def check(status: int, lib: Optional[ctypes.CDLL] = None) -> None:
    """Raises Error with the calling thread's libkiln message when `status` is not KILN_OK."""
    if status != 0:
        lib = lib or runtime()
        message = lib.kiln_error_message().decode("utf-8", "replace")
        raise Error(message, lib.kiln_status_string(status).decode())
