/*
 * dlpack_compat.h — the DLPack ABI structs that kiln.h uses, declared here so that kiln needs no
 * DLPack header. They follow the public DLPack ABI, version 1.0 (DLManagedTensor, unchanged since
 * 0.6, and DLManagedTensorVersioned, new in 1.0): same names, same layout, same values.
 *
 * Written for kiln from the published ABI, under the include guard of DLPack's own dlpack.h: include
 * the real dlpack.h before kiln.h to use its declarations instead (then this file declares
 * nothing); a dlpack.h included after this file sees its guard defined and declares nothing either.
 * C11, stands alone.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

#ifdef __cplusplus
extern "C" {
#endif

/* The DLPack version a producer speaks (DLManagedTensorVersioned only). */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Where a tensor's memory lives. kiln reads and writes kDLCPU memory only. C++ sees DLPack's own
 * fixed type, so that a device code kiln does not know is a value it can reject, not undefined. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U
} DLDataTypeCode;

/* An element type: `code` (a DLDataTypeCode), `bits` per lane, `lanes` (1 for scalars). */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/* A strided view: element (i0, i1, ...) is at data + byte_offset + sum(ik * strides[k]) elements;
 * strides NULL means compact row-major. */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/* A DLTensor with its owner: the consumer calls deleter(self) once when it is done with it. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

/* Set in DLManagedTensorVersioned.flags when the consumer must not write the tensor. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/* Set when the producer copied the data for this exchange. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

/* DLPack 1.0's managed tensor: a version and flags, and the DLTensor last. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif

#endif /* DLPACK_DLPACK_H_ */
