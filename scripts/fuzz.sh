#!/usr/bin/env bash
# Runs one libFuzzer target of tests/fuzz/ for a while: ./scripts/fuzz.sh TARGET SECONDS [libFuzzer flags]
# (TARGET: npy, tensor_proto, symbolic, onnx, plan, plan_metadata). It installs clang-19 when missing,
# configures build-fuzz/ (clang, ASan + UBSan, libFuzzer coverage on kiln's code) once, builds the
# target, and fuzzes from the seed corpus tests/fuzz/corpus/TARGET. New corpus entries go to
# build-fuzz/fuzz-corpus/TARGET (kept between runs, not in git); crash, timeout and out-of-memory
# inputs go to tests/fuzz/crashes/TARGET/. Ends with the line "TARGET: N executions in S s".
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET SECONDS [libFuzzer flags]" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2
source scripts/lib/packages.sh
kiln_ensure_fuzz_packages

# Instrument kiln's code for coverage, ASan and UBSan. UBSan's vptr check needs RTTI, which Debian's
# LLVM is built without; its function check flags the generated kernels, which are called through
# pointers of their real type but carry no type signature. Every UBSan finding aborts.
flags="-fsanitize=fuzzer-no-link -fno-sanitize=vptr,function -fno-sanitize-recover=all"
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-19 CXX=clang++-19 meson setup build-fuzz --native-file scripts/llvm19-native.ini \
    -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false \
    -Dcpp_args="$flags" -Dc_args="$flags" -Dcpp_link_args="-fno-sanitize=vptr,function"
fi
# KILN_FUZZ_NO_BUILD=1 runs the binary as it is (while another ninja is busy in build-fuzz/).
[ "${KILN_FUZZ_NO_BUILD:-0}" = 1 ] || nice -n 10 ninja -C build-fuzz "tests/fuzz/fuzz-$target"

# Per-target input size limits: large enough for the seeds and what grows from them, small enough
# that one input cannot take seconds or gigabytes.
case $target in
  npy) max_len=4096 ;;
  tensor_proto) max_len=4096 ;;
  symbolic) max_len=256 ;;
  onnx) max_len=16384 ;;
  plan) max_len=16384 ;;
  plan_metadata) max_len=4096 ;;
  *) echo "unknown fuzz target '$target'" >&2; exit 2 ;;
esac
dictionary=()
[ -f "tests/fuzz/dicts/$target.dict" ] && dictionary=("-dict=tests/fuzz/dicts/$target.dict")
work_corpus="build-fuzz/fuzz-corpus/$target"
crashes="tests/fuzz/crashes/$target"
mkdir -p "$work_corpus" "$crashes"
log="build-fuzz/fuzz-$target.log"

# The first corpus folder receives new inputs; the seeds are only read. Leaks are checked (LSan);
# a UBSan report stops the run like a crash.
status=0
started=$(date +%s)
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
KILN_CACHE=0 nice -n 15 "build-fuzz/tests/fuzz/fuzz-$target" \
  -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -artifact_prefix="$crashes/" -print_final_stats=1 "${dictionary[@]}" "$@" \
  "$work_corpus" "tests/fuzz/corpus/$target" 2>&1 | tee "$log" || status=$?
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
runtime=$(( $(date +%s) - started ))
echo "$target: ${executions:-?} executions in $runtime s (corpus: $(ls "$work_corpus" | wc -l) files; crashes in $crashes)"
exit $status
