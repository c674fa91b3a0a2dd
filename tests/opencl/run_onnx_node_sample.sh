#!/bin/sh
# The ONNX node tests on a GPU backend's device: a sample (one test folder in N, by name) run by
# `kiln test-onnx` with KILN_DEVICE=DEVICE (opencl or cuda), held to the backend's own exact
# expected-failures list by tests/onnx/check_conformance.py. Skipped (77) when this machine has no
# such device (the probe says why).
# usage: run_onnx_node_sample.sh DEVICE PROBE KILN CHECK_CONFORMANCE DATA_DIR EXPECTED_FAILURES SAMPLE
device=$1 probe=$2 kiln=$3 check=$4 data=$5 expected=$6 sample=$7
if [ "$device" = cuda ]; then "$probe" --device || exit $?; else "$probe" || exit $?; fi
KILN_DEVICE=$device exec "$check" "$kiln" "$data" "$expected" "--sample=$sample"
