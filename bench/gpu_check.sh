#!/bin/sh
# One pass of the GPU checks and benchmarks that need a lent GPU (issue 15), for a session whose device
# time is short: the CUDA test suite, the exported models as CUDA plans checked against
# onnxruntime's outputs (the f16 models also without tensor cores), each model's plan with register
# tiles on and off, split reductions off (f16 models: and tensor cores off) timed alternately, a
# per-kernel profile, and the PyTorch baseline. Every step writes its output under OUT and goes on
# when one fails, so that one run returns everything it could measure.
#
# usage: bench/gpu_check.sh BUILD_DIR OUT [MODELS_DIR]
#   BUILD_DIR   a kiln build (tools/kiln and the tests' programs)
#   OUT         a folder for the logs (created)
#   MODELS_DIR  where bench/export_models.py writes the models (default /tmp/kiln-models; needs numpy,
#               onnx and onnxruntime on this machine)
# Without a GPU it stops after the probe, saying so (exit 77).
set -u
build=$1 out=$2 models=${3:-/tmp/kiln-models}
kiln=$build/tools/kiln
mkdir -p "$out"
log() { echo "== $*" | tee -a "$out/summary.txt"; }
# Runs "$@" with its output in $out/NAME.log, and notes the exit status in the summary.
step() {
  name=$1
  shift
  start=$(date +%s)
  "$@" > "$out/$name.log" 2>&1
  status=$?
  log "$name: exit $status in $(( $(date +%s) - start )) s"
}

if ! "$build/tests/cuda/cuda-probe" --device > "$out/probe.log" 2>&1; then
  log "no CUDA device: $(cat "$out/probe.log")"
  exit 77
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1

# The CUDA suite's test programs, run directly: a build carried to another machine keeps the paths
# of the one it was configured on, which `meson test` would need. The backend-parity test runs in
# test-opencl (with NVIDIA's OpenCL driver), and lists cuda as a backend where the GPU is.
step cuda-renderer "$build/tests/cuda/test-cuda-renderer"
step cuda-nvrtc "$build/tests/cuda/test-cuda-nvrtc"
step cuda-plan "$build/tests/cuda/test-cuda-plan"
step cuda-device-tensors "$build/tests/cuda/test-cuda-device-tensors"
step opencl-and-parity env KILN_VERIFY=1 "$build/tests/opencl/test-opencl"

step export python3 "$(dirname "$0")/export_models.py" "$models" \
  --models resnet50,mobilenetv2,bert_base,resnet50_fp16,bert_base_fp16
for model in resnet50 mobilenetv2 bert_base resnet50_fp16 bert_base_fp16; do
  case $model in *_fp16) atol=0.05 ;; *) atol=1e-3 ;; esac
  step "check-$model" "$kiln" test-onnx --via-plan --plan-target cuda --atol "$atol" --timeout 900 "$models/$model"
  step "compile-$model-t0" env KILN_GPU_REGISTER_TILES=0 "$kiln" compile "$models/$model/model.onnx" \
    -o "$out/$model.t0.plan" --target cuda --cuda-arch 90
  step "compile-$model-t4" "$kiln" compile "$models/$model/model.onnx" -o "$out/$model.t4.plan" --target cuda --cuda-arch 90
  # Split reductions (gpu_grid.h) off: what they change, timed against t4 (everything on).
  step "compile-$model-s0" env KILN_GPU_SPLIT_REDUCTIONS=0 "$kiln" compile "$models/$model/model.onnx" \
    -o "$out/$model.s0.plan" --target cuda --cuda-arch 90
  variants="t0 t4 s0"
  # f16 models: the tensor cores (on in t0 and t4) checked and timed against the same plan without them.
  case $model in *_fp16)
    step "check-$model-tc0" env KILN_GPU_TENSOR_CORES=0 "$kiln" test-onnx --via-plan --plan-target cuda \
      --atol "$atol" --timeout 900 "$models/$model"
    step "compile-$model-tc0" env KILN_GPU_TENSOR_CORES=0 "$kiln" compile "$models/$model/model.onnx" \
      -o "$out/$model.tc0.plan" --target cuda --cuda-arch 90
    variants="t0 t4 s0 tc0" ;;
  esac
  # Alternating, so that a slow stretch of the machine shows in all.
  for round in 1 2; do
    for tiles in $variants; do
      step "bench-$model-$tiles-$round" "$kiln" bench "$out/$model.$tiles.plan" --iterations 50
      grep -E "min_ms|median_ms" "$out/bench-$model-$tiles-$round.log" | tr '\n' ' ' | sed "s/^/   $model $tiles: /" |
        tee -a "$out/summary.txt"
      echo >> "$out/summary.txt"
    done
  done
  step "profile-$model-t4" "$kiln" bench "$out/$model.t4.plan" --iterations 20 --profile
  rm -f "$out/$model.t0.plan" "$out/$model.t4.plan" "$out/$model.s0.plan" "$out/$model.tc0.plan"  # large: weights; the logs are what comes back
done
step torch-baseline python3 "$(dirname "$0")/torch_gpu_baseline.py"
log "done; logs in $out"
