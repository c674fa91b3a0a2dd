#!/bin/sh
# Every shared model as a CUDA plan (`kiln test-onnx --via-plan --plan-target cuda`): compiled to PTX
# by NVRTC, loaded and run on the GPU by libkiln, compared with the expected outputs. Skipped (77)
# without NVRTC, without a CUDA device or without the shared data.
# usage: run_cuda_plan_models.sh PROBE KILN DATA_DIR
probe=$1 kiln=$2 data=$3
"$probe" --device || exit $?
if [ ! -d "$data" ]; then
  echo "skip: no shared models at $data"
  exit 77
fi
exec "$kiln" test-onnx --via-plan --plan-target cuda --atol 1e-4 --timeout 900 -v "$data"
