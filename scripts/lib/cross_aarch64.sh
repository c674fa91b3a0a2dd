# The ARM64 (aarch64) cross build of libkiln and its C plan runner, for the `aarch64` test suite and
# the aarch64 runtime wheel. Sourced by tests/aarch64/run_aarch64_models.sh and python/build_wheels.sh.
#
# Debian's cross toolchain builds it (crossbuild-essential-arm64); qemu-user runs the results with
# /usr/aarch64-linux-gnu as their library root. libkiln needs only libc, libstdc++ and flatbuffers'
# header-only reader; the reader's headers are architecture independent, so the build machine's are
# used through a private include directory (pointing the cross compiler at all of /usr/include would
# mix the two architectures' C library headers).

KILN_CROSS_AARCH64_PACKAGES=(crossbuild-essential-arm64 qemu-user)

# Prints what is missing for the cross build and qemu runs, one word each; nothing when all is there.
kiln_cross_aarch64_missing() {
  local tool
  for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64; do
    command -v "$tool" > /dev/null || echo "$tool"
  done
  [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || echo "/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1"
  [ -e /usr/include/flatbuffers/flatbuffers.h ] || echo "/usr/include/flatbuffers/flatbuffers.h"
}

# Installs the cross packages when running as root with a package index that has them; returns
# non-zero (and changes nothing) otherwise.
kiln_ensure_cross_aarch64_packages() {
  [ -z "$(kiln_cross_aarch64_missing)" ] && return 0
  [ "$(id -u)" -eq 0 ] || return 1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${KILN_CROSS_AARCH64_PACKAGES[@]}" > /dev/null 2>&1 || return 1
  [ -z "$(kiln_cross_aarch64_missing)" ]
}

# kiln_cross_aarch64_build SOURCE_DIR BUILD_DIR PLAN_TOOLS_DIR: configures BUILD_DIR (once) as a
# runtime-only aarch64 build and builds libkiln and test-plan-aarch64 (tests/plan/test_plan.c, the C
# runner the plan suite uses). PLAN_TOOLS_DIR is a native build directory (the runtime-only build
# insists on one; its tools are not run here).
kiln_cross_aarch64_build() {
  # Tests of the aarch64 suite run side by side and share the build: one configures and builds at a time.
  mkdir -p "$2-deps"
  (
    flock 9 || exit 1
    kiln_cross_aarch64_build_locked "$@"
  ) 9> "$2-deps/lock"
}

kiln_cross_aarch64_build_locked() {
  local source=$1 build=$2 tools=$3
  local deps=$build-deps
  mkdir -p "$deps/include" "$deps/pkgconfig"
  ln -sfn /usr/include/flatbuffers "$deps/include/flatbuffers"
  local version
  version=$(pkg-config --modversion flatbuffers 2> /dev/null || echo 2.0.8)
  printf 'Name: flatbuffers\nDescription: header-only reader (build machine headers)\nVersion: %s\nCflags: -I%s\nLibs:\n' \
    "$version" "$(cd "$deps/include" && pwd)" > "$deps/pkgconfig/flatbuffers.pc"
  printf "[properties]\npkg_config_libdir = ['%s']\n" "$(cd "$deps/pkgconfig" && pwd)" > "$deps/pkg-config.ini"
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$source" --cross-file "$source/scripts/cross/aarch64-linux-gnu.ini" \
      --cross-file "$deps/pkg-config.ini" -Druntime_only=true -Dtests=false -Dbenchmarks=false \
      -Dz3=disabled -Dcuda=disabled -Dplan_tools_dir="$(cd "$tools" && pwd)" > "$deps/setup.log" 2>&1 ||
      { cat "$deps/setup.log" >&2; return 1; }
  fi
  ninja -C "$build" capi/libkiln.so.0.2.0 > "$deps/ninja.log" 2>&1 || { tail -n 40 "$deps/ninja.log" >&2; return 1; }
  # The C runner: C11 against kiln.h and libkiln only, exactly as tests/plan builds it natively.
  local runner=$build/test-plan-aarch64
  if [ ! -x "$runner" ] || [ "$source/tests/plan/test_plan.c" -nt "$runner" ] || [ "$build/capi/libkiln.so.0" -nt "$runner" ]; then
    aarch64-linux-gnu-gcc -std=c11 -pedantic -Wall -Wextra -Werror -O2 -I"$source/include" -I"$build/include" \
      "$source/tests/plan/test_plan.c" -o "$runner" -L"$build/capi" -lkiln -lm -lpthread \
      -Wl,-rpath,'$ORIGIN/capi' || return 1
  fi
}

# kiln_qemu_aarch64 PROGRAM ARGS...: runs an aarch64 program under qemu-user.
kiln_qemu_aarch64() {
  qemu-aarch64 -L /usr/aarch64-linux-gnu "$@"
}

# The aarch64 Python the wheel test runs under qemu: Debian's python3.11 for arm64 and the libraries
# it needs, unpacked (dpkg -x, nothing installed) into ROOT, which qemu-aarch64 -L then uses as the
# guest's /. Needs the arm64 architecture in dpkg (dpkg --add-architecture arm64; apt-get update) to
# download them; returns non-zero when they cannot be had.
KILN_CROSS_AARCH64_PYTHON_DEBS=(libc6 libgcc-s1 libstdc++6 python3.11-minimal libpython3.11-minimal
  libpython3.11-stdlib libffi8 libexpat1 zlib1g libbz2-1.0 liblzma5 libcrypt1 libuuid1)

kiln_cross_aarch64_python() {
  local root=$1
  [ -x "$root/usr/bin/python3.11" ] && return 0
  dpkg --print-foreign-architectures | grep -qx arm64 || return 1
  local debs=$root.debs package
  rm -rf "$root" "$debs"
  mkdir -p "$root" "$debs"
  ( cd "$debs" && apt-get download -qq "${KILN_CROSS_AARCH64_PYTHON_DEBS[@]/%/:arm64}" > /dev/null 2>&1 ) ||
    { rm -rf "$root" "$debs"; return 1; }
  for package in "$debs"/*.deb; do dpkg -x "$package" "$root" || { rm -rf "$root" "$debs"; return 1; }; done
  rm -rf "$debs"
  [ -x "$root/usr/bin/python3.11" ]
}
