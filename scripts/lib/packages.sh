# Debian packages kiln needs, and the function that installs the missing ones.
# Sourced by scripts/test.sh and scripts/demo.sh.

KILN_PACKAGES=(
  meson ninja-build g++ pkg-config python3
  python3-venv                         # .venv with onnx for Python (broken-model tests; python_env.sh)
  llvm-19-dev zlib1g-dev libzstd-dev   # LLVM 19 as a library (code generation)
  doctest-dev                          # unit tests
  libz3-dev                            # Z3 proofs of the rewrite rules (tests)
  libprotobuf-dev libonnx-dev          # ONNX importer: protobuf runtime + Debian's generated ONNX schema (onnx_proto)
  libonnx-testdata                     # ONNX backend node tests the conformance runner checks against
  liblld-19-dev                        # plans: LLD links the kernels into a shared object, in process
  libflatbuffers-dev flatbuffers-compiler  # plans: the metadata schema (flatc) and its header-only reader
  cmake                                # tests/install: a CMake project uses the installed find_package(kiln)
  pocl-opencl-icd ocl-icd-libopencl1   # tests/opencl: OpenCL on the CPU (PoCL) through the ICD loader, dlopen'd
  opencl-c-headers                     # the OpenCL C API's types and entry points (headers only; nothing links)
)

# Only scripts/fuzz.sh needs these (clang with libFuzzer and the sanitizer runtimes); the default
# build and test run do not install them.
KILN_FUZZ_PACKAGES=(clang-19 libclang-rt-19-dev)

# Installs missing packages when running as root; otherwise prints the command and fails.
kiln_ensure_packages() {
  local missing=() package
  for package in "${KILN_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$package")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "kiln needs these Debian packages; install them with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    return 1
  fi
  echo "== installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Configures build/ (once) and builds everything.
kiln_build() {
  if [ ! -f build/build.ninja ]; then
    meson setup build --native-file scripts/llvm19-native.ini
  fi
  ninja -C build
}

# kiln_ensure_packages for the fuzzing toolchain (KILN_FUZZ_PACKAGES).
kiln_ensure_fuzz_packages() {
  local KILN_PACKAGES=("${KILN_FUZZ_PACKAGES[@]}")
  kiln_ensure_packages
}
