#!/bin/sh
# `kiln test-onnx --via-plan` (issue 14, item 6): models compiled to plans and run through libkiln's
# C API pass their test data like the in-process runs do, and what plans cannot do yet fails with a
# message that says so. Also covers an output folded to a weight (as ONNX Shape gives): it must still
# be copied into the caller's output.
# Run by meson test (suite tools) as test_via_plan.sh KILN DATA_DIR; skipped (77) when DATA_DIR
# (../shared/data) is absent.
set -eu
kiln=$1 data=$2
node=$data/onnx-node-tests
if [ ! -d "$node" ] || [ ! -d "$data/models/mnist_8" ]; then
  echo "skipped: $node or $data/models/mnist_8 is absent"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-via-plan.XXXXXX")
trap 'rm -rf "$work"' EXIT
export KILN_CACHE_DIR="$work/kernel-cache"
failures=0
check() {  # check DESCRIPTION COMMAND...: runs COMMAND, reports ok or FAILED
  description=$1
  shift
  if "$@"; then echo "ok: $description"; else echo "FAILED: $description"; failures=$((failures + 1)); fi
}

# Tensor models, including outputs that fold to weights (shape, size) and an output that is an input.
passing="test_add test_shape test_shape_start_1 test_size test_identity test_cast_FLOAT_to_FLOAT8E4M3FN test_gather_0"
set --
for name in $passing; do set -- "$@" "$node/$name"; done
"$kiln" test-onnx --via-plan -v "$@" "$data/models/mnist_8" > "$work/pass.txt" 2>&1 || true
cat "$work/pass.txt"
for name in $passing mnist_8; do
  check "$name passes through a plan" grep -qx "PASS $name" "$work/pass.txt"
done
check "the summary counts them all" grep -qx "8 passed, 0 failed, 0 skipped" "$work/pass.txt"

# Sequences and optionals cannot cross the C API: a clear failure, not a crash.
"$kiln" test-onnx --via-plan "$node/test_sequence_insert_at_front" > "$work/sequence.txt" 2>&1 && status=0 || status=$?
cat "$work/sequence.txt"
check "a sequence input fails with exit status 1" test "$status" = 1
check "... and says why" grep -q "unsupported: --via-plan runs tensor inputs and outputs only; input 'sequence' is not a tensor" "$work/sequence.txt"

# Values that decide shapes (issue 53, docs/symbolic-shapes.md stage 6): a shape input is read at
# run time (one plan for any shape in range), a reduction's axes input is pinned to the data set's
# value, a NonZero count is decided by the run; what plans cannot take yet fails naming the node.
"$kiln" test-onnx -v --via-plan "$node/test_constantofshape_float_ones" "$node/test_reduce_sum_keepdims_example" \
  "$node/test_nonzero_example" > "$work/value.txt" 2>&1 && status=0 || status=$?
cat "$work/value.txt"
check "shapes, axes and counts decided by values pass through plans" test "$status" = 0
check "... the shape read at run time" grep -q "PASS test_constantofshape_float_ones: sizes read at run time: x" "$work/value.txt"
check "... the axes pinned" grep -q "PASS test_reduce_sum_keepdims_example: pinned to the data sets' values: axes" "$work/value.txt"
"$kiln" test-onnx --via-plan "$node/test_unique_sorted_with_axis" > "$work/unique.txt" 2>&1 && status=0 || status=$?
cat "$work/unique.txt"
check "a Unique with an axis over a graph input fails with exit status 1" test "$status" = 1
check "... naming the node and what is unsupported" grep -q "(Unique, opset 11): unsupported: Unique with an axis over values known only when the plan runs" "$work/unique.txt"

# An output folded to a weight: one kernel copies it out (there was none, and the output was left
# unwritten). Compiled, inspected, run from the command line.
"$kiln" compile "$node/test_shape/model.onnx" -o "$work/shape.kiln" > /dev/null 2>&1
check "the Shape model's plan has one kernel, the copy" sh -c "'$kiln' inspect '$work/shape.kiln' | grep -qx 'kernels: 1'"
check "... and kiln run writes its output" \
  "$kiln" run "$work/shape.kiln" --input "x=$node/test_shape/test_data_set_0/input_0.pb" --output-dir "$work/out"

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
