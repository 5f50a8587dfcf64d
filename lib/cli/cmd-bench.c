/*
 * cmd-bench.c - `m3idx bench': the library measured the way its users
 * judge it.  Every figure is the median of several runs after a warm-up,
 * set against ceilings the same run measures (a STREAM-style read and an
 * fp32 FMA loop on the CPU; a device-to-device copy and an FMA loop on
 * the GPU).  A sample of results is checked byte for byte: the CPU against
 * a 1-thread run, the GPU against the CPU.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench.h"
#include "cli.h"

static const char usage[] =
    "usage: m3idx bench [--quick] [--json] [--backend cpu|hip|all] [--threads N] [--repeats N]\n"
    "                   [--case TEXT]\n"
    "Decode (1/8/64 requests x 8K/128K/1M tokens, query_len 1 and 4, H 1 and 4), prefill\n"
    "(4K and 16K rows over 0/32K/128K context), top-k alone (1K/8K/64K blocks a row) and CPU\n"
    "thread scaling, against the machine's own read bandwidth and FMA peak.  --quick runs a\n"
    "subset in under a minute; --case runs the cases whose name contains TEXT.  See m3idx(1).\n";

struct bench_opts {
  int quick, json, want_cpu, want_hip, threads, repeats;
  const char *only; /* --case: run the cases whose name contains this */
};

/* A case runs when no --case was given or its name contains the text. */
static int wanted(const struct bench_opts *o, const char *name) {
  return o->only == NULL || strstr(name, o->only) != NULL;
}

struct ceilings {
  double cpu_read, cpu_page_read, cpu_fma, gpu_copy, gpu_fma;
};

static struct bench_result *results;
static int nresults, capresults;

static struct bench_result *add_result(void) {
  if (nresults == capresults) {
    capresults = capresults ? 2 * capresults : 64;
    results = realloc(results, sizeof *results * (size_t)capresults);
  }
  memset(&results[nresults], 0, sizeof *results);
  results[nresults].verified = "-";
  return &results[nresults++];
}

/* ---- one CPU measurement ------------------------------------------------ */

struct cpu_call {
  m3idx_context *ctx;
  m3idx_batch batch;
  m3idx_query q;
  m3idx_kcache k;
  float *scores;
  int32_t *topk;
  int64_t stride;
};

static m3idx_status cpu_once(struct cpu_call *c, enum bench_stage stage, int fused) {
  switch (stage) {
  case BENCH_DECODE:
    return fused ? m3idx_index_topk_decode(c->ctx, &c->batch, &c->q, &c->k, 0, 1, NULL, 0,
                                           c->topk, c->scores, c->stride)
                 : m3idx_score_decode(c->ctx, &c->batch, &c->q, &c->k, NULL, 0, c->scores,
                                      c->stride);
  case BENCH_PREFILL:
    return fused ? m3idx_index_topk_prefill(c->ctx, &c->batch, &c->q, &c->k, 0, 1, c->topk,
                                            c->scores, c->stride)
                 : m3idx_score_prefill(c->ctx, &c->batch, &c->q, &c->k, c->scores, c->stride);
  case BENCH_TOPK:
    return m3idx_topk_from_scores(c->ctx, &c->batch, c->scores, c->stride, c->topk);
  }
  return M3IDX_ERR_INVALID_ARGUMENT;
}

/* Median seconds of one call (after a warm-up); the outputs stay in c. */
static int cpu_time(struct cpu_call *c, enum bench_stage stage, int fused, int repeats,
                    double *out) {
  double v[32];
  if (repeats > 31)
    repeats = 31;
  for (int r = 0; r <= repeats; r++) {
    double t0 = cli_now();
    m3idx_status st = cpu_once(c, stage, fused);
    if (st != M3IDX_OK) {
      cli_library_error("bench", st, m3idx_last_error(c->ctx));
      return -1;
    }
    if (r > 0)
      v[r - 1] = cli_now() - t0;
  }
  *out = cli_median(v, repeats);
  return 0;
}

static int cpu_setup(struct cpu_call *c, const struct bench_data *d, const m3idx_batch *b,
                     int threads, uint32_t flags) {
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_CPU;
  o.threads = threads;
  o.max_reqs = b->num_reqs;
  o.max_model_len = b->max_seq_len;
  o.max_rows = b->num_rows;
  o.max_heads = b->num_heads;
  o.flags = flags;
  memset(c, 0, sizeof *c);
  m3idx_status st = m3idx_context_create(&o, &c->ctx);
  if (st != M3IDX_OK) {
    cli_library_error("bench", st, m3idx_last_error(NULL));
    return -1;
  }
  c->batch = *b;
  c->q = (m3idx_query){d->query, M3IDX_DTYPE_BF16, 0.08838835f};
  c->k = (m3idx_kcache){d->pages, d->num_pages, d->block_table, d->bt_stride};
  c->stride = (b->max_seq_len + 127) / 128;
  size_t rows = (size_t)b->num_heads * (size_t)b->num_rows;
  c->scores = calloc(rows * (size_t)c->stride + 1, sizeof(float));
  c->topk = calloc(rows * M3IDX_TOPK + 1, sizeof(int32_t));
  return c->scores && c->topk ? 0 : -1;
}

static void cpu_teardown(struct cpu_call *c) {
  m3idx_context_destroy(c->ctx);
  free(c->scores);
  free(c->topk);
}

/* Bytes equal on every causal score and every top-k slot. */
static int same_outputs(const m3idx_batch *b, int64_t stride, const float *sa, const int32_t *ta,
                        const float *sb, const int32_t *tb) {
  size_t rows = (size_t)b->num_heads * (size_t)b->num_rows;
  if (memcmp(ta, tb, rows * M3IDX_TOPK * sizeof(int32_t)) != 0)
    return 0;
  for (int32_t h = 0; h < b->num_heads; h++)
    for (int32_t r = 0; r < b->num_reqs; r++) {
      int32_t first = b->mode == M3IDX_MODE_DECODE ? r * b->query_len : b->cu_seqlens_q[r];
      int32_t count = b->mode == M3IDX_MODE_DECODE ? b->query_len
                                                   : b->cu_seqlens_q[r + 1] - first;
      for (int32_t i = 0; i < count; i++) {
        int32_t pos = b->mode == M3IDX_MODE_DECODE ? b->seq_lens[r] - b->query_len + i
                                                   : b->context_lens[r] + i;
        int64_t off = ((int64_t)h * b->num_rows + first + i) * stride;
        if (memcmp(sa + off, sb + off, sizeof(float) * (size_t)(pos / 128 + 1)) != 0)
          return 0;
      }
    }
  return 1;
}

/* ---- the work of a batch ------------------------------------------------ */

static double causal_logits(const m3idx_batch *b) {
  double n = 0.0;
  for (int32_t r = 0; r < b->num_reqs; r++) {
    int32_t rows = b->mode == M3IDX_MODE_DECODE ? b->query_len
                                                : b->cu_seqlens_q[r + 1] - b->cu_seqlens_q[r];
    int32_t base = b->mode == M3IDX_MODE_DECODE ? b->seq_lens[r] - b->query_len
                                                : b->context_lens[r];
    for (int32_t i = 0; i < rows; i++)
      n += (double)(base + i + 1);
  }
  return n * b->num_heads;
}

static double keys_read(const m3idx_batch *b) {
  double n = 0.0;
  for (int32_t r = 0; r < b->num_reqs; r++)
    n += (double)b->seq_lens[r];
  return n;
}

/* A result's ceilings (its backend's) and its ratio to them. */
static void apply_ceilings(struct bench_result *r, const struct ceilings *cl) {
  const int gpu = !strcmp(r->backend, "hip");
  r->roofline_bytes_per_s = gpu ? cl->gpu_copy : cl->cpu_read;
  r->peak_flops_per_s = gpu ? cl->gpu_fma : cl->cpu_fma;
  r->page_read_bytes_per_s = gpu ? 0.0 : cl->cpu_page_read;
  r->roofline_ratio = r->roofline_bytes_per_s > 0 ? r->bytes_per_s / r->roofline_bytes_per_s : 0;
}

static void fill(struct bench_result *res, const char *backend, const m3idx_batch *b,
                 enum bench_stage stage, double sec, const struct ceilings *cl) {
  res->backend = backend;
  res->median_s = sec;
  if (stage == BENCH_TOPK) {
    double blocks = 0.0;
    for (int32_t r = 0; r < b->num_reqs; r++)
      blocks += (double)((b->seq_lens[r] + 127) / 128) * b->query_len * b->num_heads;
    res->keys_per_s = blocks / sec; /* scores ranked per second */
    res->bytes_per_s = 4.0 * blocks / sec;
  } else {
    double keys = stage == BENCH_DECODE ? keys_read(b) : causal_logits(b) / b->num_heads;
    res->keys_per_s = keys / sec;
    res->bytes_per_s = keys_read(b) * M3IDX_PAGE_BYTES / 128.0 / sec;
    res->flops_per_s = 2.0 * 128.0 * causal_logits(b) / sec;
  }
  apply_ceilings(res, cl);
}

/* ---- the cases ----------------------------------------------------------- */

struct run_ctx {
  const struct bench_opts *o;
  struct ceilings cl;
  struct bench_gpu *gpu;
  int cpu_threads;
};

/* The ceilings of the backends the run measures; nonzero (and *err) when
 * the GPU's cannot be measured. */
static int measure_ceilings(const struct run_ctx *rc, struct ceilings *cl, char *err, size_t n) {
  memset(cl, 0, sizeof *cl);
  if (rc->o->want_cpu) {
    cli_progress("cpu ceilings");
    const int repeats = rc->o->quick ? 3 : 5;
    cl->cpu_read = bench_cpu_read_bandwidth(rc->cpu_threads, (size_t)1 << 30, repeats);
    cl->cpu_page_read = bench_cpu_page_read_bandwidth(rc->cpu_threads, (size_t)1 << 30, repeats);
    cl->cpu_fma = bench_cpu_fma_peak(rc->cpu_threads);
  }
  return rc->gpu && bench_gpu_ceilings(rc->gpu, &cl->gpu_copy, &cl->gpu_fma, err, n);
}

static double higher(double a, double b) { return a > b ? a : b; }

/* cl becomes the higher of each ceiling's two measurements, and every
 * result's ceilings and ratio follow it. */
static void take_higher_ceilings(struct ceilings *cl, const struct ceilings *again) {
  cl->cpu_read = higher(cl->cpu_read, again->cpu_read);
  cl->cpu_page_read = higher(cl->cpu_page_read, again->cpu_page_read);
  cl->cpu_fma = higher(cl->cpu_fma, again->cpu_fma);
  cl->gpu_copy = higher(cl->gpu_copy, again->gpu_copy);
  cl->gpu_fma = higher(cl->gpu_fma, again->gpu_fma);
  for (int i = 0; i < nresults; i++)
    apply_ceilings(&results[i], cl);
}

static void label(char *out, size_t n, enum bench_stage stage, const m3idx_batch *b, int32_t ctx,
                  int32_t rows) {
  if (stage == BENCH_DECODE)
    snprintf(out, n, "decode %dx%dK q%d h%d", (int)b->num_reqs, (int)(ctx / 1024),
             (int)b->query_len, (int)b->num_heads);
  else if (stage == BENCH_PREFILL)
    snprintf(out, n, "prefill %d rows ctx %dK h%d", (int)rows, (int)(ctx / 1024),
             (int)b->num_heads);
  else
    snprintf(out, n, "topk %d rows x %dK blocks", (int)(b->num_reqs * b->query_len),
             (int)(((ctx + 127) / 128) / 1024));
}

/* Measure one batch on the CPU (and the GPU); verify what is asked. */
static void measure(struct run_ctx *rc, const struct bench_data *d, const m3idx_batch *b,
                    enum bench_stage stage, int cpu, int gpu, int verify_cpu, int verify_gpu,
                    int32_t ctx_len, int32_t rows) {
  char name[80];
  label(name, sizeof name, stage, b, ctx_len, rows);
  if (!wanted(rc->o, name))
    return;
  struct cpu_call c;
  int have_cpu = 0;
  if (cpu || verify_gpu) {
    if (cpu_setup(&c, d, b, rc->cpu_threads, 0) != 0)
      return;
    have_cpu = 1;
    if (stage == BENCH_TOPK)
      memcpy(c.scores, d->scores, sizeof(float) * (size_t)b->num_heads * b->num_rows * c.stride);
  }
  if (cpu) {
    double s = 0.0, f = 0.0;
    cli_progress("cpu: %s", name);
    if (cpu_time(&c, stage, 0, rc->o->repeats, &s) != 0)
      goto done;
    if (stage != BENCH_TOPK && cpu_time(&c, stage, 1, rc->o->repeats, &f) != 0)
      goto done;
    struct bench_result *r = add_result();
    snprintf(r->name, sizeof r->name, "%s", name);
    fill(r, "cpu", b, stage, s, &rc->cl);
    if (verify_cpu) {
      struct cpu_call one;
      if (cpu_setup(&one, d, b, 1, 0) == 0) {
        if (stage == BENCH_TOPK)
          memcpy(one.scores, c.scores, sizeof(float) * (size_t)b->num_heads * b->num_rows * c.stride);
        cpu_once(&one, stage, 1);
        r->verified = same_outputs(b, c.stride, c.scores, c.topk, one.scores, one.topk)
                          ? "yes" : "NO";
        cpu_teardown(&one);
      }
    }
    if (stage != BENCH_TOPK) {
      struct bench_result *rf = add_result();
      snprintf(rf->name, sizeof rf->name, "%s fused", name);
      fill(rf, "cpu", b, stage, f, &rc->cl);
      rf->verified = r->verified;
    }
  }
  if (gpu && rc->gpu) {
    double s = 0.0, f = 0.0;
    char err[512];
    size_t nrow = (size_t)b->num_heads * b->num_rows;
    int64_t stride = (b->max_seq_len + 127) / 128;
    int32_t *gt = verify_gpu ? malloc(nrow * M3IDX_TOPK * 4 + 1) : NULL;
    float *gs = verify_gpu ? malloc(nrow * (size_t)stride * 4 + 1) : NULL;
    cli_progress("hip: %s", name);
    if (bench_gpu_run(rc->gpu, d, b, stage, rc->o->repeats, &s, &f, gt, gs, err, sizeof err) != 0) {
      cli_error("bench", "hip: %s: %s", name, err);
    } else {
      struct bench_result *r = add_result();
      snprintf(r->name, sizeof r->name, "%s", name);
      fill(r, "hip", b, stage, s, &rc->cl);
      if (verify_gpu && have_cpu) {
        if (stage == BENCH_TOPK) {
          cpu_once(&c, BENCH_TOPK, 0); /* the same scores: the same top-k? */
          r->verified = memcmp(gt, c.topk, nrow * M3IDX_TOPK * 4) == 0 ? "yes" : "NO";
        } else {
          cpu_once(&c, stage, 1);
          r->verified = same_outputs(b, stride, gs, gt, c.scores, c.topk) ? "yes" : "NO";
        }
      }
      if (stage != BENCH_TOPK) {
        struct bench_result *rf = add_result();
        snprintf(rf->name, sizeof rf->name, "%s fused", name);
        fill(rf, "hip", b, stage, f, &rc->cl);
        rf->verified = r->verified;
      }
    }
    free(gt);
    free(gs);
  }
done:
  if (have_cpu)
    cpu_teardown(&c);
}

static void decode_cases(struct run_ctx *rc) {
  static const int32_t reqs[] = {1, 8, 64};
  static const int32_t ctxs[] = {8192, 131072, 1048576};
  const struct bench_opts *o = rc->o;
  for (int ri = 0; ri < 3; ri++)
    for (int ci = 0; ci < 3; ci++) {
      int32_t n = reqs[ri], L = ctxs[ci];
      int headline = n == 8 && L == 131072;
      int cpu_quick = headline || (L == 8192 && n != 8);
      int cpu = o->want_cpu && (o->quick ? cpu_quick : 1);
      int gpu = o->want_hip && (o->quick ? (headline || (n == 64 && L == 131072) ||
                                            (n == 1 && L == 1048576))
                                         : 1);
      if (!cpu && !gpu)
        continue;
      int some = 0;
      for (int q = 1; q <= 4; q += 3)
        for (int h = 1; h <= 4; h += 3) {
          char nm[80];
          snprintf(nm, sizeof nm, "decode %dx%dK q%d h%d", (int)n, (int)(L / 1024), q, h);
          some |= wanted(o, nm);
        }
      if (!some)
        continue;
      int32_t *lens = malloc(sizeof(int32_t) * (size_t)n);
      for (int32_t r = 0; r < n; r++)
        lens[r] = L - (r * 37) % 101; /* not all equal, all near L */
      struct bench_data d;
      cli_progress("data: %d x %d tokens", (int)n, (int)L);
      if (bench_data_make(&d, n, lens, n * 4, 4, 77u + (uint64_t)(ri * 3 + ci)) != 0) {
        cli_error("bench", "no memory for %d x %d tokens", (int)n, (int)L);
        free(lens);
        continue;
      }
      for (int q = 1; q <= 4; q += 3)
        for (int h = 1; h <= 4; h += 3) {
          if (o->quick && !headline && (q != 1 || h != 1))
            continue;
          m3idx_batch b = {.mode = M3IDX_MODE_DECODE, .num_reqs = n, .num_heads = h,
                           .num_rows = n * q, .max_seq_len = d.max_seq_len,
                           .seq_lens = d.seq_lens, .query_len = q};
          int verify_cpu = cpu && headline && q == 1 && h == 1;
          int verify_gpu = gpu && (double)n * L <= 8.0 * 131072;
          measure(rc, &d, &b, BENCH_DECODE, cpu, gpu, verify_cpu, verify_gpu, L, n * q);
        }
      bench_data_free(&d);
      free(lens);
    }
}

static void prefill_cases(struct run_ctx *rc) {
  static const int32_t rows_full[] = {4096, 16384};
  static const int32_t ctxs[] = {0, 32768, 131072};
  const struct bench_opts *o = rc->o;
  for (int ri = 0; ri < 2; ri++)
    for (int ci = 0; ci < 3; ci++) {
      int32_t R = rows_full[ri], C = ctxs[ci];
      /* The CPU runs the same contexts with fewer rows in --quick. */
      int gpu = o->want_hip && (!o->quick || (R == 4096 && C == 32768));
      int cpu = o->want_cpu && (!o->quick || (ri == 0 && ci < 2));
      for (int pass = 0; pass < 2; pass++) {
        int on_cpu = pass == 0 ? cpu : 0, on_gpu = pass == 1 ? gpu : 0;
        if (!on_cpu && !on_gpu)
          continue;
        int32_t rows = on_cpu && o->quick ? 512 : R;
        int32_t seq = C + rows;
        char nm[80];
        snprintf(nm, sizeof nm, "prefill %d rows ctx %dK h1", (int)rows, (int)(C / 1024));
        if (!wanted(o, nm))
          continue;
        struct bench_data d;
        if (bench_data_make(&d, 1, &seq, rows, 1, 500u + (uint64_t)(ri * 3 + ci)) != 0)
          continue;
        d.cu_seqlens_q[0] = 0;
        d.cu_seqlens_q[1] = rows;
        d.context_lens[0] = C;
        m3idx_batch b = {.mode = M3IDX_MODE_PREFILL, .num_reqs = 1, .num_heads = 1,
                         .num_rows = rows, .max_seq_len = seq, .seq_lens = d.seq_lens,
                         .cu_seqlens_q = d.cu_seqlens_q, .context_lens = d.context_lens};
        measure(rc, &d, &b, BENCH_PREFILL, on_cpu, on_gpu, on_cpu && ci == 0 && ri == 0,
                on_gpu && ri == 0 && ci <= 1, C, rows);
        bench_data_free(&d);
      }
    }
}

static void topk_cases(struct run_ctx *rc) {
  static const int32_t blocks[] = {1024, 8192, 65536};
  const struct bench_opts *o = rc->o;
  for (int bi = 0; bi < 3; bi++) {
    if (o->quick && bi == 2)
      continue;
    /* A decode step of 64 requests (one row, one head each): only scores
       are read, so the data is the scores themselves, with ties. */
    int32_t n = 64, nb = blocks[bi], L = nb * 128;
    char nm[80];
    snprintf(nm, sizeof nm, "topk %d rows x %dK blocks", (int)n, (int)(nb / 1024));
    if (!wanted(o, nm))
      continue;
    struct bench_data d;
    memset(&d, 0, sizeof d);
    d.num_reqs = n;
    d.seq_lens = malloc(sizeof(int32_t) * (size_t)n);
    d.scores = malloc(sizeof(float) * (size_t)n * (size_t)nb);
    if (!d.seq_lens || !d.scores) {
      bench_data_free(&d);
      continue;
    }
    for (int32_t r = 0; r < n; r++)
      d.seq_lens[r] = L;
    uint64_t z = 0x9e3779b97f4a7c15ull * (uint64_t)(bi + 1);
    for (size_t i = 0; i < (size_t)n * (size_t)nb; i++) {
      z ^= z << 13;
      z ^= z >> 7;
      z ^= z << 17;
      d.scores[i] = (float)(z % 100000) / 1000.0f; /* ties are common */
    }
    m3idx_batch b = {.mode = M3IDX_MODE_DECODE, .num_reqs = n, .num_heads = 1, .num_rows = n,
                     .max_seq_len = L, .seq_lens = d.seq_lens, .query_len = 1};
    measure(rc, &d, &b, BENCH_TOPK, o->want_cpu, o->want_hip, 0, o->want_hip, L, n);
    bench_data_free(&d);
  }
}

static void scaling_cases(struct run_ctx *rc) {
  int32_t n = 8, L = 131072;
  if (!wanted(rc->o, "scaling decode 8x128K"))
    return;
  int32_t lens[8];
  for (int r = 0; r < n; r++)
    lens[r] = L - (r * 37) % 101;
  struct bench_data d;
  if (bench_data_make(&d, n, lens, n, 1, 1234u) != 0)
    return;
  m3idx_batch b = {.mode = M3IDX_MODE_DECODE, .num_reqs = n, .num_heads = 1, .num_rows = n,
                   .max_seq_len = d.max_seq_len, .seq_lens = d.seq_lens, .query_len = 1};
  int counts[4] = {1, 2, rc->cpu_threads, 0}, nc = rc->cpu_threads > 2 ? 3 : 2;
  float *first_s = NULL;
  int32_t *first_t = NULL;
  for (int i = 0; i <= nc; i++) {
    int threads = i < nc ? counts[i] : rc->cpu_threads;
    uint32_t flags = i < nc ? 0 : M3IDX_FLAG_NO_NUMA;
    struct cpu_call c;
    if (cpu_setup(&c, &d, &b, threads, flags) != 0)
      break;
    double s;
    cli_progress("cpu: scaling, %d threads%s", threads, flags ? ", no NUMA placement" : "");
    if (cpu_time(&c, BENCH_DECODE, 0, rc->o->repeats, &s) == 0) {
      struct bench_result *r = add_result();
      snprintf(r->name, sizeof r->name, "scaling decode 8x128K %d thread%s%s", threads,
               threads == 1 ? "" : "s", flags ? " numa off" : "");
      fill(r, "cpu", &b, BENCH_DECODE, s, &rc->cl);
      cpu_once(&c, BENCH_DECODE, 1);
      if (first_s == NULL) {
        size_t nb = (size_t)n * (size_t)c.stride;
        first_s = malloc(nb * 4);
        first_t = malloc((size_t)n * M3IDX_TOPK * 4);
        memcpy(first_s, c.scores, nb * 4);
        memcpy(first_t, c.topk, (size_t)n * M3IDX_TOPK * 4);
        r->verified = "yes"; /* the reference the others are checked against */
      } else {
        r->verified = same_outputs(&b, c.stride, first_s, first_t, c.scores, c.topk) ? "yes" : "NO";
      }
    }
    cpu_teardown(&c);
  }
  free(first_s);
  free(first_t);
  bench_data_free(&d);
}

/* ---- output ------------------------------------------------------------ */

static void print_table(const struct ceilings *cl, const char *gpu_name, int cpu_threads) {
  printf("m3idx %s bench\n", m3idx_version());
  if (cl->cpu_read > 0)
    printf("cpu ceilings (%d threads): read %.1f GB/s (8704-byte pages in shuffled order, as\n"
           "  decode reads them: %.1f GB/s), fp32 FMA %.1f GFLOP/s\n",
           cpu_threads, cl->cpu_read / 1e9, cl->cpu_page_read / 1e9, cl->cpu_fma / 1e9);
  if (gpu_name)
    printf("gpu ceilings (%s): copy %.1f GB/s (read + write), fp32 FMA %.1f TFLOP/s\n", gpu_name,
           cl->gpu_copy / 1e9, cl->gpu_fma / 1e12);
  printf("\n%-40s %-4s %11s %10s %9s %7s %10s %7s %s\n", "case", "", "median", "Mkeys/s",
         "GB/s", "roof", "GFLOP/s", "peak", "same bytes");
  for (int i = 0; i < nresults; i++) {
    const struct bench_result *r = &results[i];
    char t[32];
    if (r->median_s < 1e-3)
      snprintf(t, sizeof t, "%.2f us", r->median_s * 1e6);
    else
      snprintf(t, sizeof t, "%.3f ms", r->median_s * 1e3);
    printf("%-40s %-4s %11s %10.1f %9.2f %6.2f%% %10.1f %6.2f%% %s\n", r->name, r->backend, t,
           r->keys_per_s / 1e6, r->bytes_per_s / 1e9, 100.0 * r->roofline_ratio,
           r->flops_per_s / 1e9,
           r->peak_flops_per_s > 0 ? 100.0 * r->flops_per_s / r->peak_flops_per_s : 0.0,
           r->verified);
  }
}

static void print_json(void) {
  printf("[\n");
  for (int i = 0; i < nresults; i++) {
    const struct bench_result *r = &results[i];
    printf("  {\"name\": \"%s\", \"backend\": \"%s\", \"median_s\": %.9g, \"keys_per_s\": %.6g, "
           "\"bytes_per_s\": %.6g, \"roofline_bytes_per_s\": %.6g, \"roofline_ratio\": %.4f, "
           "\"flops_per_s\": %.6g, \"peak_flops_per_s\": %.6g, \"peak_ratio\": %.4f, "
           "\"page_read_bytes_per_s\": %.6g, \"verified\": \"%s\"}%s\n",
           r->name, r->backend, r->median_s, r->keys_per_s, r->bytes_per_s,
           r->roofline_bytes_per_s, r->roofline_ratio, r->flops_per_s, r->peak_flops_per_s,
           r->peak_flops_per_s > 0 ? r->flops_per_s / r->peak_flops_per_s : 0.0,
           r->page_read_bytes_per_s, r->verified,
           i + 1 < nresults ? "," : "");
  }
  printf("]\n");
}

int cli_bench(int argc, char **argv) {
  static const struct option opts[] = {{"quick", no_argument, 0, 'q'},
                                       {"json", no_argument, 0, 'j'},
                                       {"backend", required_argument, 0, 'b'},
                                       {"threads", required_argument, 0, 't'},
                                       {"repeats", required_argument, 0, 'r'},
                                       {"case", required_argument, 0, 'c'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  struct bench_opts o = {.want_cpu = 1, .want_hip = 1, .repeats = 5};
  int c;
  int32_t v;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'q': o.quick = 1; break;
    case 'j': o.json = 1; break;
    case 'b':
      if (!strcmp(optarg, "cpu"))
        o.want_hip = 0;
      else if (!strcmp(optarg, "hip"))
        o.want_cpu = 0;
      else if (strcmp(optarg, "all") != 0) {
        cli_error("bench", "--backend '%s' is not cpu, hip or all", optarg);
        return CLI_EXIT_USAGE;
      }
      break;
    case 't':
      if (cli_parse_int(optarg, 1, 4096, &v) != 0) {
        cli_error("bench", "--threads '%s' is not an integer in [1, 4096]", optarg);
        return CLI_EXIT_USAGE;
      }
      o.threads = v;
      break;
    case 'r':
      if (cli_parse_int(optarg, 1, 31, &v) != 0) {
        cli_error("bench", "--repeats '%s' is not an integer in [1, 31]", optarg);
        return CLI_EXIT_USAGE;
      }
      o.repeats = v;
      break;
    case 'c': o.only = optarg; break;
    case 'h': fputs(usage, stdout); return 0;
    default:
      cli_error("bench", "unknown or incomplete option '%s'\n%s", argv[optind - 1], usage);
      return CLI_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    cli_error("bench", "unexpected argument '%s'", argv[optind]);
    return CLI_EXIT_USAGE;
  }
  if (o.quick && o.repeats > 3)
    o.repeats = 3;
  struct run_ctx rc = {.o = &o};
#ifdef _OPENMP
  rc.cpu_threads = o.threads ? o.threads : omp_get_max_threads();
#else
  rc.cpu_threads = 1;
#endif
  char err[512];
  if (o.want_hip) {
    rc.gpu = bench_gpu_open(err, sizeof err);
    if (!rc.gpu) {
      if (!o.want_cpu) {
        cli_error("bench", "the HIP backend is unavailable: %s", err);
        return CLI_EXIT_FAILURE;
      }
      fprintf(stderr, "m3idx bench: hip skipped: %s\n", err);
      o.want_hip = 0;
    }
  }
  if (measure_ceilings(&rc, &rc.cl, err, sizeof err)) {
    cli_error("bench", "gpu ceilings: %s", err);
    return CLI_EXIT_FAILURE;
  }
  decode_cases(&rc);
  prefill_cases(&rc);
  topk_cases(&rc);
  if (o.want_cpu)
    scaling_cases(&rc);
  /* The ceilings again, once the cases have run: each ratio is against the
     higher of a ceiling's two measurements, so that a slow moment of a
     shared machine when the run began does not flatter it (on the 2-core
     VM the plain read has measured 40 GB/s at a run's start with decode
     reading 54 right after, and 80 in a run minutes later). */
  struct ceilings again;
  if (measure_ceilings(&rc, &again, err, sizeof err)) {
    cli_error("bench", "gpu ceilings: %s", err);
    return CLI_EXIT_FAILURE;
  }
  take_higher_ceilings(&rc.cl, &again);
  cli_progress_done();
  if (o.json)
    print_json();
  else
    print_table(&rc.cl, rc.gpu ? bench_gpu_name(rc.gpu) : NULL, rc.cpu_threads);
  int bad = 0;
  for (int i = 0; i < nresults; i++)
    bad |= !strcmp(results[i].verified, "NO");
  bench_gpu_close(rc.gpu);
  free(results);
  if (bad)
    cli_error("bench", "some results differ from the reference (\"NO\" above)");
  return bad ? CLI_EXIT_FAILURE : 0;
}
