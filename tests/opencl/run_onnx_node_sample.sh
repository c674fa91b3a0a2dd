#!/bin/sh
# The ONNX node tests on the OpenCL device: a sample (one test folder in N, by name) run by
# `kiln test-onnx` with KILN_DEVICE=opencl, held to its own exact expected-failures list by
# tests/onnx/check_conformance.py. Skipped (77) when this machine has no OpenCL device.
# usage: run_onnx_node_sample.sh PROBE KILN CHECK_CONFORMANCE DATA_DIR EXPECTED_FAILURES SAMPLE
probe=$1 kiln=$2 check=$3 data=$4 expected=$5 sample=$6
"$probe" || exit $?
KILN_DEVICE=opencl exec "$check" "$kiln" "$data" "$expected" "--sample=$sample"
