"""kiln's PEP 517 build backend (python/pyproject.toml): a wheel of python/kiln that carries libkiln,
and libkiln-compiler when the build has it, taken from an existing meson build of this repository.

It needs only the standard library (plus tomli before Python 3.11): no setuptools, no wheel package,
nothing to download, so `pip install ./python` works offline, with or without build isolation.

Settings (pip's --config-settings KEY=VALUE, else the environment variable):
  build-dir  (KILN_BUILD_DIR)       the meson build folder; default: build/ of this checkout
  compiler   (KILN_WHEEL_COMPILER)  auto (default: bundle libkiln-compiler when the build has it),
                                    yes (fail without it) or no (a runtime-only wheel)
  strip      (KILN_WHEEL_STRIP)     yes (default: the bundled copies lose their debug information,
                                    70 MB -> 7 MB for libkiln-compiler) or no
  platform   (KILN_WHEEL_PLATFORM)  auto (default: linux_ARCH, ARCH being libkiln's: a cross build's
                                    wheel is for its architecture) or manylinux_2_28 (runtime wheels
                                    only: refused unless libkiln imports nothing newer than glibc
                                    2.28 and nothing but libc, libdl and libpthread; docs/installing.md)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from typing import Any, Dict, List, Optional

from .elf_platform import architecture, newest_glibc, required_versions
from .elf_soname import read_soname
from .meson_build import BuildError, MesonBuild
from .project_metadata import distribution_name, metadata_text, read_project
from .wheel_writer import Entry, write_wheel

PROJECT_FOLDER = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # python/
REPOSITORY = os.path.dirname(PROJECT_FOLDER)
PACKAGE = "kiln"
BUNDLED_FOLDER = f"{PACKAGE}/_lib"  # kiln/_library.py looks here


def _setting(config_settings: Optional[Dict[str, Any]], key: str, variable: str, default: str) -> str:
    value = (config_settings or {}).get(key)
    if isinstance(value, list):  # pip passes a repeated setting as a list: the last one wins
        value = value[-1]
    return value or os.environ.get(variable) or default


# What a manylinux_2_28 libkiln may need: the libraries every glibc system has (PEP 600), at glibc
# 2.28's symbol versions at most.
_MANYLINUX_LIBRARIES = {"libc.so.6", "libdl.so.2", "libpthread.so.0", "libm.so.6", "ld-linux-x86-64.so.2",
                        "ld-linux-aarch64.so.1"}
_MANYLINUX_GLIBC = (2, 28)


def wheel_tag(libkiln: Optional[str] = None, platform: str = "auto") -> str:
    """py3-none-PLATFORM: ctypes needs no particular Python ABI, but the libraries are native code
    for one architecture, libkiln's (this machine's when no library is given). "auto" gives
    linux_ARCH (not audited: libkiln-compiler links the build machine's LLVM; `auditwheel repair`
    makes that wheel manylinux, docs/installing.md); "manylinux_2_28" gives manylinux_2_28_ARCH."""
    if libkiln is None:
        return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{'linux' if platform == 'auto' else platform}_{architecture(libkiln)}"


def _check_manylinux(libkiln: str) -> None:
    """Refuses a manylinux_2_28 tag that libkiln would not honour (a build without capi/glibc_baseline.c,
    such as a sanitizer build, imports newer glibc versions)."""
    needed = required_versions(libkiln)
    foreign = sorted(set(needed) - _MANYLINUX_LIBRARIES)
    if foreign:
        raise BuildError(f"platform=manylinux_2_28: {libkiln} needs {', '.join(foreign)}, which manylinux does not allow")
    newest = newest_glibc(libkiln)
    if newest > _MANYLINUX_GLIBC:
        raise BuildError(f"platform=manylinux_2_28: {libkiln} imports GLIBC_{newest[0]}.{newest[1]} symbols "
                         "(build it where capi/glibc_baseline.c applies: a plain, non-sanitizer build)")


def _package_files() -> List[Entry]:
    """The Python sources and py.typed of python/kiln (no caches, no stray _build_info)."""
    entries = []
    root = os.path.join(PROJECT_FOLDER, PACKAGE)
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(s for s in subfolders if s != "__pycache__" and s != "_lib")
        for name in files:
            if not (name.endswith(".py") or name == "py.typed") or name == "_build_info.py":
                continue
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                entries.append((os.path.relpath(path, PROJECT_FOLDER).replace(os.sep, "/"), f.read(), False))
    return entries


def _build_info(version: str, libkiln: str, compiler: Optional[str]) -> bytes:
    return (f'"""Written by python/backend when this wheel was built: what kiln/_library.py loads."""\n'
            f"VERSION = {version!r}\nLIBKILN = {libkiln!r}\nLIBKILN_COMPILER = {compiler!r}\n").encode()


def _library_entry(path: str, strip: bool) -> Entry:
    """A built library under its SONAME (the name its dependents ask the loader for), without its
    debug information when `strip` (the build folder's own file is left as it is)."""
    name = read_soname(path) or os.path.basename(path)
    if not strip:
        with open(path, "rb") as f:
            return (f"{BUNDLED_FOLDER}/{name}", f.read(), True)
    # A cross-built library needs its architecture's binutils, unless this machine is of that architecture.
    native = sysconfig.get_platform().endswith(architecture(path))
    program = "strip" if native else f"{architecture(path)}-linux-gnu-strip"
    tool = shutil.which(program)
    if tool is None:
        raise BuildError(f"`{program}` (binutils) is not on PATH: install it or pass --config-settings strip=no")
    with tempfile.TemporaryDirectory(prefix="kiln_wheel_") as folder:
        stripped = os.path.join(folder, name)
        completed = subprocess.run([tool, "--strip-debug", "-o", stripped, path], capture_output=True, text=True)
        if completed.returncode != 0:
            raise BuildError(f"strip --strip-debug {path} failed: {completed.stderr.strip()}")
        with open(stripped, "rb") as f:
            return (f"{BUNDLED_FOLDER}/{name}", f.read(), True)


def _make_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]]) -> str:
    project = read_project(PROJECT_FOLDER)
    build = MesonBuild(_setting(config_settings, "build-dir", "KILN_BUILD_DIR", os.path.join(REPOSITORY, "build")))
    mode = _setting(config_settings, "compiler", "KILN_WHEEL_COMPILER", "auto")
    if mode not in ("auto", "yes", "no"):
        raise BuildError(f"compiler={mode!r}: expected auto, yes or no")
    strip = _setting(config_settings, "strip", "KILN_WHEEL_STRIP", "yes")
    if strip not in ("yes", "no"):
        raise BuildError(f"strip={strip!r}: expected yes or no")
    platform = _setting(config_settings, "platform", "KILN_WHEEL_PLATFORM", "auto")
    if platform not in ("auto", "manylinux_2_28"):
        raise BuildError(f"platform={platform!r}: expected auto or manylinux_2_28")
    libkiln = build.shared_library("kiln")
    if libkiln is None:
        raise BuildError(f"the build at {build.folder} defines no shared library 'kiln' (libkiln)")
    compiler = build.shared_library("kiln-compiler") if mode != "no" else None
    if mode == "yes" and compiler is None:
        raise BuildError(f"compiler=yes, but the build at {build.folder} defines no libkiln-compiler")
    if platform != "auto" and compiler is not None:
        raise BuildError(f"unsupported: platform={platform} with libkiln-compiler (it links the build machine's "
                         "LLVM and protobuf): pass compiler=no, or build with platform=auto and run "
                         "`auditwheel repair` (python/build_wheels.sh, docs/installing.md)")
    libraries = [libkiln] + ([compiler] if compiler else [])
    build.bring_up_to_date(libraries)
    if platform == "manylinux_2_28":
        _check_manylinux(libkiln)
    tag = wheel_tag(libkiln, platform)

    name = distribution_name(project)
    dist_info = f"{name}-{build.version}.dist-info"
    library_entries = [_library_entry(path, strip == "yes") for path in libraries]
    bundled_names = [entry[0].rsplit("/", 1)[1] for entry in library_entries]
    wheel_metadata = (f"Wheel-Version: 1.0\nGenerator: kiln_build_backend\nRoot-Is-Purelib: false\n"
                      f"Tag: {tag}\n")
    entries = _package_files() + library_entries + [
        (f"{PACKAGE}/_build_info.py",
         _build_info(build.version, bundled_names[0], bundled_names[1] if compiler else None), False),
        (f"{dist_info}/METADATA", metadata_text(project, build.version, PROJECT_FOLDER).encode(), False),
        (f"{dist_info}/WHEEL", wheel_metadata.encode(), False),
        (f"{dist_info}/top_level.txt", f"{PACKAGE}\n".encode(), False),
    ]
    file_name = f"{name}-{build.version}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    write_wheel(os.path.join(wheel_directory, file_name), dist_info, entries)
    return file_name


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    """PEP 517: writes the wheel into wheel_directory and returns its file name. A build folder
    that cannot give a wheel ends the build with one line saying what to do."""
    try:
        return _make_wheel(wheel_directory, config_settings)
    except (BuildError, ValueError) as failure:
        print(f"kiln wheel: error: {failure}", file=sys.stderr)
        raise SystemExit(1) from None


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """PEP 517: refused. python/ alone cannot build libkiln (that needs the whole repository and its
    meson build), so there is no source distribution of the package; wheels come from a checkout."""
    print("kiln wheel: error: unsupported: a source distribution of python/ cannot build libkiln; "
          "build a wheel from a kiln checkout instead (pip wheel ./python)", file=sys.stderr)
    raise SystemExit(1)
