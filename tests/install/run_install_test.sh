#!/bin/sh
# Installs the build into a temporary staging folder (meson install --destdir, nothing rebuilt) and
# uses it as a program outside kiln would:
#   layout    exactly the expected files: headers, libraries with SONAME links, the kiln tool,
#             kiln.pc / kiln-compiler.pc, the CMake package; no static core libraries, no tests
#   cli       the installed `kiln --version` and `kiln compile` (of ONNX's test_matmul_2d)
#   pkgconfig consumer.c built with `pkg-config --cflags --libs kiln`, run on that plan
#   cmake     cmake_consumer/ built with find_package(kiln) (kiln::compiler, kiln::runtime): it
#             compiles the model through libkiln-compiler, runs it, and its plan equals the CLI's
# Run by meson test (suite install) as
#   run_install_test.sh MESON BUILD_DIR SOURCE_DIR PREFIX LIBDIR BINDIR INCLUDEDIR VERSION
# Exits 77 (skipped) only when a tool it needs (cc, c++, pkg-config, cmake, readelf) is absent.
set -eu
meson=$1 build=$2 source=$3 prefix=$4 libdir=$5 bindir=$6 includedir=$7 version=$8
here=$source/tests/install
model=/usr/share/libonnx-testdata/data/node/test_matmul_2d/model.onnx  # Debian's libonnx-testdata

for tool in cc c++ pkg-config cmake readelf; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "skipped: $tool is not installed (scripts/lib/packages.sh installs it)"
    exit 77
  fi
done
if [ ! -f "$model" ]; then
  echo "skipped: $model is absent (Debian package libonnx-testdata)"
  exit 77
fi
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
case $bindir in /*) ;; *) bindir=$prefix/$bindir ;; esac
case $includedir in /*) ;; *) includedir=$prefix/$includedir ;; esac

# Only what is installed may be found: not the build tree's libraries.
unset LD_LIBRARY_PATH
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage
export KILN_CACHE_DIR="$work/kernel-cache"

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

echo "== meson install --destdir $stage (prefix $prefix)"
"$meson" install -C "$build" --destdir "$stage" --no-rebuild --quiet

echo "== layout"
# Every installed file and link, relative to the prefix, against the list of what should be there.
(cd "$stage$prefix" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort) > "$work/installed.txt"
rel_lib=${libdir#"$prefix"/} rel_bin=${bindir#"$prefix"/} rel_include=${includedir#"$prefix"/}
sort > "$work/expected.txt" <<LIST
$rel_bin/kiln
$rel_include/kiln/compiler.h
$rel_include/kiln/dlpack_compat.h
$rel_include/kiln/kiln.h
$rel_include/kiln/version.h
$rel_lib/cmake/kiln/kilnConfig.cmake
$rel_lib/cmake/kiln/kilnConfigVersion.cmake
$rel_lib/libkiln-compiler.so
$rel_lib/libkiln-compiler.so.0
$rel_lib/libkiln-compiler.so.$version
$rel_lib/libkiln.so
$rel_lib/libkiln.so.0
$rel_lib/libkiln.so.$version
$rel_lib/pkgconfig/kiln-compiler.pc
$rel_lib/pkgconfig/kiln.pc
LIST
if ! diff -u "$work/expected.txt" "$work/installed.txt"; then
  fail "meson install installs other files than expected (- expected, + installed)"
fi
lib=$stage$libdir
for name in libkiln libkiln-compiler; do
  [ "$(readlink "$lib/$name.so")" = "$name.so.0" ] || fail "$name.so does not link to $name.so.0"
  [ "$(readlink "$lib/$name.so.0")" = "$name.so.$version" ] || fail "$name.so.0 does not link to $name.so.$version"
  soname=$(readelf -d "$lib/$name.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "$name.so.0" ] || fail "$name.so.$version has SONAME '$soname', expected $name.so.0"
done
# The C headers stand alone: each compiles by itself as strict C11 from the installed tree.
for header in kiln.h compiler.h; do
  printf '#include <kiln/%s>\nint main(void) { return 0; }\n' "$header" > "$work/header.c"
  cc -std=c11 -pedantic -Wall -Wextra -Werror -I"$stage$includedir" -c "$work/header.c" -o "$work/header.o" ||
    fail "the installed kiln/$header does not compile alone as C11"
done
echo "ok: the expected files, SONAMEs libkiln.so.0 and libkiln-compiler.so.0, headers that compile alone"

echo "== the installed kiln tool"
kiln=$stage$bindir/kiln
"$kiln" --version | tee "$work/version.txt"
[ "$(head -n 1 "$work/version.txt")" = "kiln $version" ] || fail "kiln --version's first line is not 'kiln $version'"
grep -q "^libkiln $version\$" "$work/version.txt" || fail "the installed kiln does not run with libkiln $version"
# It must run with the installed libkiln (found through its RUNPATH), not the build tree's.
loaded=$(ldd "$kiln" | awk '$1 == "libkiln.so.0" { print $3 }')
if [ -z "$loaded" ] || [ "$(readlink -f "$loaded")" != "$(readlink -f "$stage$libdir/libkiln.so.0")" ]; then
  fail "the installed kiln loads '$loaded', not the installed $stage$libdir/libkiln.so.0"
fi
"$kiln" compile "$model" -o "$work/matmul.kiln"

echo "== pkg-config: a C program"
export PKG_CONFIG_PATH="$stage$libdir/pkgconfig"
# --define-variable points the .pc files at the staging copy, relocatable .pc files or not.
pc() { pkg-config --define-variable=prefix="$stage$prefix" "$@"; }
pc --exists --print-errors "kiln = $version" || fail "pkg-config finds no kiln $version"
libs=$(pc --libs kiln)
echo "pkg-config --cflags --libs kiln: $(pc --cflags kiln) $libs"
case " $libs " in *" -lkiln "*) ;; *) fail "pkg-config --libs kiln lacks -lkiln" ;; esac
[ "$(echo "$libs" | wc -w)" -le 2 ] || fail "pkg-config --libs kiln asks for more than libkiln: $libs"
pc --libs kiln-compiler | grep -q -- "-lkiln-compiler" || fail "pkg-config --libs kiln-compiler lacks -lkiln-compiler"
# shellcheck disable=SC2046  # word splitting of the flags is intended
cc -std=c11 -Wall -Wextra -Werror -o "$work/consumer" "$here/consumer.c" $(pc --cflags --libs kiln) -lm
LD_LIBRARY_PATH=$stage$libdir "$work/consumer" "$work/matmul.kiln"

echo "== CMake: find_package(kiln), a C++ program"
cmake -S "$here/cmake_consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$stage$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "cmake could not configure"; }
grep -F "kiln::kiln is $stage$bindir/kiln; kiln $version" "$work/cmake.log" ||
  { cat "$work/cmake.log"; fail "find_package(kiln) found another kiln than the staged $version"; }
cmake --build "$work/cmake-build" > "$work/cmake-build.log" 2>&1 || { cat "$work/cmake-build.log"; fail "cmake --build"; }
"$work/cmake-build/consumer_cpp" "$model" "$work/from-cmake.kiln"
cmp "$work/matmul.kiln" "$work/from-cmake.kiln" || fail "the plan compiled through libkiln-compiler differs from kiln compile's"
echo "ok: the plan compiled through the installed libkiln-compiler equals the installed kiln compile's"

# kilnConfigVersion.cmake: another major version is another ABI (docs/abi.md), so it is refused.
next_major=$((${version%%.*} + 1)).0
if cmake -S "$here/cmake_consumer" -B "$work/cmake-other" -DCMAKE_PREFIX_PATH="$stage$prefix" \
     -DKILN_WANTED="$next_major" > "$work/cmake-other.log" 2>&1; then
  fail "find_package(kiln $next_major) accepted kiln $version"
fi
grep -q "requested version \"$next_major\"" "$work/cmake-other.log" ||
  { cat "$work/cmake-other.log"; fail "find_package(kiln $next_major) failed for another reason than the version"; }
echo "ok: find_package(kiln $next_major) refuses kiln $version"
echo "ok: installed kiln $version used through pkg-config and CMake"
