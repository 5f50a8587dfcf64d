/*
 * page-prefetch.h - how decode reads its pages ahead, in one place: the
 * page PREFETCH_PAGES on from the one being scored goes into L2 in eight
 * shares, one as each 16-key tile of the page is scored.  score.c picks
 * the page, the vnni kernels issue the shares (the avx512 kernel, which
 * walks a page key by key, takes the same page a line a key instead), and
 * the bench's "as decode reads them" ceiling reads pages as the vnni
 * kernels do.  Header-only, so the m3idx command can use it without a
 * private symbol.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_PAGE_PREFETCH_H
#define M3IDX_PAGE_PREFETCH_H

#include <stdint.h>

#include "m3idx.h"

/* Pages between the one scored and the one prefetched: at one page the
 * one-row kernel still waited on memory (lib-cpu/TUNING-NOTES). */
#define M3IDX_CPU_PREFETCH_PAGES 2

/* Shares of a page, one a tile, and the 64-byte lines of each (17). */
#define M3IDX_CPU_PREFETCH_SHARES (M3IDX_BLOCK_SIZE / 16)
#define M3IDX_CPU_PREFETCH_LINES (M3IDX_PAGE_BYTES / 64 / M3IDX_CPU_PREFETCH_SHARES)
_Static_assert(M3IDX_PAGE_BYTES == 64 * M3IDX_CPU_PREFETCH_SHARES * M3IDX_CPU_PREFETCH_LINES,
               "the shares cover the page");
_Static_assert(M3IDX_CPU_PREFETCH_LINES == 17, "the unroll below");

/* Share `share' of `page' into L2 (a hint: never faults, never read). */
static inline __attribute__((always_inline)) void m3idx__cpu_prefetch_share(const uint8_t *page,
                                                                            int share) {
#pragma GCC unroll 17
  for (int l = 0; l < M3IDX_CPU_PREFETCH_LINES; l++)
    __builtin_prefetch(page + 64 * (M3IDX_CPU_PREFETCH_LINES * share + l), 0, 2);
}

#endif /* M3IDX_PAGE_PREFETCH_H */
