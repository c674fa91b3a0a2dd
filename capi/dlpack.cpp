// C shims of kiln.h for DLPack: views of DLTensors as kiln_tensors, and kiln_tensors wrapped as
// DLManagedTensors. Nothing here throws; errors become a kiln_status and the per-thread message.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "error_bridge.h"
#include "kiln/kiln.h"

namespace {

kiln_status invalid(const char* function, const std::string& what) {
  return kiln_private_set_error_message(KILN_ERROR_INVALID_ARGUMENT, (std::string(function) + ": " + what).c_str());
}

// The kiln_dtype of a DLPack element type, or 0 when kiln has none.
int dtype_of(DLDataType type) {
  switch (type.code) {
    case kDLBool: return type.bits == 8 ? int{KILN_DTYPE_BOOL} : 0;
    case kDLInt:
      switch (type.bits) {
        case 8: return KILN_DTYPE_INT8;
        case 16: return KILN_DTYPE_INT16;
        case 32: return KILN_DTYPE_INT32;
        case 64: return KILN_DTYPE_INT64;
      }
      return 0;
    case kDLUInt:
      switch (type.bits) {
        case 8: return KILN_DTYPE_UINT8;
        case 16: return KILN_DTYPE_UINT16;
        case 32: return KILN_DTYPE_UINT32;
        case 64: return KILN_DTYPE_UINT64;
      }
      return 0;
    case kDLFloat:
      switch (type.bits) {
        case 16: return KILN_DTYPE_FLOAT16;
        case 32: return KILN_DTYPE_FLOAT32;
        case 64: return KILN_DTYPE_FLOAT64;
      }
      return 0;
    case kDLBfloat: return type.bits == 16 ? int{KILN_DTYPE_BFLOAT16} : 0;
  }
  return 0;
}

bool dlpack_type_of(kiln_dtype dtype, DLDataType& type) {
  type.lanes = 1;
  type.bits = static_cast<uint8_t>(kiln_dtype_size(dtype) * 8);
  switch (dtype) {
    case KILN_DTYPE_BOOL: type.code = kDLBool; return true;
    case KILN_DTYPE_INT8: case KILN_DTYPE_INT16: case KILN_DTYPE_INT32: case KILN_DTYPE_INT64:
      type.code = kDLInt;
      return true;
    case KILN_DTYPE_UINT8: case KILN_DTYPE_UINT16: case KILN_DTYPE_UINT32: case KILN_DTYPE_UINT64:
      type.code = kDLUInt;
      return true;
    case KILN_DTYPE_FLOAT16: case KILN_DTYPE_FLOAT32: case KILN_DTYPE_FLOAT64:
      type.code = kDLFloat;
      return true;
    case KILN_DTYPE_BFLOAT16: type.code = kDLBfloat; return true;
  }
  return false;
}

// The wrapper that kiln_tensor_to_dlpack allocates, in one block with the shape after it (rank
// int64_t; sizeof(Wrapper) is a multiple of 8).
struct Wrapper {
  DLManagedTensor managed;
  void (*release)(void*);
  void* release_user_data;
};
static_assert(sizeof(Wrapper) % alignof(int64_t) == 0);

void delete_wrapper(DLManagedTensor* self) {
  if (self == nullptr) return;
  auto* wrapper = static_cast<Wrapper*>(self->manager_ctx);
  void (*release)(void*) = wrapper->release;
  void* user_data = wrapper->release_user_data;
  std::free(wrapper);
  if (release != nullptr) release(user_data);
}

}  // namespace

extern "C" {

kiln_status kiln_tensor_from_dltensor(const DLTensor* tensor, const char* name, kiln_tensor* out_tensor) {
  const char* function = "kiln_tensor_from_dltensor";
  try {
    if (tensor == nullptr) return invalid(function, "tensor is NULL");
    if (out_tensor == nullptr) return invalid(function, "out_tensor is NULL");
    if (tensor->device.device_type != kDLCPU)
      return invalid(function, "the tensor is on device type " + std::to_string(tensor->device.device_type) +
                                   ", kiln reads CPU memory (kDLCPU) only");
    if (tensor->dtype.lanes != 1)
      return invalid(function, "the tensor has " + std::to_string(tensor->dtype.lanes) + " lanes, kiln takes 1");
    int dtype = dtype_of(tensor->dtype);
    if (dtype == 0)
      return invalid(function, "kiln has no element type for DLPack code " + std::to_string(tensor->dtype.code) +
                                   " with " + std::to_string(tensor->dtype.bits) + " bits");
    if (tensor->ndim < 0) return invalid(function, "ndim is negative");
    if (tensor->ndim > 0 && tensor->shape == nullptr) return invalid(function, "shape is NULL");
    size_t count = 1;
    for (int32_t d = 0; d < tensor->ndim; ++d) {
      if (tensor->shape[d] < 0) return invalid(function, "dimension " + std::to_string(d) + " is negative");
      count *= static_cast<size_t>(tensor->shape[d]);
    }
    if (tensor->strides != nullptr) {
      int64_t expected = 1;
      for (int32_t d = tensor->ndim - 1; d >= 0; --d) {
        if (tensor->shape[d] != 1 && tensor->strides[d] != expected)
          return invalid(function, "the tensor is not dense row-major (dimension " + std::to_string(d) +
                                       " has stride " + std::to_string(tensor->strides[d]) + ", expected " +
                                       std::to_string(expected) + "); kiln takes compact tensors only");
        expected *= tensor->shape[d];
      }
    }
    kiln_tensor result;
    result.name = name;
    result.dtype = static_cast<kiln_dtype>(dtype);
    result.rank = static_cast<size_t>(tensor->ndim);
    result.shape = tensor->shape;
    result.data = tensor->data == nullptr ? nullptr : static_cast<unsigned char*>(tensor->data) + tensor->byte_offset;
    result.byte_size = count * kiln_dtype_size(result.dtype);
    *out_tensor = result;
    kiln_private_set_error_message(KILN_OK, nullptr);
    return KILN_OK;
  } catch (...) {
    return kiln_private_set_error_message(KILN_ERROR_OUT_OF_MEMORY, "kiln_tensor_from_dltensor: out of memory");
  }
}

kiln_status kiln_tensor_from_dlpack(const DLManagedTensor* managed, const char* name, kiln_tensor* out_tensor) {
  if (managed == nullptr) return invalid("kiln_tensor_from_dlpack", "managed is NULL");
  return kiln_tensor_from_dltensor(&managed->dl_tensor, name, out_tensor);
}

kiln_status kiln_tensor_to_dlpack(const kiln_tensor* tensor, void (*release)(void*), void* release_user_data,
                                  DLManagedTensor** out_managed) {
  const char* function = "kiln_tensor_to_dlpack";
  try {
    if (tensor == nullptr) return invalid(function, "tensor is NULL");
    if (out_managed == nullptr) return invalid(function, "out_managed is NULL");
    DLDataType type;
    if (!dlpack_type_of(tensor->dtype, type))
      return invalid(function, "dtype " + std::to_string(static_cast<int>(tensor->dtype)) + " is not a kiln_dtype");
    if (tensor->rank > INT32_MAX) return invalid(function, "the rank is above INT32_MAX");
    if (tensor->rank > 0 && tensor->shape == nullptr) return invalid(function, "shape is NULL");
    size_t rank = tensor->rank;
    auto* wrapper = static_cast<Wrapper*>(std::calloc(1, sizeof(Wrapper) + rank * sizeof(int64_t)));
    if (wrapper == nullptr)
      return kiln_private_set_error_message(KILN_ERROR_OUT_OF_MEMORY, "kiln_tensor_to_dlpack: out of memory");
    auto* shape = reinterpret_cast<int64_t*>(wrapper + 1);
    if (rank > 0) std::memcpy(shape, tensor->shape, rank * sizeof(int64_t));
    wrapper->release = release;
    wrapper->release_user_data = release_user_data;
    DLTensor& dl = wrapper->managed.dl_tensor;
    dl.data = tensor->data;
    dl.device.device_type = kDLCPU;
    dl.device.device_id = 0;
    dl.ndim = static_cast<int32_t>(rank);
    dl.dtype = type;
    dl.shape = shape;
    dl.strides = nullptr;
    dl.byte_offset = 0;
    wrapper->managed.manager_ctx = wrapper;
    wrapper->managed.deleter = delete_wrapper;
    *out_managed = &wrapper->managed;
    kiln_private_set_error_message(KILN_OK, nullptr);
    return KILN_OK;
  } catch (...) {
    return kiln_private_set_error_message(KILN_ERROR_OUT_OF_MEMORY, "kiln_tensor_to_dlpack: out of memory");
  }
}

}  // extern "C"
