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
#   graphs    each exported model's plan with launch graphs off (KILN_CUDA_GRAPHS=0) and on (the
#             default), timed alternately, and its per-kernel profile
#   exported  the models of ../shared/data/models-exported in $KILN_GPU_DATA (those the bundle
#             carries) as CUDA plans against every test set (a fixed plan per set's shapes)
#   batch     kiln against onnxruntime's CUDA provider at batch 32 (resnet50_b32, mobilenetv2_b32,
#             bert_base_b32, exported here; TF32 off)
#   ort-exported  the same for the exported models the bundle carries, at test_data_set_0's shapes
#   torch     the PyTorch baseline (bench/torch_gpu_baseline.py)
# Without a GPU it stops after the probe, saying so (exit 77).
set -u
build=$1 out=$2 models=${3:-/tmp/kiln-models}
steps=${KILN_GPU_CHECK_STEPS:-suite shared models symbolic variants ort graphs exported batch ort-exported torch}
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
# timed NAME LABEL COMMAND...: step NAME running a `kiln bench` COMMAND, then its fastest and median
# run in the summary as LABEL.
timed() {
  label=$2 bench_name=$1
  shift 2
  step "$bench_name" "$@" || true
  grep -E "min_ms|median_ms" "$logs/$bench_name.log" | tr '\n' ' ' | sed "s/^/   $label: /" >> "$logs/summary.txt"
  echo >> "$logs/summary.txt"
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
        timed "bench-$model-$variant-$round" "$model $variant" "$kiln" bench "$plans/$model.$variant.plan" --iterations 50
      done
    done
    step "profile-$model-t4" "$kiln" bench "$plans/$model.t4.plan" --iterations 20 --profile
    rm -f "$plans/$model".*.plan  # large (weights); the logs are what comes back
  done
  rmdir "$plans"
}

# onnxruntime-gpu unpacked once into $ort_site from $KILN_ORT_GPU_PARTS, with CUDA 13's cuBLAS,
# cuDNN, cuFFT, cuRAND and runtime on the loader's path: here they are PyTorch's nvidia-* packages
# (onnxruntime's own preload and PyTorch's import, in compare_onnxruntime.py, are tried as well).
ort_site=/tmp/kiln-onnxruntime-gpu
ort_ready() {
  if [ ! -d "$ort_site/onnxruntime" ] &&
    ! step ort-unpack python3 "$bench/ort_gpu_pack.py" unpack "${KILN_ORT_GPU_PARTS:-/nonexistent}" "$ort_site"; then
    sed 's/^/   /' "$logs/ort-unpack.log" >> "$logs/summary.txt"
    publish
    return 1
  fi
  nvidia_libs=$(python3 -c 'import glob, os, site
dirs = {os.path.dirname(f) for base in site.getsitepackages() for f in glob.glob(os.path.join(base, "nvidia", "**", "lib*.so*"), recursive=True)}
print(":".join(sorted(dirs)))')
  case ${LD_LIBRARY_PATH:-} in *"$nvidia_libs"*) ;; *) export LD_LIBRARY_PATH="$nvidia_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
}
# compare NAME ITERATIONS [compare_onnxruntime.py arguments and models]: one table, into the summary.
compare() {
  name=$1 iterations=$2
  shift 2
  step "$name" env PYTHONPATH=$ort_site python3 "$bench/compare_onnxruntime.py" --device cuda --cuda-arch 90 \
    --kiln "$kiln" --statistic min --iterations "$iterations" --rounds 2 --warmup 5 "$@"
  sed -n '/^model /,$p' "$logs/$name.log" | sed "s/^/   $name: /" >> "$logs/summary.txt"
  publish
}

run_ort() {
  ort_ready || return
  export_models
  # fp32 with TF32 off is kiln's arithmetic; TF32 on (last) is what onnxruntime does by default here.
  compare ort-cuda-fp32 30 --ort-cuda-option use_tf32=0 "$models/resnet50" "$models/mobilenetv2" "$models/bert_base"
  compare ort-cuda-fp16 30 "$models/resnet50_fp16" "$models/bert_base_fp16"
  compare ort-cuda-fp32-tf32 30 "$models/resnet50" "$models/mobilenetv2" "$models/bert_base"
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
      timed "bench-symbolic-$plan-$round" "bert_base_symbolic $plan plan at (1, 128)" "$kiln" bench "$plans/$plan.plan" \
        --iterations 50 --shape batch=1 --shape sequence=128
    done
  done
  step profile-symbolic "$kiln" bench "$plans/symbolic.plan" --iterations 20 --profile --shape batch=1 --shape sequence=128
  rm -rf "$plans"
  publish
}

run_graphs() {
  export_models
  plans=$(mktemp -d)
  for model in resnet50 mobilenetv2 bert_base resnet50_fp16 bert_base_fp16; do
    step "compile-$model-graphs" "$kiln" compile "$models/$model/model.onnx" -o "$plans/$model.plan" --target cuda --cuda-arch 90
    for round in 1 2; do
      for graphs in 0 1; do
        timed "bench-$model-graphs$graphs-$round" "$model KILN_CUDA_GRAPHS=$graphs" env KILN_CUDA_GRAPHS=$graphs \
          "$kiln" bench "$plans/$model.plan" --iterations 50
      done
    done
    # Each launch synchronised and timed (no graph): the slowest kernels' GFLOP/s and GB/s.
    step "profile-$model" "$kiln" bench "$plans/$model.plan" --iterations 10 --profile
    rm -f "$plans/$model.plan"
  done
  rmdir "$plans"
  publish
}

# The exported models the bundle carries, and the fixed shapes of their test_data_set_0.
exported_shapes() {
  case $(basename "$1") in
    mobilenet_v3_small_dynbatch | shufflenet_v2_dynbatch) echo "--shape batch=1" ;;
    bert_tiny_legacy | bert_tiny_dynamo) echo "--shape batch=1 --shape sequence=9" ;;
    *) echo "" ;;
  esac
}
exported_models() {
  for folder in "${KILN_GPU_DATA:-/nonexistent}"/models-exported/*/; do
    [ -f "$folder/model.onnx" ] && echo "${folder%/}"
  done
}

run_exported() {
  for folder in $(exported_models); do
    name=$(basename "$folder")
    # Every test set, one fixed-shape plan per set's shapes (test-onnx --via-plan), at the model's
    # own tolerance (its info.json).
    atol=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["atol"])' "$folder/info.json")
    step "check-exported-$name" "$kiln" test-onnx --via-plan --plan-target cuda --atol "$atol" --timeout 900 "$folder"
  done
  publish
}

batch32="resnet50_b32 mobilenetv2_b32 bert_base_b32"
export_batch32() {
  for model in $batch32; do
    [ -f "$models/$model/model.onnx" ] || step "export-$model" python3 "$bench/export_models.py" "$models" --models "$model"
  done
}

run_batch() {
  export_batch32
  ort_ready || return
  compare ort-cuda-batch32 10 --ort-cuda-option use_tf32=0 $(for model in $batch32; do echo "$models/$model"; done)
}

run_ort_exported() {
  ort_ready || return
  for folder in $(exported_models); do
    compare "ort-cuda-$(basename "$folder")" 30 --ort-cuda-option use_tf32=0 $(exported_shapes "$folder") "$folder/model.onnx"
  done
}

run_torch() { step torch-baseline python3 "$bench/torch_gpu_baseline.py"; }

for name in $steps; do
  case $name in
    suite | shared | models | symbolic | variants | ort | graphs | exported | batch | torch) "run_$name" ;;
    ort-exported) run_ort_exported ;;
    *) log "unknown step '$name' (steps: suite shared models symbolic variants ort graphs exported batch ort-exported torch)" ;;
  esac
done
log "done; logs in $logs and $out/logs.tar.gz"
