#!/bin/bash
# The aarch64 runtime wheel (issue 54): built from the cross build (build-aarch64) by python/'s own
# backend with platform=manylinux_2_28; `auditwheel show` must find it consistent with that tag (its
# libkiln imports nothing newer than glibc 2.28: capi/glibc_baseline.c); pip installs it (with
# numpy's aarch64 wheel) for an aarch64 CPython 3.11, and that Python, under qemu-aarch64, runs
# `import kiln; kiln.Plan(...)` on mnist_8 compiled with --target aarch64 against the test data
# (tests/aarch64/wheel_plan_check.py). Skipped (77), naming what is missing, without the cross
# tools, the arm64 Debian packages of Python, auditwheel in .venv, numpy's aarch64 wheel or the models.
# usage: test_aarch64_wheel.sh SOURCE_ROOT NATIVE_BUILD CROSS_BUILD KILN PLAN_REFERENCE MODELS_DIR
set -u
source_root=$1 native_build=$2 cross_build=$3 kiln=$4 reference=$5 models=$6
venv=$source_root/.venv/bin
source "$source_root/scripts/lib/cross_aarch64.sh"
skip() { echo "skip: $*"; exit 77; }
missing=$(kiln_cross_aarch64_missing)
[ -z "$missing" ] || kiln_ensure_cross_aarch64_packages || skip "the aarch64 cross build needs $(echo $missing)"
[ -f "$models/mnist_8/model.onnx" ] || skip "no shared model at $models/mnist_8"
[ -x "$venv/auditwheel" ] || skip "auditwheel is not in .venv (.venv/bin/pip install auditwheel)"
python_root=$cross_build-deps/python-root
kiln_cross_aarch64_python "$python_root" ||
  skip "no aarch64 Python: dpkg --add-architecture arm64 && apt-get update (then the test unpacks ${KILN_CROSS_AARCH64_PYTHON_DEBS[*]})"
kiln_cross_aarch64_build "$source_root" "$cross_build" "$native_build" || { echo "FAIL: the aarch64 cross build"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-aarch64-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
numpy_wheels=$cross_build-deps/numpy-wheels
if ! ls "$numpy_wheels"/numpy-*aarch64*.whl > /dev/null 2>&1; then
  "$venv/pip" download --quiet --disable-pip-version-check numpy --platform manylinux2014_aarch64 \
    --python-version 3.11 --implementation cp --abi cp311 --only-binary=:all: --no-deps -d "$numpy_wheels" \
    > "$work/numpy.log" 2>&1 || skip "numpy's aarch64 wheel cannot be downloaded ($(tail -n 1 "$work/numpy.log"))"
fi
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The wheel, from the cross build.
env -u LD_LIBRARY_PATH "$venv/pip" wheel "$source_root/python" --no-deps --no-build-isolation --no-index \
  --config-settings build-dir="$cross_build" --config-settings compiler=no \
  --config-settings platform=manylinux_2_28 -w "$work/wheels" > "$work/wheel.log" 2>&1 ||
  { cat "$work/wheel.log"; echo "FAIL: pip wheel of the aarch64 runtime wheel"; exit 1; }
wheel=$(ls "$work"/wheels/kiln-*-py3-none-manylinux_2_28_aarch64.whl 2> /dev/null)
[ -n "$wheel" ] && echo "ok   built $(basename "$wheel") ($(stat -c %s "$wheel") bytes)" ||
  { ls "$work/wheels"; echo "FAIL: no manylinux_2_28_aarch64 wheel"; exit 1; }
"$venv/auditwheel" show "$wheel" > "$work/audit.log" 2>&1
cat "$work/audit.log"
# auditwheel names the most compatible tag the libraries allow: 2_28 or older.
tag=$(tr '\n' ' ' < "$work/audit.log" | grep -o 'consistent with the *following platform tag: *"manylinux_2_[0-9]*_aarch64"' | grep -o '2_[0-9]*')
if [ -n "$tag" ] && [ "${tag#2_}" -le 28 ]; then
  echo "ok   auditwheel show: consistent with manylinux_${tag}_aarch64, so the manylinux_2_28 tag is honest"
else
  fail "auditwheel show does not find the wheel manylinux_2_28 compatible"
fi

# Installed for aarch64 CPython 3.11, then run under qemu.
"$venv/pip" install --quiet --disable-pip-version-check --no-index --target "$work/site" \
  --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 --python-version 3.11 --implementation cp \
  --abi cp311 --only-binary=:all: --no-deps "$wheel" "$numpy_wheels"/numpy-*aarch64*.whl > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "pip install of the aarch64 wheels"; }
"$reference" "$models/mnist_8/model.onnx" "$models/mnist_8/test_data_set_0" "$work/data" > "$work/ref.log" 2>&1 ||
  { cat "$work/ref.log"; fail "plan-reference"; }
"$kiln" compile "$models/mnist_8/model.onnx" -o "$work/mnist.kiln" --target aarch64 > "$work/compile.log" 2>&1 ||
  { cat "$work/compile.log"; fail "kiln compile --target aarch64"; }
"$kiln" compile "$models/mnist_8/model.onnx" -o "$work/mnist-x86.kiln" > "$work/compile.log" 2>&1 ||
  { cat "$work/compile.log"; fail "kiln compile (x86-64)"; }
(cd "$work" && env -i PATH=/usr/bin:/bin PYTHONPATH="$work/site" PYTHONNOUSERSITE=1 \
  qemu-aarch64 -L "$python_root" "$python_root/usr/bin/python3.11" "$source_root/tests/aarch64/wheel_plan_check.py" \
  "$work/mnist.kiln" "$work/data" "$work/mnist-x86.kiln") || fail "import kiln and run the plan under qemu-aarch64"

[ $failures -eq 0 ] && echo "all checks passed" || echo "$failures checks failed"
[ $failures -eq 0 ]
