#!/bin/sh
# The GPU checks and benchmarks that need a lent GPU (issue 15), for a session whose device time is
# short. Every step writes its own log and goes on when one fails, so that one run returns
# everything it could measure.
#
# usage: bench/gpu_check.sh BUILD_DIR OUT [MODELS_DIR]
#   BUILD_DIR   a kiln build (tools/kiln and the tests' programs), or DEST/build of bench/gpu_unbundle.sh
#   OUT         a folder that receives two files, rewritten after every step: summary.txt (each
#               step's exit status and the timings) and logs.tar.gz (every step's log). The logs
#               themselves go to $KILN_GPU_CHECK_LOGS (default /tmp/kiln-gpu-check), so that OUT
#               holds few files (the device tool returns at most 8) and a later call adds to them.
#   MODELS_DIR  where bench/export_models.py writes the models (default /tmp/kiln-models; needs numpy,
#               onnx and onnxruntime on this machine)
# Steps; KILN_GPU_CHECK_STEPS names the ones to run, in its order (default: all, in this order):
#   suite     the cuda suite's test programs and the backend-parity test (OpenCL on the GPU's driver)
#   shared    the shared models as CUDA plans and one ONNX node test in 8 on CUDA, from
#             $KILN_GPU_DATA (a folder holding models/ and onnx-node-tests/; skipped without it)
#   models    exports ResNet-50, MobileNetV2, BERT-base and their fp16 versions, checks each as a
#             CUDA plan against onnxruntime's outputs (f16 models also without tensor cores)
#   variants  each exported model's plan with register tiles off (t0), everything on (t4), split
#             reductions off (s0) and, for f16 models, tensor cores off (tc0), timed alternately,
#             and a per-kernel profile
#   symbolic  BERT-base over [batch, sequence] as one CUDA plan (batch 1..4, sequence 1..512) checked
#             against onnxruntime at four shapes (bench/check_symbolic_bert.py), then timed at
#             (1, 128) alternately with the plan compiled for exactly that shape
#   ort       kiln's CUDA plans against onnxruntime's CUDA execution provider in one run
#             (bench/compare_onnxruntime.py --device cuda): fp32 with TF32 off and on, fp16; needs
#             onnxruntime-gpu's parts in $KILN_ORT_GPU_PARTS (bench/ort_gpu_pack.py)
#   torch     the PyTorch baseline (bench/torch_gpu_baseline.py)
# Without a GPU it stops after the probe, saying so (exit 77).
set -u
build=$1 out=$2 models=${3:-/tmp/kiln-models}
steps=${KILN_GPU_CHECK_STEPS:-suite shared models symbolic variants ort torch}
logs=${KILN_GPU_CHECK_LOGS:-/tmp/kiln-gpu-check}
bench=$(cd "$(dirname "$0")" && pwd)
kiln=$build/tools/kiln
mkdir -p "$out" "$logs"
# The summary lives with the logs, so that a later call's summary continues an earlier one's.
log() { echo "== $*" | tee -a "$logs/summary.txt"; publish; }
publish() {
  cp "$logs/summary.txt" "$out/summary.txt"
  tar -C "$logs" -czf "$out/logs.tar.gz" --exclude='*.plan' .
}
# Runs "$@" with its output in $logs/NAME.log, and notes the exit status in the summary.
step() {
  name=$1
  shift
  start=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1
  status=$?
  log "$name: exit $status in $(( $(date +%s) - start )) s"
  return $status
}
touch "$logs/summary.txt"
log "gpu_check $(date -u +%FT%TZ): steps '$steps', kiln $build"

if ! "$build/tests/cuda/cuda-probe" --device > "$logs/probe.log" 2>&1; then
  log "no CUDA device: $(cat "$logs/probe.log")"
  exit 77
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$logs/gpu.txt" 2>&1

run_suite() {
  # The test programs run directly: a build carried to another machine keeps the paths of the one it
  # was configured on, which `meson test` would need. The backend-parity test runs in test-opencl
  # (with NVIDIA's OpenCL driver), and lists cuda as a backend where the GPU is.
  step cuda-renderer "$build/tests/cuda/test-cuda-renderer"
  step cuda-nvrtc "$build/tests/cuda/test-cuda-nvrtc"
  step cuda-plan "$build/tests/cuda/test-cuda-plan"
  step cuda-device-tensors "$build/tests/cuda/test-cuda-device-tensors"
  step opencl-and-parity env KILN_VERIFY=1 "$build/tests/opencl/test-opencl"
}

tests=$bench/../tests
run_shared() {
  if [ -d "${KILN_GPU_DATA:-/nonexistent}/models" ]; then
    step cuda-plan-models "$tests/cuda/run_cuda_plan_models.sh" "$build/tests/cuda/cuda-probe" "$kiln" \
      "$KILN_GPU_DATA/models"
    step onnx-node-cuda "$tests/opencl/run_onnx_node_sample.sh" cuda "$build/tests/cuda/cuda-probe" "$kiln" \
      "$tests/onnx/check_conformance.py" "$KILN_GPU_DATA/onnx-node-tests" "$tests/cuda/expected_failures_node_cuda.txt" 8
  else
    log "shared: skipped, no KILN_GPU_DATA/models (${KILN_GPU_DATA:-unset})"
  fi
}

exported="resnet50 mobilenetv2 bert_base resnet50_fp16 bert_base_fp16"
export_models() {
  for model in $exported; do [ -f "$models/$model/model.onnx" ] || break; done
  [ -f "$models/$model/model.onnx" ] ||
    step export python3 "$bench/export_models.py" "$models" --models "$(echo $exported | tr ' ' ,)"
}
atol_of() { case $1 in *_fp16) echo 0.05 ;; *) echo 1e-3 ;; esac; }

run_models() {
  export_models
  for model in $exported; do
    step "check-$model" "$kiln" test-onnx --via-plan --plan-target cuda --atol "$(atol_of "$model")" --timeout 900 "$models/$model"
    case $model in *_fp16)
      step "check-$model-tc0" env KILN_GPU_TENSOR_CORES=0 "$kiln" test-onnx --via-plan --plan-target cuda \
        --atol "$(atol_of "$model")" --timeout 900 "$models/$model" ;;
    esac
  done
}

run_variants() {
  export_models
  plans=$(mktemp -d)
  for model in $exported; do
    variants="t0 t4 s0"
    case $model in *_fp16) variants="t0 t4 s0 tc0" ;; esac
    for variant in $variants; do
      case $variant in
        t0) switch=KILN_GPU_REGISTER_TILES=0 ;;
        t4) switch=KILN_GPU_CHECK_ALL_ON=1 ;;  # everything on: the plan kiln compiles by default
        s0) switch=KILN_GPU_SPLIT_REDUCTIONS=0 ;;
        tc0) switch=KILN_GPU_TENSOR_CORES=0 ;;
      esac
      step "compile-$model-$variant" env "$switch" "$kiln" compile "$models/$model/model.onnx" \
        -o "$plans/$model.$variant.plan" --target cuda --cuda-arch 90
    done
    # Alternating, so that a slow stretch of the machine shows in all.
    for round in 1 2; do
      for variant in $variants; do
        step "bench-$model-$variant-$round" "$kiln" bench "$plans/$model.$variant.plan" --iterations 50
        grep -E "min_ms|median_ms" "$logs/bench-$model-$variant-$round.log" | tr '\n' ' ' |
          sed "s/^/   $model $variant: /" >> "$logs/summary.txt"
        echo >> "$logs/summary.txt"
      done
    done
    step "profile-$model-t4" "$kiln" bench "$plans/$model.t4.plan" --iterations 20 --profile
    rm -f "$plans/$model".*.plan  # large (weights); the logs are what comes back
  done
  rmdir "$plans"
}

run_ort() {
  site=/tmp/kiln-onnxruntime-gpu
  if step ort-unpack python3 "$bench/ort_gpu_pack.py" unpack "${KILN_ORT_GPU_PARTS:-/nonexistent}" "$site"; then
    export_models
    # onnxruntime's CUDA provider needs CUDA 13's cuBLAS, cuDNN, cuFFT, cuRAND and runtime: here they
    # are PyTorch's nvidia-* packages, whose folders the loader is told about (onnxruntime's own
    # preload and PyTorch's import, in compare_onnxruntime.py, are tried as well).
    nvidia_libs=$(python3 -c 'import glob, os, site
dirs = {os.path.dirname(f) for base in site.getsitepackages() for f in glob.glob(os.path.join(base, "nvidia", "**", "lib*.so*"), recursive=True)}
print(":".join(sorted(dirs)))')
    export LD_LIBRARY_PATH="$nvidia_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> "$logs/ort-unpack.log"
    set -- "$models/resnet50" "$models/bert_base" "$models/mobilenetv2"
    # fp32: TF32 off is kiln's arithmetic; TF32 on is what onnxruntime does by default on this GPU.
    step ort-cuda-fp32 env PYTHONPATH=$site python3 "$bench/compare_onnxruntime.py" --device cuda --cuda-arch 90 \
      --kiln "$kiln" --statistic min --iterations 50 --rounds 3 --warmup 10 --ort-cuda-option use_tf32=0 "$@"
    step ort-cuda-fp32-tf32 env PYTHONPATH=$site python3 "$bench/compare_onnxruntime.py" --device cuda --cuda-arch 90 \
      --kiln "$kiln" --statistic min --iterations 50 --rounds 3 --warmup 10 "$@"
    step ort-cuda-fp16 env PYTHONPATH=$site python3 "$bench/compare_onnxruntime.py" --device cuda --cuda-arch 90 \
      --kiln "$kiln" --statistic min --iterations 50 --rounds 3 --warmup 10 "$models/resnet50_fp16" "$models/bert_base_fp16"
    for name in ort-cuda-fp32 ort-cuda-fp32-tf32 ort-cuda-fp16; do
      sed -n '/^model /,$p' "$logs/$name.log" | sed "s/^/   $name: /" >> "$logs/summary.txt"
    done
    publish
  else
    sed 's/^/   /' "$logs/ort-unpack.log" >> "$logs/summary.txt"
    publish
  fi
}

run_symbolic() {
  model=$models/bert_base_symbolic
  [ -f "$model/model.onnx" ] || step export-symbolic python3 "$bench/export_models.py" "$models" --models bert_base_symbolic
  plans=$(mktemp -d)
  step compile-symbolic "$kiln" compile "$model/model.onnx" -o "$plans/symbolic.plan" --target cuda --cuda-arch 90 \
    --shape batch=1..4 --shape sequence=1..512
  step compile-symbolic-fixed "$kiln" compile "$model/model.onnx" -o "$plans/fixed.plan" --target cuda --cuda-arch 90 \
    --shape batch=1 --shape sequence=128
  step check-symbolic python3 "$bench/check_symbolic_bert.py" "$kiln" "$model/model.onnx" "$plans/symbolic.plan" \
    1x128 2x37 1x1 3x200
  sed 's/^/   /' "$logs/check-symbolic.log" >> "$logs/summary.txt"
  for round in 1 2; do
    for plan in symbolic fixed; do
      step "bench-symbolic-$plan-$round" "$kiln" bench "$plans/$plan.plan" --iterations 50 --shape batch=1 --shape sequence=128
      grep -E "min_ms|median_ms" "$logs/bench-symbolic-$plan-$round.log" | tr '\n' ' ' |
        sed "s/^/   bert_base_symbolic $plan plan at (1, 128): /" >> "$logs/summary.txt"
      echo >> "$logs/summary.txt"
    done
  done
  step profile-symbolic "$kiln" bench "$plans/symbolic.plan" --iterations 20 --profile --shape batch=1 --shape sequence=128
  rm -rf "$plans"
  publish
}

run_torch() { step torch-baseline python3 "$bench/torch_gpu_baseline.py"; }

for name in $steps; do
  case $name in
    suite | shared | models | symbolic | variants | ort | torch) "run_$name" ;;
    *) log "unknown step '$name' (steps: suite shared models symbolic variants ort torch)" ;;
  esac
done
log "done; logs in $logs and $out/logs.tar.gz"
