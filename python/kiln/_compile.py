"""kiln.compile: an ONNX model to a plan file, through libkiln-compiler when it loads, else through
the `kiln compile` command-line tool."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from typing import Iterable, Optional, Union

from . import _library
from ._errors import Error
from ._library import _CompileOptions

PathLike = Union[str, "os.PathLike[str]"]


def kiln_cli() -> Optional[str]:
    """The kiln CLI that compile() falls back to: $KILN_CLI, the build folder's tools/kiln, or
    `kiln` on PATH; None when there is none."""
    path = os.environ.get("KILN_CLI")
    if path:
        return path
    folder = _library.build_folder()
    if folder:
        built = os.path.join(folder, "tools", "kiln")
        if os.access(built, os.X_OK):
            return built
    return shutil.which("kiln")


def compile(model_path: PathLike, plan_path: PathLike, shapes: Iterable[str] = (), verbose: bool = False,
            values: Iterable[str] = (), precision: str = "fp32") -> PathLike:
    """Compiles the ONNX model at `model_path` into a plan file at `plan_path` for this CPU.

    shapes: bindings for symbolic or unknown dimensions, as for `kiln compile --shape`:
    "INPUT=D1,D2,..." (a whole input shape) or "SYMBOL=N" (one dim_param everywhere).
    values: as for `kiln compile --value`: "NAME=V1,V2,..." compiles for that one value of input
    NAME (the plan refuses others), "NAME=MIN..MAX" reads each element of an int64 input as a size
    at run time (docs/symbolic-shapes.md, decisions 14 and 19).
    precision: "fp32" (the default) or "bf16", as for `kiln compile --precision`: f32 matmuls by a
    weight on bf16 operands, on AMX tiles where the CPU has them (docs/optimisation.md).

    Uses libkiln-compiler's kiln_compile_onnx_file (include/kiln/compiler.h) when that library is
    found and loads (KILN_COMPILER_LIBRARY, the copy bundled in the wheel, the build folder, or the
    system library path; see kiln.compiler_library_path()). Otherwise it runs the `kiln compile`
    command-line tool (KILN_CLI, the build folder's tools/kiln, or `kiln` on PATH). Raises Error
    with the compiler's message when compiling fails. Returns `plan_path`."""
    shapes = [str(s) for s in shapes]
    values = [str(v) for v in values]
    lib = _library.compiler()
    if lib is not None:
        options = _CompileOptions()
        lib.kiln_compile_options_init(ctypes.byref(options))
        encoded = (ctypes.c_char_p * max(len(shapes), 1))(*[s.encode() for s in shapes])
        options.shapes, options.shape_count, options.verbose = encoded, len(shapes), int(bool(verbose))
        encoded_values = (ctypes.c_char_p * max(len(values), 1))(*[v.encode() for v in values])
        options.values, options.value_count = encoded_values, len(values)
        options.precision = str(precision).encode()
        status = lib.kiln_compile_onnx_file(os.fsencode(model_path), ctypes.byref(options), os.fsencode(plan_path))
        _library.check(status, lib)
        return plan_path
    cli = kiln_cli()
    if not cli:
        problem = _library.compiler_problem()
        raise Error("unsupported: compiling needs libkiln-compiler or the kiln CLI, and neither is available"
                    + (f" ({problem})" if problem else "")
                    + "; build kiln (ninja -C build), set KILN_COMPILER_LIBRARY or KILN_CLI, or use `kiln compile`",
                    "KILN_ERROR_IO")
    if not os.path.isfile(model_path):  # as libkiln-compiler reports it, not as a CLI failure
        raise Error(f"cannot open ONNX model '{os.fspath(model_path)}': No such file or directory", "KILN_ERROR_IO")
    arguments = [cli, "compile", os.fspath(model_path), "-o", os.fspath(plan_path)]
    if shapes:
        arguments += ["--shape"] + shapes
    for value in values:
        arguments += ["--value", value]
    arguments += ["--precision", str(precision)]
    completed = subprocess.run(arguments, capture_output=True, text=True)
    if verbose and completed.stderr:
        print(completed.stderr, end="")
    if completed.returncode != 0:
        lines = [line for line in completed.stderr.splitlines() if not line.startswith("kiln compile: [")]
        raise Error("\n".join(lines) or f"kiln compile exited with status {completed.returncode}",
                    "KILN_ERROR_INVALID_ARGUMENT")
    return plan_path
