/*
 * launch-after.h - programmatic dependent launch (NVIDIA sm_90 and later):
 * a kernel launched this way is made ready while the kernel before it on
 * the stream still runs, and waits for that kernel's end (and its
 * memory) before it touches memory itself, so part of the launch latency
 * between two short kernels is hidden.  No kernel lets the next one in
 * early (griddepcontrol.launch_dependents): the wait is the only
 * ordering.  Elsewhere (AMD, older NVIDIA parts) the launch is a plain
 * one and the wait a no-op.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_LAUNCH_AFTER_H
#define M3IDX_GPU_LAUNCH_AFTER_H

#include <utility>

#include "device-math.h"
#include "gpu-runtime.h"

/* Wait until the grids before this one on the stream have ended and their
 * writes are visible: first in a kernel launched after_prior, before any
 * load or store (a store could otherwise race a read of the kernel before). */
M3IDX_DEV void prior_grids_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" : : : "memory");
#endif
}

/* Launch kernel k; after_prior (a device that supports it) lets it start
 * before the kernel before it ends: k must call prior_grids_wait first. */
template <class... P, class... A>
hipError_t launch_after_prior(bool after_prior, void (*k)(P...), dim3 grid, dim3 block,
                              size_t smem, hipStream_t s, A &&...args) {
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = at;
  cfg.numAttrs = after_prior ? 1 : 0;
  const hipError_t e = cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);
  return e != hipSuccess ? e : hipGetLastError();
#else
  (void)after_prior;
  hipLaunchKernelGGL(k, grid, block, smem, s, std::forward<A>(args)...);
  return hipGetLastError();
#endif
}

#endif /* M3IDX_GPU_LAUNCH_AFTER_H */
