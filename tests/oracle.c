/*
 * oracle.c - the tests' independent oracle (see oracle.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "oracle.h"

float oracle_bf16(uint16_t x) {
  uint32_t u = (uint32_t)x << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float oracle_e4m3(uint8_t x) {
  int s = x >> 7, e = (x >> 3) & 15, m = x & 7;
  if (e == 15 && m == 7)
    return NAN;
  float v = e == 0 ? ldexpf((float)m / 8.0f, -6) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
  return s ? -v : v;
}

float oracle_e2m1(unsigned code) {
  int s = (code >> 3) & 1, e = (code >> 1) & 3, m = code & 1;
  float v = e == 0 ? 0.5f * (float)m : ldexpf(1.0f + 0.5f * (float)m, e - 1);
  return s ? -v : v;
}

float oracle_e8m0(unsigned e) {
  return e == 255 ? NAN : ldexpf(1.0f, (int)e - 127);
}

int oracle_width(const struct oracle_call *c) {
  return (c->max_seq_len + 127) / 128;
}

static int row_request(const struct oracle_call *c, int row) {
  if (c->mode == 1)
    return row / c->query_len;
  int r = 0;
  while (c->cu_seqlens_q[r + 1] <= row)
    r++;
  return r;
}

int oracle_row_pos(const struct oracle_call *c, int row) {
  int r = row_request(c, row);
  if (c->mode == 1)
    return c->seq_lens[r] - c->query_len + row % c->query_len;
  return c->context_lens[r] + (row - c->cu_seqlens_q[r]);
}

int oracle_row_blocks(const struct oracle_call *c, int row) {
  return oracle_row_pos(c, row) / 128 + 1;
}

static float query_elem(const struct oracle_call *c, int row, int h, int d) {
  size_t i = ((size_t)row * c->num_heads + h) * 128 + d;
  return c->dtype == 1 ? oracle_bf16(((const uint16_t *)c->query)[i])
                       : oracle_e4m3(((const uint8_t *)c->query)[i]);
}

/* Token p of request r, decoded: 128 e2m1 values and 4 scales. */
static void decode_token(const struct oracle_call *c, int r, int p, float *k,
                         float *sc) {
  int page = c->block_table[(size_t)r * c->bt_stride + p / 128];
  const uint8_t *pg = c->pages + (size_t)page * 8704;
  int slot = p % 128;
  for (int d = 0; d < 128; d++) {
    uint8_t byte = pg[64 * slot + d / 2];
    k[d] = oracle_e2m1(d % 2 == 0 ? (byte & 15u) : (byte >> 4));
  }
  for (int g = 0; g < 4; g++)
    sc[g] = oracle_e8m0(pg[8192 + 4 * slot + g]);
}

static float logit_of(const struct oracle_call *c, const float *q,
                      const float *k, const float *sc) {
  float s[4];
  for (int g = 0; g < 4; g++) {
    float acc = 0.0f;
    for (int j = 0; j < 32; j++) {
      float prod = q[32 * g + j] * k[32 * g + j]; /* rounded to fp32 */
      acc = acc + prod;
    }
    s[g] = acc * sc[g];
  }
  float dot = (s[0] + s[1]) + (s[2] + s[3]);
  float logit = dot * c->scale;
  if (logit == 0.0f)
    logit = 0.0f;
  return logit;
}

float oracle_logit(const struct oracle_call *c, int h, int row, int r, int p) {
  float q[128], k[128], sc[4];
  for (int d = 0; d < 128; d++)
    q[d] = query_elem(c, row, h, d);
  decode_token(c, r, p, k, sc);
  return logit_of(c, q, k, sc);
}

static float clamp(float x) {
  const float cap = nextafterf(1e29f, 0.0f);
  return x > cap ? cap : x;
}

void oracle_scores(const struct oracle_call *c, float *scores, int64_t stride) {
  for (int r = 0; r < c->num_reqs; r++) {
    /* This request's rows, and its keys decoded once. */
    int first = 0, count = 0;
    if (c->mode == 1) {
      first = r * c->query_len;
      count = c->query_len;
    } else {
      first = c->cu_seqlens_q[r];
      count = c->cu_seqlens_q[r + 1] - first;
    }
    if (count == 0)
      continue;
    int tokens = c->seq_lens[r];
    float *keys = malloc(sizeof(float) * 132 * (size_t)tokens);
    for (int p = 0; p < tokens; p++)
      decode_token(c, r, p, keys + 132 * (size_t)p, keys + 132 * (size_t)p + 128);
    for (int h = 0; h < c->num_heads; h++)
      for (int row = first; row < first + count; row++) {
        float q[128];
        for (int d = 0; d < 128; d++)
          q[d] = query_elem(c, row, h, d);
        int pos = oracle_row_pos(c, row);
        for (int b = 0; b * 128 <= pos; b++) {
          float best = NAN;
          for (int p = b * 128; p <= pos && p < b * 128 + 128; p++) {
            const float *k = keys + 132 * (size_t)p;
            float l = logit_of(c, q, k, k + 128);
            if (isnan(l))
              continue;
            if (isnan(best) || l > best)
              best = l;
          }
          scores[((int64_t)h * c->num_rows + row) * stride + b] = clamp(best);
        }
      }
    free(keys);
  }
}

void oracle_pin(const struct oracle_call *c, float *scores, int64_t stride) {
  for (int h = 0; h < c->num_heads; h++)
    for (int row = 0; row < c->num_rows; row++) {
      float *s = scores + ((int64_t)h * c->num_rows + row) * stride;
      int n = oracle_row_blocks(c, row);
      for (int b = 0; b < n; b++)
        s[b] = clamp(s[b]);
      for (int b = 0; b < n && b < c->init_blocks; b++)
        s[b] = 1e30f;
      for (int b = n - c->local_blocks < 0 ? 0 : n - c->local_blocks; b < n; b++)
        s[b] = 1e29f;
    }
}

struct ranked {
  float score;
  int id;
};

static int by_rank(const void *pa, const void *pb) {
  const struct ranked *a = pa, *b = pb;
  int an = isnan(a->score), bn = isnan(b->score);
  if (an != bn)
    return an ? 1 : -1;
  if (!an && a->score != b->score)
    return a->score > b->score ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

void oracle_topk(const struct oracle_call *c, const float *scores,
                 int64_t stride, int32_t *topk) {
  struct ranked *all = malloc(sizeof *all * (size_t)oracle_width(c));
  for (int h = 0; h < c->num_heads; h++)
    for (int row = 0; row < c->num_rows; row++) {
      const float *s = scores + ((int64_t)h * c->num_rows + row) * stride;
      int32_t *out = topk + ((int64_t)h * c->num_rows + row) * 16;
      int n = oracle_row_blocks(c, row);
      for (int b = 0; b < n; b++)
        all[b] = (struct ranked){s[b], b};
      qsort(all, (size_t)n, sizeof *all, by_rank);
      for (int i = 0; i < 16; i++)
        out[i] = i < n ? all[i].id : -1;
    }
  free(all);
}
