/*
 * fuzz-cli.c - libFuzzer harness for the command's argument and file
 * handling: the input bytes pick `topk' or `encode', a sequence of words
 * (options, their abbreviations, values, and the names of files of every
 * kind: inputs, their symbolic and hard links, spellings with ./ and ..,
 * a FIFO, a directory, a read-only file, a missing folder) and the bytes
 * of one more input file.  Nothing may crash, a file named as an input
 * must keep its bytes, and no temporary may be left behind.
 *
 * SPDX-License-Identifier: MIT
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char *words[96];
static int n_words;
/* The input files and their bytes, to check that no run changes them. */
static const char *const inputs[] = {"q.npy", "qe.npy", "pages.npy", "bt.npy", "sl.npy",
                                     "cu.npy", "cl.npy", "keys.npy", "ro.npy"};
#define N_INPUTS (int)(sizeof inputs / sizeof inputs[0])
static unsigned char *input_bytes[N_INPUTS];
static long input_len[N_INPUTS];

static char *path(const char *name) {
  char *p = malloc(strlen(dir) + strlen(name) + 2);
  sprintf(p, "%s/%s", dir, name);
  return p;
}

static void word(const char *w) { words[n_words++] = strdup(w); }
static void file_word(const char *name) { words[n_words++] = path(name); }

static unsigned char *slurp(const char *name, long *len) {
  char *p = path(name);
  FILE *f = fopen(p, "rb");
  free(p);
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  *len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)*len + 1);
  if (fread(b, 1, (size_t)*len, f) != (size_t)*len)
    abort();
  fclose(f);
  return b;
}

static void save(const char *name, const char *descr, int nd, int64_t d0, int64_t d1,
                 int64_t d2, const void *v) {
  int64_t shape[3] = {d0, d1, d2};
  char err[256];
  char *p = path(name);
  if (npy_write(p, descr, nd, shape, v, err, sizeof err) != 0)
    abort();
  free(p);
}

static void setup(void) {
  strcpy(dir, "/tmp/m3idx-fuzz-cli.XXXXXX");
  if (!mkdtemp(dir))
    abort();
  static uint16_t q[2 * 2 * 128];
  static uint8_t qe[2 * 2 * 128], pages[3 * M3IDX_PAGE_BYTES];
  static float keys[130 * 128];
  for (int i = 0; i < 2 * 2 * 128; i++) {
    q[i] = (uint16_t)(0x3c00 + (i * 37) % 512);
    qe[i] = (uint8_t)((i * 29) % 0x7e);
  }
  for (int i = 0; i < 3 * M3IDX_PAGE_BYTES; i++)
    pages[i] = (uint8_t)(i * 131 + (i >> 7));
  for (int i = 0; i < 130 * 128; i++)
    keys[i] = (float)((i * 7) % 19) - 9.0f;
  int32_t bt[2 * 3] = {0, 1, 2, 2, 1, 0}, sl[2] = {300, 129}, cu[3] = {0, 1, 2}, cl[2] = {299, 128};
  save("q.npy", "<u2", 3, 2, 2, 128, q);
  save("qe.npy", "|u1", 3, 2, 2, 128, qe);
  save("pages.npy", "|u1", 2, 3, M3IDX_PAGE_BYTES, 0, pages);
  save("bt.npy", "<i4", 2, 2, 3, 0, bt);
  save("sl.npy", "<i4", 1, 2, 0, 0, sl);
  save("cu.npy", "<i4", 1, 3, 0, 0, cu);
  save("cl.npy", "<i4", 1, 2, 0, 0, cl);
  save("keys.npy", "<f4", 2, 130, 128, 0, keys);
  save("ro.npy", "<i4", 1, 2, 0, 0, sl);
  char *p = path("ro.npy"), *l = path("q-link.npy"), *h = path("sl-hard.npy"), *s = path("sl.npy");
  chmod(p, 0444);
  if (symlink("q.npy", l) != 0 || link(s, h) != 0)
    abort();
  free(p), free(l), free(h), free(s);
  p = path("fifo"), mkfifo(p, 0600), free(p);
  p = path("subdir"), mkdir(p, 0700), free(p);
  for (int i = 0; i < N_INPUTS; i++)
    input_bytes[i] = slurp(inputs[i], &input_len[i]);

  static const char *const options[] = {
      "--mode", "--query", "--query-dtype", "--pages", "--block-table", "--seq-lens",
      "--query-len", "--cu-seqlens-q", "--context-lens", "--scale", "--init-blocks",
      "--local-blocks", "--out", "--scores-out", "--backend", "--threads", "--force", "--keys",
      "--help", "--ou", "--score", "--sc", "--out=", "--", "-o", "--qu", "decode", "prefill",
      "bf16", "e4m3", "cpu", "auto", "0", "1", "2", "-1", "16", "2147483647", "nan", "0.5",
      "1e39", ""};
  for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
    word(options[i]);
  static const char *const files[] = {
      "q.npy", "qe.npy", "pages.npy", "bt.npy", "sl.npy", "cu.npy", "cl.npy", "keys.npy",
      "ro.npy", "q-link.npy", "sl-hard.npy", "fifo", "subdir", "fuzz.npy", "out.npy",
      "./out.npy", "subdir/../out.npy", "scores.npy", "missing/x.npy", "link-out.npy"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
    file_word(files[i]);
}

/* The files the run may have replaced, as they were: their bytes, the
 * read-only mode of ro.npy, the two links. */
static void restore(void) {
  for (int i = 0; i < N_INPUTS; i++) {
    char *p = path(inputs[i]);
    unlink(p);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(input_bytes[i], 1, (size_t)input_len[i], f) != (size_t)input_len[i])
      abort();
    fclose(f);
    if (!strcmp(inputs[i], "ro.npy"))
      chmod(p, 0444);
    free(p);
  }
  char *l = path("q-link.npy"), *h = path("sl-hard.npy"), *s = path("sl.npy");
  unlink(l);
  unlink(h);
  if (symlink("q.npy", l) != 0 || link(s, h) != 0)
    abort();
  free(l), free(h), free(s);
}

/* An input that a run named with an input option must keep its bytes; no
 * temporary may be left; then every file is put back for the next run. */
static void check_and_clean(const int *named) {
  int changed = 0;
  for (int i = 0; i < N_INPUTS; i++) {
    long len = -1;
    unsigned char *b = slurp(inputs[i], &len);
    if (!b || len != input_len[i] || memcmp(b, input_bytes[i], (size_t)len) != 0) {
      if (named[i]) {
        fprintf(stderr, "fuzz-cli: input %s changed\n", inputs[i]);
        abort();
      }
      changed = 1;
    }
    free(b);
  }
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    if (strncmp(e->d_name, ".m3idx-", 7) == 0) {
      fprintf(stderr, "fuzz-cli: temporary %s left\n", e->d_name);
      abort();
    }
  if (d)
    closedir(d);
  static const char *const outs[] = {"out.npy", "scores.npy", "fuzz.npy", "link-out.npy"};
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
    char *p = path(outs[i]);
    unlink(p);
    free(p);
  }
  if (changed)
    restore();
}

/* Which inputs the words name after an input option (links count for
 * the file they name). */
static void mark_inputs(int argc, char **argv, int *named) {
  static const char *const in_opts[] = {"--query", "--qu", "--pages", "--block-table",
                                        "--seq-lens", "--cu-seqlens-q", "--context-lens",
                                        "--keys"};
  memset(named, 0, N_INPUTS * sizeof *named);
  for (int i = 1; i + 1 < argc; i++) {
    int is_in = 0;
    for (size_t k = 0; k < sizeof in_opts / sizeof in_opts[0]; k++)
      is_in |= !strcmp(argv[i], in_opts[k]);
    if (!is_in || strncmp(argv[i + 1], dir, strlen(dir)) != 0)
      continue;
    const char *name = argv[i + 1] + strlen(dir) + 1;
    if (!strcmp(name, "q-link.npy"))
      name = "q.npy";
    if (!strcmp(name, "sl-hard.npy"))
      name = "sl.npy";
    for (int k = 0; k < N_INPUTS; k++)
      if (!strcmp(name, inputs[k]))
        named[k] = 1;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (n_words == 0)
    setup();
  if (size < 2)
    return 0;
  /* Bytes: [command] [n] [n words] [the rest: fuzz.npy's bytes]. */
  int encode = data[0] & 1;
  size_t n = data[1] % 24;
  if (size < 2 + n)
    return 0;
  char *argv[32];
  int argc = 0;
  argv[argc++] = encode ? "encode" : "topk";
  for (size_t i = 0; i < n; i++)
    argv[argc++] = words[data[2 + i] % n_words];
  argv[argc] = NULL;
  char *fz = path("fuzz.npy");
  FILE *f = fopen(fz, "wb");
  if (f) {
    fwrite(data + 2 + n, 1, size - 2 - n, f);
    fclose(f);
  }
  free(fz);
  char *link_out = path("link-out.npy");
  if (symlink("out.npy", link_out) != 0) {
    /* left from a run that did not clean: fine, it is removed below */
  }
  free(link_out);
  int named[N_INPUTS];
  mark_inputs(argc, argv, named);
  int rc = encode ? cli_encode(argc, argv) : cli_topk(argc, argv);
  if (rc < 0 || rc > 2)
    abort();
  check_and_clean(named);
  return 0;
}
