#!/bin/sh
# Builds every kernel of every model under DATA_DIR (each folder holding a model.onnx) as CUDA C with
# `kiln gpu-kernels --target cuda` (NVRTC to PTX and an sm_90 cubin). Skipped (77) without NVRTC or
# without the shared data; fails on the first model whose kernels do not all compile.
# usage: compile_shared_models.sh PROBE KILN DATA_DIR
probe=$1 kiln=$2 data=$3
"$probe" || exit $?
if [ ! -d "$data" ]; then
  echo "skip: no shared models at $data"
  exit 77
fi
models=$(find "$data" -name model.onnx | sort)
[ -n "$models" ] || { echo "no model.onnx under $data"; exit 1; }
count=0
for model in $models; do
  printf '%s: ' "${model#"$data"/}"
  "$kiln" gpu-kernels "$model" --target cuda --arch 90 2>"${TMPDIR:-/tmp}/kiln-gpu-kernels.$$.log" || {
    echo "FAILED"; cat "${TMPDIR:-/tmp}/kiln-gpu-kernels.$$.log"; rm -f "${TMPDIR:-/tmp}/kiln-gpu-kernels.$$.log"; exit 1; }
  count=$((count + 1))
done
rm -f "${TMPDIR:-/tmp}/kiln-gpu-kernels.$$.log"
echo "$count models: every kernel compiled"
