/*
 * call-checks.h - the fused call's argument checks, for m3idx's own
 * libraries that split a call over contexts they size themselves
 * (libm3idx_mpi).  Exported in the version node M3IDX_PRIVATE: not part
 * of the API, no compatibility promised, not installed.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CALL_CHECKS_H
#define M3IDX_CALL_CHECKS_H

#include "m3idx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every check m3idx_index_topk_decode (without a work map) or _prefill,
 * by batch->mode, makes of its arguments in host memory (lengths, page
 * ids, forced blocks, outputs apart from inputs), with the batch's own
 * sizes as the limits.  M3IDX_OK, or the status with its message in
 * m3idx_last_error(NULL). */
M3IDX_API m3idx_status m3idx__check_index_topk(const m3idx_batch *batch,
                                               const m3idx_query *query,
                                               const m3idx_kcache *kcache,
                                               int32_t init_blocks, int32_t local_blocks,
                                               const int32_t *topk, const float *scores,
                                               int64_t score_stride);

/* The same for m3idx_verify_topk's arguments. */
M3IDX_API m3idx_status m3idx__check_verify_topk(const m3idx_batch *batch,
                                                const m3idx_query *query,
                                                const m3idx_kcache *kcache,
                                                int32_t init_blocks, int32_t local_blocks,
                                                const int32_t *candidate,
                                                const float *candidate_scores,
                                                int64_t score_stride,
                                                const m3idx_verify_options *opts);

#ifdef M3IDX_BUILDING_LIBRARY
struct m3idx_context;
/* A context that only checks: host memory, no limits, no backend. */
void m3idx__probe_context(struct m3idx_context *probe);
#endif

#ifdef __cplusplus
}
#endif
#endif /* M3IDX_CALL_CHECKS_H */
