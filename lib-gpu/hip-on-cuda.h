/*
 * hip-on-cuda.h - the HIP runtime names the backend uses, mapped onto CUDA,
 * so that the same .hip sources build with nvcc (--with-hip-platform=nvidia).
 * ROCm's own NVIDIA headers do not build with CUDA 13; this covers only
 * what lib-gpu calls.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_HIP_ON_CUDA_H
#define M3IDX_HIP_ON_CUDA_H

#include <cuda_runtime.h>

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaDeviceProp hipDeviceProp_t;
typedef cudaFuncAttributes hipFuncAttributes;

#define hipSuccess cudaSuccess
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice

#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc(ptr, bytes, flags) cudaMallocHost((ptr), (bytes))
#define hipHostMallocDefault 0
#define hipHostFree cudaFreeHost
#define hipHostGetDevicePointer cudaHostGetDevicePointer
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemsetAsync cudaMemsetAsync
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipFuncGetAttributes cudaFuncGetAttributes
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount

/* hipLaunchKernelGGL(kernel, grid, block, shared bytes, stream, args...) */
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)

#endif /* M3IDX_HIP_ON_CUDA_H */
