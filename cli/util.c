/*
 * util.c - messages, number parsing, clocks and progress for the CLI.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

const char *cli_program = "m3idx";

void cli_error(const char *sub, const char *fmt, ...) {
  va_list ap;
  cli_progress_done();
  fprintf(stderr, "%s%s%s: ", cli_program, sub ? " " : "", sub ? sub : "");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* C names in the library's messages, and the options they come from. */
static const char *const renames[][2] = {
    {"batch->seq_lens", "--seq-lens"},
    {"batch->cu_seqlens_q", "--cu-seqlens-q"},
    {"batch->context_lens", "--context-lens"},
    {"context_lens", "--context-lens"},
    {"cu_seqlens_q", "--cu-seqlens-q"},
    {"seq_lens", "--seq-lens"},
    {"score_stride", "the width of --scores-out"},
    {"batch->query_len", "--query-len"},
    {"batch->num_rows", "the rows of --query"},
    {"batch->num_heads", "the heads of --query"},
    {"batch->num_reqs", "the length of --seq-lens"},
    {"batch->max_seq_len", "the largest of --seq-lens"},
    {"kcache->block_table", "--block-table"},
    {"kcache->num_pages", "the pages of --pages"},
    {"kcache->bt_stride", "the width of --block-table"},
    {"query->scale", "--scale"},
    {"query->dtype", "--query-dtype"},
    {"init_blocks", "--init-blocks"},
    {"local_blocks", "--local-blocks"},
};

void cli_library_error(const char *sub, m3idx_status st, const char *msg) {
  char out[1024];
  size_t o = 0;
  const char *p = msg;
  while (*p && o + 1 < sizeof out) {
    size_t i, n = sizeof renames / sizeof renames[0];
    for (i = 0; i < n; i++) {
      size_t l = strlen(renames[i][0]);
      if (strncmp(p, renames[i][0], l) == 0) {
        int w = snprintf(out + o, sizeof out - o, "%s", renames[i][1]);
        if (w > 0)
          o += (size_t)w < sizeof out - o ? (size_t)w : sizeof out - o - 1;
        p += l;
        break;
      }
    }
    if (i == n)
      out[o++] = *p++;
  }
  out[o] = '\0';
  cli_error(sub, "%s (%s)", out[0] ? out : m3idx_strerror(st), m3idx_strerror(st));
}

int cli_refuse_abbreviated(int argc, char **argv, const struct option *opts,
                           const char *const *full, const char *sub) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0)
      break;
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
      continue;
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const struct option *o = opts;
    while (o->name && !(strlen(o->name) == len && strncmp(o->name, name, len) == 0))
      o++;
    if (o->name) {
      if (o->has_arg == required_argument && !eq)
        i++; /* its value, whatever it looks like */
      continue;
    }
    for (const char *const *f = full; *f; f++)
      if (len < strlen(*f) && strncmp(*f, name, len) == 0) {
        cli_error(sub, "'--%.*s' is not an option; options that name output files must be "
                  "written in full (--%s)", (int)len, name, *f);
        return -1;
      }
  }
  return 0;
}

int cli_parse_int(const char *s, int32_t lo, int32_t hi, int32_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = (int32_t)v;
  return 0;
}

int cli_parse_float(const char *s, float *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno == ERANGE && fabs(v) > 1.0)
    return -1;
  if (end == s || *end != '\0')
    return -1;
  *out = (float)v;
  return 0;
}

int cli_parse_backend(const char *s, m3idx_backend *out) {
  if (!strcasecmp(s, "cpu"))
    *out = M3IDX_BACKEND_CPU;
  else if (!strcasecmp(s, "hip"))
    *out = M3IDX_BACKEND_HIP;
  else if (!strcasecmp(s, "auto"))
    *out = M3IDX_BACKEND_AUTO;
  else
    return -1;
  return 0;
}

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double cli_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int cli_unsteady(const double *v, int n) {
  double lo = v[0], hi = v[0];
  for (int i = 1; i < n; i++) {
    lo = v[i] < lo ? v[i] : lo;
    hi = v[i] > hi ? v[i] : hi;
  }
  return hi - lo > lo * (CLI_UNSTEADY_PERCENT / 100.0);
}

static double progress_start = -1.0;
static int progress_shown;

void cli_progress(const char *fmt, ...) {
  if (progress_start < 0)
    progress_start = cli_now();
  if (!isatty(STDERR_FILENO) || cli_now() - progress_start < 1.0)
    return;
  va_list ap;
  fprintf(stderr, "\r\033[K%s: ", cli_program);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fflush(stderr);
  progress_shown = 1;
}

void cli_progress_done(void) {
  if (progress_shown)
    fprintf(stderr, "\r\033[K");
  progress_shown = 0;
}
