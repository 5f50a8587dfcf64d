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
/* Lane src's v, within each group of 32 lanes (every lane takes part). */
#define M3IDX_SHFL32(v, src) __shfl_sync(0xffffffffu, (v), (src), 32)
/* Bit l: pred of lane l of the warp (every lane takes part). */
#define M3IDX_BALLOT32(pred) __ballot_sync(0xffffffffu, (pred))
/* The warp's lanes meet (shared memory written by some, read by others). */
#define M3IDX_SYNCWARP() __syncwarp()
#else
#include <hip/hip_runtime.h>
#define M3IDX_SHFL_XOR(v, mask) __shfl_xor((v), (mask))
#define M3IDX_SHFL32(v, src) __shfl((v), (src), 32)
/* The 32 bits of the lane's half of a 64-lane wavefront. */
#define M3IDX_BALLOT32(pred) ((uint32_t)(__ballot(pred) >> (__lane_id() & 32u)))
/* A wavefront runs in lockstep; the barrier keeps the compiler from
   moving shared-memory accesses across it. */
#define M3IDX_SYNCWARP() __builtin_amdgcn_wave_barrier()
#endif

/* Let a kernel take BYTES of dynamic shared memory: NVIDIA gives more
 * than 48 KB only when asked (once, not per launch, so that graph capture
 * sees plain launches); AMD gives any block up to 64 KB of LDS unasked,
 * so nothing is asked there (a runtime that refused would leave the whole
 * backend unavailable). */
template <unsigned long BYTES> hipError_t m3idx_allow_shared(const void *kernel) {
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  return hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, (int)BYTES);
#else
  static_assert(BYTES <= 65536, "more LDS than a gfx9 block gets");
  (void)kernel;
  return hipSuccess;
#endif
}

#endif /* M3IDX_GPU_RUNTIME_H */
