#!/bin/bash
# Shared models as ARM64 plans, run under emulation (issue 54): each model is compiled with
#   kiln compile --target aarch64 [--cpu CPU]
# on this (x86-64) machine, and test-plan (tests/plan/test_plan.c, cross-built for aarch64 against the
# aarch64 libkiln) loads and runs it under qemu-aarch64 for every data set, against the model's
# expected outputs at atol 1e-4 + rtol 1e-3 (`test-plan matches-data`; the bit-for-bit comparison
# with the x86 JIT does not apply to another architecture's code).
#
# usage: run_aarch64_models.sh SOURCE_ROOT NATIVE_BUILD CROSS_BUILD KILN PLAN_REFERENCE MODELS_DIR QEMU_CPU CPU MODEL...
#   QEMU_CPU: the CPU qemu emulates (max, neoverse-n1, cortex-a53, ...); CPU: kiln's --cpu ("" for
#   the generic ARMv8-A baseline). Skipped (77), naming what is missing, without the cross toolchain,
#   qemu-user or the shared models.
set -u
source_root=$1 native_build=$2 cross_build=$3 kiln=$4 reference=$5 models=$6 qemu_cpu=$7 cpu=$8
shift 8

source "$source_root/scripts/lib/cross_aarch64.sh"
missing=$(kiln_cross_aarch64_missing)
if [ -n "$missing" ] && ! kiln_ensure_cross_aarch64_packages; then
  echo "skip: the aarch64 cross build needs $(echo $missing) (apt-get install ${KILN_CROSS_AARCH64_PACKAGES[*]})"
  exit 77
fi
if [ ! -d "$models" ]; then
  echo "skip: no shared models at $models"
  exit 77
fi
kiln_cross_aarch64_build "$source_root" "$cross_build" "$native_build" || { echo "FAIL: the aarch64 cross build"; exit 1; }
runner=$cross_build/test-plan-aarch64

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-aarch64.XXXXXX")
trap 'rm -rf "$work"' EXIT
cpu_args=()
[ -n "$cpu" ] && cpu_args=(--cpu "$cpu")
failed=0 count=0
for name in "$@"; do
  count=$((count + 1))
  dir=$models/$name
  log=$work/log
  : > "$log"
  result=pass
  sets=$(find -L "$dir" -maxdepth 1 -name 'test_data_set_*' -type d | sort)
  if [ -z "$sets" ]; then
    echo "FAIL: $name: no test_data_set_* in $dir"
    failed=$((failed + 1))
    continue
  fi
  # Raw inputs and expected outputs of every data set (the in-process run is the x86 reference, unused).
  set --
  for data_set in $sets; do set -- "$@" "$data_set" "$work/data/${data_set##*/}"; done
  "$reference" "$dir/model.onnx" "$@" >> "$log" 2>&1 || result="FAIL (plan-reference)"
  # One plan per distinct set of input shapes (models-exported's data sets differ in their symbolic
  # dims): each compiled with that data set's shapes, as `kiln compile --shape` takes them.
  compile_s=0 run_s=0 compiled_shapes=
  for data_set in $sets; do
    [ "$result" = pass ] || break
    data=$work/data/${data_set##*/}
    if [ "$(cat "$data/shapes.txt")" != "$compiled_shapes" ]; then
      compiled_shapes=$(cat "$data/shapes.txt")
      shapes=()
      while IFS= read -r spec; do shapes+=("--shape=$spec"); done < "$data/shapes.txt"
      start=$(date +%s)
      "$kiln" compile "$dir/model.onnx" -o "$work/model.kiln" --target aarch64 "${cpu_args[@]}" "${shapes[@]}" \
        >> "$log" 2>&1 || { result="FAIL (kiln compile --target aarch64)"; break; }
      compile_s=$(( compile_s + $(date +%s) - start ))
    fi
    start=$(date +%s)
    echo "== ${data_set##*/}" >> "$log"
    qemu-aarch64 -cpu "$qemu_cpu" -L /usr/aarch64-linux-gnu "$runner" matches-data "$work/model.kiln" "$data" \
      >> "$log" 2>&1 || result="FAIL (${data_set##*/} under qemu)"
    run_s=$(( run_s + $(date +%s) - start ))
  done
  [ "$result" = pass ] &&
    result="pass (compile ${compile_s}s, $(echo "$sets" | wc -l) data sets under qemu -cpu $qemu_cpu ${run_s}s)"
  echo "$name: $result"
  case $result in pass*) ;; *) failed=$((failed + 1)); sed 's/^/    | /' "$log" | tail -n 40 ;; esac
  rm -rf "$work/data" "$work/model.kiln"
done
echo "$count models, $failed failed"
[ "$failed" -eq 0 ]
