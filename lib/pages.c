/*
 * pages.c - encode key rows into MXFP4 pages and decode them back.
 *
 * Page layout (SPEC section 3): slot t's 128 elements are in bytes
 * [64t, 64t + 64), element d in byte 64t + d/2, low nibble for even d;
 * its four e8m0 scales are bytes 8192 + 4t + g for elements [32g, 32g + 32).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "context.h"
#include "encoding.h"
#include "fp-env.h"

/* Quantise 128 fp32 values into one slot. */
static void encode_slot(uint8_t *page, int32_t slot, const float *key) {
  uint8_t *data = page + 64 * slot;
  uint8_t *scales = page + M3IDX_PAGE_DATA_BYTES + 4 * slot;
  for (int g = 0; g < 4; g++) {
    const float *x = key + 32 * g;
    float amax = 0.0f;
    int finite = 1;
    for (int j = 0; j < 32; j++) {
      if (!isfinite(x[j]))
        finite = 0;
      else if (fabsf(x[j]) > amax)
        amax = fabsf(x[j]);
    }
    uint8_t e = finite ? m3idx__encode_e8m0(amax) : 255u;
    scales[g] = e;
    /* 2^(127-e): e <= 253 for finite amax, so this is a normal number
       and x * inv is exact wherever the rounding can depend on it. */
    float inv = e < 255u ? m3idx__bits_to_float((uint32_t)(254 - e) << 23) : 0.0f;
    for (int j = 0; j < 32; j += 2) {
      uint8_t lo = finite ? m3idx__encode_e2m1(x[j] * inv) : 0u;
      uint8_t hi = finite ? m3idx__encode_e2m1(x[j + 1] * inv) : 0u;
      data[16 * g + j / 2] = (uint8_t)(lo | (hi << 4));
    }
  }
}

static m3idx_status check_slot(const void *page, int32_t slot, const void *key) {
  if (page == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "page is NULL");
  if (key == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "key is NULL");
  if (slot < 0 || slot >= M3IDX_BLOCK_SIZE)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "slot is %d, outside [0, 128)", (int)slot);
  return M3IDX_OK;
}

m3idx_status m3idx_page_encode_f32(uint8_t *page, int32_t slot, const float *key) {
  m3idx_status st = check_slot(page, slot, key);
  if (st != M3IDX_OK)
    return st;
  m3idx_fpenv env = m3idx__fpenv_enter();
  encode_slot(page, slot, key);
  m3idx__fpenv_leave(env);
  return M3IDX_OK;
}

m3idx_status m3idx_page_encode_bf16(uint8_t *page, int32_t slot,
                                    const uint16_t *key) {
  m3idx_status st = check_slot(page, slot, key);
  if (st != M3IDX_OK)
    return st;
  float x[M3IDX_HEAD_DIM];
  m3idx_fpenv env = m3idx__fpenv_enter();
  for (int d = 0; d < M3IDX_HEAD_DIM; d++)
    x[d] = m3idx__bf16_value(key[d]);
  encode_slot(page, slot, x);
  m3idx__fpenv_leave(env);
  return M3IDX_OK;
}

/* Element d of a slot: its e2m1 code and scale byte. */
static uint32_t code_of(const uint8_t *page, int32_t slot, int d) {
  return m3idx__code_at(page + 64 * slot, d);
}

static uint8_t scale_of(const uint8_t *page, int32_t slot, int d) {
  return page[M3IDX_PAGE_DATA_BYTES + 4 * slot + d / 32];
}

m3idx_status m3idx_page_decode(const uint8_t *page, int32_t slot, float *key) {
  m3idx_status st = check_slot(page, slot, key);
  if (st != M3IDX_OK)
    return st;
  m3idx_fpenv env = m3idx__fpenv_enter();
  for (int d = 0; d < M3IDX_HEAD_DIM; d++)
    key[d] = m3idx__e2m1_value(code_of(page, slot, d)) *
             m3idx__e8m0_value(scale_of(page, slot, d));
  m3idx__fpenv_leave(env);
  return M3IDX_OK;
}

m3idx_status m3idx_page_decode_f64(const uint8_t *page, int32_t slot, double *key) {
  m3idx_status st = check_slot(page, slot, key);
  if (st != M3IDX_OK)
    return st;
  /* e2m1 has two significant bits and 2^(e-127) is a normal double: the
     product is exact, whatever the caller's rounding mode. */
  for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
    uint8_t e = scale_of(page, slot, d);
    key[d] = e == 255u ? (double)NAN
                       : (double)m3idx__e2m1_value(code_of(page, slot, d)) * m3idx__e8m0_double(e);
  }
  return M3IDX_OK;
}

m3idx_status m3idx_encode_keys_f32(const float *keys, int64_t num_tokens,
                                   uint8_t *pages, int64_t num_pages) {
  if (keys == NULL && num_tokens > 0)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "keys is NULL");
  if (pages == NULL && num_pages > 0)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "pages is NULL");
  if (num_tokens < 0)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "num_tokens is %lld, negative", (long long)num_tokens);
  if (num_pages < 0)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "num_pages is %lld, negative", (long long)num_pages);
  /* Both buffers must be addressable before any offset is computed. */
  if (num_tokens > PTRDIFF_MAX / (M3IDX_HEAD_DIM * (int64_t)sizeof(float)))
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "num_tokens is %lld, more rows of 128 floats than can be addressed",
                       (long long)num_tokens);
  if (num_pages > PTRDIFF_MAX / M3IDX_PAGE_BYTES)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "num_pages is %lld, more pages of %d bytes than can be addressed",
                       (long long)num_pages, M3IDX_PAGE_BYTES);
  int64_t need = num_tokens / M3IDX_BLOCK_SIZE + (num_tokens % M3IDX_BLOCK_SIZE != 0);
  if (num_pages != need)
    return m3idx__fail(NULL, M3IDX_ERR_INCONSISTENT,
                       "num_pages is %lld, but %lld tokens fill %lld pages",
                       (long long)num_pages, (long long)num_tokens,
                       (long long)need);
  m3idx_fpenv env = m3idx__fpenv_enter();
  for (int64_t p = 0; p < num_pages; p++) {
    uint8_t *page = pages + p * M3IDX_PAGE_BYTES;
    int64_t first = p * M3IDX_BLOCK_SIZE;
    int64_t count = num_tokens - first < M3IDX_BLOCK_SIZE ? num_tokens - first
                                                          : M3IDX_BLOCK_SIZE;
    if (count < M3IDX_BLOCK_SIZE)
      memset(page, 0, M3IDX_PAGE_BYTES);
    for (int64_t t = 0; t < count; t++)
      encode_slot(page, (int32_t)t, keys + (first + t) * M3IDX_HEAD_DIM);
  }
  m3idx__fpenv_leave(env);
  return M3IDX_OK;
}
