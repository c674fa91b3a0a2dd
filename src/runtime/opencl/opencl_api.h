// The OpenCL entry points kiln calls, loaded from libOpenCL.so.1 (the ICD loader) with dlopen at run
// time, so that nothing links against OpenCL: a machine without it builds and runs kiln, and only a
// request for the OpenCL device fails, with a UserError naming what is missing. The types and
// constants come from the Khronos headers (Debian's opencl-c-headers); no function of theirs is
// called directly.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>

namespace kiln {

// X-macro of the entry points: KILN_OPENCL_FUNCTION(name).
#define KILN_OPENCL_FUNCTIONS(X) \
  X(clGetPlatformIDs)            \
  X(clGetPlatformInfo)           \
  X(clGetDeviceIDs)              \
  X(clGetDeviceInfo)             \
  X(clCreateContext)             \
  X(clReleaseContext)            \
  X(clCreateCommandQueue)        \
  X(clReleaseCommandQueue)       \
  X(clCreateBuffer)              \
  X(clReleaseMemObject)          \
  X(clCreateSubBuffer)           \
  X(clEnqueueWriteBuffer)        \
  X(clEnqueueReadBuffer)         \
  X(clEnqueueCopyBuffer)         \
  X(clCreateProgramWithSource)   \
  X(clBuildProgram)              \
  X(clGetProgramBuildInfo)       \
  X(clReleaseProgram)            \
  X(clCreateKernel)              \
  X(clReleaseKernel)             \
  X(clSetKernelArg)              \
  X(clEnqueueNDRangeKernel)      \
  X(clFinish)                    \
  X(clGetCommandQueueInfo)       \
  X(clEnqueueMarkerWithWaitList) \
  X(clWaitForEvents)             \
  X(clReleaseEvent)

struct OpenCLApi {
#define KILN_OPENCL_POINTER(name) decltype(&::name) name = nullptr;
  KILN_OPENCL_FUNCTIONS(KILN_OPENCL_POINTER)
#undef KILN_OPENCL_POINTER
};

// The process's table, loaded on first use from $KILN_OPENCL_LIBRARY if set, else libOpenCL.so.1,
// else libOpenCL.so. Returns null and sets *why_not (the library or the entry point that is
// missing, with dlerror's text) when it cannot be loaded; the answer is the same on every call.
const OpenCLApi* load_opencl_api(std::string* why_not);

// "CL_OUT_OF_RESOURCES (-5)" for an OpenCL error code.
std::string opencl_error_name(cl_int code);

}  // namespace kiln
