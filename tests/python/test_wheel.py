"""The pip-installable package: build wheels of python/ from this build, install them into a fresh
venv, and run the binding's tests (test_python_binding.py --installed) against the installed package
from a temporary folder, with no PYTHONPATH and no KILN_* variables.

Two wheels: the full one (built with --no-build-isolation; it bundles libkiln-compiler, stripped of
debug information, so kiln.compile runs in process) and a runtime-only one (built with build
isolation and --config-settings compiler=no strip=no: libkiln exactly as built; kiln.compile then
runs the `kiln` CLI found on PATH). Both builds
pass --no-index: the backend needs nothing from PyPI. Also checked: the wheel's name, tag, version
(meson's), RECORD hashes and contents, and the backend's error for a folder that is not a build.

The fresh venv is made by the project .venv's python (same interpreter) without system site
packages; numpy and onnx come from the project .venv through a .pth file in the fresh venv (offline:
no download), while kiln itself must come from the wheel.

usage: test_wheel.py --source-root DIR --build-root DIR --kiln KILN_CLI --libkiln LIBKILN [--python VENV_PYTHON]
"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import python_test_env  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--source-root", required=True)
parser.add_argument("--build-root", required=True)
parser.add_argument("--kiln", required=True)
parser.add_argument("--libkiln", required=True, help="the built libkiln (compared with the strip=no wheel's)")
parser.add_argument("--python")
args = parser.parse_args()
python_test_env.require_numpy_and_onnx(args.python)  # from here on, sys.executable has numpy and onnx
python_test_env.shared_model(args.source_root, "mnist_8")
checks = python_test_env.Checks(args.kiln)

with open(os.path.join(args.build_root, "meson-info", "intro-projectinfo.json")) as f:
    meson_version = json.load(f)["version"]
platform_tag = sysconfig.get_platform().replace("-", "_").replace(".", "_")
# Whatever the environment says about kiln must not reach the builds or the installed package's run;
# nor LD_LIBRARY_PATH, which meson points at build/capi for tests (the system search would find
# the build's libkiln-compiler there).
clean_environment = {name: value for name, value in os.environ.items()
                     if not name.startswith(("KILN_", "PYTHON", "PIP_")) and name != "LD_LIBRARY_PATH"}


def run(command, what, env=None, cwd=None):
    completed = subprocess.run(command, capture_output=True, text=True, env=env or clean_environment, cwd=cwd)
    print(f"$ {' '.join(command)}  -> {completed.returncode}\n{completed.stdout[-4000:]}{completed.stderr[-4000:]}")
    checks.check(completed.returncode == 0, what)
    return completed


def build_wheel(folder, *options):
    """Runs pip wheel on python/ against this build; returns the wheel's path (or None)."""
    environment = dict(clean_environment, KILN_BUILD_DIR=args.build_root)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--disable-pip-version-check",
         "-w", folder, *options, os.path.join(args.source_root, "python")],
        f"pip wheel {' '.join(options)} builds a wheel", env=environment)
    wheels = [name for name in os.listdir(folder) if name.endswith(".whl")] if os.path.isdir(folder) else []
    return os.path.join(folder, wheels[0]) if len(wheels) == 1 else None


def check_wheel(path, with_compiler, unstripped_libkiln=None):
    """The archive's name, metadata, RECORD and contents."""
    expected_name = f"kiln-{meson_version}-py3-none-{platform_tag}.whl"
    checks.check(os.path.basename(path) == expected_name, f"wheel name {os.path.basename(path)} = {expected_name}")
    dist_info = f"kiln-{meson_version}.dist-info"
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        record = archive.read(f"{dist_info}/RECORD").decode().splitlines()
        bad_hashes = []
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            if name == f"{dist_info}/RECORD":
                continue
            content = archive.read(name)
            actual = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
            if digest != actual or int(size) != len(content):
                bad_hashes.append(name)
        checks.check(len(record) == len(names) and not bad_hashes,
                     f"RECORD lists all {len(names)} files with their sha256 and size (wrong: {bad_hashes})")
        metadata = archive.read(f"{dist_info}/METADATA").decode()
        checks.check(f"Version: {meson_version}\n" in metadata and "Requires-Dist: numpy" in metadata,
                     "METADATA: meson's version and the numpy requirement")
        checks.check(f"Tag: py3-none-{platform_tag}\n" in archive.read(f"{dist_info}/WHEEL").decode(),
                     "WHEEL: a platform tag (it carries native libraries)")
        libraries = sorted(name for name in names if name.startswith("kiln/_lib/"))
        runtime = [name for name in libraries if re.fullmatch(r"kiln/_lib/libkiln\.so(\.\d+)*", name)]
        compiler = [name for name in libraries if name.startswith("kiln/_lib/libkiln-compiler.so")]
        checks.check(len(runtime) == 1 and len(compiler) == (1 if with_compiler else 0)
                     and len(libraries) == len(runtime) + len(compiler),
                     f"bundled libraries: {libraries} ({'with' if with_compiler else 'without'} libkiln-compiler)")
        built_soname = re.search(r"\(SONAME\)[^\[]*\[([^\]]+)\]", subprocess.run(
            ["readelf", "-d", args.libkiln], capture_output=True, text=True).stdout)
        checks.check(built_soname is not None and runtime == [f"kiln/_lib/{built_soname.group(1)}"],
                     f"libkiln is bundled under its SONAME ({built_soname.group(1) if built_soname else None})")
        if unstripped_libkiln and runtime:
            with open(unstripped_libkiln, "rb") as built:
                checks.check(archive.read(runtime[0]) == built.read(), "strip=no: libkiln is bundled byte for byte")
        executable = all((archive.getinfo(name).external_attr >> 16) & 0o111 for name in libraries)
        checks.check(executable, "bundled libraries are stored executable")
        for name in ("kiln/__init__.py", "kiln/py.typed", "kiln/_build_info.py"):
            checks.check(name in names, f"{name} is in the wheel")
        checks.check(not any("__pycache__" in name or name.endswith(".pyc") for name in names),
                     "no byte-code caches in the wheel")


def installed_run(venv_python, site_packages, work, compiler, extra_path=None):
    """test_python_binding.py in its --installed mode, copied out of the source tree, run by the venv."""
    tests = os.path.join(work, "tests")
    os.makedirs(tests, exist_ok=True)
    for name in ("test_python_binding.py", "python_test_env.py"):
        shutil.copy(os.path.join(HERE, name), tests)
    environment = dict(clean_environment)
    if extra_path:
        environment["PATH"] = extra_path + os.pathsep + environment.get("PATH", "")
    run([venv_python, os.path.join(tests, "test_python_binding.py"), "--source-root", args.source_root,
         "--installed", site_packages, "--compiler", compiler, "--expect-version", meson_version],
        f"the binding's tests pass against the installed wheel (compiler: {compiler})",
        env=environment, cwd=work)


with tempfile.TemporaryDirectory(prefix="kiln_wheel_test_") as work:
    # A folder that is not a kiln build: a clear error, no wheel.
    not_a_build = os.path.join(work, "not-a-build")
    os.makedirs(not_a_build)
    completed = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation",
         "--disable-pip-version-check", "-w", os.path.join(work, "none"), os.path.join(args.source_root, "python")],
        capture_output=True, text=True, env=dict(clean_environment, KILN_BUILD_DIR=not_a_build))
    checks.check(completed.returncode != 0 and "no kiln build at" in completed.stdout + completed.stderr,
                 "a folder that is not a kiln build is refused with 'no kiln build at ...'")

    # No source distribution: python/ alone cannot build libkiln, and the backend says so.
    completed = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import kiln_build_backend; "
         "kiln_build_backend.build_sdist(sys.argv[2])", os.path.join(args.source_root, "python", "backend"), work],
        capture_output=True, text=True, env=clean_environment)
    checks.check(completed.returncode == 1 and "unsupported: a source distribution" in completed.stderr,
                 f"build_sdist is refused: {completed.stderr.strip()}")

    full_wheel = build_wheel(os.path.join(work, "full"), "--no-build-isolation")
    runtime_wheel = build_wheel(os.path.join(work, "runtime"), "--config-settings", "compiler=no",
                                "--config-settings", "strip=no")
    if full_wheel is None or runtime_wheel is None:
        checks.finish()
    check_wheel(full_wheel, with_compiler=True)
    check_wheel(runtime_wheel, with_compiler=False,
                unstripped_libkiln=args.libkiln)

    venv = os.path.join(work, "venv")
    run([sys.executable, "-m", "venv", venv], "python3 -m venv makes a fresh venv")
    venv_python = os.path.join(venv, "bin", "python")
    site_packages = subprocess.run([venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, env=clean_environment).stdout.strip()
    with open(os.path.join(site_packages, "kiln_test_dependencies.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")  # numpy and onnx, from the project .venv
    pip = [venv_python, "-m", "pip", "--disable-pip-version-check"]

    run(pip + ["install", "--no-index", full_wheel], "pip install the full wheel (numpy already there)")
    installed_run(venv_python, site_packages, work, "bundled")

    run(pip + ["uninstall", "--yes", "kiln"], "pip uninstall kiln")
    checks.check(not os.path.exists(os.path.join(site_packages, "kiln")), "uninstalling removes kiln/")
    run(pip + ["install", "--no-index", runtime_wheel], "pip install the runtime-only wheel")
    installed_run(venv_python, site_packages, work, "cli", extra_path=os.path.dirname(os.path.abspath(args.kiln)))

checks.finish()
