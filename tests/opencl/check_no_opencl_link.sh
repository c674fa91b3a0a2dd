#!/bin/sh
# libkiln and the kiln tool must not link against OpenCL (it is loaded with dlopen at run time):
# their dynamic dependencies, as ldd lists them, name no libOpenCL.
status=0
for binary in "$@"; do
  if ! dependencies=$(ldd "$binary" 2>&1); then
    echo "ldd failed on $binary: $dependencies"
    exit 1
  fi
  if echo "$dependencies" | grep -qi opencl; then
    echo "FAIL: $binary links against OpenCL:"
    echo "$dependencies" | grep -i opencl
    status=1
  else
    echo "ok: $binary does not link against OpenCL"
  fi
done
exit $status
