#!/bin/sh
# Shared models as OpenCL plans: each compiled with `kiln compile --target opencl` (the --via-plan
# path of kiln test-onnx), loaded and run through libkiln on the OpenCL device, and compared with
# the model's expected outputs. Skipped (77) without an OpenCL device or without the shared data.
# usage: run_plan_models.sh PROBE KILN DATA_DIR MODEL_FOLDER...
probe=$1 kiln=$2 data=$3
shift 3
"$probe" || exit $?
if [ ! -d "$data" ]; then
  echo "skip: no shared models at $data"
  exit 77
fi
folders=""
for model in "$@"; do folders="$folders $data/$model"; done
# shellcheck disable=SC2086  # the folders are one word each
exec "$kiln" test-onnx --via-plan --plan-target opencl --atol 1e-4 --timeout 600 -v $folders
