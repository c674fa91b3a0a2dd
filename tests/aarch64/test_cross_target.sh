#!/bin/bash
# `kiln compile --target aarch64` as a user meets it (issue 54), on mnist_8:
#   - the plan's code section is an AArch64 ELF shared object (e_machine 183), and the plan records
#     the triple and the chosen CPU's features (neoverse-n1: dotprod and fullfp16; generic: neither);
#   - compiling twice gives the same bytes, with and without the disk kernel cache;
#   - libkiln on x86-64 refuses the plan, naming both architectures; with the cross tools present,
#     the aarch64 libkiln under qemu refuses an x86-64 plan the same way, and refuses a neoverse-n1
#     plan on an emulated Cortex-A53 (no dotprod) naming the missing feature;
#   - bad options give clear errors: an unknown CPU, --cpu without an architecture;
#   - `--target x86_64 --cpu x86-64-v3` (the cross path for this machine's architecture) runs here.
# usage: test_cross_target.sh SOURCE_ROOT NATIVE_BUILD CROSS_BUILD KILN TEST_PLAN PLAN_REFERENCE MODELS_DIR
set -u
source_root=$1 native_build=$2 cross_build=$3 kiln=$4 test_plan=$5 reference=$6 models=$7
model=$models/mnist_8
if [ ! -f "$model/model.onnx" ]; then
  echo "skip: no shared model at $model"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-cross-target.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

# The ELF header of the plan's code section: the header's code_offset field (docs/plan-format.md)
# gives where it starts. Prints "MACHINE CLASS" (183 2 for AArch64 ELF64).
code_elf() {
  python3 - "$1" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
at = data.find(b"\x7fELF")
if at < 0:
    print("none"); sys.exit(0)
print(struct.unpack_from("<H", data, at + 18)[0], data[at + 4])
PY
}

compile() { "$kiln" compile "$model/model.onnx" -o "$@" > "$work/compile.log" 2>&1; }

# --- the plan and its code
KILN_CACHE_DIR=$work/cache1 compile "$work/a.kiln" --target aarch64 --cpu neoverse-n1 ||
  { fail "kiln compile --target aarch64 --cpu neoverse-n1"; cat "$work/compile.log"; }
elf=$(code_elf "$work/a.kiln")
[ "$elf" = "183 2" ] && ok "the code section is an ELF64 AArch64 shared object" ||
  fail "the code section's ELF machine/class is '$elf', not AArch64 ELF64 (183 2)"
for text in aarch64-unknown-linux-gnu neoverse-n1 dotprod fullfp16; do
  grep -qa "$text" "$work/a.kiln" && ok "the plan records '$text'" || fail "the plan does not record '$text'"
done
KILN_CACHE_DIR=$work/cache2 compile "$work/generic.kiln" --target aarch64 || fail "kiln compile --target aarch64"
grep -qa generic "$work/generic.kiln" && ! grep -qa dotprod "$work/generic.kiln" &&
  ok "the default aarch64 CPU is generic, without dotprod" || fail "the generic aarch64 plan names another CPU or dotprod"

# --- reproducible: a second compile with a cold cache, and a third from the warm one
KILN_CACHE_DIR=$work/cache3 compile "$work/b.kiln" --target aarch64 --cpu neoverse-n1 || fail "second compile"
KILN_CACHE_DIR=$work/cache1 compile "$work/c.kiln" --target aarch64 --cpu neoverse-n1 || fail "third compile"
cmp -s "$work/a.kiln" "$work/b.kiln" && cmp -s "$work/a.kiln" "$work/c.kiln" &&
  ok "three compiles (two cold caches, one warm) give identical bytes" || fail "aarch64 plans differ between compiles"

# --- libkiln on this x86-64 machine refuses it
"$kiln" inspect "$work/a.kiln" > "$work/inspect.log" 2>&1
status=$?
if [ $status -ne 0 ] && grep -q "the plan was compiled for aarch64-unknown-linux-gnu, this runtime runs on x86_64 Linux" "$work/inspect.log" &&
   grep -q "KILN_ERROR_UNSUPPORTED_TARGET" "$work/inspect.log"; then
  ok "x86-64 libkiln refuses the aarch64 plan: $(head -n 1 "$work/inspect.log")"
else
  fail "x86-64 libkiln did not refuse the aarch64 plan clearly (exit $status):"; cat "$work/inspect.log"
fi

# --- bad options
"$kiln" compile "$model/model.onnx" -o "$work/x.kiln" --target aarch64 --cpu not-a-cpu > "$work/bad.log" 2>&1
status=$?
[ $status -eq 1 ] && grep -q "unknown aarch64 CPU 'not-a-cpu' (--cpu takes one of LLVM's names: .*neoverse-n1" "$work/bad.log" &&
  [ ! -e "$work/x.kiln" ] && ok "an unknown CPU is a clear error (exit 1, no plan written)" ||
  { fail "unknown CPU: exit $status"; cat "$work/bad.log"; }
"$kiln" compile "$model/model.onnx" -o "$work/x.kiln" --cpu neoverse-n1 > "$work/bad.log" 2>&1
status=$?
[ $status -eq 2 ] && grep -q "\-\-cpu needs --target aarch64 or --target x86_64" "$work/bad.log" &&
  ok "--cpu without an architecture is a usage error" || { fail "--cpu alone: exit $status"; cat "$work/bad.log"; }
"$kiln" compile "$model/model.onnx" -o "$work/x.kiln" --target riscv64 > "$work/bad.log" 2>&1
status=$?
[ $status -eq 2 ] && grep -q "unknown target 'riscv64'" "$work/bad.log" &&
  ok "an unknown --target is a usage error" || { fail "--target riscv64: exit $status"; cat "$work/bad.log"; }

# --- the cross path for this machine's own architecture runs here, against the test data
"$reference" "$model/model.onnx" "$model/test_data_set_0" "$work/data0" > "$work/reference.log" 2>&1 ||
  { fail "plan-reference"; cat "$work/reference.log"; }
KILN_CACHE_DIR=$work/cache4 compile "$work/v3.kiln" --target x86_64 --cpu x86-64-v3 || fail "kiln compile --target x86_64"
if grep -q avx2 /proc/cpuinfo; then
  "$test_plan" matches-data "$work/v3.kiln" "$work/data0" > "$work/run.log" 2>&1 &&
    ok "an x86-64-v3 cross plan runs here and matches the test data" || { fail "the x86-64-v3 plan"; cat "$work/run.log"; }
fi

# --- the other direction, under qemu (with the cross tools)
source "$source_root/scripts/lib/cross_aarch64.sh"
missing=$(kiln_cross_aarch64_missing)
if [ -n "$missing" ] && ! kiln_ensure_cross_aarch64_packages; then
  echo "note: no aarch64 cross tools ($(echo $missing)): the aarch64 libkiln checks are left out"
elif kiln_cross_aarch64_build "$source_root" "$cross_build" "$native_build"; then
  runner=$cross_build/test-plan-aarch64
  KILN_CACHE_DIR=$work/cache4 compile "$work/x86.kiln" || fail "kiln compile (host)"
  qemu-aarch64 -L /usr/aarch64-linux-gnu "$runner" matches-data "$work/x86.kiln" "$work/data0" > "$work/qemu.log" 2>&1
  status=$?
  [ $status -ne 0 ] && grep -q "the plan was compiled for x86_64-.*, this runtime runs on aarch64 Linux" "$work/qemu.log" &&
    ok "aarch64 libkiln (qemu) refuses an x86-64 plan: $(grep -m1 'compiled for' "$work/qemu.log")" ||
    { fail "aarch64 libkiln did not refuse the x86-64 plan (exit $status)"; cat "$work/qemu.log"; }
  qemu-aarch64 -cpu cortex-a53 -L /usr/aarch64-linux-gnu "$runner" matches-data "$work/a.kiln" "$work/data0" > "$work/qemu.log" 2>&1
  status=$?
  [ $status -ne 0 ] && grep -q "the plan needs CPU feature '[a-z0-9]*', which this CPU lacks" "$work/qemu.log" &&
    ok "a Cortex-A53 refuses the neoverse-n1 plan: $(grep -m1 'needs CPU feature' "$work/qemu.log")" ||
    { fail "the neoverse-n1 plan on a Cortex-A53 (exit $status)"; cat "$work/qemu.log"; }
  qemu-aarch64 -cpu neoverse-n1 -L /usr/aarch64-linux-gnu "$runner" matches-data "$work/a.kiln" "$work/data0" > "$work/qemu.log" 2>&1 &&
    ok "the neoverse-n1 plan runs on an emulated Neoverse N1 and matches the test data" ||
    { fail "the neoverse-n1 plan on qemu -cpu neoverse-n1"; cat "$work/qemu.log"; }
else
  fail "the aarch64 cross build"
fi

[ $failures -eq 0 ] && echo "all checks passed" || echo "$failures checks failed"
[ $failures -eq 0 ]
