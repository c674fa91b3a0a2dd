#!/bin/sh
# kiln as a Meson subproject: a fresh project (meson_consumer/meson.build and consumer.c) with
# subprojects/kiln linking to this source tree asks for dependency('kiln'), which falls back to the
# subproject's meson.override_dependency. Only the consumer's target is built (libkiln and the
# consumer, not the compiler), and it runs a plan of ONNX's test_matmul_2d compiled by the build's
# kiln tool. Run by meson test (suite install) as
#   run_meson_subproject_test.sh MESON SOURCE_DIR KILN
# Exits 77 (skipped) when cc or ninja is absent.
set -eu
meson=$1 source=$2 kiln=$3
model=/usr/share/libonnx-testdata/data/node/test_matmul_2d/model.onnx  # Debian's libonnx-testdata
for tool in cc ninja; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "skipped: $tool is not installed"
    exit 77
  fi
done
[ -f "$model" ] || { echo "skipped: $model is absent (Debian package libonnx-testdata)"; exit 77; }

# meson test points LD_LIBRARY_PATH at this build's libkiln; the consumer must find its own.
unset LD_LIBRARY_PATH
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-subproject-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
export KILN_CACHE_DIR="$work/kernel-cache"
project=$work/project
mkdir -p "$project/subprojects"
cp "$source/tests/install/meson_consumer/meson.build" "$source/tests/install/consumer.c" "$project/"
ln -s "$source" "$project/subprojects/kiln"

"$meson" setup "$project/build" "$project" --native-file "$source/scripts/llvm19-native.ini" \
  --force-fallback-for=kiln,kiln-compiler > "$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
ninja -C "$project/build" consumer > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
# The consumer links the subproject's libkiln (found through the build's RUNPATH), nothing else of kiln.
ldd "$project/build/consumer" | grep -q "subprojects/kiln/capi/libkiln.so.0" ||
  { ldd "$project/build/consumer"; echo "FAILED: the consumer does not load the subproject's libkiln" >&2; exit 1; }
"$kiln" compile "$model" -o "$work/matmul.kiln"
"$project/build/consumer" "$work/matmul.kiln"
echo "ok: dependency('kiln') from the kiln subproject builds and runs a C program"
