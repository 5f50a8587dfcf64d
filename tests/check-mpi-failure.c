/*
 * check-mpi-failure.c - m3idx_mpi_index_topk's failures, under mpiexec
 * with 3 ranks (check-mpi.sh runs it): bad input at the root, a rank
 * whose context cannot be made, and an options struct of the wrong size
 * each make every rank return the same status with the same message, in
 * bounded time, and leave the root's outputs untouched; a good call
 * gives the bytes of m3idx_index_topk_decode in one process.
 *
 * SPDX-License-Identifier: MIT
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m3idx.h"
#include "m3idx_mpi.h"

#define PAGES 6
#define FILL 0x5a

static int rank, ranks, checks, failures;

static void expect(int ok, const char *what) {
  checks++;
  if (!ok) {
    failures++;
    printf("FAIL (rank %d): %s\n", rank, what);
  }
}

/* Every rank's status and message equal to rank 0's. */
static void same_everywhere(m3idx_status st, const char *what) {
  char mine[800], first[800];
  snprintf(mine, sizeof mine, "%d %s", (int)st, m3idx_mpi_last_error());
  memcpy(first, mine, sizeof first);
  MPI_Bcast(first, (int)sizeof first, MPI_CHAR, 0, MPI_COMM_WORLD);
  int same = strcmp(first, mine) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  expect(all, what);
  if (rank == 0)
    printf("check-mpi-failure: %s: %s\n", what, mine);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  /* Two decode requests of 700 and 129 tokens, query_len 2, one head. */
  static uint8_t pages[PAGES * M3IDX_PAGE_BYTES];
  static uint16_t query[4 * M3IDX_HEAD_DIM];
  int32_t seq_lens[2] = {700, 129}, bt[2 * 6] = {0, 1, 2, 3, 4, 5, 5, 4, 0, 0, 0, 0};
  for (size_t i = 0; i < sizeof pages; i++)
    pages[i] = (uint8_t)(i * 2654435761u >> 13);
  for (int p = 0; p < PAGES; p++)
    for (int t = 0; t < 128; t++)
      memset(pages + p * M3IDX_PAGE_BYTES + M3IDX_PAGE_DATA_BYTES + 4 * t, 120 + (t + p) % 9, 4);
  for (int i = 0; i < 4 * M3IDX_HEAD_DIM; i++)
    query[i] = m3idx_float_to_bf16((float)((i * 37) % 17) - 8.0f);
  m3idx_batch b = {M3IDX_MODE_DECODE, 2, 1, 4, 700, seq_lens, 2, NULL, NULL};
  const m3idx_query q = {query, M3IDX_DTYPE_BF16, 0.5f};
  const m3idx_kcache kc = {pages, PAGES, bt, 6};
  int32_t topk[4 * 16], want[4 * 16];
  const int root = rank == 0;
  m3idx_mpi_options o;
  m3idx_mpi_options_init(&o);
  o.context.backend = M3IDX_BACKEND_CPU;
  o.split = M3IDX_MPI_SPLIT_BLOCKS;

  /* Bad input at the root: a seq_len past max_seq_len. */
  memset(topk, FILL, sizeof topk);
  seq_lens[0] = 900;
  m3idx_status st = m3idx_mpi_index_topk(MPI_COMM_WORLD, &o, root ? &b : NULL, root ? &q : NULL,
                                         root ? &kc : NULL, 1, 1, root ? topk : NULL, NULL, 0);
  seq_lens[0] = 700;
  expect(st == M3IDX_ERR_INCONSISTENT, "bad input: M3IDX_ERR_INCONSISTENT");
  expect(strstr(m3idx_mpi_last_error(), "seq_lens[0]") != NULL, "bad input: names seq_lens[0]");
  same_everywhere(st, "bad input at the root");
  for (size_t i = 0; root && i < sizeof topk; i++)
    expect(((uint8_t *)topk)[i] == FILL, "bad input: topk untouched");

  /* Rank 1 cannot make its context (a negative thread count). */
  m3idx_mpi_options bad = o;
  if (rank == 1)
    bad.context.threads = -3;
  st = m3idx_mpi_index_topk(MPI_COMM_WORLD, &bad, root ? &b : NULL, root ? &q : NULL,
                            root ? &kc : NULL, 1, 1, root ? topk : NULL, NULL, 0);
  expect(st == M3IDX_ERR_INVALID_SIZE, "rank 1 fails: M3IDX_ERR_INVALID_SIZE");
  expect(strncmp(m3idx_mpi_last_error(), "rank 1: its context:", 20) == 0,
         "rank 1 fails: the message names rank 1");
  same_everywhere(st, "rank 1 cannot make its context");
  for (size_t i = 0; root && i < sizeof topk; i++)
    expect(((uint8_t *)topk)[i] == FILL, "rank 1 fails: topk untouched");

  /* An options struct of another size, on every rank. */
  m3idx_mpi_options small = o;
  small.size = 8;
  st = m3idx_mpi_index_topk(MPI_COMM_WORLD, &small, root ? &b : NULL, root ? &q : NULL,
                            root ? &kc : NULL, 1, 1, root ? topk : NULL, NULL, 0);
  expect(st == M3IDX_ERR_OPTIONS, "opts->size: M3IDX_ERR_OPTIONS");
  same_everywhere(st, "opts->size");

  /* A good call: the bytes of one process. */
  st = m3idx_mpi_index_topk(MPI_COMM_WORLD, &o, root ? &b : NULL, root ? &q : NULL,
                            root ? &kc : NULL, 1, 1, root ? topk : NULL, NULL, 0);
  expect(st == M3IDX_OK, "good call: M3IDX_OK");
  if (root) {
    m3idx_options co;
    m3idx_options_init(&co);
    co.backend = M3IDX_BACKEND_CPU;
    co.max_reqs = 2, co.max_model_len = 700, co.max_rows = 4, co.max_heads = 1;
    m3idx_context *ctx = NULL;
    expect(m3idx_context_create(&co, &ctx) == M3IDX_OK, "one process: context");
    expect(m3idx_index_topk_decode(ctx, &b, &q, &kc, 1, 1, NULL, 0, want, NULL, 0) == M3IDX_OK,
           "one process: the fused call");
    expect(memcmp(want, topk, sizeof want) == 0, "good call: the bytes of one process");
    m3idx_context_destroy(ctx);
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (root)
    printf("check-mpi-failure: %d ranks, %d checks on rank 0, %d failures in all\n", ranks,
           checks, all);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
