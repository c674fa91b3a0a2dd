#!/bin/sh
# Every real model through a plan and the C API (issue 5's first "done when"):
#   run_every_model.sh KILN PLAN_REFERENCE TEST_PLAN MODELS_DIR
# For each folder under MODELS_DIR (recursively) with a model.onnx and test_data_set_*:
# plan-reference writes every data set's raw inputs, the in-process (JIT) outputs, the expected
# outputs and the input shapes; `kiln compile` makes a plan with those shapes; test-plan (C11, linked
# against libkiln only) loads it and checks, for every data set, that its outputs equal the
# in-process ones bit for bit and the test data within atol 1e-4 + rtol 1e-3.
# Prints one line per model (name, plan size, compile, reference and C-run times, result) and the log of
# each failure. The reference runs first (it gives the shapes to compile with), so the compile finds
# its kernels in the kernel cache; the reference time includes the cold kernel compiles, if any.
# Exits 1 if any model fails, 77 (skipped) when MODELS_DIR is absent.
set -u
kiln=$1 reference=$2 test_plan=$3 models=$4

if [ ! -d "$models" ]; then
  echo "skipped: $models is absent"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-every-model.XXXXXX")
trap 'rm -rf "$work"' EXIT

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

start_all=$(now_ms)
count=0 failed=0
for model in $(find -L "$models" -name model.onnx | sort); do
  dir=$(dirname "$model")
  name=${dir#"$models"/}
  sets=$(find -L "$dir" -maxdepth 1 -name 'test_data_set_*' -type d | sort)
  [ -n "$sets" ] || continue
  count=$((count + 1))
  log=$work/log
  : > "$log"
  result=pass size=- compile_ms=- reference_ms=- run_ms=-

  # Raw data and the in-process reference, one folder per data set.
  set --
  for data_set in $sets; do set -- "$@" "$data_set" "$work/data/${data_set##*/}"; done
  begin=$(now_ms)
  if "$reference" "$model" "$@" >> "$log" 2>&1; then
    reference_ms=$(( $(now_ms) - begin ))
  else
    result="FAIL (plan-reference)"
  fi

  # The plan, with the first data set's input shapes (binds symbolic dimensions; fixed ones must agree).
  if [ "$result" = pass ]; then
    first=$(echo "$sets" | head -n 1)
    set --
    while IFS= read -r spec; do set -- "$@" "--shape=$spec"; done < "$work/data/${first##*/}/shapes.txt"
    begin=$(now_ms)
    if "$kiln" compile "$model" -o "$work/model.kiln" "$@" >> "$log" 2>&1; then
      compile_ms=$(( $(now_ms) - begin ))
      size=$(stat -c %s "$work/model.kiln")
    else
      result="FAIL (kiln compile)"
    fi
  fi

  # Every data set through the C API.
  if [ "$result" = pass ]; then
    begin=$(now_ms)
    for data_set in $sets; do
      echo "== ${data_set##*/}" >> "$log"
      if ! "$test_plan" end-to-end "$work/model.kiln" "$work/data/${data_set##*/}" >> "$log" 2>&1; then
        result="FAIL (${data_set##*/})"
      fi
    done
    run_ms=$(( $(now_ms) - begin ))
  fi

  printf '%-31s plan %8s bytes  compile %5s ms  reference %6s ms  C run %6s ms  %s\n' "$name" "$size" \
    "$compile_ms" "$reference_ms" "$run_ms" "$result"
  if [ "$result" != pass ]; then
    failed=$((failed + 1))
    sed 's/^/    | /' "$log" | tail -n 40
  fi
  rm -rf "$work/data" "$work/model.kiln"
done

echo "$count models, $failed failed, $(( $(now_ms) - start_all )) ms in all"
if [ "$count" -eq 0 ]; then
  echo "FAILED: no model with test data under $models" >&2
  exit 1
fi
[ "$failed" -eq 0 ]
