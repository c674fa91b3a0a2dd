#!/bin/sh
# Compiles tests/plan/data/nonzero_gathernd.onnx with `kiln compile` (a plan whose output shapes the
# run decides) and runs test-run-bound on it: libkiln alone, so sanitizer builds run it too.
#   run_run_bound_test.sh KILN TEST_RUN_BOUND MODEL
set -eu
kiln=$1 test=$2 model=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-run-bound.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$kiln" compile "$model" -o "$work/nonzero.kiln" 2>"$work/compile.log" || { cat "$work/compile.log" >&2; exit 1; }
"$test" "$work/nonzero.kiln"
