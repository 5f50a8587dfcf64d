/*
 * cmd-encode.c - `m3idx encode': fp32 keys [tokens, 128] to MXFP4 pages
 * [ceil(tokens / 128), 8704] in token order, unused slots zero.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "npy.h"
#include "out-files.h"

static const char usage[] =
    "usage: m3idx encode --keys k.npy --out pages.npy [--force]\n"
    "Quantises float32 keys [tokens, 128] into MXFP4 pages [ceil(tokens/128), 8704]\n"
    "(page i holds tokens 128i..128i+127; unused slots are zero).  --out appears\n"
    "complete or not at all; --force replaces a read-only one.  See m3idx(1).\n";

int cli_encode(int argc, char **argv) {
  static const struct option opts[] = {{"keys", required_argument, 0, 'k'},
                                       {"out", required_argument, 0, 'o'},
                                       {"force", no_argument, 0, 'f'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  static const char *const outputs[] = {"out", NULL};
  const char *keys = NULL, *out = NULL;
  int c, force = 0;
  if (cli_refuse_abbreviated(argc, argv, opts, outputs, "encode") != 0)
    return CLI_EXIT_USAGE;
  opterr = 0;
  optind = 0; /* 0: glibc forgets a previous parse, even one cut short */
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'k': keys = optarg; break;
    case 'o': out = optarg; break;
    case 'f': force = 1; break;
    case 'h': fputs(usage, stdout); return 0;
    default:
      cli_error("encode", "unknown or incomplete option '%s'\n%s", argv[optind - 1], usage);
      return CLI_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    cli_error("encode", "unexpected argument '%s'", argv[optind]);
    return CLI_EXIT_USAGE;
  }
  if (!keys || !out) {
    cli_error("encode", "%s is required\n%s", keys ? "--out" : "--keys", usage);
    return CLI_EXIT_USAGE;
  }
  struct npy_array k;
  struct out_set outs;
  char err[1024];
  const char *in_opt = "--keys";
  out_init(&outs, force);
  out_add(&outs, "--out", out);
  if (out_check(&outs, 1, &in_opt, &keys, err, sizeof err) != 0 ||
      npy_read(keys, "--keys", "<f4", 2, &k, err, sizeof err) != 0) {
    cli_error("encode", "%s", err);
    out_discard(&outs);
    return CLI_EXIT_USAGE;
  }
  if (k.shape[1] != M3IDX_HEAD_DIM) {
    cli_error("encode", "--keys has shape [%lld, %lld], expected [tokens, %d]",
              (long long)k.shape[0], (long long)k.shape[1], M3IDX_HEAD_DIM);
    npy_free(&k);
    out_discard(&outs);
    return CLI_EXIT_USAGE;
  }
  int64_t tokens = k.shape[0];
  int64_t npages = (tokens + M3IDX_BLOCK_SIZE - 1) / M3IDX_BLOCK_SIZE;
  uint8_t *pages = malloc((size_t)npages * M3IDX_PAGE_BYTES + 1);
  if (!pages) {
    cli_error("encode", "no memory for %lld pages", (long long)npages);
    npy_free(&k);
    out_discard(&outs);
    return CLI_EXIT_FAILURE;
  }
  int rc = 0;
  m3idx_status st = m3idx_encode_keys_f32(k.data, tokens, pages, npages);
  if (st != M3IDX_OK) {
    cli_library_error("encode", st, m3idx_last_error(NULL));
    rc = CLI_EXIT_USAGE;
  } else {
    int64_t shape[2] = {npages, M3IDX_PAGE_BYTES};
    if (npy_stage(&outs, 0, "|u1", 2, shape, pages, err, sizeof err) != 0 ||
        out_commit(&outs, err, sizeof err) != 0) {
      cli_error("encode", "%s", err);
      rc = CLI_EXIT_FAILURE;
    }
  }
  out_discard(&outs);
  free(pages);
  npy_free(&k);
  return rc;
}
