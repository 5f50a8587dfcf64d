/*
 * out-files.h - the command's output files, written as one set.
 *
 * Each output is written to a temporary file beside it and renamed into
 * place once every output is complete, so the set appears together or not
 * at all, and a failure or a signal leaves every existing file as it was.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_OUT_FILES_H
#define M3IDX_CLI_OUT_FILES_H

#include <stddef.h>
#include <sys/stat.h>

#define OUT_MAX 4

struct out_file {
  const char *opt;     /* the option that names it, "--out" */
  const char *path;    /* as given */
  char *target;        /* what is replaced: symlinks followed, directory resolved */
  int exists;          /* target exists; st describes it */
  int through;         /* written in place: a character device, a FIFO, /dev or /proc */
  struct stat st;
  char *tmp;           /* the staged temporary, until it is renamed */
  char *old;           /* a hard link to the replaced file while the set is renamed */
  void *head;          /* a write-through output's header, copied, until commit */
  const void *data;    /* and its data, the caller's, kept until commit */
  size_t head_len, data_len;
  int staged;
};

struct out_set {
  int n;
  int force;           /* replace read-only files */
  struct out_file f[OUT_MAX];
};

void out_init(struct out_set *s, int force);
/* Add an output named by option `opt'; returns its index. */
int out_add(struct out_set *s, const char *opt, const char *path);

/* Before any work: resolve every output and refuse what must not be
 * written (a directory, socket or block device, a missing folder, a
 * symbolic link to nothing, a read-only file without force) and two names
 * of one file among the outputs or between an output and an input
 * (compared by what they point to, not by spelling).  0, or -1 and a
 * message naming the option. */
int out_check(struct out_set *s, int n_inputs, const char *const *in_opts,
              const char *const *in_paths, char *err, size_t errlen);

/* Write output i (head then data bytes) to its temporary file; for a
 * write-through output, copy head and keep data's pointer (data must stay
 * valid until out_commit). */
int out_stage(struct out_set *s, int i, const void *head, size_t head_len,
              const void *data, size_t data_len, char *err, size_t errlen);

/* Put every staged output in place: write-through outputs first, then the
 * renames with SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE held, undone if one
 * fails.  0, or -1 with nothing replaced. */
int out_commit(struct out_set *s, char *err, size_t errlen);

/* Remove what is left of the set (temporaries) and free it. */
void out_discard(struct out_set *s);

#endif
