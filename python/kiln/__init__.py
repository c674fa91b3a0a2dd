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
the copies bundled in the wheel (kiln/_lib), the meson build folder (KILN_BUILD_DIR, or build/ of the
checkout when running from the source tree), then the system's library path; `library_path()` and
`compiler_library_path()` say which were loaded. See `compile` for how models are compiled when
libkiln-compiler is absent, and python/README.md for installing the package.
"""
from __future__ import annotations

from typing import Optional

from . import _library, _version
from ._compile import compile
from ._errors import Error
from ._plan import Inputs, Outputs, Plan, PlanSource, TensorInfo, aligned_empty

__all__ = ["Error", "Plan", "TensorInfo", "compile", "version", "aligned_empty", "library_path",
           "compiler_library_path", "Inputs", "Outputs", "PlanSource"]


def version() -> str:
    """The version of the libkiln actually loaded, "MAJOR.MINOR.PATCH"."""
    return str(_library.runtime().kiln_version().decode())


def library_path() -> str:
    """The path of the libkiln this package loaded (loading it first; see the module docstring for
    the search order)."""
    return _library.runtime_path()


def compiler_library_path() -> Optional[str]:
    """The path of the libkiln-compiler that `compile` uses, or None when there is none that loads
    and `compile` runs the kiln CLI instead."""
    return _library.compiler_path()


__version__: str = _version.package_version()
"""kiln's version (meson.build's project version); `version()` is the loaded libkiln's."""
