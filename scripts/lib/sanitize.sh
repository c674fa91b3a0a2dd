# Sanitizer builds and the suites that run under them (docs/sanitizers.md). Sourced by
# scripts/test.sh after packages.sh. gcc's sanitizers: the same compiler as the plain build.
#
#   address,undefined  build-asan: the whole project under ASan + UBSan (LeakSanitizer included)
#   thread             build-tsan: libkiln alone under TSan (runtime_only), plans from build/
#   (default CI run)   build-asan-runtime (libkiln alone under ASan + UBSan) and build-tsan

# Suites per sanitizer. A suite this checkout lacks is left out.
KILN_ASAN_SUITES=(unit plan capi onnx-broken onnx-node-sample soak)
KILN_TSAN_SUITES=(concurrency soak)
KILN_ASAN_RUNTIME_SUITES=(plan capi concurrency soak)

# Every finding fails its test: ASan and UBSan stop at the first report, TSan too (it would
# otherwise only change the exit status at the end). Suppressions are for third-party code only,
# each with its reason, in tests/sanitizers/.
kiln_sanitizer_environment() {
  # use_sigaltstack=0: LLVM gives each thread that compiles a malloc'd alternate signal stack,
  # and ASan, which unmaps the thread's alternate stack at thread exit as if it were its own,
  # then stops with "unable to unmap" when the compile thread (src/support/large_stack.cpp) ends.
  export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:use_sigaltstack=0"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
  local suppressions
  for suppressions in tests/sanitizers/*.supp; do
    [ -f "$suppressions" ] || continue
    case $suppressions in
      */lsan.supp) export LSAN_OPTIONS="suppressions=$PWD/$suppressions:print_suppressions=0" ;;
      */ubsan.supp) export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:suppressions=$PWD/$suppressions" ;;
      */tsan.supp) export TSAN_OPTIONS="${TSAN_OPTIONS:-}:suppressions=$PWD/$suppressions" ;;
    esac
  done
  # The soak test's iteration counts, scaled down: a sanitizer is 2-15x slower.
  export KILN_SOAK_SCALE=${KILN_SOAK_SCALE:-0.01}
  # RSS under a sanitizer measures the sanitizer (TSan's race history grew 3.5 MiB in 10,000 runs):
  # the plain build checks that RSS stays flat, these builds check leaks and races.
  export KILN_SOAK_RSS_LIMIT_KIB=${KILN_SOAK_RSS_LIMIT_KIB:-1000000}
}

# kiln_sanitize_setup DIR SANITIZERS [runtime-only]: configures DIR once. A runtime-only build
# compiles libkiln and its C tests alone; their plans come from build/'s kiln. -O1 and line tables
# only (-g1): compiling is the slow part on 2 cores, and reports need no more than file:line.
kiln_sanitize_setup() {
  local dir=$1 options=(-Db_sanitize="$2" -Dbenchmarks=false -Doptimization=1 -Dc_args=-g1 -Dcpp_args=-g1)
  if [ "${3:-}" = runtime-only ]; then
    options+=(-Druntime_only=true -Dplan_tools_dir="$PWD/build")
  fi
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --native-file scripts/llvm19-native.ini "${options[@]}"
  fi
}

# kiln_sanitize_run DIR SUITES_ARRAY_NAME [MESON_TEST_ARG...]: builds only what those suites need,
# then runs them. Returns meson test's status.
kiln_sanitize_run() {
  local dir=$1 suites_name=$2[@]
  shift 2
  local suites=() suite_args=() suite targets started=$SECONDS status=0
  ninja -C "$dir" build.ninja >/dev/null || return   # introspection must see the current meson.build
  mapfile -t suites < <(python3 scripts/lib/suite_targets.py --present "$dir" "${!suites_name}")
  echo "== $dir: suites ${suites[*]} (asked: ${!suites_name})"
  if [ ${#suites[@]} -eq 0 ]; then
    echo "== $dir: none of these suites is defined here" >&2
    return 1
  fi
  for suite in "${suites[@]}"; do suite_args+=(--suite "$suite"); done
  targets=$(python3 scripts/lib/suite_targets.py "$dir" "${suites[@]}")
  # shellcheck disable=SC2086  # one target per word
  ninja -C "$dir" $targets || return
  kiln_sanitizer_environment
  meson test -C "$dir" --no-rebuild --print-errorlogs --timeout-multiplier 4 "${suite_args[@]}" "$@" || status=$?
  echo "== $dir: built and tested in $((SECONDS - started)) s"
  return $status
}
