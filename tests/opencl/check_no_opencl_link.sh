#!/bin/sh
# libkiln and the kiln tool must not link against OpenCL or CUDA (libOpenCL, the CUDA driver and
# NVRTC are loaded with dlopen at run time): their dynamic dependencies, as ldd lists them, name no
# libOpenCL, libcuda or libnvrtc.
status=0
for binary in "$@"; do
  if ! dependencies=$(ldd "$binary" 2>&1); then
    echo "ldd failed on $binary: $dependencies"
    exit 1
  fi
  if echo "$dependencies" | grep -qiE 'opencl|libcuda|nvrtc'; then
    echo "FAIL: $binary links against OpenCL or CUDA:"
    echo "$dependencies" | grep -iE 'opencl|libcuda|nvrtc'
    status=1
  else
    echo "ok: $binary does not link against OpenCL or CUDA"
  fi
done
exit $status
