#!/usr/bin/env bash
# Installs what is missing, builds, and runs the most useful thing kiln can do so far: the compiler
# core simplifying the index arithmetic that a convolution kernel generates.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh

kiln_ensure_packages
kiln_build
echo
./build/samples/index_simplification
