/*
 * kernels.h - what the HIP kernels are given, and their launchers.
 *
 * Every pointer is device memory.  Kernels check the contents they read
 * (lengths, page ids, work-map entries) before using them, never read out
 * of bounds, and record bad input as bits in *err, which
 * m3idx_synchronize reports.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_KERNELS_H
#define M3IDX_GPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gpu-runtime.h"
#include "m3idx.h"

/* Bits of the device error word. */
#define M3IDX_GPU_BAD_SEQ_LENS 0x1u     /* seq_lens / query_len / max_seq_len */
#define M3IDX_GPU_BAD_PREFILL 0x2u      /* cu_seqlens_q / context_lens */
#define M3IDX_GPU_BAD_PAGE_ID 0x4u      /* block_table entry outside [0, num_pages) */
#define M3IDX_GPU_BAD_WORK_MAP 0x8u     /* an entry not of this batch */
#define M3IDX_GPU_MAP_TOO_SMALL 0x10u   /* work_map_capacity too small */

/* The scoring kernels' paths, which give the same bits.  PLAIN runs on
 * every target.  FAST uses the target's own instructions (NVIDIA: the
 * integer filter with prmt and dp4a; gfx950: e2m1 codes decoded by
 * v_cvt_scalef32_pk_f32_fp4 and maxima across half-warps by
 * v_permlane16_swap; other targets: none, it is PLAIN) and runs only once
 * the self-check at context creation (path-check.hip) found it equal to
 * PLAIN.  FAST_BROKEN is FAST reading every code byte's nibbles swapped:
 * the deliberately broken path of that check's test. */
#define M3IDX_GPU_PATH_PLAIN 0
#define M3IDX_GPU_PATH_FAST 1
#define M3IDX_GPU_PATH_FAST_BROKEN 2

/* A path as a type: the launchers call launch(path_type<P>()) for their
 * kernel<P>, so that the choice among the paths is written here once. */
template <int P> struct path_type {
  static constexpr int value = P;
};

/* launch for one of the fast paths (FAST_BROKEN, or FAST for any other). */
template <class F> void with_fast_path(int path, F launch) {
  if (path == M3IDX_GPU_PATH_FAST_BROKEN)
    launch(path_type<M3IDX_GPU_PATH_FAST_BROKEN>());
  else
    launch(path_type<M3IDX_GPU_PATH_FAST>());
}

/* launch for any path. */
template <class F> void with_path(int path, F launch) {
  if (path == M3IDX_GPU_PATH_PLAIN)
    launch(path_type<M3IDX_GPU_PATH_PLAIN>());
  else
    with_fast_path(path, launch);
}

struct gpu_call {
  int mode;          /* 1 decode, 2 prefill */
  int num_reqs, num_heads, num_rows, max_seq_len, width, query_len;
  const int32_t *seq_lens, *cu_seqlens_q, *context_lens;
  const void *query;
  int dtype;         /* 1 bf16, 2 e4m3 */
  float scale;
  const uint8_t *pages;
  int num_pages;
  const int32_t *block_table;
  int bt_stride;
  int init_blocks, local_blocks;
  float *scores;
  long long stride;
  unsigned *err;
  int one_grid;      /* the most blocks a decode scoring launch takes */
  int staged_grid;   /* the same for the staged one-pair decode; 0: not used */
  int path;          /* M3IDX_GPU_PATH_*, for the scoring kernels */
};

hipError_t m3idx_gpu_work_map(const struct gpu_call *c, int32_t *map, int capacity,
                              int chunk, hipStream_t s);
/* Decode scoring over the work map; prefill scoring (score-fp64.hip). */
hipError_t m3idx_gpu_score_decode(const struct gpu_call *c, const int32_t *map,
                                  int capacity, hipStream_t s);
hipError_t m3idx_gpu_score_prefill(const struct gpu_call *c, hipStream_t s);
/* NVIDIA's fast path for decode with several pairs a request, and for
 * prefill (score-mma.hip); m3idx_gpu_score_decode / _prefill choose it. */
hipError_t m3idx_gpu_score_decode_mma(const struct gpu_call *c, const int32_t *map,
                                      int capacity, hipStream_t s);
hipError_t m3idx_gpu_score_prefill_mma(const struct gpu_call *c, hipStream_t s);
/* NVIDIA's fast path for decode with one pair a request on sm_90 and
 * later, pages staged in shared memory (score-staged.hip); its setup
 * gives *grid 0 where it cannot run (the plain path, an older target). */
hipError_t m3idx_gpu_score_decode_staged(const struct gpu_call *c, const int32_t *map,
                                         int capacity, hipStream_t s);
hipError_t m3idx_gpu_score_decode_staged_setup(int path, int *grid);
/* Once per context: *grid receives the most blocks a decode launch of
 * the path takes, for gpu_call.one_grid: M3IDX_GPU_DECODE_WAVES times
 * what stays resident, so that a map of up to that many entries gives
 * each block at most one and the hardware hands the blocks to SMs as they
 * free up; fixed for the context, so that graph replays see one grid.
 * The staged kernel's setup sizes its grid the same way. */
#define M3IDX_GPU_DECODE_WAVES 4
hipError_t m3idx_gpu_score_decode_setup(int path, int *grid);

/* The scoring path for a context on `device' (arch: its target name):
 * *path receives M3IDX_GPU_PATH_FAST when the target has one and it
 * passed the self-check (run once per device and process), else PLAIN.
 * M3IDX_HIP_PATH=plain|fast|auto in the environment forces one.
 * M3IDX_OK, or an error with its message in msg (a failed device call;
 * fast forced but unusable; a bad M3IDX_HIP_PATH). */
int m3idx_gpu_pick_path(int device, const char *arch, int *path, char *msg, size_t n);
/* What m3idx_gpu_pick_path decided for device: 1 fast, 0 plain, -1 not
 * yet decided; why receives the fast path's name or why it is not used. */
int m3idx_gpu_path_verdict(int device, char *why, size_t n);
/* Tests only (devtools inject_broken_fast_path): FAST launches as
 * FAST_BROKEN, in the self-check too; each switch forgets the verdicts. */
void m3idx_gpu_break_fast_path(int on);

/* Verification's bound terms of count items {query row, page, keys}
 * into terms [count][2] (verify-bound.hip; lib/verify-rules.h). */
hipError_t m3idx_gpu_bound_terms(const struct gpu_call *c, const int32_t *items,
                                 long long count, double *terms, hipStream_t s);

/* Verification's verdicts (verify-rows.hip), after the scoring kernel
 * left the exact scores in ref [pairs, width] (c->scores, pinned there)
 * and with room for their top-k in ref_ids [pairs, 16]: rows, row_dev
 * and err_seen [pairs] (memory the device writes, the host's pinned
 * memory included) receive each row's verdict, largest deviation and the
 * device error word as its block saw it at its end (their OR holds every
 * bit the call's kernels set); done [pairs, width] is the kernel's
 * scratch; terms (or NULL) [pairs, width, 2] receives every block's terms
 * first, for the largest deviation with candidate scores. */
hipError_t m3idx_gpu_verify_rows(const struct gpu_call *c, float *ref, int32_t *ref_ids,
                                 const int32_t *cand, const float *cand_scores,
                                 long long cand_stride, const m3idx_verify_options *o,
                                 m3idx_verify_row *rows, double *row_dev, unsigned *err_seen,
                                 uint8_t *done, double *terms, hipStream_t s);

/* Tests only (devtools inject_device_failure): the device calls switch to
 * a device ordinal that does not exist. */
extern int m3idx_gpu_inject_bad_device;
/* Pin (pin != 0) and/or select (topk != NULL): scores_in is read, and
 * pinned scores are written to c->scores when write_pinned. */
hipError_t m3idx_gpu_pin_topk(const struct gpu_call *c, const float *scores_in,
                              int pin, int write_pinned, int32_t *topk, hipStream_t s);

#endif /* M3IDX_GPU_KERNELS_H */
