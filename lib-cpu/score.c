/*
 * score.c - decode and prefill scoring on the CPU: work items of
 * (request, blocks), each scoring its pages against every row and head
 * that sees them.  Each score is computed whole by one thread, so the
 * bytes never depend on the thread count or the schedule.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"
#include "spec-rules.h"
#include "fp-env.h"
#include "omp-compat.h"
#include "page-prefetch.h"
#include "work-map.h"

/* Rows gathered for one page, flushed through the kernel in batches. */
struct row_batch {
  struct m3idx_cpu_row rows[M3IDX_CPU_ROW_BATCH];
  int n;
  const uint8_t *page;
  const uint8_t *ahead; /* a page scored soon after this one, or NULL */
  m3idx_cpu_page_kernel kernel;
  float scale;
};

static inline void add_row(struct row_batch *rb, const struct m3idx_cpu_state *s,
                           int64_t qrow, int32_t nkeys, float *out) {
  rb->rows[rb->n++] = (struct m3idx_cpu_row){s->query_f32 + qrow * M3IDX_HEAD_DIM,
                                             s->query_digits + qrow, nkeys,
                                             s->query_spread[qrow], out};
  if (rb->n == M3IDX_CPU_ROW_BATCH) {
    rb->kernel(rb->page, rb->ahead, rb->rows, rb->n, rb->scale);
    rb->n = 0;
  }
}

static inline void flush(struct row_batch *rb) {
  if (rb->n > 0)
    rb->kernel(rb->page, rb->ahead, rb->rows, rb->n, rb->scale);
  rb->n = 0;
}

static inline const uint8_t *page_of(const struct m3idx_call *c, int32_t r,
                                     int32_t b) {
  int32_t id = c->block_table[(int64_t)r * c->bt_stride + b];
  return c->pages + (int64_t)id * M3IDX_PAGE_BYTES;
}

/* Decode the query rows to fp32 (exactly: bf16 and e4m3 values are fp32
 * values), note how far each row's keys may spread for fp64 sums, and cut
 * each row for the vnni kernel's filter. */
void m3idx__cpu_decode_queries(struct m3idx_cpu_state *s,
                               const struct m3idx_call *c) {
  int64_t n = (int64_t)c->num_rows * c->num_heads;
#pragma omp parallel for num_threads(m3idx__cpu_team(s)) schedule(static)
  for (int64_t r = 0; r < n; r++) {
    float *out = s->query_f32 + r * M3IDX_HEAD_DIM;
    for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
      int64_t i = r * M3IDX_HEAD_DIM + d;
      out[d] = c->query_dtype == M3IDX_DTYPE_BF16
                   ? m3idx__bf16_value(((const uint16_t *)c->query)[i])
                   : m3idx__e4m3_value(((const uint8_t *)c->query)[i]);
    }
    s->query_spread[r] = (int8_t)m3idx__row_spread_allowed(out);
    m3idx__cpu_cut_row(out, c->scale, s->query_digits + r);
  }
}

void m3idx__cpu_row_positions(struct m3idx_cpu_state *s,
                              const struct m3idx_call *c) {
  m3idx__row_positions(c, s->row_pos);
}

/* The next work-map entry for this thread: entries are handed out one at
 * a time, in map order, to whichever thread asks first. */
static int64_t claim_entry(int64_t *claimed) {
  int64_t e;
#pragma omp atomic capture
  e = (*claimed)++;
  return e;
}

/* Page k of work-map entry e, or NULL past the used entries or the entry's
 * blocks. */
static const uint8_t *entry_page(const struct m3idx_call *c, const int32_t *map, int64_t e,
                                 int64_t used, int32_t k) {
  if (e >= used || map[2 * e] < 0 || k >= m3idx__work_count(map[2 * e + 1]))
    return NULL;
  return page_of(c, map[2 * e], m3idx__work_first(map[2 * e + 1]) + k);
}

/* Scores work-map entry e, each page with the one M3IDX_CPU_PREFETCH_PAGES
 * on (page-prefetch.h) on its way, and returns the entry this thread takes
 * next.  That entry is claimed as the first page to prefetch from it comes
 * up, so that its first pages are on their way too; no earlier, so that
 * calls of a few entries still spread over the threads. */
static int64_t decode_entry(const struct m3idx_cpu_state *s,
                            const struct m3idx_call *c, const int32_t *map,
                            int64_t e, int64_t used, int64_t *claimed,
                            float *scores, int64_t stride) {
  const int32_t H = c->num_heads, qlen = c->query_len;
  const int32_t r = map[2 * e], w = map[2 * e + 1];
  const int32_t b0 = m3idx__work_first(w);
  const int32_t end = r < 0 ? b0 : b0 + m3idx__work_count(w); /* r < 0: unused */
  int64_t then = -1;
  struct row_batch rb = {.n = 0, .kernel = s->kernel, .scale = c->scale};
  for (int32_t b = b0; b < end; b++) {
    rb.page = page_of(c, r, b);
    if (b + M3IDX_CPU_PREFETCH_PAGES < end) {
      rb.ahead = page_of(c, r, b + M3IDX_CPU_PREFETCH_PAGES);
    } else {
      if (then < 0)
        then = claim_entry(claimed);
      rb.ahead = entry_page(c, map, then, used, b + M3IDX_CPU_PREFETCH_PAGES - end);
    }
    for (int32_t j = 0; j < qlen; j++) {
      int32_t row = r * qlen + j;
      int32_t pos = c->seq_lens[r] - qlen + j;
      if (b * M3IDX_BLOCK_SIZE > pos)
        continue;
      for (int32_t h = 0; h < H; h++)
        add_row(&rb, s, (int64_t)row * H + h, m3idx__keys_seen(pos, b),
                scores + ((int64_t)h * c->num_rows + row) * stride + b);
    }
    flush(&rb);
  }
  return then >= 0 ? then : claim_entry(claimed);
}

void m3idx__cpu_score_decode(struct m3idx_cpu_state *s,
                             const struct m3idx_call *c, const int32_t *map,
                             float *scores, int64_t stride) {
  int32_t chunk = m3idx__work_chunk_blocks(c->query_len, c->num_heads);
  int64_t used = m3idx__work_map_entries(c->seq_lens, c->num_reqs, chunk);
  if (map == NULL) {
    m3idx__work_map_fill(s->map, (int32_t)used, c->seq_lens, c->num_reqs, chunk);
    map = s->map;
  }
  int64_t claimed = 0;
#pragma omp parallel num_threads(m3idx__cpu_team(s))
  {
    m3idx_fpenv env = m3idx__fpenv_enter();
    for (int64_t e = claim_entry(&claimed); e < used;)
      e = decode_entry(s, c, map, e, used, &claimed, scores, stride);
    m3idx__fpenv_leave(env);
  }
}

static void prefill_item(const struct m3idx_cpu_state *s,
                         const struct m3idx_call *c, int32_t r, int32_t b,
                         float *scores, int64_t stride) {
  const int32_t H = c->num_heads;
  const int32_t row0 = c->cu_seqlens_q[r], rows = c->cu_seqlens_q[r + 1] - row0;
  const int32_t ctx_len = c->context_lens[r];
  int32_t i0 = b * M3IDX_BLOCK_SIZE - ctx_len;
  struct row_batch rb = {.n = 0, .kernel = s->kernel, .scale = c->scale,
                         .page = page_of(c, r, b)};
  for (int32_t i = i0 > 0 ? i0 : 0; i < rows; i++) {
    int32_t row = row0 + i, pos = ctx_len + i;
    for (int32_t h = 0; h < H; h++)
      add_row(&rb, s, (int64_t)row * H + h, m3idx__keys_seen(pos, b),
              scores + ((int64_t)h * c->num_rows + row) * stride + b);
  }
  flush(&rb);
}

void m3idx__cpu_score_prefill(struct m3idx_cpu_state *s,
                              const struct m3idx_call *c, float *scores,
                              int64_t stride) {
  int64_t *prefix = s->prefix;
  prefix[0] = 0;
  for (int32_t r = 0; r < c->num_reqs; r++)
    prefix[r + 1] = prefix[r] + m3idx__request_blocks(c, r);
  int64_t items = prefix[c->num_reqs];
#pragma omp parallel num_threads(m3idx__cpu_team(s))
  {
    m3idx_fpenv env = m3idx__fpenv_enter();
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++) {
      const int32_t r = m3idx__request_at64(prefix, c->num_reqs, it);
      prefill_item(s, c, r, (int32_t)(it - prefix[r]), scores, stride);
    }
    m3idx__fpenv_leave(env);
  }
}

void m3idx__cpu_pin_topk(struct m3idx_cpu_state *s, const struct m3idx_call *c,
                         float *scores, int64_t stride, int pin,
                         const float *scores_in, int32_t *topk) {
  m3idx__cpu_row_positions(s, c);
  int64_t total = (int64_t)c->num_heads * c->num_rows;
  const float *in = scores_in ? scores_in : scores;
#pragma omp parallel num_threads(m3idx__cpu_team(s))
  {
    m3idx_fpenv env = m3idx__fpenv_enter();
#pragma omp for schedule(static)
    for (int64_t hr = 0; hr < total; hr++) {
      int32_t row = (int32_t)(hr % c->num_rows);
      int32_t n = s->row_pos[row] / M3IDX_BLOCK_SIZE + 1;
      if (pin)
        m3idx__cpu_pin_row(scores + hr * stride, n, c->init_blocks,
                           c->local_blocks);
      if (topk)
        m3idx__cpu_topk_row(in + hr * stride, n, topk + hr * M3IDX_TOPK);
    }
    m3idx__fpenv_leave(env);
  }
}
