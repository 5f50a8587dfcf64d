/*
 * share.c - building, sending and receiving a rank's share (share.h).
 *
 * Rows: the share's rows as the original requests they belong to (a
 * prefill request cut at the share's edges keeps its rows' positions by
 * its context length).  Blocks: each request's range [lo, hi) becomes a
 * decode request whose blocks are those of the range: the last range
 * keeps the request's own end (seq_len - 128 lo); any other range, all of
 * whose keys are causal for every row, gets seq_len 128 (hi - lo) +
 * query_len - 1, so that its rows see every key of the range, and the
 * block past the range that this length adds reads the range's first
 * page and is not used.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "share.h"
#include "work-map.h"

#define CHUNK (1 << 30)
#define TAG 0x6d33

int query_elt(const struct call_head *h) { return h->dtype == M3IDX_DTYPE_BF16 ? 2 : 1; }

int send_bytes(MPI_Comm comm, int dest, const void *p, int64_t n) {
  for (int64_t at = 0; at < n; at += CHUNK) {
    const int e = MPI_Send((const char *)p + at, (int)(n - at < CHUNK ? n - at : CHUNK), MPI_BYTE,
                           dest, TAG, comm);
    if (e != MPI_SUCCESS)
      return e;
  }
  return 0;
}

int recv_bytes(MPI_Comm comm, int src, void *p, int64_t n) {
  for (int64_t at = 0; at < n; at += CHUNK) {
    const int e = MPI_Recv((char *)p + at, (int)(n - at < CHUNK ? n - at : CHUNK), MPI_BYTE, src,
                           TAG, comm, MPI_STATUS_IGNORE);
    if (e != MPI_SUCCESS)
      return e;
  }
  return 0;
}

void package_free(struct package *p) {
  free(p->seq_lens);
  free(p->cu);
  free(p->ctx);
  free(p->bt);
  free(p->req_of);
  if (!p->own_pages)
    free(p->pages);
  if (!p->own_query)
    free(p->query);
  *p = (struct package){0};
}

static int alloc_arrays(const struct call_head *h, struct package *p) {
  const int prefill = h->mode == M3IDX_MODE_PREFILL;
  const size_t n = (size_t)p->num_reqs;
  p->seq_lens = malloc(4 * n + 4);
  p->req_of = malloc(4 * n + 4);
  p->cu = prefill ? malloc(4 * n + 8) : NULL;
  p->ctx = prefill ? malloc(4 * n + 4) : NULL;
  p->bt = malloc(4 * n * (size_t)p->bt_stride + 4);
  if (!p->own_pages)
    p->pages = malloc((size_t)p->num_pages * M3IDX_PAGE_BYTES + 1);
  if (!p->own_query)
    p->query =
        malloc((size_t)p->num_rows * (size_t)h->num_heads * M3IDX_HEAD_DIM * query_elt(h) + 1);
  return p->seq_lens && p->req_of && (!prefill || (p->cu && p->ctx)) && p->bt && p->pages &&
                 p->query
             ? 0
             : -1;
}

/* Sub-request i of the share: its global request, first global row, rows,
 * first global block, the block past its range, and its seq_len. */
struct sub {
  int32_t r, row, rows, lo, hi, len;
};

/* The share's sub-requests into subs (room for num_reqs); their count. */
static int32_t subs_of(const struct call_head *h, const struct call_inputs_g *g,
                       const struct share *s, struct sub *subs) {
  int32_t n = 0;
  const int32_t q = h->query_len;
  for (int32_t r = s->req0; r < s->req1; r++) {
    struct sub u = {r, 0, 0, 0, 0, 0};
    if (s->blocks) {
      const int32_t end = (int32_t)m3idx__blocks_of(g->seq_lens[r]);
      if (s->lo[r] >= s->hi[r])
        continue;
      u.row = r * q, u.rows = q, u.lo = s->lo[r], u.hi = s->hi[r];
      u.len = u.hi == end ? g->seq_lens[r] - M3IDX_BLOCK_SIZE * u.lo
                          : M3IDX_BLOCK_SIZE * (u.hi - u.lo) + q - 1;
    } else if (h->mode == M3IDX_MODE_DECODE) {
      u.row = r * q, u.rows = q, u.len = g->seq_lens[r];
      u.hi = (int32_t)m3idx__blocks_of(u.len);
    } else {
      const int32_t a = g->cu[r] > s->row0 ? g->cu[r] : s->row0;
      const int32_t b = g->cu[r + 1] < s->row1 ? g->cu[r + 1] : s->row1;
      if (a >= b)
        continue;
      u.row = a, u.rows = b - a, u.len = g->ctx[r] + (a - g->cu[r]) + (b - a);
      u.hi = (int32_t)m3idx__blocks_of(u.len);
    }
    subs[n++] = u;
  }
  return n;
}

int package_build(const struct call_head *h, const struct call_inputs_g *g,
                  const struct share *s, int borrow, struct package *p) {
  *p = (struct package){0};
  struct sub *subs = malloc(sizeof *subs * (size_t)h->num_reqs + 1);
  int32_t *local = malloc(sizeof(int32_t) * (size_t)g->num_pages + 1);
  if (subs == NULL || local == NULL) {
    free(subs);
    free(local);
    return -1;
  }
  const struct share all_rows = {0, s->row0, s->row1, 0, h->num_reqs, NULL, NULL};
  p->num_reqs = subs_of(h, g, h->mode == M3IDX_MODE_PREFILL ? &all_rows : s, subs);
  p->bt_stride = 1;
  for (int32_t i = 0; i < p->num_reqs; i++) {
    const int32_t nb = (int32_t)m3idx__blocks_of(subs[i].len);
    p->bt_stride = nb > p->bt_stride ? nb : p->bt_stride;
    p->max_seq_len = subs[i].len > p->max_seq_len ? subs[i].len : p->max_seq_len;
    p->num_rows += subs[i].rows;
  }
  /* The pages the share reads, renumbered in first-use order (or, borrowed,
     all of them under their own ids). */
  for (int32_t i = 0; i < g->num_pages; i++)
    local[i] = borrow ? i : -1;
  if (borrow) {
    p->own_pages = 1;
    p->pages = (uint8_t *)g->pages;
    p->num_pages = g->num_pages;
    /* A row split's rows are contiguous: the root's own query rows. */
    p->own_query = !s->blocks && p->num_reqs > 0;
    if (p->own_query)
      p->query = (uint8_t *)g->query + (size_t)subs[0].row * (size_t)h->num_heads *
                                           M3IDX_HEAD_DIM * query_elt(h);
  }
  for (int32_t i = 0; i < p->num_reqs && !borrow; i++)
    for (int32_t j = 0; j < (int32_t)m3idx__blocks_of(subs[i].len); j++) {
      const int32_t b = subs[i].lo + j < subs[i].hi ? subs[i].lo + j : subs[i].lo;
      const int32_t id = g->bt[(int64_t)subs[i].r * h->bt_stride + b];
      if (local[id] < 0)
        local[id] = p->num_pages++;
    }
  int rc = alloc_arrays(h, p);
  const size_t row_bytes = (size_t)h->num_heads * M3IDX_HEAD_DIM * query_elt(h);
  for (int32_t i = 0, row = 0; rc == 0 && i < p->num_reqs; row += subs[i].rows, i++) {
    const struct sub *u = &subs[i];
    p->seq_lens[i] = u->len;
    p->req_of[i] = u->r;
    if (h->mode == M3IDX_MODE_PREFILL) {
      p->cu[i] = row;
      p->cu[i + 1] = row + u->rows;
      p->ctx[i] = u->len - u->rows;
    }
    const int32_t nb = (int32_t)m3idx__blocks_of(u->len);
    for (int32_t j = 0; j < p->bt_stride; j++) {
      const int32_t b = u->lo + j < u->hi ? u->lo + j : u->lo;
      p->bt[(int64_t)i * p->bt_stride + j] =
          j < nb ? local[g->bt[(int64_t)u->r * h->bt_stride + b]] : 0;
    }
    if (!p->own_query)
      memcpy(p->query + (size_t)row * row_bytes, g->query + (size_t)u->row * row_bytes,
             (size_t)u->rows * row_bytes);
  }
  for (int32_t id = 0; rc == 0 && !borrow && id < g->num_pages; id++)
    if (local[id] >= 0)
      memcpy(p->pages + (size_t)local[id] * M3IDX_PAGE_BYTES,
             g->pages + (size_t)id * M3IDX_PAGE_BYTES, M3IDX_PAGE_BYTES);
  free(subs);
  free(local);
  if (rc != 0)
    package_free(p);
  return rc;
}

/* After the head, the receiver says whether it has room (1) or not (0);
 * the arrays follow only if it has. */
int package_send(MPI_Comm comm, int dest, const struct call_head *h, const struct package *p) {
  const int32_t head[5] = {p->num_reqs, p->num_rows, p->max_seq_len, p->bt_stride, p->num_pages};
  int32_t room = 0;
  int e = send_bytes(comm, dest, head, sizeof head);
  if (e != 0 || p->num_reqs == 0)
    return e;
  e = recv_bytes(comm, dest, &room, sizeof room);
  if (e != 0 || !room)
    return e;
  const int64_t n = p->num_reqs;
  if (!e) e = send_bytes(comm, dest, p->seq_lens, 4 * n);
  if (!e) e = send_bytes(comm, dest, p->req_of, 4 * n);
  if (!e && h->mode == M3IDX_MODE_PREFILL) e = send_bytes(comm, dest, p->cu, 4 * (n + 1));
  if (!e && h->mode == M3IDX_MODE_PREFILL) e = send_bytes(comm, dest, p->ctx, 4 * n);
  if (!e) e = send_bytes(comm, dest, p->bt, 4 * n * p->bt_stride);
  if (!e) e = send_bytes(comm, dest, p->pages, (int64_t)p->num_pages * M3IDX_PAGE_BYTES);
  if (!e)
    e = send_bytes(comm, dest, p->query,
                   (int64_t)p->num_rows * h->num_heads * M3IDX_HEAD_DIM * query_elt(h));
  return e;
}

int package_recv(MPI_Comm comm, int src, const struct call_head *h, struct package *p) {
  *p = (struct package){0};
  int32_t head[5];
  int e = recv_bytes(comm, src, head, sizeof head);
  if (e != 0)
    return e;
  p->num_reqs = head[0], p->num_rows = head[1], p->max_seq_len = head[2];
  p->bt_stride = head[3], p->num_pages = head[4];
  if (p->num_reqs == 0)
    return 0;
  const int32_t room = alloc_arrays(h, p) == 0;
  e = send_bytes(comm, src, &room, sizeof room);
  const int64_t n = p->num_reqs;
  const int prefill = h->mode == M3IDX_MODE_PREFILL;
  if (!e && room) e = recv_bytes(comm, src, p->seq_lens, 4 * n);
  if (!e && room) e = recv_bytes(comm, src, p->req_of, 4 * n);
  if (!e && room && prefill) e = recv_bytes(comm, src, p->cu, 4 * (n + 1));
  if (!e && room && prefill) e = recv_bytes(comm, src, p->ctx, 4 * n);
  if (!e && room) e = recv_bytes(comm, src, p->bt, 4 * n * p->bt_stride);
  if (!e && room) e = recv_bytes(comm, src, p->pages, (int64_t)p->num_pages * M3IDX_PAGE_BYTES);
  if (!e && room)
    e = recv_bytes(comm, src, p->query,
                   (int64_t)p->num_rows * h->num_heads * M3IDX_HEAD_DIM * query_elt(h));
  if (e != 0 || !room) {
    package_free(p);
    return e != 0 ? e : -1;
  }
  return 0;
}
