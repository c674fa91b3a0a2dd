#!/usr/bin/env bash
# Installs what is missing, builds, and runs the most useful things kiln can do so far: a digits
# classifier trained here, compiled into a plan by `kiln compile` and run from a C program that links
# only libkiln; a small MLP written with the C++ Tensor API, compiled into fused kernels by LLVM and
# run in process; then the compiler core simplifying the index arithmetic of a convolution kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
source scripts/lib/python_env.sh

kiln_ensure_packages
kiln_ensure_python_env
kiln_build
echo
if kiln_ensure_demo_python_env; then
  mkdir -p build/demo
  echo "== samples/models/make_digits_model.py: train the digits classifier, write it as ONNX"
  .venv/bin/python3 samples/models/make_digits_model.py build/demo
  echo
  echo "== kiln compile: the model becomes one plan file (batch 1: one image per run)"
  ./build/tools/kiln compile build/demo/digits.onnx -o build/demo/digits.kiln --shape N=1
  ./build/tools/kiln inspect build/demo/digits.kiln
  echo
  echo "== samples/classify_digits.c (links only libkiln) on the 300 held-out test images"
  ./build/samples/classify_digits build/demo/digits.kiln \
    build/demo/digits_test_pixels.npy build/demo/digits_test_labels.npy
  echo
  echo "== samples/classify_digits.py: the same through the Python binding (python/kiln, ctypes)"
  PYTHONPATH=python .venv/bin/python3 samples/classify_digits.py build/demo
else
  echo "== skipping the digits classifier: .venv lacks scikit-learn or onnxruntime (no network?)"
fi
echo
echo "== samples/hello_tensor.cpp (KILN_DEBUG=1: kernels, compile time, cache use)"
KILN_DEBUG=1 ./build/samples/hello_tensor
echo
echo "== the same program again: every kernel now comes from the disk cache"
KILN_DEBUG=1 ./build/samples/hello_tensor 2>&1 | grep -E "realize:.*kernels|cache" || true
echo
echo "== samples/index_simplification.cpp"
./build/samples/index_simplification
