/*
 * gpu-runtime.h - the HIP runtime on AMD, or its CUDA mapping on NVIDIA.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_RUNTIME_H
#define M3IDX_GPU_RUNTIME_H

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
#include "hip-on-cuda.h"
/* A butterfly exchange within the warp (every lane takes part). */
#define M3IDX_SHFL_XOR(v, mask) __shfl_xor_sync(0xffffffffu, (v), (mask))
#else
#include <hip/hip_runtime.h>
#define M3IDX_SHFL_XOR(v, mask) __shfl_xor((v), (mask))
#endif

#endif /* M3IDX_GPU_RUNTIME_H */
