/*
 * m3idx_mpi.h - the indexer across the ranks of an MPI communicator
 * (libm3idx_mpi, beside libm3idx; see m3idx_mpi(3)).
 *
 * One collective call computes what m3idx_index_topk_decode / _prefill
 * would compute in one process, and writes the same bytes at the root.
 * Each rank computes its share with the ordinary library (its own
 * context: threads within the rank, or its GPU): rows split by their
 * cost, or a long decode row's blocks split across ranks and the parts'
 * candidates merged (m3idx_merge_topk).  The root holds the inputs and
 * sends each rank the rows, block-table entries and pages its share
 * reads; the root receives the outputs.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_MPI_H
#define M3IDX_MPI_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include <m3idx.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(M3IDX_BUILDING_MPI_LIBRARY) && defined(__GNUC__)
#define M3IDX_MPI_API __attribute__((visibility("default")))
#else
#define M3IDX_MPI_API
#endif

/* How the work is split. */
typedef enum m3idx_mpi_split {
  M3IDX_MPI_SPLIT_AUTO = 0,   /* rows, unless a decode batch has too few to share
                                 or one request outweighs a rank's share */
  M3IDX_MPI_SPLIT_ROWS = 1,   /* whole rows (decode: whole requests) by cost */
  M3IDX_MPI_SPLIT_BLOCKS = 2  /* decode: every request's blocks across the ranks */
} m3idx_mpi_split;

/* Where the inputs are. */
typedef enum m3idx_mpi_inputs {
  M3IDX_MPI_INPUTS_ROOT = 0,      /* at the root, which sends each rank its share */
  M3IDX_MPI_INPUTS_EVERY_RANK = 1 /* every rank passes the same inputs (mapped from a
                                     shared file system, say): nothing is sent */
} m3idx_mpi_inputs;

typedef struct m3idx_mpi_options {
  size_t size;            /* sizeof(m3idx_mpi_options): set by _init */
  m3idx_options context;  /* this rank's context: backend, threads, device,
                             stream, flags (its limits are set from its share) */
  int32_t root;           /* the rank that holds the inputs and the outputs */
  m3idx_mpi_split split;
  m3idx_mpi_inputs inputs;
} m3idx_mpi_options;

/* Defaults: m3idx_options_init's context, root 0, SPLIT_AUTO, INPUTS_ROOT. */
M3IDX_MPI_API void m3idx_mpi_options_init(m3idx_mpi_options *opts);

/* Collective over comm (every rank calls it): the fused indexer call of
 * the root's arguments, decode or prefill by batch->mode, with the
 * arguments of m3idx_index_topk_decode / _prefill (host memory; no work
 * map).  Other ranks pass NULL for batch, query, kcache, topk and
 * scores, or with M3IDX_MPI_INPUTS_EVERY_RANK the root's batch, query and
 * kcache (the same bytes) and NULL outputs.  At the root, topk [H, rows, 16] and scores (may be NULL)
 * [H, rows, score_stride] receive the bytes one process writes; entries
 * a process leaves untouched stay untouched.
 *
 * Every rank returns the same status, and on failure
 * m3idx_mpi_last_error() gives every rank the same message and the
 * root's outputs are untouched: bad input is found at the root before any
 * work; a rank that fails (its context, its share) makes every rank fail
 * with that rank's message. */
M3IDX_MPI_API m3idx_status m3idx_mpi_index_topk(MPI_Comm comm, const m3idx_mpi_options *opts,
                                                const m3idx_batch *batch,
                                                const m3idx_query *query,
                                                const m3idx_kcache *kcache,
                                                int32_t init_blocks, int32_t local_blocks,
                                                int32_t *topk, float *scores,
                                                int64_t score_stride);

/* Collective: m3idx_verify_topk of the root's arguments (candidate
 * [H, rows, 16], candidate_scores (may be NULL) [H, rows, score_stride],
 * the verify options; a decode work map in them is not used), rows split
 * by cost whatever opts->split says.  At the root, rows (may be NULL)
 * [H, rows] and summary (may be NULL) receive what one process writes.
 * Other ranks pass NULL for every pointer, or with
 * M3IDX_MPI_INPUTS_EVERY_RANK the root's batch, query, kcache, candidate
 * and candidate_scores.  Failures as m3idx_mpi_index_topk's. */
M3IDX_MPI_API m3idx_status m3idx_mpi_verify_topk(MPI_Comm comm, const m3idx_mpi_options *opts,
                                                 const m3idx_batch *batch,
                                                 const m3idx_query *query,
                                                 const m3idx_kcache *kcache,
                                                 int32_t init_blocks, int32_t local_blocks,
                                                 const int32_t *candidate,
                                                 const float *candidate_scores,
                                                 int64_t score_stride,
                                                 const m3idx_verify_options *vopts,
                                                 m3idx_verify_row *rows,
                                                 m3idx_verify_summary *summary);

/* The calling thread's message of its last failed m3idx_mpi_ call. */
M3IDX_MPI_API const char *m3idx_mpi_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* M3IDX_MPI_H */
