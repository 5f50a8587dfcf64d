/*
 * merge.c - m3idx_merge_topk: the top-k of several parts' top-k lists, as
 * a context-parallel indexer merges its ranks' candidates.
 *
 * Exact by construction: a block of the union's top-k is in the top-k of
 * whichever part holds it (fewer than k of that part's blocks rank above
 * it), so ranking the parts' candidates by SPEC section 7's key (score
 * descending, -0 as +0, NaN below every number, then block id ascending)
 * gives the single-pass selection, bit for bit.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "spec-rules.h"

static int meet(const void *a, size_t an, const void *b, size_t bn) {
  const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

/* A candidate: its rank key and the score it was listed with (the key
 * keeps neither -0 nor a NaN's payload). */
struct candidate {
  uint64_t key;
  float score;
};

static int descending(const void *a, const void *b) {
  const uint64_t x = ((const struct candidate *)a)->key, y = ((const struct candidate *)b)->key;
  return x < y ? 1 : x > y ? -1 : 0;
}

static int ascending_id(const void *a, const void *b) {
  const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return x < y ? -1 : x > y;
}

/* Every argument, before anything is written. */
static m3idx_status check(int64_t pairs, int32_t parts, const int32_t *const *ids,
                          const float *const *scores, int32_t *out_ids, float *out_scores) {
  if (pairs < 0)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE, "pairs is %lld, negative", (long long)pairs);
  if (parts < 1)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE, "parts is %d: at least one part is merged",
                       (int)parts);
  if (pairs > PTRDIFF_MAX / (M3IDX_TOPK * (int64_t)sizeof(uint64_t)) / parts)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "pairs is %lld: %d parts of that many lists of 16 cannot be addressed",
                       (long long)pairs, (int)parts);
  if (ids == NULL || scores == NULL || out_ids == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "%s is NULL",
                       ids == NULL ? "ids" : scores == NULL ? "scores" : "out_ids");
  const size_t list = (size_t)pairs * M3IDX_TOPK;
  for (int32_t p = 0; p < parts; p++) {
    if (ids[p] == NULL || scores[p] == NULL)
      return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "%s[%d] is NULL",
                         ids[p] == NULL ? "ids" : "scores", (int)p);
    if (meet(out_ids, list * 4, ids[p], list * 4) || meet(out_ids, list * 4, scores[p], list * 4) ||
        (out_scores != NULL &&
         (meet(out_scores, list * 4, ids[p], list * 4) ||
          meet(out_scores, list * 4, scores[p], list * 4))))
      return m3idx__fail(NULL, M3IDX_ERR_INVALID_ARGUMENT,
                         "%s (an output) overlaps part %d's ids or scores (an input)",
                         meet(out_ids, list * 4, ids[p], list * 4) ||
                                 meet(out_ids, list * 4, scores[p], list * 4)
                             ? "out_ids"
                             : "out_scores",
                         (int)p);
  }
  if (out_scores != NULL && meet(out_ids, list * 4, out_scores, list * 4))
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_ARGUMENT, "out_ids and out_scores overlap");
  int32_t *seen = malloc(sizeof(int32_t) * (size_t)parts * M3IDX_TOPK);
  if (seen == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NO_MEMORY, "no memory for %d parts' ids", (int)parts);
  m3idx_status rc = M3IDX_OK;
  for (int64_t i = 0; i < pairs && rc == M3IDX_OK; i++) {
    int n = 0;
    for (int32_t p = 0; p < parts && rc == M3IDX_OK; p++)
      for (int k = 0; k < M3IDX_TOPK; k++) {
        const int32_t id = ids[p][i * M3IDX_TOPK + k];
        const int32_t before = k > 0 ? ids[p][i * M3IDX_TOPK + k - 1] : 0;
        if (id < -1 || (id >= 0 && before == -1)) {
          rc = m3idx__fail(NULL, M3IDX_ERR_INVALID_ARGUMENT,
                           "ids[%d] pair %lld slot %d is %d: ids are >= 0, then -1 to the end",
                           (int)p, (long long)i, k, (int)id);
          break;
        }
        if (id >= 0)
          seen[n++] = id;
      }
    if (rc != M3IDX_OK)
      break;
    qsort(seen, (size_t)n, sizeof *seen, ascending_id);
    for (int k = 1; k < n; k++)
      if (seen[k] == seen[k - 1]) {
        rc = m3idx__fail(NULL, M3IDX_ERR_INVALID_ARGUMENT,
                         "pair %lld lists block %d twice: each block belongs to one part",
                         (long long)i, (int)seen[k]);
        break;
      }
  }
  free(seen);
  return rc;
}

m3idx_status m3idx_merge_topk(int64_t pairs, int32_t parts, const int32_t *const *ids,
                              const float *const *scores, int32_t *out_ids, float *out_scores) {
  m3idx_status rc = check(pairs, parts, ids, scores, out_ids, out_scores);
  if (rc != M3IDX_OK)
    return rc;
  struct candidate *cand = malloc(sizeof *cand * (size_t)parts * M3IDX_TOPK);
  if (cand == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NO_MEMORY, "no memory for %d parts' candidates",
                       (int)parts);
  for (int64_t i = 0; i < pairs; i++) {
    int n = 0;
    for (int32_t p = 0; p < parts; p++)
      for (int k = 0; k < M3IDX_TOPK && ids[p][i * M3IDX_TOPK + k] >= 0; k++) {
        const float s = scores[p][i * M3IDX_TOPK + k];
        cand[n].key = m3idx__rank_key(s, ids[p][i * M3IDX_TOPK + k]);
        cand[n++].score = s;
      }
    qsort(cand, (size_t)n, sizeof *cand, descending);
    for (int k = 0; k < M3IDX_TOPK; k++) {
      out_ids[i * M3IDX_TOPK + k] = k < n ? m3idx__rank_key_id(cand[k].key) : -1;
      if (out_scores != NULL)
        out_scores[i * M3IDX_TOPK + k] = k < n ? cand[k].score : -INFINITY;
    }
  }
  free(cand);
  return M3IDX_OK;
}
