#!/bin/sh
# Drives the soak tests (tests/soak/soak.c) on plans made by `kiln compile` at test time.
#   run_soak.sh MODE KILN SOAK DATA_DIR
# MODE tiny:     Debian's libonnx-testdata test_add (an Add of two float32[3,4,5]): 1,000,000 runs
#                from 8 threads, then 1,000 load/run/free cycles.
# MODE mnist:    ../shared/data/models/mnist_8: 10,000 runs from 8 threads, then 200 cycles.
# MODE valgrind-tiny, valgrind-mnist: the same soaks under valgrind memcheck, shortened
#                (KILN_SOAK_SCALE=0.002 and 0.01): no invalid access and no leaked block (definite,
#                indirect or possible; valgrind.supp lists the one block kept on purpose). The plans
#                are compiled for x86-64-v3, as valgrind's emulated CPU lacks newer features.
# KILN_SOAK_SCALE multiplies the counts (the sanitizer builds set it lower); KILN_SOAK_RSS_LIMIT_KIB
# sets the allowed RSS growth after warm-up (default 1024; the sanitizer builds lift it, as their
# shadow memory, quarantine and race history grow RSS on their own). Exits 77 (skipped) when the
# model or valgrind is absent.
set -eu
mode=$1 kiln=$2 soak=$3 data=$4
tiny_model=/usr/share/libonnx-testdata/data/node/test_add/model.onnx
mnist_model=$data/models/mnist_8/model.onnx

case "$mode" in
  tiny | valgrind-tiny) model=$tiny_model ;;
  mnist | valgrind-mnist) model=$mnist_model ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
if [ ! -f "$model" ]; then
  echo "skipped: $model is absent"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-soak.XXXXXX")
trap 'rm -rf "$work"' EXIT
case "$mode" in
  valgrind-*)
    if ! command -v valgrind >/dev/null 2>&1; then
      echo "skipped: valgrind is absent"
      exit 77
    fi
    KILN_CPU_TARGET=x86-64-v3 "$kiln" compile "$model" -o "$work/soak.kiln"
    ;;
  *) "$kiln" compile "$model" -o "$work/soak.kiln" ;;
esac

case "$mode" in
  tiny) "$soak" "$work/soak.kiln" 1000000 8 1000 "${KILN_SOAK_RSS_LIMIT_KIB:-1024}" ;;
  mnist) "$soak" "$work/soak.kiln" 10000 8 200 "${KILN_SOAK_RSS_LIMIT_KIB:-1024}" ;;
  valgrind-*)
    # RSS under valgrind says nothing about kiln, so its growth limit is lifted; the leak check is
    # what these modes are for. The threads still overlap, on valgrind's serialised scheduler.
    if [ "$mode" = valgrind-tiny ]; then scale=0.002 runs=1000000 reloads=1000
    else scale=0.01 runs=10000 reloads=200; fi
    KILN_SOAK_SCALE=${KILN_SOAK_SCALE:-$scale} valgrind --quiet --error-exitcode=1 \
      --suppressions="$(dirname "$0")/valgrind.supp" --leak-check=full \
      --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
      "$soak" "$work/soak.kiln" $runs 8 $reloads 1000000
    echo "ok   valgrind memcheck: no invalid access, no leaked or possibly leaked block"
    ;;
esac
