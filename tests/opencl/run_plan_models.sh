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
"$kiln" test-onnx --via-plan --plan-target opencl --atol 1e-4 --timeout 600 -v $folders || exit 1
# SqueezeNet's squeeze convs share their reductions across work-groups of 16 (docs/backends.md):
# `kiln inspect` shows the size the plan fixes for them.
for model in "$@"; do
  case $model in */squeezenet)
    work=$(mktemp -d) || exit 1
    "$kiln" compile "$data/$model/model.onnx" -o "$work/plan" --target opencl > /dev/null &&
      "$kiln" inspect "$work/plan" > "$work/inspect.txt" || { rm -rf "$work"; exit 1; }
    if ! grep -q "(parallel extent [0-9]*, work-group 16," "$work/inspect.txt"; then
      echo "FAIL: kiln inspect of SqueezeNet's OpenCL plan shows no kernel with a work-group of 16:"
      cat "$work/inspect.txt"
      rm -rf "$work"
      exit 1
    fi
    echo "ok: kiln inspect shows SqueezeNet's work-groups of 16"
    rm -rf "$work" ;;
  esac
done
