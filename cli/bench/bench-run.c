/*
 * bench-run.c - the bench's one runner: every case of the table that the
 * options select, on each engine its flags name, timed, set against the
 * ceilings measured before and after the cases, and sampled byte for byte
 * where the table says (the CPU against a 1-thread run, the GPU against
 * the CPU).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench.h"
#include "cli.h"

enum { CPU, GPU };
static const struct bench_engine *const engines[2] = {&bench_engine_cpu, &bench_engine_gpu};

struct runner {
  const struct bench_opts *o;
  struct bench_report *rep;
  void *engine[2]; /* the CPU's is always open: it is the GPU's reference */
  int want[2];     /* the backends whose figures the run reports */
  int threads;     /* the CPU's */
  /* The data of the last case, kept while the next case shares it. */
  struct synth data;
  struct bench_case data_of;
  int have_data;
};

/* Does the case run on engine e in this run? */
static int runs_on(const struct runner *rn, const struct bench_case *c, int e) {
  unsigned full = e == CPU ? BENCH_CPU : BENCH_GPU;
  unsigned quick = e == CPU ? BENCH_CPU_QUICK : BENCH_GPU_QUICK;
  return rn->want[e] && (c->flags & (rn->o->quick ? quick : full)) != 0;
}

/* Cases share data when they differ only in the rows and heads they read
   (decode data holds 4 rows a request and 4 heads). */
static int same_data(const struct bench_case *a, const struct bench_case *b) {
  return a->stage == b->stage && a->reqs == b->reqs && a->tokens == b->tokens &&
         a->seed == b->seed && a->pages == b->pages && (a->stage == BENCH_DECODE || (a->rows == b->rows &&
                                                            a->heads == b->heads &&
                                                            a->query_len == b->query_len));
}

static const struct synth *case_data(struct runner *rn, const struct bench_case *c) {
  if (rn->have_data && same_data(&rn->data_of, c))
    return &rn->data;
  if (rn->have_data)
    synth_free(&rn->data);
  rn->have_data = 0;
  int32_t *lens = malloc(sizeof(int32_t) * (size_t)c->reqs);
  if (lens == NULL)
    return NULL;
  struct synth_spec spec = {.seed = c->seed, .num_reqs = c->reqs, .seq_lens = lens};
  switch (c->stage) {
  case BENCH_DECODE: /* lengths not all equal, all near the case's */
    for (int32_t r = 0; r < c->reqs; r++)
      lens[r] = c->tokens - (r * 37) % 101;
    spec.style = c->pages;
    spec.num_heads = 4;
    spec.query_len = 4;
    break;
  case BENCH_PREFILL:
    lens[0] = c->tokens + c->rows;
    spec.style = c->pages;
    spec.num_heads = c->heads;
    spec.prefill_chunk = c->rows;
    break;
  case BENCH_TOPK:
    for (int32_t r = 0; r < c->reqs; r++)
      lens[r] = c->tokens;
    spec.style = SYNTH_SCORES;
    spec.num_heads = c->heads;
    spec.query_len = c->query_len;
    break;
  }
  cli_progress("data: %d x %d tokens", (int)c->reqs, (int)lens[0]);
  int bad = synth_make(&rn->data, &spec);
  free(lens);
  if (bad)
    return NULL;
  rn->data_of = *c;
  rn->have_data = 1;
  return &rn->data;
}

static void case_job(const struct bench_case *c, const struct synth *d, struct bench_job *job) {
  memset(job, 0, sizeof *job);
  job->data = d;
  job->stage = c->stage;
  job->threads = c->threads;
  job->flags = c->flags & BENCH_NUMA_OFF ? M3IDX_FLAG_NO_NUMA : 0;
  if (c->stage == BENCH_PREFILL) {
    synth_prefill_batch(d, &job->batch);
  } else {
    synth_decode_batch(d, &job->batch);
    job->batch.query_len = c->query_len;
    job->batch.num_rows = c->reqs * c->query_len;
  }
  job->batch.num_heads = c->heads;
}

/* ---- what a batch is worth -------------------------------------------- */

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

static void figures(struct bench_result *res, const struct bench_job *job,
                    const struct bench_timing *t) {
  const m3idx_batch *b = &job->batch;
  const double sec = t->median_s;
  res->median_s = sec;
  res->spread = t->spread;
  if (t->unsteady)
    res->unreliable = "unsteady";
  if (job->stage == BENCH_TOPK) {
    double blocks = 0.0;
    for (int32_t r = 0; r < b->num_reqs; r++)
      blocks += (double)synth_blocks_of(b->seq_lens[r]) * b->query_len * b->num_heads;
    res->keys_per_s = blocks / sec; /* scores ranked per second */
    res->bytes_per_s = 4.0 * blocks / sec;
  } else {
    double keys = job->stage == BENCH_DECODE ? keys_read(b) : causal_logits(b) / b->num_heads;
    res->keys_per_s = keys / sec;
    res->bytes_per_s = keys_read(b) * M3IDX_PAGE_BYTES / 128.0 / sec;
    res->flops_per_s = 2.0 * 128.0 * causal_logits(b) / sec;
  }
}

/* ---- sampling --------------------------------------------------------- */

/* Bytes equal on every causal score (scores may be NULL: top-k alone) and
   every top-k slot. */
static int same_outputs(const m3idx_batch *b, const float *sa, const int32_t *ta,
                        const float *sb, const int32_t *tb) {
  const int64_t stride = synth_blocks_of(b->max_seq_len);
  size_t rows = (size_t)b->num_heads * (size_t)b->num_rows;
  if (memcmp(ta, tb, rows * M3IDX_TOPK * sizeof(int32_t)) != 0)
    return 0;
  if (sa == NULL || sb == NULL)
    return sa == sb;
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

/* "yes" or "NO": the job's outputs on engine e against the CPU's with
   `threads' threads; NULL when the reference could not be run. */
static const char *sample(struct runner *rn, int e, void *job, const struct bench_job *spec,
                          int threads) {
  char err[512];
  const float *s, *rs;
  const int32_t *t, *rt;
  struct bench_job ref = *spec;
  ref.threads = threads;
  void *rj = engines[CPU]->setup(rn->engine[CPU], &ref, err, sizeof err);
  const char *verdict = NULL;
  if (rj != NULL && engines[e]->outputs(job, &s, &t, err, sizeof err) == 0 &&
      engines[CPU]->outputs(rj, &rs, &rt, err, sizeof err) == 0)
    verdict = same_outputs(&spec->batch, s, t, rs, rt) ? "yes" : "NO";
  else
    cli_error("bench", "sampling: %s", err);
  engines[CPU]->teardown(rj);
  return verdict;
}

/* ---- verifying ---------------------------------------------------------- */

/* The top-k of scores (pinned as the fused call pins them) on the CPU. */
static int topk_of(const m3idx_batch *b, const float *scores, int64_t stride, int32_t *ids,
                   char *err, size_t n) {
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_CPU; /* the arrays are host memory */
  o.max_reqs = b->num_reqs;
  o.max_model_len = b->max_seq_len;
  o.max_rows = b->num_rows;
  o.max_heads = b->num_heads;
  m3idx_context *ctx = NULL;
  const size_t count = (size_t)b->num_heads * (size_t)b->num_rows * (size_t)stride;
  float *pinned = malloc(sizeof(float) * count + 1);
  int rc = -1;
  if (pinned != NULL && m3idx_context_create(&o, &ctx) == M3IDX_OK) {
    memcpy(pinned, scores, sizeof(float) * count);
    rc = m3idx_pin_forced_blocks(ctx, b, 0, 1, pinned, stride) == M3IDX_OK &&
                 m3idx_topk_from_scores(ctx, b, pinned, stride, ids) == M3IDX_OK
             ? 0
             : -1;
  }
  if (rc != 0)
    snprintf(err, n, "the candidate's top-k: %s", ctx ? m3idx_last_error(ctx) : "no memory");
  m3idx_context_destroy(ctx);
  free(pinned);
  return rc;
}

/* Time m3idx_verify_topk of a near candidate (the fused call's scores one
   ulp off, and their top-k): its ids and scores for the verdicts (t[0]),
   its ids alone (t[1]), its ids and scores with the largest deviation
   (t[2]): "yes" when every row came out exact or equivalent each time,
   as it must, "NO" else; NULL on a failure (err says). */
static const char *near_candidate_verified(const struct bench_engine *en, void *j,
                                           const struct bench_job *job, int repeats,
                                           struct bench_timing t[3], char *err, size_t n) {
  const float *s;
  const int32_t *ids;
  const size_t rows = (size_t)job->batch.num_heads * (size_t)job->batch.num_rows;
  const size_t count = rows * (size_t)synth_blocks_of(job->batch.max_seq_len);
  if (en->outputs(j, &s, &ids, err, n) != 0)
    return NULL;
  float *near = malloc(sizeof(float) * count + 1);
  if (near == NULL) {
    snprintf(err, n, "no memory for the candidate");
    return NULL;
  }
  int32_t *near_ids = malloc(sizeof(int32_t) * rows * M3IDX_TOPK + 1);
  memcpy(near, s, sizeof(float) * count);
  bench_near_candidate(near, count, 0x5eed);
  static const enum bench_mode modes[3] = {BENCH_VERIFY_CALL, BENCH_VERIFY_IDS,
                                           BENCH_VERIFY_MAX_DEV};
  m3idx_verify_summary sum[3] = {{0}, {0}, {0}};
  int rc = near_ids == NULL ? -1
           : topk_of(&job->batch, near, (int64_t)(count / rows), near_ids, err, n);
  for (int k = 0; k < 3 && rc == 0; k++) {
    rc = en->set_candidate(j, near_ids, near, &sum[k], err, n);
    if (rc == 0)
      rc = en->time(j, modes[k], repeats, &t[k], err, n);
  }
  free(near);
  free(near_ids);
  if (rc != 0)
    return NULL;
  for (int k = 0; k < 3; k++)
    if (sum[k].rows != (int64_t)rows || sum[k].wrong != 0)
      return "NO";
  return "yes";
}

/* ---- one case on one engine ------------------------------------------- */

static void run_case(struct runner *rn, const struct bench_case *c, const char *name, int e,
                     const struct synth *d) {
  const struct bench_engine *en = engines[e];
  struct bench_job job;
  char err[512];
  case_job(c, d, &job);
  cli_progress("%s: %s", en->name, name);
  void *j = en->setup(rn->engine[e], &job, err, sizeof err);
  /* Top-k alone has no fused call; a scaling case reports the score alone. */
  const int stages = c->stage == BENCH_TOPK || (c->flags & BENCH_SCALING) ? 1 : 2;
  struct bench_timing score, fused, verify[3];
  if (j == NULL || en->time(j, BENCH_SCORE_ONLY, rn->o->repeats, &score, err, sizeof err) != 0 ||
      (stages == 2 && en->time(j, BENCH_FUSED, rn->o->repeats, &fused, err, sizeof err) != 0)) {
    cli_error("bench", "%s: %s: %s", en->name, name, err);
    en->teardown(j);
    return;
  }
  const char *verdicts = NULL; /* a verify line: every row explained */
  if (c->flags & BENCH_VERIFY && stages == 2) {
    verdicts = near_candidate_verified(en, j, &job, rn->o->repeats, verify, err, sizeof err);
    if (verdicts == NULL) {
      cli_error("bench", "%s: %s verify: %s", en->name, name, err);
      en->teardown(j);
      return;
    }
  }
  const char *verified = "-";
  if (c->flags & (e == CPU ? BENCH_SAMPLE_CPU : BENCH_SAMPLE_GPU)) {
    const char *v = sample(rn, e, j, &job, e == CPU ? 1 : 0);
    verified = v ? v : "-";
  }
  en->teardown(j);
  static const char *const suffix[] = {"", " fused", " verify", " verify ids",
                                        " verify dev"};
  for (int f = 0; f < stages + 3 * (verdicts != NULL); f++) {
    struct bench_result *r = bench_report_add(rn->rep);
    if (r == NULL)
      return;
    snprintf(r->name, sizeof r->name, "%s%s", name, suffix[f]);
    r->backend = en->name;
    r->verified = f >= 2 ? verdicts : verified;
    figures(r, &job, f >= 2 ? &verify[f - 2] : f ? &fused : &score);
    if (f >= 2)
      r->of_fused = verify[f - 2].median_s / fused.median_s;
  }
}

/* ---- the run ------------------------------------------------------------ */

static int measure_ceilings(struct runner *rn, struct bench_ceilings out[2], char *err,
                            size_t n) {
  memset(out, 0, 2 * sizeof *out);
  for (int e = 0; e < 2; e++)
    if (rn->want[e] && engines[e]->ceilings(rn->engine[e], rn->o->quick, &out[e], err, n))
      return -1;
  return 0;
}

static double higher(double a, double b) { return a > b ? a : b; }
static double moved(double a, double b) {
  double lo = a < b ? a : b;
  return lo > 0 ? higher(a, b) / lo - 1.0 : 0.0;
}

/* Each ceiling becomes the higher of its two measurements (a slow moment
   of a shared machine when the run began must not flatter a ratio); each
   result's ratios follow, and are marked when they cannot be right. */
static void settle_ceilings(struct bench_report *rep, const struct bench_ceilings before[2],
                            const struct bench_ceilings after[2]) {
  for (int e = 0; e < 2; e++) {
    struct bench_ceilings *c = &rep->ceilings[e];
    c->bytes_per_s = higher(before[e].bytes_per_s, after[e].bytes_per_s);
    c->page_bytes_per_s = higher(before[e].page_bytes_per_s, after[e].page_bytes_per_s);
    c->flops_per_s = higher(before[e].flops_per_s, after[e].flops_per_s);
    rep->ceiling_moved[e] = higher(moved(before[e].bytes_per_s, after[e].bytes_per_s),
                                   moved(before[e].flops_per_s, after[e].flops_per_s));
    if (e == GPU)
      rep->ceiling_moved[e] = higher(rep->ceiling_moved[e], moved(before[e].page_bytes_per_s,
                                                                  after[e].page_bytes_per_s));
  }
  for (int i = 0; i < rep->count; i++) {
    struct bench_result *r = &rep->results[i];
    const int e = strcmp(r->backend, "hip") == 0 ? GPU : CPU;
    const struct bench_ceilings *c = &rep->ceilings[e];
    /* The roof: the CPU's plain read, the GPU's read-only kernel. */
    const double roof = e == GPU ? c->page_bytes_per_s : c->bytes_per_s;
    r->roofline_bytes_per_s = roof;
    r->peak_flops_per_s = c->flops_per_s;
    r->page_read_bytes_per_s = c->page_bytes_per_s;
    r->roofline_ratio = roof > 0 ? r->bytes_per_s / roof : 0;
    if (r->unreliable)
      continue;
    if (rep->ceiling_moved[e] > CLI_UNSTEADY_PERCENT / 100.0)
      r->unreliable = "ceilings moved";
    else if (r->roofline_ratio > 1.0) /* an integer kernel may pass the FMA peak */
      r->unreliable = "above a ceiling";
  }
}

/* Has an earlier case of the table the same name (a scaling case whose
   thread count is the run's)? */
static int named_before(const struct runner *rn, size_t i, const char *name) {
  char other[80];
  for (size_t k = 0; k < i; k++) {
    bench_case_name(&bench_cases[k], rn->threads, other, sizeof other);
    if (strcmp(other, name) == 0)
      return 1;
  }
  return 0;
}

/* The names of the cases this run could take, for --case without a match. */
static void list_cases(const struct runner *rn) {
  char name[80];
  fprintf(stderr, "m3idx bench: the cases of a%s run:\n", rn->o->quick ? " --quick" : " full");
  for (size_t i = 0; i < bench_ncases; i++) {
    bench_case_name(&bench_cases[i], rn->threads, name, sizeof name);
    if ((runs_on(rn, &bench_cases[i], CPU) || runs_on(rn, &bench_cases[i], GPU)) &&
        !named_before(rn, i, name))
      fprintf(stderr, "  %s\n", name);
  }
}

int bench_run(const struct bench_opts *o, struct bench_report *rep) {
  struct runner rn = {.o = o, .rep = rep};
  char err[512], name[80];
#ifdef _OPENMP
  rn.threads = o->threads ? o->threads : omp_get_max_threads();
#else
  rn.threads = 1;
#endif
  memset(rep, 0, sizeof *rep);
  rep->cpu_threads = rn.threads;
  int rc = 0;
  rn.want[CPU] = o->want_cpu;
  rn.want[GPU] = o->want_hip;
  for (int e = 0; e < 2; e++) {
    if (e == GPU && !o->want_hip)
      continue;
    rn.engine[e] = engines[e]->open(rn.threads, err, sizeof err);
    if (rn.engine[e] == NULL) {
      rn.want[e] = 0;
      if (e == GPU && o->want_cpu) {
        fprintf(stderr, "m3idx bench: hip skipped: %s\n", err);
        continue;
      }
      cli_error("bench", "the %s backend is unavailable: %s", engines[e]->name, err);
      rc = CLI_EXIT_FAILURE;
      goto out;
    }
    if (rn.want[e])
      snprintf(rep->device[e], sizeof rep->device[e], "%s", engines[e]->device(rn.engine[e]));
  }
  size_t matched = 0;
  for (size_t i = 0; i < bench_ncases; i++) {
    bench_case_name(&bench_cases[i], rn.threads, name, sizeof name);
    matched += (runs_on(&rn, &bench_cases[i], CPU) || runs_on(&rn, &bench_cases[i], GPU)) &&
               (o->only == NULL || strstr(name, o->only) != NULL);
  }
  if (matched == 0) {
    cli_error("bench", "--case '%s' names no case of this run", o->only ? o->only : "");
    list_cases(&rn);
    rc = CLI_EXIT_USAGE;
    goto out;
  }
  struct bench_ceilings before[2], after[2];
  if (measure_ceilings(&rn, before, err, sizeof err)) {
    cli_error("bench", "gpu ceilings: %s", err);
    rc = CLI_EXIT_FAILURE;
    goto out;
  }
  for (size_t i = 0; i < bench_ncases; i++) {
    const struct bench_case *c = &bench_cases[i];
    bench_case_name(c, rn.threads, name, sizeof name);
    if ((o->only && strstr(name, o->only) == NULL) || named_before(&rn, i, name))
      continue;
    int on[2] = {runs_on(&rn, c, CPU), runs_on(&rn, c, GPU)};
    if (!on[CPU] && !on[GPU])
      continue;
    const struct synth *d = case_data(&rn, c);
    if (d == NULL) {
      cli_error("bench", "no memory for the data of %s", name);
      continue;
    }
    for (int e = 0; e < 2; e++)
      if (on[e])
        run_case(&rn, c, name, e, d);
  }
  if (measure_ceilings(&rn, after, err, sizeof err)) {
    cli_error("bench", "gpu ceilings: %s", err);
    rc = CLI_EXIT_FAILURE;
    goto out;
  }
  settle_ceilings(rep, before, after);
out:
  if (rn.have_data)
    synth_free(&rn.data);
  for (int e = 0; e < 2; e++)
    if (rn.engine[e])
      engines[e]->close(rn.engine[e]);
  cli_progress_done();
  return rc;
}
