/*
 * cli.h - what the m3idx command's subcommands share.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_H
#define M3IDX_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "m3idx.h"

/* Exit codes: 0 success, 1 the run failed, 2 bad usage or bad input. */
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE 2

extern const char *cli_program; /* "m3idx" */

int cli_topk(int argc, char **argv);
int cli_verify(int argc, char **argv);
int cli_encode(int argc, char **argv);
int cli_default_job(int argc, char **argv);
int cli_bench(int argc, char **argv);

/* Print "m3idx SUB: message" on stderr. */
void cli_error(const char *sub, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The library's message with its C names turned into the CLI's options. */
void cli_library_error(const char *sub, m3idx_status st, const char *msg);

/* getopt_long takes any unique prefix of a long option: --score would be
 * --scores-out.  Refuse abbreviations of the options in `full' (those that
 * name output files), with a message; 0 when there are none. */
int cli_refuse_abbreviated(int argc, char **argv, const struct option *opts,
                           const char *const *full, const char *sub);

/* Strict number parsing: 0 on success. */
int cli_parse_int(const char *s, int32_t lo, int32_t hi, int32_t *out);
int cli_parse_float(const char *s, float *out);
int cli_parse_backend(const char *s, m3idx_backend *out);

double cli_now(void); /* seconds, monotonic */
/* The median of v[0..n) (sorts v). */
double cli_median(double *v, int n);
/* Timings too spread to quote: the slowest of v[0..n) more than
 * CLI_UNSTEADY_PERCENT above the fastest (a busy or shared machine). */
#define CLI_UNSTEADY_PERCENT 50
int cli_unsteady(const double *v, int n);

/* A progress line on stderr, only when stderr is a terminal and the run
 * has lasted more than a second; cleared by cli_progress_done. */
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_progress_done(void);

#endif
