/*
 * cli-helper.c - makes .npy inputs for the CLI tests and their expected
 * outputs from the tests' independent oracle, and damages files in the
 * ways a user's files can be damaged.
 *
 *   cli-helper gen DIR decode|prefill|special|long-decode|long-prefill SEED
 *       query.npy pages.npy block_table.npy seq_lens.npy [cu_seqlens_q.npy
 *       context_lens.npy] args (the CLI options) expected_topk.npy
 *       expected_scores.npy (non-causal entries -inf, as the CLI writes);
 *       long-decode: 3 requests of 7000 to 9000, 300 and 5000 to 6000
 *       tokens, 4 rows each, 2 heads (rows whose blocks split over ranks);
 *       long-prefill: ragged, contexts 2000 to 3000, 0 and 1000 to 1500
 *       with 150 to 250, 0 and 100 to 200 rows, 2 heads
 *   cli-helper keys FILE TOKENS SEED      fp32 keys [TOKENS, 128]
 *   cli-helper expect-pages KEYS OUT      the pages of KEYS, encoded here
 *                                         with the oracle's own rules
 *   cli-helper damage IN OUT KIND         fortran | bigendian | truncate |
 *                                         trailing | v2 | v3 | magic | f8 | 4d |
 *                                         twodescr
 *   cli-helper set-i32 FILE INDEX VALUE   overwrite one int32 element
 *   cli-helper zeros FILE DESCR D0 [D1 [D2]]  a zero array of that shape
 *   cli-helper fill-i32 FILE VALUE N      int32 [N], every element VALUE
 *   cli-helper abi                        the public structs' layout, a line
 *                                         each: "struct NAME SIZE" and
 *                                         "field NAME.FIELD OFFSET SIZE"
 *                                         (the Python package's test)
 *
 * SPDX-License-Identifier: MIT
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "npy.h"

static void die(const char *what) {
  fprintf(stderr, "cli-helper: %s\n", what);
  exit(99);
}

static void put(const char *dir, const char *name, const char *descr, int nd,
                const int64_t *shape, const void *data) {
  char path[4096], err[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (npy_write(path, descr, nd, shape, data, err, sizeof err) != 0)
    die(err);
}

static int gen(const char *dir, const char *kind, uint64_t seed) {
  uint64_t rs = seed;
  struct test_case *tc;
  int H = 1 + (int)(case_rand(&rs) % 3);
  if (!strcmp(kind, "decode") || !strcmp(kind, "special")) {
    int qlen = 1 + (int)(case_rand(&rs) % 3), n = 1 + (int)(case_rand(&rs) % 5);
    int32_t lens[5];
    for (int r = 0; r < n; r++)
      lens[r] = qlen + (int32_t)(case_rand(&rs) % 2600);
    tc = case_decode(seed, strcmp(kind, "special") ? FLAVOR_PLAIN : FLAVOR_SPECIAL, H, qlen,
                     (m3idx_dtype)(1 + seed % 2), n, lens);
  } else if (!strcmp(kind, "long-decode")) {
    H = 2;
    int32_t lens[3] = {7000 + (int32_t)(case_rand(&rs) % 2000), 300,
                       5000 + (int32_t)(case_rand(&rs) % 1000)};
    tc = case_decode(seed, FLAVOR_PLAIN, H, 4, (m3idx_dtype)(1 + seed % 2), 3, lens);
  } else if (!strcmp(kind, "long-prefill")) {
    H = 2;
    int32_t ctx[3] = {2000 + (int32_t)(case_rand(&rs) % 1000), 0,
                      1000 + (int32_t)(case_rand(&rs) % 500)};
    int32_t q[3] = {150 + (int32_t)(case_rand(&rs) % 100), 0,
                    100 + (int32_t)(case_rand(&rs) % 100)};
    tc = case_prefill(seed, FLAVOR_PLAIN, H, (m3idx_dtype)(1 + seed % 2), 3, ctx, q);
  } else if (!strcmp(kind, "prefill")) {
    int n = 1 + (int)(case_rand(&rs) % 4);
    int32_t ctx[4], q[4];
    for (int r = 0; r < n; r++) {
      ctx[r] = (int32_t)(case_rand(&rs) % 2000);
      q[r] = (int32_t)(case_rand(&rs) % 300);
    }
    tc = case_prefill(seed, FLAVOR_PLAIN, H, (m3idx_dtype)(1 + seed % 2), n, ctx, q);
  } else {
    die("gen: kind is decode, prefill, special, long-decode or long-prefill");
    return 99;
  }
  int I = (int)(case_rand(&rs) % 4), L = (int)(case_rand(&rs) % 4);
  float scale = (float)(case_rand(&rs) % 1000) / 256.0f;
  case_set_forced(tc, I, L);
  tc->query.scale = scale;
  tc->oc.scale = scale;
  /* The CLI's max_seq_len is the largest seq_len. */
  int32_t max = 1;
  for (int r = 0; r < tc->batch.num_reqs; r++)
    if (tc->seq_lens[r] > max)
      max = tc->seq_lens[r];
  tc->oc.max_seq_len = max;
  const m3idx_batch *b = &tc->batch;
  int64_t rows = b->num_rows, reqs = b->num_reqs;
  int64_t qshape[3] = {rows, H, 128};
  put(dir, "query.npy", tc->query.dtype == M3IDX_DTYPE_BF16 ? "<u2" : "|u1", 3, qshape,
      tc->query_data);
  int64_t pshape[2] = {tc->kcache.num_pages, M3IDX_PAGE_BYTES};
  put(dir, "pages.npy", "|u1", 2, pshape, tc->pages);
  int64_t bshape[2] = {reqs, tc->kcache.bt_stride};
  put(dir, "block_table.npy", "<i4", 2, bshape, tc->block_table);
  put(dir, "seq_lens.npy", "<i4", 1, &reqs, tc->seq_lens);
  if (b->mode == M3IDX_MODE_PREFILL) {
    int64_t n1 = reqs + 1;
    put(dir, "cu_seqlens_q.npy", "<i4", 1, &n1, tc->cu_seqlens_q);
    put(dir, "context_lens.npy", "<i4", 1, &reqs, tc->context_lens);
  }
  int width = (max + 127) / 128;
  float *scores = malloc(sizeof(float) * (size_t)(H * rows * width + 1));
  int32_t *topk = malloc(sizeof(int32_t) * (size_t)(H * rows * 16 + 1));
  for (int64_t i = 0; i < H * rows * width; i++)
    scores[i] = -INFINITY;
  oracle_scores(&tc->oc, scores, width);
  oracle_pin(&tc->oc, scores, width);
  oracle_topk(&tc->oc, scores, width, topk);
  int64_t tshape[3] = {H, rows, 16}, sshape[3] = {H, rows, width};
  put(dir, "expected_topk.npy", "<i4", 3, tshape, topk);
  put(dir, "expected_scores.npy", "<f4", 3, sshape, scores);
  char path[4096];
  snprintf(path, sizeof path, "%s/args", dir);
  FILE *f = fopen(path, "w");
  if (!f)
    die("cannot write args");
  fprintf(f, "--mode %s --query-dtype %s --scale %.9g --init-blocks %d --local-blocks %d",
          b->mode == M3IDX_MODE_DECODE ? "decode" : "prefill",
          tc->query.dtype == M3IDX_DTYPE_BF16 ? "bf16" : "e4m3", (double)scale, I, L);
  if (b->mode == M3IDX_MODE_DECODE)
    fprintf(f, " --query-len %d", b->query_len);
  fprintf(f, "\n");
  fclose(f);
  free(scores);
  free(topk);
  case_free(tc);
  return 0;
}

static int keys(const char *path, int64_t tokens, uint64_t seed) {
  float *k = malloc(sizeof(float) * (size_t)(tokens * 128 + 1));
  uint64_t rs = seed;
  for (int64_t i = 0; i < tokens * 128; i++) {
    uint64_t r = case_rand(&rs);
    k[i] = ldexpf((float)((int64_t)(r % 20001) - 10000) / 1000.0f, (int)((r >> 32) % 21) - 10);
    if ((r >> 48) % 2000 == 0)
      k[i] = (r >> 60) & 1 ? INFINITY : NAN; /* a non-finite group */
  }
  int64_t shape[2] = {tokens, 128};
  char err[512];
  if (npy_write(path, "<f4", 2, shape, k, err, sizeof err) != 0)
    die(err);
  free(k);
  return 0;
}

/* SPEC section 3's encoder, written here from its definition. */
static unsigned e2m1_nearest_even(float v) {
  static const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float a = fabsf(v);
  unsigned best = 0;
  for (unsigned c = 1; c < 8; c++) {
    float dc = fabsf(a - grid[c]), db = fabsf(a - grid[best]);
    if (dc < db || (dc == db && (c & 1) == 0))
      best = c;
  }
  return best | (signbit(v) ? 8u : 0u);
}

static int expect_pages(const char *in, const char *out) {
  struct npy_array k;
  char err[512];
  if (npy_read(in, "keys", "<f4", 2, &k, err, sizeof err) != 0)
    die(err);
  int64_t tokens = k.shape[0], np = (tokens + 127) / 128;
  uint8_t *pages = calloc((size_t)np * M3IDX_PAGE_BYTES + 1, 1);
  const float *x = k.data;
  for (int64_t p = 0; p < tokens; p++) {
    uint8_t *pg = pages + (p / 128) * M3IDX_PAGE_BYTES;
    int slot = (int)(p % 128);
    for (int g = 0; g < 4; g++) {
      const float *v = x + p * 128 + 32 * g;
      float amax = 0.0f;
      int finite = 1;
      for (int j = 0; j < 32; j++) {
        if (!isfinite(v[j]))
          finite = 0;
        else if (fabsf(v[j]) > amax)
          amax = fabsf(v[j]);
      }
      int e = 0;
      if (!finite)
        e = 255;
      else
        while (e < 254 && (double)amax / ldexp(1.0, e - 127) > 6.0)
          e++;
      pg[8192 + 4 * slot + g] = (uint8_t)e;
      for (int j = 0; j < 32; j++) {
        unsigned code = e == 255 ? 0u : e2m1_nearest_even((float)((double)v[j] / ldexp(1.0, e - 127)));
        int d = 32 * g + j;
        pg[64 * slot + d / 2] |= (uint8_t)(d % 2 ? code << 4 : code);
      }
    }
  }
  int64_t shape[2] = {np, M3IDX_PAGE_BYTES};
  if (npy_write(out, "|u1", 2, shape, pages, err, sizeof err) != 0)
    die(err);
  free(pages);
  npy_free(&k);
  return 0;
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    die("cannot open input");
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)len + 64);
  if (fread(b, 1, (size_t)len, f) != (size_t)len)
    die("cannot read input");
  fclose(f);
  *n = (size_t)len;
  return b;
}

static void spill(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(b, 1, n, f) != n)
    die("cannot write output");
  fclose(f);
}

static void replace_in_header(unsigned char *b, const char *from, const char *to) {
  size_t hlen = (size_t)b[8] | (size_t)b[9] << 8;
  char *h = (char *)b + 10;
  char *p = NULL;
  for (size_t i = 0; i + strlen(from) <= hlen; i++)
    if (!memcmp(h + i, from, strlen(from))) {
      p = h + i;
      break;
    }
  if (!p || strlen(from) != strlen(to))
    die("damage: header text not found");
  memcpy(p, to, strlen(to));
}

static int damage(const char *in, const char *out, const char *kind) {
  size_t n;
  unsigned char *b = slurp(in, &n);
  if (!strcmp(kind, "fortran"))
    replace_in_header(b, "False", "True ");
  else if (!strcmp(kind, "bigendian")) {
    char *d = strstr((char *)b + 10, "'<");
    if (!d)
      die("damage: no little-endian descr");
    d[1] = '>';
  } else if (!strcmp(kind, "f8")) {
    char *d = strstr((char *)b + 10, "'descr': '");
    if (!d)
      die("damage: no descr");
    memcpy(d + 10, "<f8", 3);
  } else if (!strcmp(kind, "truncate"))
    n -= 1;
  else if (!strcmp(kind, "trailing")) {
    b[n] = 0;
    n += 1;
  } else if (!strcmp(kind, "magic"))
    b[1] = 'X';
  else if (!strcmp(kind, "v3"))
    b[6] = 3;
  else if (!strcmp(kind, "4d")) {
    char *s = strstr((char *)b + 10, "'shape': (");
    char *e = s ? strchr(s, ')') : NULL;
    /* (a, b) -> (a, b, 1, 1) needs 6 more characters: take them from the padding */
    size_t hlen = (size_t)b[8] | (size_t)b[9] << 8;
    if (!e)
      die("damage: no shape");
    char *end = (char *)b + 10 + hlen - 1; /* the '\n' */
    memmove(e + 6, e, (size_t)(end - e - 6));
    memcpy(e, ", 1, 1", 6);
  } else if (!strcmp(kind, "twodescr")) {
    /* {'descr': '<i4', ...} -> {'descr': '<i4', 'descr': '<f4', ...}: numpy
       reads the last; 16 more characters come from the padding. */
    char *s = strstr((char *)b + 10, "', ");
    size_t hlen = (size_t)b[8] | (size_t)b[9] << 8;
    if (!s)
      die("damage: no descr");
    s += 3;
    char *end = (char *)b + 10 + hlen - 1;
    memmove(s + 16, s, (size_t)(end - s - 16));
    memcpy(s, "'descr': '<f4', ", 16);
  } else if (!strcmp(kind, "v2")) {
    /* The same array in format 2.0: a 4-byte header length. */
    size_t hlen = (size_t)b[8] | (size_t)b[9] << 8;
    unsigned char *c = malloc(n + 2);
    memcpy(c, b, 8);
    c[6] = 2;
    c[8] = (unsigned char)(hlen & 0xff);
    c[9] = (unsigned char)(hlen >> 8);
    c[10] = c[11] = 0;
    memcpy(c + 12, b + 10, n - 10);
    spill(out, c, n + 2);
    free(c);
    free(b);
    return 0;
  } else
    die("damage: unknown kind");
  spill(out, b, n);
  free(b);
  return 0;
}

static int set_i32(const char *path, long index, long value) {
  size_t n;
  unsigned char *b = slurp(path, &n);
  size_t hlen = (size_t)b[8] | (size_t)b[9] << 8;
  size_t off = 10 + hlen + 4 * (size_t)index;
  if (off + 4 > n)
    die("set-i32: index out of range");
  int32_t v = (int32_t)value;
  memcpy(b + off, &v, 4);
  spill(path, b, n);
  free(b);
  return 0;
}

/* Every field of the structs that the Python package restates. */
#define STRUCT(T) printf("struct %s %zu\n", #T, sizeof(T))
#define FIELD(T, f) printf("field %s.%s %zu %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))
static int abi(void) {
  STRUCT(m3idx_options);
  FIELD(m3idx_options, size), FIELD(m3idx_options, backend), FIELD(m3idx_options, threads);
  FIELD(m3idx_options, device), FIELD(m3idx_options, stream), FIELD(m3idx_options, max_reqs);
  FIELD(m3idx_options, max_model_len), FIELD(m3idx_options, max_rows);
  FIELD(m3idx_options, max_heads), FIELD(m3idx_options, flags);
  STRUCT(m3idx_batch);
  FIELD(m3idx_batch, mode), FIELD(m3idx_batch, num_reqs), FIELD(m3idx_batch, num_heads);
  FIELD(m3idx_batch, num_rows), FIELD(m3idx_batch, max_seq_len), FIELD(m3idx_batch, seq_lens);
  FIELD(m3idx_batch, query_len), FIELD(m3idx_batch, cu_seqlens_q);
  FIELD(m3idx_batch, context_lens);
  STRUCT(m3idx_kcache);
  FIELD(m3idx_kcache, pages), FIELD(m3idx_kcache, num_pages), FIELD(m3idx_kcache, block_table);
  FIELD(m3idx_kcache, bt_stride);
  STRUCT(m3idx_query);
  FIELD(m3idx_query, data), FIELD(m3idx_query, dtype), FIELD(m3idx_query, scale);
  STRUCT(m3idx_verify_options);
  FIELD(m3idx_verify_options, size), FIELD(m3idx_verify_options, order);
  FIELD(m3idx_verify_options, query_rounding), FIELD(m3idx_verify_options, tolerance_rel);
  FIELD(m3idx_verify_options, tolerance_ulps), FIELD(m3idx_verify_options, flags);
  FIELD(m3idx_verify_options, work_map), FIELD(m3idx_verify_options, work_map_capacity);
  STRUCT(m3idx_verify_row);
  FIELD(m3idx_verify_row, verdict), FIELD(m3idx_verify_row, reason);
  FIELD(m3idx_verify_row, slot), FIELD(m3idx_verify_row, block_a);
  FIELD(m3idx_verify_row, block_b), FIELD(m3idx_verify_row, gap);
  STRUCT(m3idx_verify_summary);
  FIELD(m3idx_verify_summary, rows), FIELD(m3idx_verify_summary, exact);
  FIELD(m3idx_verify_summary, equivalent), FIELD(m3idx_verify_summary, wrong);
  FIELD(m3idx_verify_summary, max_score_deviation);
  return 0;
}
#undef STRUCT
#undef FIELD

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "abi"))
    return abi();
  if (argc == 5 && !strcmp(argv[1], "gen"))
    return gen(argv[2], argv[3], strtoull(argv[4], NULL, 10));
  if (argc == 5 && !strcmp(argv[1], "keys"))
    return keys(argv[2], strtoll(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
  if (argc == 4 && !strcmp(argv[1], "expect-pages"))
    return expect_pages(argv[2], argv[3]);
  if (argc == 5 && !strcmp(argv[1], "damage"))
    return damage(argv[2], argv[3], argv[4]);
  if (argc >= 5 && argc <= 7 && !strcmp(argv[1], "zeros")) {
    int64_t shape[3];
    size_t count = 1;
    for (int i = 4; i < argc; i++)
      count *= (size_t)(shape[i - 4] = strtoll(argv[i], NULL, 10));
    void *z = calloc(count * 4 + 1, 1);
    char err[512];
    if (npy_write(argv[2], argv[3], argc - 4, shape, z, err, sizeof err) != 0)
      die(err);
    free(z);
    return 0;
  }
  if (argc == 5 && !strcmp(argv[1], "fill-i32")) {
    int64_t n = strtoll(argv[4], NULL, 10);
    int32_t *v = malloc((size_t)n * 4 + 1), value = (int32_t)strtol(argv[3], NULL, 10);
    char err[512];
    for (int64_t i = 0; v && i < n; i++)
      v[i] = value;
    if (!v || npy_write(argv[2], "<i4", 1, &n, v, err, sizeof err) != 0)
      die(v ? err : "no memory");
    free(v);
    return 0;
  }
  if (argc == 5 && !strcmp(argv[1], "set-i32"))
    return set_i32(argv[2], strtol(argv[3], NULL, 10), strtol(argv[4], NULL, 10));
  fprintf(stderr, "usage: see the comment at the top of cli-helper.c\n");
  return 99;
}
