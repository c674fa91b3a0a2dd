#!/bin/sh
# The kiln tool's small promises:
#   kiln --version   prints "kiln VERSION", "LLVM VERSION", "plan format N", "libkiln VERSION"
#   test names       `kiln test-onnx` names a test after its folder however the folder is written:
#                    "dir", "dir/", "dir//", "dir/." and "." (from inside it) all report "test_relu"
# Run by meson test (suite tools) as test_cli_basics.sh KILN VERSION LLVM_VERSION.
# The test folder is Debian's libonnx-testdata (scripts/lib/packages.sh); skipped (77) without it.
set -eu
kiln=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute: one check runs from another folder
version=$2 llvm_version=$3
relu=/usr/share/libonnx-testdata/data/node/test_relu
failures=0
check() {  # check DESCRIPTION COMMAND...: runs COMMAND, reports ok or FAILED
  description=$1
  shift
  if "$@"; then echo "ok: $description"; else echo "FAILED: $description"; failures=$((failures + 1)); fi
}

output=$("$kiln" --version)
echo "$output"
expected="kiln $version
LLVM $llvm_version
libkiln $version"
check "kiln --version names kiln $version, LLVM $llvm_version and libkiln $version" \
  test "$(echo "$output" | grep -v '^plan format ')" = "$expected"
check "kiln --version names the plan format with a number" sh -c "echo '$output' | grep -Eq '^plan format [0-9]+\$'"
check "kiln --help lists --version" sh -c "'$kiln' --help | grep -q -- --version"

if [ ! -d "$relu" ]; then
  echo "skipped: $relu is absent (Debian package libonnx-testdata)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-cli-basics.XXXXXX")
trap 'rm -rf "$work"' EXIT
export KILN_CACHE_DIR="$work/kernel-cache"
for spelling in "$relu" "$relu/" "$relu//" "$relu/."; do
  check "kiln test-onnx -v '$spelling' reports PASS test_relu" \
    sh -c "'$kiln' test-onnx -v '$spelling' | grep -qx 'PASS test_relu'"
done
check "kiln test-onnx -v . (inside the folder) reports PASS test_relu" \
  sh -c "cd '$relu' && '$kiln' test-onnx -v . | grep -qx 'PASS test_relu'"
[ "$failures" -eq 0 ]
