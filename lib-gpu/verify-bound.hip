/*
 * verify-bound.hip - verification's bound terms on the device: one block
 * of 128 threads an item {query row, page, keys}; thread d rounds element
 * d of the row up to its integer (lib/verify-rules.h), thread t takes key
 * t's terms, and the block keeps the largest, so the bits are the CPU's;
 * a floor item (keys negated) is one key's terms, taken by thread 0.
 *
 * SPDX-License-Identifier: MIT
 */
#include "kernels.h"
#include "verify-rules.h"

__global__ void __launch_bounds__(128)
    bound_kernel(const gpu_call c, const int32_t *items, long long count,
                 double *terms) {
  __shared__ float amax_part[128];
  __shared__ uint32_t qi[128];
  __shared__ double best[2][128];
  const int t = threadIdx.x;
  for (long long i = blockIdx.x; i < count; i += gridDim.x) {
    const int32_t qrow = items[3 * i], page = items[3 * i + 1], keys = items[3 * i + 2];
    const long long e = (long long)qrow * M3IDX_HEAD_DIM + t;
    const float q = c.query_dtype == M3IDX_DTYPE_BF16
                        ? m3idx__bf16_value(((const uint16_t *)c.query)[e])
                        : m3idx__e4m3_value(((const uint8_t *)c.query)[e]);
    amax_part[t] = q != q ? q : fabsf(q);
    __syncthreads();
    for (int w = 64; w > 0; w /= 2) { /* the row's largest, a NaN kept */
      if (t < w) {
        const float a = amax_part[t], b = amax_part[t + w];
        amax_part[t] = b > a || b != b ? b : a;
      }
      __syncthreads();
    }
    const int32_t shift = m3idx__verify_shift(amax_part[0]);
    qi[t] = shift == M3IDX_VERIFY_NO_SHIFT ? 0u : m3idx__verify_query_int(q, shift);
    __syncthreads();
    const int n = keys < 0 ? -keys : keys; /* negated: the block's floor */
    const int bad = page < 0 || page >= c.num_pages || n < 1 || n > M3IDX_BLOCK_SIZE;
    if (bad && t == 0)
      atomicOr(c.err, M3IDX_GPU_BAD_PAGE_ID);
    if (keys < 0) {
      if (!bad && t == 0)
        m3idx__verify_floor_terms(qi, shift, c.pages + (long long)page * M3IDX_PAGE_BYTES, n,
                                  terms + 2 * i);
      __syncthreads();
      continue;
    }
    double kt[2] = {0.0, 0.0};
    if (!bad && t < keys) {
      const uint8_t *pg = c.pages + (long long)page * M3IDX_PAGE_BYTES;
      m3idx__verify_key_terms(qi, shift, pg + 64 * t, pg + M3IDX_PAGE_DATA_BYTES + 4 * t, kt);
    }
    best[0][t] = kt[0] > 0.0 ? kt[0] : 0.0;
    best[1][t] = kt[1] > 0.0 ? kt[1] : 0.0;
    __syncthreads();
    for (int w = 64; w > 0; w /= 2) {
      if (t < w)
        for (int j = 0; j < 2; j++)
          best[j][t] = best[j][t + w] > best[j][t] ? best[j][t + w] : best[j][t];
      __syncthreads();
    }
    if (t < 2)
      terms[2 * i + t] = best[t][0];
    __syncthreads();
  }
}

hipError_t m3idx_gpu_bound_terms(const gpu_call &c, const int32_t *items,
                                 long long count, double *terms, hipStream_t s) {
  if (count == 0)
    return hipSuccess;
  const long long grid = count < 65535 ? count : 65535;
  hipLaunchKernelGGL(bound_kernel, dim3((unsigned)grid), dim3(128), 0, s, c, items, count,
                     terms);
  return hipGetLastError();
}
