/*
 * score-mma.hip - decode with several (row, head) pairs a request, and
 * prefill, on NVIDIA's fast path: lib/filter-cut.h's tensor-core filter
 * done by the tensor cores (mma-quads.h), so that a page's codes are
 * decoded once for four pairs.  The pages are read from global memory.
 *
 * SPDX-License-Identifier: MIT
 */
#include "mma-quads.h"

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)

#define MMA_PREFILL_BLOCKS 8 /* key blocks (pages) a prefill block scores them against */

/* Blocks an SM for NQMAX quads a pass: one quad's row runs in 96
 * registers (5 blocks, 20 warps; a few bytes spill), two quads' in 168
 * (3 blocks). */
#define MMA_BLOCKS_PER_SM(NQMAX) ((NQMAX) == 1 ? 5 : 3)

/* Blocks take work-map entries; for each, the pairs MMA_PAIRS at a time
 * into shared memory, then each warp a page of the entry for all of them,
 * NQMAX quads at a time. */
template <int P, int NQMAX>
__global__ void __launch_bounds__(FP64_THREADS, MMA_BLOCKS_PER_SM(NQMAX))
    score_decode_mma(gpu_call c, const int32_t *map, int capacity) {
  __shared__ mma_smem sm;
  fill_e2m1(sm.e2m1);
  const int warp = threadIdx.x >> 5, H = c.num_heads;
  const int qlen = c.query_len, pairs = qlen * H;
  for (int e = blockIdx.x; e < capacity; e += gridDim.x) {
    int r, s, b0, count;
    if (map_entry(c, map, e, &r, &s, &b0, &count) <= 0)
      continue;
    for (int p0 = 0; p0 < pairs; p0 += MMA_PAIRS) {
      const int np = min(MMA_PAIRS, pairs - p0);
      __syncthreads(); /* the buffer's last readers are done */
      for (int i = warp; i < np; i += FP64_WARPS) {
        const int p = p0 + i;
        load_query<P>(c, sm.wq[i], (long long)(r * qlen + p / H) * H + p % H,
                      M3IDX_GEMM_CUT_BITS);
      }
      __syncthreads();
      for (int k = warp; k < count; k += FP64_WARPS) {
        const uint8_t *page = page_of(c, r, b0 + k);
        if (page == nullptr)
          continue;
        score_page<P, false, NQMAX>(c, sm, page, r, s, b0 + k, p0, np);
      }
    }
  }
}

/* Block (x, y) scores key blocks MMA_PREFILL_BLOCKS x .. + 7 against the
 * pairs of tiles y, y + gridDim.y, ... (MMA_PAIRS a tile): the tile's
 * queries into shared memory, then each warp a page for all of them, four
 * pairs at a time, once for each request among them. */
template <int P>
__global__ void __launch_bounds__(FP64_THREADS, MMA_BLOCKS_PER_SM(2))
    score_prefill_mma(gpu_call c, int ntiles) {
  __shared__ mma_smem sm;
  fill_e2m1(sm.e2m1);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, H = c.num_heads;
  const int b0 = blockIdx.x * MMA_PREFILL_BLOCKS, b1 = min(b0 + MMA_PREFILL_BLOCKS, c.width);
  const long long npairs = (long long)c.num_rows * H;
  for (int tile = blockIdx.y; tile < ntiles; tile += gridDim.y) {
    const long long first = (long long)tile * MMA_PAIRS;
    const int np = (int)min((long long)MMA_PAIRS, npairs - first);
    __syncthreads(); /* the buffer's last readers are done */
    for (int i = warp; i < np; i += FP64_WARPS) {
      const int row = (int)((first + i) / H), head = (int)((first + i) % H);
      int r = 0;
      const int pos = row_position(c, row, &r); /* -1 on bad lengths, recorded */
      if (pos >= b0 * 128)
        load_query<P>(c, sm.wq[i], first + i, M3IDX_GEMM_CUT_BITS);
      if (lane == 0)
        sm.at[i] = pair_at{row, head, pos >= b0 * 128 ? pos : -1, r};
    }
    __syncthreads();
    for (int b = b0 + warp; b < b1; b += FP64_WARPS)
      for (int i = 0; i < np; i++) {
        /* Each request of the tile once: its first pair that sees b. */
        const int r = sm.at[i].req;
        bool first_of_r = sees(sm, i, r, b);
        for (int k = 0; k < i && first_of_r; k++)
          first_of_r = !sees(sm, k, r, b);
        if (!first_of_r)
          continue;
        const uint8_t *page = page_of(c, r, b);
        if (page == nullptr)
          continue;
        score_page<P, true, 2>(c, sm, page, r, 0, b, 0, np);
      }
  }
}

/* The launchers of the pick table's mma row (kernel-pick.hip). */
#define MMA_PATHS M3IDX_GPU_PATH_FAST, M3IDX_GPU_PATH_FAST_BROKEN

hipError_t m3idx_gpu_prefill_mma(const gpu_call &c, hipStream_t s) {
  return launch_prefill<MMA_PATHS>(c, MMA_PAIRS, MMA_PREFILL_BLOCKS, FP64_THREADS, 0, s,
                                   [](auto p) { return score_prefill_mma<decltype(p)::value>; });
}

hipError_t m3idx_gpu_decode_mma(const gpu_call &c, const int32_t *map, int capacity,
                                hipStream_t s) {
  const bool one_quad = c.query_len * c.num_heads <= 4;
  return launch_decode<MMA_PATHS>(c, map, capacity, FP64_THREADS, 0, s, [&](auto p) {
    return one_quad ? score_decode_mma<decltype(p)::value, 1>
                    : score_decode_mma<decltype(p)::value, 2>;
  });
}

#endif /* M3IDX_HIP_PLATFORM_NVIDIA */
