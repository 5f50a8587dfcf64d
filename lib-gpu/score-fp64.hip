/*
 * score-fp64.hip - decode and prefill scoring on the vector units: SPEC
 * section 4's exact score, rounded once.  A warp scores one (row, head)
 * pair against one page: lane l owns keys l, l + 32, l + 64 and l + 96.
 *
 * Rounding is monotone, so a block's score is the rounding of its largest
 * D (the smallest for a negative scale), and only the keys that could hold
 * it need an exact sum.  Each lane first approximates its keys (A, within
 * the row's proven bound of D: lane_filter; integer sums on NVIDIA, fp32
 * sums elsewhere); the keys whose A is within
 * twice that bound of the warp's largest then sum their 128 products in
 * fp64, which is exact when the row's span and the key's scale spread
 * allow it (lib/spec-rules.h), or take the exact fixed-point path.  The
 * warp keeps the best fp64 sum and the best exactly rounded logit, and
 * rounds the sum once a block.  A block's four warps share its items.
 * The kernels are built for each path of kernels.h (P): the plain row of
 * the pick table, and the target's fast row (NVIDIA's integer filter,
 * gfx950's decode and lane swaps).
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-parts.h"

#define PREFILL_PAIRS 64 /* (row, head) pairs a prefill block takes at a time */
#define PREFILL_BLOCKS 4 /* key blocks (pages) a prefill block scores them against */

/* Ask L2 for block b's page of request r, a line a lane (NVIDIA only; a
 * bad page id is left to the visit that reports it). */
M3IDX_DEV void prefetch_page(const gpu_call &c, int r, int b) {
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  const int id = block_table_at(c, r, b);
  if (id >= 0 && id < c.num_pages) {
    const uint8_t *pg = c.pages + (long long)id * M3IDX_PAGE_BYTES;
    for (int o = 128 * (threadIdx.x & 31); o < M3IDX_PAGE_BYTES; o += 128 * 32)
      asm volatile("prefetch.global.L2 [%0];" : : "l"(pg + o));
  }
#else
  (void)c, (void)r, (void)b;
#endif
}

template <int P>
__global__ void FP64_BOUNDS score_decode_fp64(gpu_call c, const int32_t *map, int capacity) {
  __shared__ fp64_smem sm;
  fill_table(sm);
  const int warp = threadIdx.x >> 5, H = c.num_heads, qlen = c.query_len;
  warp_query &wq = sm.wq[warp];
  long long loaded = -1; /* the pair whose query is in wq */
  for (int e = blockIdx.x; e < capacity; e += gridDim.x) {
    int r, s, b0, count;
    if (map_entry(c, map, e, &r, &s, &b0, &count) <= 0)
      continue;
    /* The entry's (block, pair) items, the block's warps taking every
       FP64_WARPS-th: all four warps work even for one pair a request,
       and a warp whose pair repeats keeps its query. */
    const int pairs = qlen * H;
    for (int it = warp; it < count * pairs; it += FP64_WARPS) {
      /* Item it: block b0 + it / pairs, pair it % pairs (with one pair a
         request the block itself: no division a page). */
      int b = b0 + it, j = 0, head = 0;
      if (pairs > 1) {
        const int p = it % pairs;
        b = b0 + it / pairs, j = p / H, head = p % H;
        /* The warp that scores a page's first pair asks for the page the
           warp scores it FP64_WARPS items on (with one pair, the warps'
           own loads keep memory busy enough). */
        if (p == 0 && it / pairs + FP64_WARPS < count)
          prefetch_page(c, r, b + FP64_WARPS);
      }
      const uint8_t *page = page_of(c, r, b);
      if (page == nullptr)
        continue;
      const int row = r * qlen + j, pos = s - qlen + j;
      if (b * 128 > pos)
        continue;
      const long long pair = (long long)row * H + head;
      if (pair != loaded) {
        M3IDX_SYNCWARP();
        load_query<P>(c, wq, pair);
        loaded = pair;
      }
      score_pair<P>(c, sm, wq, page, m3idx__keys_seen(pos, b), head, row, b);
    }
  }
}

/* Block (x, y) scores key blocks PREFILL_BLOCKS x .. + PREFILL_BLOCKS - 1
 * against the pairs of tiles y, y + gridDim.y, ...: a warp loads a pair's
 * query once for all of its blocks. */
template <int P> __global__ void FP64_BOUNDS score_prefill_fp64(gpu_call c, int ntiles) {
  __shared__ fp64_smem sm;
  fill_table(sm);
  const int warp = threadIdx.x >> 5, b0 = blockIdx.x * PREFILL_BLOCKS;
  const int b1 = min(b0 + PREFILL_BLOCKS, c.width);
  const long long npairs = (long long)c.num_rows * c.num_heads;
  warp_query &wq = sm.wq[warp];
  for (int tile = blockIdx.y; tile < ntiles; tile += gridDim.y)
    for (int i = warp; i < PREFILL_PAIRS; i += FP64_WARPS) {
      const long long pair = (long long)tile * PREFILL_PAIRS + i;
      if (pair >= npairs)
        break;
      const int row = (int)(pair / c.num_heads), head = (int)(pair % c.num_heads);
      int r;
      const int pos = row_position(c, row, &r);
      if (pos < b0 * 128) /* -1 too: bad lengths, recorded by row_position */
        continue;
      load_query<P>(c, wq, pair);
      for (int b = b0; b < b1 && b * 128 <= pos; b++) {
        const uint8_t *page = page_of(c, r, b);
        if (page != nullptr)
          score_pair<P>(c, sm, wq, page, m3idx__keys_seen(pos, b), head, row, b);
      }
      M3IDX_SYNCWARP();
    }
}

/* The launchers of the plain row and of the fast rows that score on the
 * vector units (kernel-pick.hip). */
#define FP64_PATHS M3IDX_GPU_PATH_PLAIN, M3IDX_GPU_PATH_FAST, M3IDX_GPU_PATH_FAST_BROKEN

hipError_t m3idx_gpu_decode_fp64(const gpu_call &c, const int32_t *map, int capacity,
                                 hipStream_t s) {
  return launch_decode<FP64_PATHS>(c, map, capacity, FP64_THREADS, 0, s, [](auto p) {
    return score_decode_fp64<decltype(p)::value>;
  });
}

hipError_t m3idx_gpu_setup_fp64(int path, int *grid) {
  hipError_t e = hipSuccess;
  on_path<FP64_PATHS>(path, [&](auto p) {
    e = m3idx_gpu_decode_grid((const void *)score_decode_fp64<decltype(p)::value>, FP64_THREADS,
                              0, grid);
  });
  return e;
}

hipError_t m3idx_gpu_prefill_fp64(const gpu_call &c, hipStream_t s) {
  return launch_prefill<FP64_PATHS>(c, PREFILL_PAIRS, PREFILL_BLOCKS, FP64_THREADS, 0, s,
                                    [](auto p) { return score_prefill_fp64<decltype(p)::value>; });
}
