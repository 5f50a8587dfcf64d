/*
 * score-staged.hip - decode with one (row, head) pair a request on
 * NVIDIA's fast path (sm_90 and later), its pages staged in shared
 * memory.  Each warp owns two page buffers: lane 0 asks for the warp's
 * next page with one bulk copy (cp.async.bulk, completed on an mbarrier)
 * before the warp scores the current one, so a whole page is on its way
 * while the warp computes, and no register waits on memory.  The scoring
 * itself is score_pair's (score-parts.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "bulk-copy.h"
#include "score-parts.h"

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)

#define STAGED_BUFFERS 2

struct staged_smem {
  alignas(128) uint8_t page[FP64_WARPS][STAGED_BUFFERS][M3IDX_PAGE_BYTES];
  uint64_t full[FP64_WARPS][STAGED_BUFFERS]; /* mbarriers: the buffer's page has come */
  fp64_smem base;
};

/* A page to score: its block b of request r, the row's first nkeys keys. */
struct staged_item {
  const uint8_t *page;
  int r, b, nkeys;
};

/* Where a warp is in the block's work-map entries: entry e next, and the
 * current entry's request r (seq_len s), first block b0, count blocks,
 * item it next (the block's warps take every FP64_WARPS-th, from the
 * warp's number); lane j holds the page id of the warp's j-th item in
 * ids, read for all of them at once. */
struct staged_walk {
  int e, r, s, b0, count, it, ids;
};

/* An entry counts at most 127 blocks, so its items fit 32 lanes a warp. */
static_assert((0x7fffffff >> M3IDX_WORK_COUNT_SHIFT) <= 32 * FP64_WARPS,
              "a warp's items of an entry fit one read of page ids");

/* The warp's next item with a page to score: false when there is none.
 * Bad page ids and entries are recorded as score-fp64's walk records
 * them, and skipped. */
M3IDX_DEV bool next_item(const gpu_call &c, const int32_t *map, int capacity, staged_walk &w,
                         staged_item &out) {
  const int warp = threadIdx.x >> 5;
  for (;;) {
    while (w.it < w.count) {
      const int id = M3IDX_SHFL32(w.ids, (w.it - warp) / FP64_WARPS);
      const int b = w.b0 + w.it;
      w.it += FP64_WARPS;
      const uint8_t *page = page_with_id(c, id);
      const int pos = w.s - 1;
      if (page == nullptr || b * 128 > pos)
        continue;
      out = staged_item{page, w.r, b, m3idx__keys_seen(pos, b)};
      return true;
    }
    if (w.e >= capacity)
      return false;
    const int e = w.e;
    w.e += gridDim.x;
    w.it = warp;
    if (map_entry(c, map, e, &w.r, &w.s, &w.b0, &w.count) <= 0) {
      w.count = 0;
      continue;
    }
    const int item = warp + FP64_WARPS * (int)(threadIdx.x & 31);
    w.ids = item < w.count ? block_table_at(c, w.r, w.b0 + item) : -1;
  }
}

template <int P>
__global__ void __launch_bounds__(FP64_THREADS) score_decode_staged(gpu_call c, const int32_t *map,
                                                                    int capacity) {
#if __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t staged_raw[];
  staged_smem &sm = *reinterpret_cast<staged_smem *>(staged_raw);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) {
    for (int k = 0; k < STAGED_BUFFERS; k++)
      barrier_init(&sm.full[warp][k]);
    asm volatile("fence.mbarrier_init.release.cluster;" : : : "memory");
  }
  fill_table(sm.base); /* syncs the block, so the barriers are seen too */
  warp_query &wq = sm.base.wq[warp];
  staged_walk w{(int)blockIdx.x, 0, 0, 0, 0, 0, -1};
  staged_item cur, next;
  bool have = next_item(c, map, capacity, w, cur);
  if (have && lane == 0)
    page_copy(sm.page[warp][0], cur.page, &sm.full[warp][0]);
  uint32_t parity = 0; /* bit k: the phase buffer k waits for next */
  int k = 0, loaded = -1; /* loaded: the request whose query is in wq */
  /* Lane n % 32 keeps the best of the warp's n-th item; every 32 items
     the lanes round theirs and store them together (one lane rounding
     and storing each page took about 60 instructions of the warp). */
  m3idx__block_best held;
  int held_row = -1, held_b = 0, n = 0;
  while (have) {
    const bool more = next_item(c, map, capacity, w, next);
    M3IDX_SYNCWARP(); /* every lane is done with buffer k ^ 1 */
    if (more && lane == 0)
      page_copy(sm.page[warp][k ^ 1], next.page, &sm.full[warp][k ^ 1]);
    if (cur.r != loaded) {
      load_query<P>(c, wq, cur.r); /* one pair a request: pair r, row r */
      loaded = cur.r;
    }
    page_wait(&sm.full[warp][k], (parity >> k) & 1u);
    parity ^= 1u << k;
    const m3idx__block_best best = pair_best<P, true>(c, sm.base, wq, sm.page[warp][k], cur.nkeys);
    if (lane == (n & 31)) {
      held = best;
      held_row = cur.r; /* one pair a request: row r, head 0 */
      held_b = cur.b;
    }
    if ((++n & 31) == 0 || !more) {
      if (held_row >= 0)
        store_score(c, 0, held_row, held_b, m3idx__best_logit(&held, c.scale));
      held_row = -1;
    }
    cur = next;
    have = more;
    k ^= 1;
  }
#else
  (void)c, (void)map, (void)capacity;
#endif
}

/* The launcher of the pick table's staged row (kernel-pick.hip). */
#define STAGED_PATHS M3IDX_GPU_PATH_FAST, M3IDX_GPU_PATH_FAST_BROKEN

hipError_t m3idx_gpu_decode_staged(const gpu_call &c, const int32_t *map, int capacity,
                                   hipStream_t s) {
  return launch_decode<STAGED_PATHS>(c, map, capacity, FP64_THREADS, sizeof(staged_smem), s,
                                     [](auto p) {
                                       return score_decode_staged<decltype(p)::value>;
                                     });
}

/* Its setup: the grid, 0 where the kernel cannot run (m3idx_gpu_staged_grid). */
hipError_t m3idx_gpu_setup_staged(int path, int *grid) {
  *grid = 0;
  hipError_t e = hipSuccess;
  on_path<STAGED_PATHS>(path, [&](auto p) {
    e = m3idx_gpu_staged_grid((const void *)score_decode_staged<decltype(p)::value>, FP64_THREADS,
                              sizeof(staged_smem), grid);
  });
  return e;
}

#endif
