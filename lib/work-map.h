/*
 * work-map.h - the decode work map's entry encoding and chunking.
 *
 * Entry e is int32 [2]: {request, first_block | count << 24}; {-1, 0} is
 * an unused entry that kernels skip.  A request with n causal blocks gets
 * ceil(n / chunk) entries of up to `chunk` blocks, in request order.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_WORK_MAP_H
#define M3IDX_WORK_MAP_H

#include <stdint.h>

#include "backend.h"
#include "spec-rules.h"

#define M3IDX_WORK_COUNT_SHIFT 24
#define M3IDX_WORK_FIRST_MASK 0x00ffffff
#define M3IDX_WORK_CHUNK_MIN 8 /* the smallest chunk: maps of it are the largest */

/* Blocks per work item: fewer when a block carries more rows of work. */
static inline int32_t m3idx__work_chunk_blocks(int32_t query_len, int32_t num_heads) {
  int64_t rows = (int64_t)query_len * num_heads;
  return rows <= 2 ? 32 : rows <= 8 ? 16 : M3IDX_WORK_CHUNK_MIN;
}

/* The second int32 of an entry, and its two fields. */
M3IDX_RULE int32_t m3idx__work_entry(int32_t first_block, int32_t count) {
  return first_block | (count << M3IDX_WORK_COUNT_SHIFT);
}
M3IDX_RULE int32_t m3idx__work_first(int32_t entry) { return entry & M3IDX_WORK_FIRST_MASK; }
M3IDX_RULE int32_t m3idx__work_count(int32_t entry) { return entry >> M3IDX_WORK_COUNT_SHIFT; }

/* Entries of a request of n causal blocks. */
M3IDX_RULE int32_t m3idx__work_entries_of(int32_t n, int32_t chunk) {
  return (n + chunk - 1) / chunk;
}

/* Entries that bound every batch of max_reqs requests of max_blocks blocks. */
static inline int64_t m3idx__work_map_capacity_of(int32_t max_reqs, int32_t max_blocks,
                                                  int32_t chunk) {
  return (int64_t)max_reqs * m3idx__work_entries_of(max_blocks, chunk);
}

/* Causal blocks of request r's last row, 0 for a prefill request with no
 * rows: the blocks whose page ids a call reads (checks and backends). */
static inline int32_t m3idx__request_blocks(const struct m3idx_call *c, int32_t r) {
  if (c->mode == M3IDX_MODE_PREFILL && c->cu_seqlens_q[r + 1] == c->cu_seqlens_q[r])
    return 0;
  return m3idx__blocks_of(c->seq_lens[r]);
}

/* The request that holds prefill row or item x: the last r < n with
 * start[r] <= x, by binary search (start[] non-decreasing from start[0] <=
 * x, as cu_seqlens_q is, or a prefix sum of the requests' blocks; start
 * is read in bounds whatever it holds, and a caller that cannot trust it
 * checks the answer).  One body for both widths of start. */
#define M3IDX__REQUEST_AT(start, n, x)                                        \
  {                                                                           \
    int32_t lo = 0, hi = (n) - 1;                                             \
    while (lo < hi) {                                                         \
      const int32_t mid = lo + (hi - lo + 1) / 2;                             \
      if ((start)[mid] <= (x))                                                \
        lo = mid;                                                             \
      else                                                                    \
        hi = mid - 1;                                                         \
    }                                                                         \
    return lo;                                                                \
  }
M3IDX_RULE int32_t m3idx__request_at(const int32_t *start, int32_t n, int32_t x)
    M3IDX__REQUEST_AT(start, n, x)
M3IDX_RULE int32_t m3idx__request_at64(const int64_t *start, int32_t n, int64_t x)
    M3IDX__REQUEST_AT(start, n, x)

/* Each row's position (SPEC section 5) into pos[num_rows]. */
static inline void m3idx__row_positions(const struct m3idx_call *c, int32_t *pos) {
  if (c->mode == M3IDX_MODE_DECODE) {
    for (int32_t r = 0; r < c->num_reqs; r++)
      for (int32_t j = 0; j < c->query_len; j++)
        pos[r * c->query_len + j] = c->seq_lens[r] - c->query_len + j;
  } else {
    for (int32_t r = 0; r < c->num_reqs; r++)
      for (int32_t i = c->cu_seqlens_q[r]; i < c->cu_seqlens_q[r + 1]; i++)
        pos[i] = c->context_lens[r] + (i - c->cu_seqlens_q[r]);
  }
}

/* Entries the batch needs. */
int64_t m3idx__work_map_entries(const int32_t *seq_lens, int32_t num_reqs,
                                int32_t chunk);

/* Write the map for the batch (entries <= capacity, checked by the caller). */
void m3idx__work_map_fill(int32_t *map, int32_t capacity,
                          const int32_t *seq_lens, int32_t num_reqs,
                          int32_t chunk);

#endif /* M3IDX_WORK_MAP_H */
