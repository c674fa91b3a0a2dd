#!/bin/sh
# `kiln tune` end to end on mnist_8, kept short (a few seconds of budget; no timed checks):
#   run_tune_test.sh KILN PLAN_REFERENCE TEST_PLAN DATA_DIR
# the tuner writes a database; two compiles with --tuning (one with the kernel cache off) give
# byte-identical plans that still match the model's test data; a second tune skips the kernels the
# database has; a damaged database is refused with its file and line named.
# Exits 77 (skipped) when the model is absent.
set -eu
kiln=$1 reference=$2 test_plan=$3 data=$4
model_dir=$data/models/mnist_8
if [ ! -f "$model_dir/model.onnx" ]; then
  echo "skipped: $model_dir/model.onnx is absent"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-tune-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$kiln" tune "$model_dir/model.onnx" --db "$work/mnist.db" --budget 6 --threads 1 --beam 2 2>&1 | tee "$work/tune.log"
entries=$(grep -c '^entry ' "$work/mnist.db" || true)
if [ "$entries" -lt 1 ]; then
  echo "FAILED: the tuner recorded no kernel" >&2
  exit 1
fi
grep -q '^\[1/' "$work/tune.log" || { echo "FAILED: no per-kernel progress line" >&2; exit 1; }

"$kiln" compile "$model_dir/model.onnx" -o "$work/tuned.kiln" --tuning "$work/mnist.db" 2>&1 | tee "$work/compile.log"
grep -Eq "opts of $entries of [0-9]+ kernels from the tuning database" "$work/compile.log" ||
  { echo "FAILED: the compile did not take $entries kernels from the database" >&2; exit 1; }
KILN_CACHE=0 "$kiln" compile "$model_dir/model.onnx" -o "$work/again.kiln" --tuning "$work/mnist.db"
cmp "$work/tuned.kiln" "$work/again.kiln"
echo "ok: two compiles with one tuning database give byte-identical plans"
"$reference" "$model_dir/model.onnx" "$model_dir/test_data_set_0" "$work/data"
# Other Opts than the JIT's sum in another order, so no bit-for-bit check against the in-process path.
"$test_plan" matches-data "$work/tuned.kiln" "$work/data"
echo "ok: the tuned plan matches the model's test data"

# Resume: what the database has is not tuned again.
"$kiln" tune "$model_dir/model.onnx" --db "$work/mnist.db" --budget 6 --threads 1 --beam 2 2>&1 | tee "$work/again.log"
grep -q ", $entries already in the database" "$work/again.log" ||
  { echo "FAILED: the second tune did not skip the $entries kernels in the database" >&2; exit 1; }
echo "ok: a second tune skips the kernels the database has"

# A damaged database: refused, naming the file and the line.
sed 's/^opt-version 1$/opt-version x/' "$work/mnist.db" > "$work/bad.db"
if "$kiln" compile "$model_dir/model.onnx" -o "$work/bad.kiln" --tuning "$work/bad.db" 2> "$work/bad.log"; then
  echo "FAILED: a damaged database was accepted" >&2
  exit 1
fi
cat "$work/bad.log"
grep -q "$work/bad.db:6: bad opt-version 'x'" "$work/bad.log" || { echo "FAILED: unexpected message" >&2; exit 1; }
echo "ok: a damaged database is refused with its file and line"
