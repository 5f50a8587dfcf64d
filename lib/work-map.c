/*
 * work-map.c - capacity of the decode work map, and building it on the host.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "context.h"
#include "work-map.h"

int64_t m3idx__work_map_entries(const int32_t *seq_lens, int32_t num_reqs,
                                int32_t chunk) {
  int64_t total = 0;
  for (int32_t r = 0; r < num_reqs; r++) {
    total += m3idx__work_entries_of(m3idx__blocks_of(seq_lens[r]), chunk);
  }
  return total;
}

void m3idx__work_map_fill(int32_t *map, int32_t capacity,
                          const int32_t *seq_lens, int32_t num_reqs,
                          int32_t chunk) {
  int64_t e = 0;
  for (int32_t r = 0; r < num_reqs; r++) {
    int32_t n = m3idx__blocks_of(seq_lens[r]);
    for (int32_t b0 = 0; b0 < n; b0 += chunk) {
      int32_t count = n - b0 < chunk ? n - b0 : chunk;
      map[2 * e] = r;
      map[2 * e + 1] = m3idx__work_entry(b0, count);
      e++;
    }
  }
  for (; e < capacity; e++) {
    map[2 * e] = -1;
    map[2 * e + 1] = 0;
  }
}

m3idx_status m3idx_work_map_capacity(int32_t max_reqs, int32_t max_blocks,
                                     int32_t query_len, int32_t num_heads,
                                     int32_t *capacity) {
  m3idx__clear_error(NULL);
  if (capacity == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "capacity is NULL");
  if (max_reqs < 1)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "max_reqs is %d, must be >= 1", (int)max_reqs);
  if (max_blocks < 1 || max_blocks > M3IDX_WORK_FIRST_MASK + 1)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "max_blocks is %d, must be in [1, 2^24]", (int)max_blocks);
  if (query_len < 1)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "query_len is %d, must be >= 1", (int)query_len);
  if (num_heads < 1)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "num_heads is %d, must be >= 1", (int)num_heads);
  int64_t cap = m3idx__work_map_capacity_of(max_reqs, max_blocks,
                                            m3idx__work_chunk_blocks(query_len, num_heads));
  if (cap > INT32_MAX / 2)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "a work map for %d requests of %d blocks would have %lld entries, more than int32 indexing allows",
                       (int)max_reqs, (int)max_blocks, (long long)cap);
  *capacity = (int32_t)cap;
  return M3IDX_OK;
}
