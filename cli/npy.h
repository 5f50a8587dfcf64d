/*
 * npy.h - NumPy .npy files: read (format 1.0 and 2.0, little-endian,
 * C order) and write (format 1.0).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_NPY_H
#define M3IDX_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_DIMS 8

struct npy_array {
  char descr[8];              /* "<u2", "|u1", "<i4", "<f4" */
  int ndim;
  int64_t shape[NPY_MAX_DIMS];
  size_t itemsize;
  size_t count;               /* elements */
  void *data;                 /* count * itemsize bytes, 64-byte aligned */
};

/* Parse a header: head holds the file's first head_len bytes (at least
 * the whole header, or all of a shorter file), file_len its size.  Checks
 * as npy_read does; on success *data_offset is where the data begins.
 * a->data stays NULL.  0 on success, else -1 and a message. */
int npy_parse_header(const unsigned char *head, size_t head_len, uint64_t file_len,
                     const char *what, const char *descr, int ndim, struct npy_array *a,
                     size_t *data_offset, char *err, size_t errlen);

/* Read path, a regular file, into a; the array must have dtype `descr` (for "|u1", "<u1"
 * is accepted too) and `ndim` dimensions.  0 on success; else -1 and a
 * message naming `what` (the option) in err. */
int npy_read(const char *path, const char *what, const char *descr, int ndim,
             struct npy_array *a, char *err, size_t errlen);
void npy_free(struct npy_array *a);

struct out_set;
/* Stage output i of an output set (out-files.h) as a format 1.0 file
 * holding `shape' of `descr' from data (which must stay valid until
 * out_commit).  0 on success; else -1 and a message in err. */
int npy_stage(struct out_set *set, int i, const char *descr, int ndim, const int64_t *shape,
              const void *data, char *err, size_t errlen);

/* Write one file as an output set of one (out-files.h): complete or not
 * at all.  0 on success; else -1 and a message in err. */
int npy_write(const char *path, const char *descr, int ndim,
              const int64_t *shape, const void *data, char *err,
              size_t errlen);

#endif
