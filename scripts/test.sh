#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite. Extra arguments go to `meson test`
# (for example `./scripts/test.sh --suite passes`). Ends with the line "N passed, M failed, K skipped".
#
# With no arguments (the CI run) it then runs the cheap sanitizer subset: libkiln alone built under
# ASan+UBSan and under TSan, running the C API, plan and concurrency tests (docs/sanitizers.md).
#   ./scripts/test.sh --sanitize address,undefined [MESON_TEST_ARG...]   the whole project, build-asan
#   ./scripts/test.sh --sanitize thread [MESON_TEST_ARG...]              concurrency tests, build-tsan
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
source scripts/lib/python_env.sh
source scripts/lib/sanitize.sh

sanitize=
case "${1:-}" in
  --sanitize) sanitize=${2:?--sanitize needs address,undefined or thread}; shift 2 ;;
  --sanitize=*) sanitize=${1#--sanitize=}; shift ;;
esac

kiln_ensure_packages
kiln_ensure_python_env
status=0
case "$sanitize" in
  "")
    kiln_ensure_sklearn_python_env || true
    kiln_ensure_wheel_python_env || true
    kiln_build
    meson test -C build --print-errorlogs "$@" || status=$?
    logs=(build/meson-logs/testlog.json)
    if [ $# -eq 0 ]; then
      python3 scripts/lib/test_summary.py "${logs[@]}" | sed 's/^/plain build: /'
      kiln_sanitize_setup build-asan-runtime address,undefined runtime-only
      kiln_sanitize_run build-asan-runtime KILN_ASAN_RUNTIME_SUITES || status=$?
      kiln_sanitize_setup build-tsan thread runtime-only
      kiln_sanitize_run build-tsan KILN_TSAN_SUITES || status=$?
      logs+=(build-asan-runtime/meson-logs/testlog.json build-tsan/meson-logs/testlog.json)
    fi
    ;;
  address,undefined | undefined,address)
    kiln_sanitize_setup build-asan address,undefined
    kiln_sanitize_run build-asan KILN_ASAN_SUITES "$@" || status=$?
    logs=(build-asan/meson-logs/testlog.json)
    ;;
  thread)
    # The plans come from the plain build's kiln.
    ninja -C build tools/kiln tests/plan/plan-reference 2>/dev/null || kiln_build
    kiln_sanitize_setup build-tsan thread runtime-only
    kiln_sanitize_run build-tsan KILN_TSAN_SUITES "$@" || status=$?
    logs=(build-tsan/meson-logs/testlog.json)
    ;;
  *)
    echo "--sanitize takes address,undefined or thread (ASan and TSan cannot share a build)" >&2
    exit 2
    ;;
esac

python3 scripts/lib/test_summary.py "${logs[@]}"
exit $status
