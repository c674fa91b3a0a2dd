#!/usr/bin/env bash
# Installs what is missing, builds, and runs the most useful things kiln can do so far: a small MLP
# written with the C++ Tensor API, compiled into fused kernels by LLVM and run in process, then the
# compiler core simplifying the index arithmetic of a convolution kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
source scripts/lib/python_env.sh

kiln_ensure_packages
kiln_ensure_python_env
kiln_build
echo
echo "== samples/hello_tensor.cpp (KILN_DEBUG=1: kernels, compile time, cache use)"
KILN_DEBUG=1 ./build/samples/hello_tensor
echo
echo "== the same program again: every kernel now comes from the disk cache"
KILN_DEBUG=1 ./build/samples/hello_tensor 2>&1 | grep -E "realize:.*kernels|cache" || true
echo
echo "== samples/index_simplification.cpp"
./build/samples/index_simplification
