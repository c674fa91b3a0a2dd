#!/bin/sh
# Drives the plan tests that need a plan made by `kiln compile` at test time.
#   run_plan_test.sh MODE KILN PLAN_REFERENCE TEST_PLAN LIBKILN DATA_DIR [TEST_COMPILER TEST_RUN_OPTIONS]
# MODE: end-to-end (compile mnist_8, run it through the C API, compare with the test data and the
# in-process path), reproducible (two compiles, one with the kernel cache off, are byte-identical),
# misuse (the C misuse tests on a fresh plan), threads (8 threads run one plan at once),
# deps (libkiln depends on the C library only: no LLVM, no protobuf, no libstdc++), compiler
# (compiler.h compiles mnist_8 from C; the plan equals `kiln compile`'s byte for byte and passes the
# end-to-end test), cancel (cancellation, on the largest model present: many kernels), options
# (plan load options and run options), dlpack (DLPack in and out).
# Exits 77 (skipped) when the models are absent.
set -eu
mode=$1 kiln=$2 reference=$3 test_plan=$4 libkiln=$5 data=$6
test_compiler=${7:-} test_run_options=${8:-}
model_dir=$data/models/mnist_8

if [ "$mode" = deps ]; then
  deps=$(ldd "$libkiln")
  echo "$deps"
  # Only the C library (libdl and libpthread are part of it since glibc 2.34, libm is allowed).
  unexpected=$(echo "$deps" | grep -Ev 'linux-vdso|ld-linux|libc\.so|libdl\.so|libpthread\.so|libm\.so' || true)
  if [ -n "$unexpected" ]; then
    echo "FAILED: libkiln depends on more than libc, libdl and pthreads:" >&2
    echo "$unexpected" >&2
    exit 1
  fi
  exit 0
fi

if [ ! -f "$model_dir/model.onnx" ]; then
  echo "skipped: $model_dir/model.onnx is absent"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-plan-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ "$mode" = cancel ]; then
  # A model with many kernels, so that a run is long enough to be cancelled in the middle.
  model=$data/models/ultraface_rfb_320/model.onnx
  [ -f "$model" ] || model=$model_dir/model.onnx
  "$kiln" compile "$model" -o "$work/cancel.kiln"
  "$test_run_options" cancel "$work/cancel.kiln"
  exit 0
fi

"$kiln" compile "$model_dir/model.onnx" -o "$work/mnist.kiln"
case "$mode" in
  compiler)
    "$test_compiler" "$model_dir/model.onnx" "$work/from-c.kiln" "$work"
    cmp "$work/mnist.kiln" "$work/from-c.kiln"
    echo "ok: the plan compiled through compiler.h equals kiln compile's byte for byte"
    "$reference" "$model_dir/model.onnx" "$model_dir/test_data_set_0" "$work/data"
    "$test_plan" end-to-end "$work/from-c.kiln" "$work/data"
    ;;
  options | dlpack)
    "$test_run_options" "$mode" "$work/mnist.kiln"
    ;;
  end-to-end)
    "$kiln" inspect "$work/mnist.kiln"
    "$reference" "$model_dir/model.onnx" "$model_dir/test_data_set_0" "$work/data"
    "$test_plan" end-to-end "$work/mnist.kiln" "$work/data"
    ;;
  reproducible)
    KILN_CACHE=0 "$kiln" compile "$model_dir/model.onnx" -o "$work/again.kiln"
    cmp "$work/mnist.kiln" "$work/again.kiln"
    echo "ok: two compiles (cached and uncached kernels) give byte-identical plans"
    # Kernels are optimised and compiled on several threads (support/parallel_tasks.h;
    # KILN_COMPILE_THREADS or --jobs): the plan and the progress lines must not depend on how
    # many, or on which thread finishes first.
    # (The same output path both times, since the last progress line names it.)
    KILN_CACHE=0 KILN_COMPILE_THREADS=1 "$kiln" compile "$model_dir/model.onnx" -o "$work/threads.kiln" 2> "$work/one.log"
    mv "$work/threads.kiln" "$work/one.kiln"
    KILN_CACHE=0 "$kiln" compile "$model_dir/model.onnx" -o "$work/threads.kiln" --jobs 5 2> "$work/five.log"
    mv "$work/threads.kiln" "$work/five.kiln"
    cmp "$work/one.kiln" "$work/five.kiln"
    cmp "$work/mnist.kiln" "$work/five.kiln"
    strip_times() { sed -e 's/^kiln compile: \[ *[0-9.]*s\] //' -e 's/ on [0-9]* threads*$//' "$1"; }
    [ "$(strip_times "$work/one.log")" = "$(strip_times "$work/five.log")" ] || {
      echo "FAILED: the progress lines differ between 1 and 5 compile threads" >&2
      diff "$work/one.log" "$work/five.log" >&2
      exit 1
    }
    grep -q "on 5 threads" "$work/five.log"
    echo "ok: compiles on 1 and 5 threads give byte-identical plans and the same progress lines"
    if "$kiln" compile "$model_dir/model.onnx" -o "$work/none.kiln" -j 0 2> "$work/jobs.log"; then
      echo "FAILED: kiln compile -j 0 succeeded" >&2
      exit 1
    fi
    grep -q -- "-j needs a number of threads" "$work/jobs.log"
    [ ! -e "$work/none.kiln" ]
    echo "ok: -j 0 is refused with a message, and no plan is written"
    ;;
  misuse)
    "$test_plan" misuse "$work/mnist.kiln"
    ;;
  threads)
    "$test_plan" threads "$work/mnist.kiln"
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
