/*
 * gpu-runtime.h - the HIP runtime on AMD, or its CUDA mapping on NVIDIA.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_RUNTIME_H
#define M3IDX_GPU_RUNTIME_H

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
#include "hip-on-cuda.h"
#else
#include <hip/hip_runtime.h>
#endif

#endif /* M3IDX_GPU_RUNTIME_H */
