/*
 * m3idx-mpi.c - the m3idx-mpi command (m3idx-mpi(1)): `m3idx topk' across
 * the ranks of MPI_COMM_WORLD, through libm3idx_mpi, and its
 * strong-scaling bench.
 *
 * Rank 0 parses, refuses bad outputs and reads the inputs exactly as
 * `m3idx topk' does (cmd-topk.c), and writes the outputs the same way;
 * every rank computes its share; every rank exits with rank 0's code.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cmd-topk.h"
#include "cmd-verify.h"
#include "m3idx_mpi.h"
#include "synth.h"

static const char usage[] =
    "usage: mpirun -n N m3idx-mpi topk [the arguments of m3idx topk] [--split auto|rows|blocks]\n"
    "                                   [--inputs root|every-rank] [--gpus-per-node N]\n"
    "       mpirun -n N m3idx-mpi verify [the arguments of m3idx verify] [--inputs root|every-rank]\n"
    "                                     [--gpus-per-node N]\n"
    "       mpirun -n N m3idx-mpi bench [--threads T] [--repeats R] [--prefill-rows N]\n"
    "topk writes the bytes `m3idx topk' writes, verify prints what `m3idx verify'\n"
    "prints, computed by every rank; bench\n"
    "times a prefill and a block-split decode on 1 .. N ranks, the inputs sent\n"
    "by rank 0 or every rank's own.  See m3idx-mpi(1).\n";

static int rank, ranks;

/* Every rank's exit code: rank 0's. */
static int agree_exit(int rc) {
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return rc;
}

/* GPUs a node gives its ranks (--gpus-per-node): a rank's device is its
 * rank on its node modulo this. */
static int gpus_per_node = 1;

/* --split, --inputs and --gpus-per-node (VALUE or =VALUE) taken out of
 * argv (m3idx topk does not know them): 0, or -1 for a bad value. */
static int take_own(int *argc, char **argv, m3idx_mpi_options *o) {
  static const char *const names[3] = {"split", "inputs", "gpus-per-node"};
  static const char *const values[2][4] = {{"auto", "rows", "blocks", NULL},
                                           {"root", "every-rank", NULL, NULL}};
  int out = 0;
  for (int i = 0; i < *argc; i++) {
    const char *v = NULL;
    int which = -1;
    for (int w = 0; w < 3 && which < 0; w++) {
      const size_t n = strlen(names[w]);
      if (strncmp(argv[i], "--", 2) != 0 || strncmp(argv[i] + 2, names[w], n) != 0)
        continue;
      if (argv[i][2 + n] == '\0' && i + 1 < *argc)
        which = w, v = argv[++i];
      else if (argv[i][2 + n] == '=')
        which = w, v = argv[i] + 3 + n;
    }
    if (which < 0) {
      argv[out++] = argv[i];
      continue;
    }
    if (which == 2) {
      char *end = NULL;
      const long n = strtol(v, &end, 10);
      if (end == v || *end != '\0' || n < 1 || n > 1024) {
        if (rank == 0)
          cli_error(NULL, "--gpus-per-node is '%s': it takes a count from 1 to 1024", v);
        return -1;
      }
      gpus_per_node = (int)n;
      continue;
    }
    int k = 0;
    while (values[which][k] && strcmp(values[which][k], v) != 0)
      k++;
    if (values[which][k] == NULL) {
      if (rank == 0)
        cli_error("topk", "--%s is '%s': it takes %s", names[which], v,
                  which == 0 ? "auto, rows or blocks" : "root or every-rank");
      return -1;
    }
    if (which == 0)
      o->split = (m3idx_mpi_split)k;
    else
      o->inputs = (m3idx_mpi_inputs)k;
  }
  *argc = out;
  argv[out] = NULL;
  return 0;
}

/* What the two commands' jobs share: how to prepare one, free it, and
 * find its call arguments. */
struct job_ops {
  int (*prepare)(int argc, char **argv, void *job);
  void (*release)(void *job);
  const struct call_args *(*args)(const void *job);
  int help; /* what prepare returns after --help */
};

/* The start of topk and verify: --split and --inputs taken out, rank 0
 * (then, with --inputs every-rank, every other rank: after rank 0, so that
 * bad arguments are said once; a rank that cannot read says why) prepares
 * the job, and every rank's context takes rank 0's --backend and
 * --threads.  0 with *has set when this rank holds the job; or the exit
 * code, with the job freed. */
static int start(int argc, char **argv, m3idx_mpi_options *o, const struct job_ops *ops,
                 void *job, int *has) {
  m3idx_mpi_options_init(o);
  int rc = take_own(&argc, argv, o) != 0 ? CLI_EXIT_USAGE : 0;
  if (rc == 0 && rank == 0)
    rc = ops->prepare(argc, argv, job);
  rc = agree_exit(rc);
  const int everywhere = o->inputs == M3IDX_MPI_INPUTS_EVERY_RANK;
  *has = rank == 0 || (everywhere && rc == 0);
  if (rc == 0 && everywhere && rank != 0) {
    rc = ops->prepare(argc, argv, job);
    rc = rc == ops->help ? 0 : rc;
  }
  if (everywhere)
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rc != 0) {
    if (*has)
      ops->release(job);
    return rc == ops->help ? 0 : rc;
  }
  const struct call_args *c = rank == 0 ? ops->args(job) : NULL;
  int32_t cfg[2] = {c ? (int32_t)c->backend : 0, c ? c->threads : 0};
  MPI_Bcast(cfg, 2, MPI_INT32_T, 0, MPI_COMM_WORLD);
  o->context.backend = (m3idx_backend)cfg[0];
  o->context.threads = cfg[1];
  /* One GPU a rank: its rank among the node's ranks, modulo the node's GPUs. */
  MPI_Comm node;
  int local = 0;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
  }
  o->context.device = local % gpus_per_node;
  return 0;
}

/* A failed collective: rank 0 says why; every rank's exit code. */
static int failed(const char *sub, m3idx_status st) {
  if (rank == 0)
    cli_library_error(sub, st, m3idx_mpi_last_error());
  return st == M3IDX_ERR_DEVICE || st == M3IDX_ERR_NO_MEMORY ? CLI_EXIT_FAILURE : CLI_EXIT_USAGE;
}

static int topk_prepare(int argc, char **argv, void *j) { return cli_topk_prepare(argc, argv, j); }
static void topk_release(void *j) { cli_topk_free(j); }
static const struct call_args *topk_args(const void *j) {
  return &((const struct topk_job *)j)->a.call;
}

static int mpi_topk(int argc, char **argv) {
  static const struct job_ops ops = {topk_prepare, topk_release, topk_args, CLI_TOPK_HELP};
  m3idx_mpi_options o;
  struct topk_job j;
  int has = 0;
  memset(&j, 0, sizeof j);
  int rc = start(argc, argv, &o, &ops, &j, &has);
  if (rc != 0)
    return rc;
  const int root = rank == 0;
  const m3idx_status st = m3idx_mpi_index_topk(
      MPI_COMM_WORLD, &o, has ? &j.in.batch : NULL, has ? &j.in.query : NULL,
      has ? &j.in.kc : NULL, root ? j.a.call.init_blocks : 0, root ? j.a.call.local_blocks : 0,
      root ? j.topk : NULL, root ? j.scores : NULL, root && j.scores ? j.in.width : 0);
  rc = st != M3IDX_OK ? failed("topk", st) : root ? cli_topk_write(&j) : 0;
  if (has)
    cli_topk_free(&j);
  return agree_exit(rc);
}

static int verify_prepare(int argc, char **argv, void *j) {
  return cli_verify_prepare(argc, argv, j);
}
static void verify_release(void *j) { cli_verify_free(j); }
static const struct call_args *verify_args_of(const void *j) {
  return &((const struct verify_job *)j)->a.call;
}

static int mpi_verify(int argc, char **argv) {
  static const struct job_ops ops = {verify_prepare, verify_release, verify_args_of,
                                     CLI_VERIFY_HELP};
  m3idx_mpi_options o;
  struct verify_job j;
  int has = 0;
  memset(&j, 0, sizeof j);
  int rc = start(argc, argv, &o, &ops, &j, &has);
  if (rc != 0)
    return rc;
  const int root = rank == 0, scores = has && j.a.candidate_scores != NULL;
  m3idx_verify_summary sum;
  const m3idx_status st = m3idx_mpi_verify_topk(
      MPI_COMM_WORLD, &o, has ? &j.in.batch : NULL, has ? &j.in.query : NULL,
      has ? &j.in.kc : NULL, root ? j.a.call.init_blocks : 0, root ? j.a.call.local_blocks : 0,
      has ? j.cand.data : NULL, scores ? j.cscores.data : NULL, scores ? j.cscores.shape[2] : 0,
      root ? &j.a.opts : NULL, root ? j.rows : NULL, root ? &sum : NULL);
  rc = st != M3IDX_OK ? failed("verify", st) : root ? cli_verify_report(&j, &sum) : 0;
  if (has)
    cli_verify_free(&j);
  return agree_exit(rc);
}

/* ---- bench: strong scaling over 1 .. N ranks ----------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Median seconds of repeats calls on the first k ranks (others wait). */
static double time_on(int k, int repeats, int threads, const struct synth *s, int prefill,
                      m3idx_mpi_inputs inputs, int32_t *topk) {
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, rank < k ? 0 : MPI_UNDEFINED, rank, &sub);
  double t[16] = {0};
  if (rank < k) {
    m3idx_mpi_options o;
    m3idx_mpi_options_init(&o);
    o.context.backend = M3IDX_BACKEND_CPU;
    o.context.threads = threads;
    o.inputs = inputs;
    const int has = rank == 0 || inputs == M3IDX_MPI_INPUTS_EVERY_RANK;
    m3idx_batch b;
    m3idx_kcache kc;
    if (prefill)
      synth_prefill_batch(s, &b);
    else
      synth_decode_batch(s, &b);
    synth_kcache(s, &kc);
    const m3idx_query q = {prefill ? s->prefill_query : s->decode_query, M3IDX_DTYPE_BF16, 0.088f};
    for (int r = 0; r < repeats; r++) {
      MPI_Barrier(sub);
      const double t0 = now();
      const m3idx_status st = m3idx_mpi_index_topk(
          sub, &o, has ? &b : NULL, has ? &q : NULL, has ? &kc : NULL, 1, 2,
          rank == 0 ? topk : NULL, NULL, 0);
      t[r] = now() - t0;
      if (st != M3IDX_OK && rank == 0)
        cli_error("bench", "%s", m3idx_mpi_last_error());
    }
    MPI_Comm_free(&sub);
  }
  /* Insertion sort; the median. */
  for (int a = 1; a < repeats; a++)
    for (int c = a; c > 0 && t[c - 1] > t[c]; c--) {
      const double x = t[c];
      t[c] = t[c - 1];
      t[c - 1] = x;
    }
  MPI_Barrier(MPI_COMM_WORLD);
  return t[repeats / 2];
}

static int mpi_bench(int argc, char **argv) {
  int threads = 1, repeats = 3, rows = 1024;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
      repeats = atoi(argv[++i]);
    else if (strcmp(argv[i], "--prefill-rows") == 0 && i + 1 < argc)
      rows = atoi(argv[++i]);
    else {
      if (rank == 0)
        cli_error("bench", "unknown option '%s'\n%s", argv[i], usage);
      return CLI_EXIT_USAGE;
    }
  }
  if (threads < 1 || repeats < 1 || repeats > 15 || rows < 1 || rows > 16384) {
    if (rank == 0)
      cli_error("bench", "--threads takes 1 or more, --repeats 1 to 15, --prefill-rows 1 to 16384");
    return CLI_EXIT_USAGE;
  }
  /* Prefill: 2 requests of 16K tokens, their last `rows' rows each;
     decode: one request of 256K tokens, one row (its blocks split). */
  static const int32_t pre_lens[2] = {16384, 16384}, dec_lens[1] = {262144};
  const struct synth_spec specs[2] = {
      {SYNTH_RANDOM_BYTES, 0x6d7069ull, 2, pre_lens, 1, 0, rows},
      {SYNTH_RANDOM_BYTES, 0x6d706aull, 1, dec_lens, 1, 1, 0}};
  char prefill_name[64];
  snprintf(prefill_name, sizeof prefill_name, "prefill 2 x %d rows ctx 16K h1", rows);
  const char *const names[2] = {prefill_name, "decode 1 x 256K q1 h1 (blocks split)"};
  if (rank == 0)
    printf("%-38s %-10s %5s %7s %12s %8s %10s\n", "case", "inputs", "ranks", "threads", "median",
           "speedup", "efficiency");
  for (int c = 0; c < 2; c++) {
    struct synth s;
    memset(&s, 0, sizeof s);
    int ok = synth_make(&s, &specs[c]) == 0; /* every rank's, for --inputs every-rank */
    int32_t *topk = malloc(sizeof(int32_t) * 2 * (size_t)rows * M3IDX_TOPK + 64);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok || topk == NULL) {
      if (rank == 0)
        cli_error("bench", "no memory for the synthetic batch");
      free(topk);
      return CLI_EXIT_FAILURE;
    }
    static const char *const where[2] = {"root", "every-rank"};
    for (int in = 0; in < 2; in++) {
      double t1 = 0;
      for (int k = 1; k <= ranks; k++) {
        const double t = time_on(k, repeats, threads, &s, c == 0, (m3idx_mpi_inputs)in, topk);
        if (k == 1)
          t1 = t;
        if (rank == 0)
          printf("%-38s %-10s %5d %7d %9.3f ms %7.2fx %9.0f%%\n", names[c], where[in], k, threads,
                 1e3 * t, t1 / t, 100.0 * t1 / (t * k));
      }
    }
    synth_free(&s);
    free(topk);
  }
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  cli_program = "m3idx-mpi";
  int rc;
  if (argc >= 2 && strcmp(argv[1], "topk") == 0) {
    rc = mpi_topk(argc - 1, argv + 1);
  } else if (argc >= 2 && strcmp(argv[1], "verify") == 0) {
    rc = mpi_verify(argc - 1, argv + 1);
  } else if (argc >= 2 && strcmp(argv[1], "bench") == 0) {
    rc = agree_exit(mpi_bench(argc - 1, argv + 1));
  } else if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    if (rank == 0)
      fputs(usage, stdout);
    rc = 0;
  } else if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
    if (rank == 0)
      printf("m3idx-mpi %s\n", m3idx_version());
    rc = 0;
  } else {
    if (rank == 0)
      cli_error(NULL, "%s", usage);
    rc = CLI_EXIT_USAGE;
  }
  MPI_Finalize();
  return rc;
}
