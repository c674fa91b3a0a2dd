#!/bin/sh
# The tools on a symbolic plan (docs/plan-format.md, "Symbolic plans"); the plan, its inputs and
# expected outputs come from test-symbolic-plan (KILN_SYMBOLIC_PLAN_DIR). `kiln inspect` prints the
# variables with their ranges and the symbolic dims and extents; `kiln run` sizes the outputs from
# the inputs' shapes and writes the expected values; `kiln bench` takes the variables' values from
# --shape; the Python binding's Plan.run computes the same outputs (with the .venv python; left out
# without it); warm runs call no malloc (symbolic_no_alloc.c, not built under sanitizers).
# usage: run_symbolic_tools.sh KILN TEST_SYMBOLIC_PLAN WORK_DIR LIBKILN NO_ALLOC|not-built
set -eu
kiln=$1 test_binary=$2 work=$3 libkiln=$4 no_alloc=$5
rm -rf "$work"
mkdir -p "$work"
KILN_SYMBOLIC_PLAN_DIR=$work "$test_binary" -tc="writes the plan and its files for the tools test" >"$work/write.log" 2>&1 ||
  { cat "$work/write.log"; exit 1; }

failures=0
expect() {  # expect FILE LINE: FILE has LINE exactly
  if ! grep -qxF -- "$2" "$1"; then
    echo "FAIL: $(basename "$1") lacks the line '$2'"
    failures=$((failures + 1))
  fi
}

"$kiln" inspect "$work/symbolic.kiln" >"$work/inspect.txt"
cat "$work/inspect.txt"
expect "$work/inspect.txt" "variables:"
expect "$work/inspect.txt" "  cols: 1..16"
expect "$work/inspect.txt" "  n: 1..64"
expect "$work/inspect.txt" "  rows: 1..8"
expect "$work/inspect.txt" "  a: float32 (n)"
expect "$work/inspect.txt" "  x: float32 (rows, cols)"
expect "$work/inspect.txt" "  y: float32 (n * 2)"
expect "$work/inspect.txt" "  s: float32 (rows)"
expect "$work/inspect.txt" "arena: 256 bytes (every variable at its maximum)"
expect "$work/inspect.txt" "  sym_interleave (parallel extent n * 2, at most 128)"

"$kiln" run "$work/symbolic.kiln" --input a="$work/a.npy" --input b="$work/b.npy" --input x="$work/x.npy" \
  --output-dir "$work/out" --output-format npy >"$work/run.txt"
cat "$work/run.txt"
expect "$work/run.txt" "y: float32 (10) -> $work/out/y.npy"
expect "$work/run.txt" "s: float32 (2) -> $work/out/s.npy"
for output in y s; do
  if ! cmp -s "$work/out/$output.npy" "$work/expected_$output.npy"; then
    echo "FAIL: output $output differs from the C++ reference"
    failures=$((failures + 1))
  fi
done

# kiln bench: --shape gives variables (the others at their maxima).
"$kiln" bench "$work/symbolic.kiln" --iterations 3 --warmup 1 --shape n=3 rows=2 >"$work/bench.txt"
cat "$work/bench.txt"
expect "$work/bench.txt" "input a: float32 (3) (random, seed 0)"
expect "$work/bench.txt" "input x: float32 (2, 16) (random, seed 0)"
# --input: an input's values from a file (the shape must be the one --shape binds).
"$kiln" bench "$work/symbolic.kiln" --iterations 2 --warmup 0 --shape n=5 rows=2 --input a="$work/a.npy" \
  >"$work/bench_input.txt"
expect "$work/bench_input.txt" "input a: float32 (5) (from $work/a.npy)"
if "$kiln" bench "$work/symbolic.kiln" --shape n=3 --input a="$work/a.npy" >"$work/bench_input_bad.txt" 2>&1; then
  echo "FAIL: kiln bench took a file of 5 elements for an input bound at 3"
  failures=$((failures + 1))
fi
expect "$work/bench_input_bad.txt" "kiln bench: --input a=$work/a.npy: the file holds float32 (5), the input is bound as float32 (3) (a symbolic plan's sizes come from --shape)"
if "$kiln" bench "$work/symbolic.kiln" --shape n=65 >"$work/bench_bad.txt" 2>&1; then
  echo "FAIL: kiln bench accepted n=65"
  failures=$((failures + 1))
fi
expect "$work/bench_bad.txt" "kiln bench: --shape n=65: the plan allows n in 1..64"

# A shape out of range is the runtime's error, with its message.
if "$kiln" run "$work/symbolic.kiln" --input a="$work/x.npy" --input b="$work/b.npy" --input x="$work/x.npy" \
  --output-dir "$work/out" >"$work/bad.txt" 2>&1; then
  echo "FAIL: kiln run accepted an input of the wrong rank"
  failures=$((failures + 1))
fi
cat "$work/bad.txt"
expect "$work/bad.txt" "kiln run: kiln_plan_output_shape: input 'a' has shape (2, 3), rank 2; the plan expects rank 1: (n) (KILN_ERROR_INVALID_ARGUMENT)"
# The Python binding (python/kiln) on the same plan, when the .venv python with numpy exists.
python=$(dirname "$0")/../../.venv/bin/python3
if [ -x "$python" ] && "$python" -c "import numpy" 2>/dev/null; then
  KILN_LIBRARY=$libkiln PYTHONPATH=$(dirname "$0")/../../python "$python" - "$work" <<'PYTHON' || failures=$((failures + 1))
import sys
import numpy as np
import kiln
work = sys.argv[1]
plan = kiln.Plan(work + "/symbolic.kiln")
assert plan.variables == {"cols": (1, 16), "n": (1, 64), "rows": (1, 8)}, plan.variables
assert plan.outputs[0].shape == (-1,), plan.outputs
inputs = {name: np.load(f"{work}/{name}.npy") for name in ("a", "b", "x")}
outputs = plan.run(inputs)
for name in ("y", "s"):
    expected = np.load(f"{work}/expected_{name}.npy")
    assert outputs[name].shape == expected.shape and (outputs[name] == expected).all(), (name, outputs[name])
try:
    plan.run({"a": inputs["a"], "b": np.zeros(6, np.float32), "x": inputs["x"]})
    raise SystemExit("FAIL: inconsistent inputs were accepted")
except kiln.Error as error:
    assert "'a' gives n=5, 'b' gives n=6" in str(error), str(error)
print("ok: the Python binding runs the symbolic plan")
PYTHON
fi
if [ "$no_alloc" != not-built ]; then
  for threads in 1 0; do "$no_alloc" "$work/symbolic.kiln" "$threads" || failures=$((failures + 1)); done
fi
[ "$failures" -eq 0 ] && echo "ok: kiln inspect and kiln run on a symbolic plan"
exit "$failures"
