/*
 * fuzz-args.c - libFuzzer harness for the argument checks of every entry
 * point: the input bytes describe a call (counts, lengths, block tables,
 * page ids, dtype, scale, forced blocks, strides, NULL pointers, work
 * maps), every array exactly as long as the call says, so that a read past
 * one is caught.  A failed call must leave its outputs untouched; nothing
 * may crash.
 *
 * SPDX-License-Identifier: MIT
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "m3idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct reader {
  const uint8_t *p;
  size_t n;
};

static int take(struct reader *r) {
  if (r->n == 0)
    return 0;
  r->n--;
  return *r->p++;
}

static int32_t take_range(struct reader *r, int32_t lo, int32_t hi) {
  uint32_t v = (uint32_t)take(r) | (uint32_t)take(r) << 8;
  return lo + (int32_t)(v % (uint32_t)(hi - lo + 1));
}

#define NPAGES 24
#define FILL 0x3c

static m3idx_context *ctx;
static uint8_t *pages;

static void setup(void) {
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_CPU;
  o.threads = 1;
  o.max_reqs = 6;
  o.max_model_len = 2048;
  o.max_rows = 24;
  o.max_heads = 3;
  if (m3idx_context_create(&o, &ctx) != M3IDX_OK)
    abort();
  pages = malloc((size_t)NPAGES * M3IDX_PAGE_BYTES);
  for (size_t i = 0; i < (size_t)NPAGES * M3IDX_PAGE_BYTES; i++)
    pages[i] = (uint8_t)(i * 2654435761u >> 11);
}

/* An array of exactly n elements (n <= 0: a 1-byte allocation, and NULL
 * half the time). */
static void *array(struct reader *r, int32_t n, size_t elem) {
  if (n <= 0)
    return take(r) & 1 ? NULL : malloc(1);
  return malloc((size_t)n * elem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (ctx == NULL)
    setup();
  struct reader r = {data, size};
  int entry = take(&r) % 7;
  /* Half the inputs describe a coherent batch (so that the kernels run),
     the other half anything at all. */
  int coherent = take(&r) & 1;
  m3idx_batch b;
  memset(&b, 0, sizeof b);
  b.mode = (m3idx_mode)take_range(&r, coherent ? 1 : 0, coherent ? 2 : 3);
  b.num_reqs = take_range(&r, coherent ? 1 : -2, coherent ? 6 : 8);
  b.num_heads = take_range(&r, coherent ? 1 : -1, coherent ? 3 : 4);
  b.query_len = take_range(&r, coherent ? 1 : -1, coherent ? 4 : 5);
  b.max_seq_len = take_range(&r, coherent ? 1 : -10, coherent ? 2048 : 2100);
  int32_t *seq = array(&r, b.num_reqs, 4), *cu = array(&r, b.num_reqs + 1, 4),
          *cl = array(&r, b.num_reqs, 4);
  for (int32_t i = 0; seq && i < b.num_reqs; i++)
    seq[i] = coherent ? take_range(&r, b.query_len, b.max_seq_len > b.query_len ? b.max_seq_len : b.query_len)
                      : take_range(&r, -3, 2100);
  if (coherent && cu && cl && seq) {
    cu[0] = 0;
    for (int32_t i = 0; i < b.num_reqs; i++) {
      int32_t q = take_range(&r, 0, seq[i] < 5 ? seq[i] : 5);
      cu[i + 1] = cu[i] + q;
      cl[i] = seq[i] - q;
    }
  } else {
    for (int32_t i = 0; cu && i <= b.num_reqs; i++)
      cu[i] = take_range(&r, -2, 40);
    for (int32_t i = 0; cl && i < b.num_reqs; i++)
      cl[i] = take_range(&r, -2, 2100);
  }
  b.seq_lens = seq;
  b.cu_seqlens_q = take(&r) % 8 ? cu : NULL;
  b.context_lens = take(&r) % 8 ? cl : NULL;
  b.num_rows = !coherent && take(&r) & 1 ? take_range(&r, -1, 40)
                            : (b.mode == M3IDX_MODE_DECODE ? b.num_reqs * b.query_len
                                                           : (cu && b.num_reqs >= 0 ? cu[b.num_reqs] : 0));
  int32_t bt_stride = coherent ? 17 : take_range(&r, -1, 20);
  int32_t bt_n = b.num_reqs > 0 && bt_stride > 0 ? b.num_reqs * bt_stride : 0;
  int32_t *bt = array(&r, bt_n, 4);
  for (int32_t i = 0; bt && i < bt_n; i++)
    bt[i] = coherent && take(&r) % 16 ? take_range(&r, 0, NPAGES - 1)
                                      : take_range(&r, -3, NPAGES + 3);
  m3idx_kcache kc = {take(&r) % 8 ? pages : NULL, take_range(&r, -1, NPAGES), bt, bt_stride};
  int32_t rows = b.num_rows > 0 ? b.num_rows : 0, heads = b.num_heads > 0 ? b.num_heads : 0;
  int dtype = take_range(&r, 0, 3);
  size_t qbytes = (size_t)rows * (size_t)heads * 128 * (dtype == M3IDX_DTYPE_E4M3 ? 1 : 2);
  uint8_t *q = qbytes ? malloc(qbytes) : (take(&r) & 1 ? NULL : malloc(1));
  for (size_t i = 0; q && i < qbytes; i++)
    q[i] = (uint8_t)take(&r);
  static const float scales[6] = {1.0f, 0.0f, -3.5f, NAN, INFINITY, 1e-40f};
  m3idx_query qq = {q, (m3idx_dtype)dtype, scales[take(&r) % 6]};
  int32_t init = take_range(&r, -2, 18), local = take_range(&r, -2, 18);
  int32_t width = b.max_seq_len > 0 ? (b.max_seq_len + 127) / 128 : 1;
  int64_t stride = take_range(&r, -1, width + 4);
  size_t sbytes = (size_t)heads * (size_t)rows * (size_t)(stride > width ? stride : width) * 4;
  size_t tbytes = (size_t)heads * (size_t)rows * M3IDX_TOPK * 4;
  int32_t cap = take_range(&r, -1, 40);
  size_t mbytes = cap > 0 ? (size_t)cap * 8 : 0;
  /* Outputs with 64 guard bytes on each side, all FILL. */
  uint8_t *sbuf = malloc(sbytes + 128), *tbuf = malloc(tbytes + 128), *mbuf = malloc(mbytes + 128);
  memset(sbuf, FILL, sbytes + 128);
  memset(tbuf, FILL, tbytes + 128);
  memset(mbuf, FILL, mbytes + 128);
  float *scores = take(&r) % 8 ? (float *)(sbuf + 64) : NULL;
  int32_t *topk = take(&r) % 8 ? (int32_t *)(tbuf + 64) : NULL;
  int32_t *map = take(&r) % 4 ? (int32_t *)(mbuf + 64) : NULL;
  m3idx_status st = M3IDX_OK;
  switch (entry) {
  case 0:
    st = m3idx_score_decode(ctx, &b, &qq, &kc, NULL, 0, scores, stride);
    break;
  case 1:
    st = m3idx_score_prefill(ctx, &b, &qq, &kc, scores, stride);
    break;
  case 2:
    st = m3idx_pin_forced_blocks(ctx, &b, init, local, scores, stride);
    break;
  case 3:
    st = m3idx_topk_from_scores(ctx, &b, scores, stride, topk);
    break;
  case 4:
    st = m3idx_index_topk_decode(ctx, &b, &qq, &kc, init, local, NULL, 0, topk, scores, stride);
    break;
  case 5:
    st = m3idx_index_topk_prefill(ctx, &b, &qq, &kc, init, local, topk, scores, stride);
    break;
  case 6:
    st = m3idx_work_map_build(ctx, &b, map, cap);
    if (st == M3IDX_OK) /* a map just built is one scoring accepts */
      st = m3idx_score_decode(ctx, &b, &qq, &kc, map, cap, scores, stride);
    break;
  }
  /* Guards always intact; the whole buffer too when the call failed
     (a failed score after a built map may have written the map). */
  for (size_t i = 0; i < 64; i++)
    if (sbuf[i] != FILL || sbuf[sbytes + 64 + i] != FILL || tbuf[i] != FILL ||
        tbuf[tbytes + 64 + i] != FILL || mbuf[i] != FILL || mbuf[mbytes + 64 + i] != FILL)
      abort();
  if (st != M3IDX_OK) {
    if (m3idx_last_error(ctx)[0] == '\0' || m3idx_strerror(st) == NULL)
      abort();
    for (size_t i = 64; i < sbytes + 64; i++)
      if (sbuf[i] != FILL)
        abort();
    for (size_t i = 64; i < tbytes + 64; i++)
      if (tbuf[i] != FILL)
        abort();
    if (entry != 6)
      for (size_t i = 64; i < mbytes + 64; i++)
        if (mbuf[i] != FILL)
          abort();
  }
  free(sbuf);
  free(tbuf);
  free(mbuf);
  free(seq);
  free(cu);
  free(cl);
  free(bt);
  free(q);
  return 0;
}
