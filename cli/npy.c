/*
 * npy.c - NumPy .npy reading and writing (see npy.h).
 *
 * The format: magic "\x93NUMPY", major, minor, a little-endian header
 * length (2 bytes in 1.0, 4 in 2.0), then an ASCII Python dict literal
 * {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with spaces
 * and ended by '\n', then the raw data.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npy.h"
#include "out-files.h"

#define MAX_HEADER (1 << 20)

static int fail(char *err, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return -1;
}

/* Find 'key' in the dict and return a pointer just past its ':'. */
static const char *dict_value(const char *h, const char *key) {
  char quoted[32];
  for (int q = 0; q < 2; q++) {
    snprintf(quoted, sizeof quoted, q ? "\"%s\"" : "'%s'", key);
    const char *p = strstr(h, quoted);
    if (p) {
      p += strlen(quoted);
      while (isspace((unsigned char)*p))
        p++;
      if (*p != ':')
        return NULL;
      p++;
      while (isspace((unsigned char)*p))
        p++;
      return p;
    }
  }
  return NULL;
}

/* How many times 'key' (either quote) appears in the dict. */
static int key_count(const char *h, const char *key) {
  char quoted[32];
  int count = 0;
  for (int q = 0; q < 2; q++) {
    snprintf(quoted, sizeof quoted, q ? "\"%s\"" : "'%s'", key);
    for (const char *p = strstr(h, quoted); p; p = strstr(p + 1, quoted))
      count++;
  }
  return count;
}

static int parse_header(const char *h, const char *what, struct npy_array *a,
                        char *err, size_t n) {
  /* numpy reads a repeated key as its last value, a hand-written reader
     as its first: a header that says two things is refused. */
  static const char *const keys[] = {"descr", "fortran_order", "shape"};
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
    if (key_count(h, keys[k]) > 1)
      return fail(err, n, "%s: .npy header gives '%s' more than once", what, keys[k]);
  const char *p = dict_value(h, "descr");
  if (!p || (*p != '\'' && *p != '"'))
    return fail(err, n, "%s: .npy header has no 'descr'", what);
  char quote = *p++;
  size_t len = 0;
  while (p[len] && p[len] != quote)
    len++;
  if (p[len] != quote || len == 0 || len >= sizeof a->descr)
    return fail(err, n, "%s: unsupported dtype in .npy header", what);
  memcpy(a->descr, p, len);
  a->descr[len] = '\0';

  p = dict_value(h, "fortran_order");
  if (!p)
    return fail(err, n, "%s: .npy header has no 'fortran_order'", what);
  if (strncmp(p, "False", 5) != 0)
    return fail(err, n, "%s: Fortran-ordered arrays are not supported; save it in C order "
                        "(numpy.ascontiguousarray)", what);

  p = dict_value(h, "shape");
  if (!p || *p != '(')
    return fail(err, n, "%s: .npy header has no 'shape'", what);
  p++;
  a->ndim = 0;
  for (;;) {
    while (isspace((unsigned char)*p))
      p++;
    if (*p == ')')
      break;
    if (!isdigit((unsigned char)*p))
      return fail(err, n, "%s: malformed shape in .npy header", what);
    if (a->ndim == NPY_MAX_DIMS)
      return fail(err, n, "%s: more than %d dimensions", what, NPY_MAX_DIMS);
    errno = 0;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (errno || v < 0 || v > ((int64_t)1 << 40))
      return fail(err, n, "%s: dimension out of range in .npy header", what);
    a->shape[a->ndim++] = v;
    p = end;
    while (isspace((unsigned char)*p))
      p++;
    if (*p == ',')
      p++;
    else if (*p != ')')
      return fail(err, n, "%s: malformed shape in .npy header", what);
  }
  return 0;
}

static size_t descr_itemsize(const char *d) {
  if (!strcmp(d, "|u1") || !strcmp(d, "<u1") || !strcmp(d, "|i1"))
    return 1;
  if (!strcmp(d, "<u2"))
    return 2;
  if (!strcmp(d, "<i4") || !strcmp(d, "<f4"))
    return 4;
  return 0;
}

static const char *dtype_name(const char *d) {
  if (!strcmp(d, "|u1"))
    return "uint8 ('|u1')";
  if (!strcmp(d, "<u2"))
    return "uint16 ('<u2')";
  if (!strcmp(d, "<i4"))
    return "int32 ('<i4')";
  if (!strcmp(d, "<f4"))
    return "float32 ('<f4')";
  return d;
}

int npy_parse_header(const unsigned char *head, size_t head_len, uint64_t file_len,
                     const char *what, const char *descr, int ndim, struct npy_array *a,
                     size_t *data_offset, char *err, size_t n) {
  memset(a, 0, sizeof *a);
  if (head_len < 10 || memcmp(head, "\x93NUMPY", 6) != 0)
    return fail(err, n, "%s: not a .npy file", what);
  uint32_t hlen;
  size_t off;
  if (head[6] == 1) {
    hlen = (uint32_t)head[8] | (uint32_t)head[9] << 8;
    off = 10;
  } else if (head[6] == 2) {
    if (head_len < 12)
      return fail(err, n, "%s: truncated .npy header", what);
    hlen = (uint32_t)head[8] | (uint32_t)head[9] << 8 | (uint32_t)head[10] << 16 |
           (uint32_t)head[11] << 24;
    off = 12;
  } else {
    return fail(err, n, "%s: .npy format %d.%d; only 1.0 and 2.0 are read", what, head[6],
                head[7]);
  }
  if (hlen == 0 || hlen > MAX_HEADER)
    return fail(err, n, "%s: a .npy header of %u bytes", what, (unsigned)hlen);
  if (off + hlen > head_len)
    return fail(err, n, "%s: truncated .npy header", what);
  char *header = malloc(hlen + 1);
  if (!header)
    return fail(err, n, "%s: no memory", what);
  memcpy(header, head + off, hlen);
  header[hlen] = '\0';
  int rc = -1;
  if (strlen(header) != hlen) {
    fail(err, n, "%s: a NUL byte in the .npy header", what);
    goto out;
  }
  if (parse_header(header, what, a, err, n) != 0)
    goto out;
  size_t isz = descr_itemsize(a->descr);
  int want_u1 = !strcmp(descr, "|u1");
  int same = !strcmp(a->descr, descr) || (want_u1 && !strcmp(a->descr, "<u1"));
  if (!same) {
    if (a->descr[0] == '>' && isz == 0)
      fail(err, n, "%s: big-endian (%s); m3idx reads little-endian .npy files", what, a->descr);
    else
      fail(err, n, "%s: dtype '%s', expected %s", what, a->descr, dtype_name(descr));
    goto out;
  }
  a->itemsize = isz;
  if (a->ndim != ndim) {
    fail(err, n, "%s: %d dimensions, expected %d", what, a->ndim, ndim);
    goto out;
  }
  size_t count = 1;
  for (int i = 0; i < a->ndim; i++) {
    if (a->shape[i] != 0 && count > (SIZE_MAX / 16) / (size_t)a->shape[i]) {
      fail(err, n, "%s: too large", what);
      goto out;
    }
    count *= (size_t)a->shape[i];
  }
  a->count = count;
  if (file_len < off + hlen || file_len - (off + hlen) != (uint64_t)(count * isz)) {
    fail(err, n, "%s: %lld data bytes, its shape needs %zu", what,
         file_len < off + hlen ? -1LL : (long long)(file_len - (off + hlen)), count * isz);
    goto out;
  }
  *data_offset = off + hlen;
  rc = 0;
out:
  free(header);
  return rc;
}

int npy_read(const char *path, const char *what, const char *descr, int ndim,
             struct npy_array *a, char *err, size_t n) {
  memset(a, 0, sizeof *a);
  /* Non-blocking, then checked: a FIFO or device would block or never end. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return fail(err, n, "%s: cannot open '%s': %s", what, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return fail(err, n, "%s: cannot read '%s': %s", what, path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return fail(err, n, "%s: '%s' is not a regular file (it is %s)", what, path,
                S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                : S_ISSOCK(st.st_mode) ? "a socket" : "a device");
  }
  int fl = fcntl(fd, F_GETFL);
  FILE *f = fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    int e = errno;
    close(fd);
    return fail(err, n, "%s: cannot open '%s': %s", what, path, strerror(e));
  }
  int rc = -1;
  unsigned char *head = malloc(MAX_HEADER + 12);
  char inner[768];
  long end = -1;
  if (fseek(f, 0, SEEK_END) == 0)
    end = ftell(f);
  if (!head || end < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fail(err, n, "%s: cannot read '%s'", what, path);
    goto out;
  }
  size_t got = fread(head, 1, MAX_HEADER + 12, f);
  size_t off = 0;
  if (npy_parse_header(head, got, (uint64_t)end, what, descr, ndim, a, &off, inner,
                       sizeof inner) != 0) {
    /* "what: detail" -> "what: 'path': detail" */
    const char *detail = inner + strlen(what) + 2;
    if (strncmp(inner, what, strlen(what)) != 0)
      detail = inner;
    if (!strcmp(detail, "not a .npy file"))
      fail(err, n, "%s: '%s' is not a .npy file", what, path);
    else
      fail(err, n, "%s: '%s': %s", what, path, detail);
    goto out;
  }
  size_t bytes = a->count * a->itemsize;
  if (posix_memalign(&a->data, 64, bytes ? bytes : 64) != 0) {
    a->data = NULL;
    fail(err, n, "%s: no memory for '%s' (%zu bytes)", what, path, bytes);
    goto out;
  }
  if (fseek(f, (long)off, SEEK_SET) != 0 || fread(a->data, 1, bytes, f) != bytes) {
    fail(err, n, "%s: '%s' is truncated", what, path);
    goto out;
  }
  rc = 0;
out:
  free(head);
  fclose(f);
  if (rc != 0)
    npy_free(a);
  return rc;
}

void npy_free(struct npy_array *a) {
  free(a->data);
  a->data = NULL;
}

/* The header of a format 1.0 file holding `shape' of `descr' into out
 * (cap bytes); its length, 0 if it does not fit. */
#define NPY_HEADER_MAX 256
static size_t npy_header(const char *descr, int ndim, const int64_t *shape, unsigned char *out,
                         size_t cap) {
  char dict[256], dims[160] = "";
  for (int i = 0; i < ndim; i++) {
    char one[32];
    /* numpy's own spelling: (3,) and (3, 4) */
    snprintf(one, sizeof one, "%s%lld%s", i ? ", " : "", (long long)shape[i],
             ndim == 1 ? "," : "");
    strncat(dims, one, sizeof dims - strlen(dims) - 1);
  }
  int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                    descr, dims);
  /* Pad so that the data starts on a 64-byte boundary; end with '\n'. */
  size_t total = 10 + (size_t)dl + 1;
  size_t pad = (64 - total % 64) % 64;
  size_t hlen = (size_t)dl + pad + 1;
  if (10 + hlen > cap)
    return 0;
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                           (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
  memcpy(out, pre, 10);
  memcpy(out + 10, dict, (size_t)dl);
  memset(out + 10 + dl, ' ', pad);
  out[10 + hlen - 1] = '\n';
  return 10 + hlen;
}

int npy_stage(struct out_set *set, int i, const char *descr, int ndim, const int64_t *shape,
              const void *data, char *err, size_t n) {
  unsigned char head[NPY_HEADER_MAX];
  size_t hlen = npy_header(descr, ndim, shape, head, sizeof head);
  size_t count = 1;
  for (int d = 0; d < ndim; d++)
    count *= (size_t)shape[d];
  return out_stage(set, i, head, hlen, data, count * descr_itemsize(descr), err, n);
}

int npy_write(const char *path, const char *descr, int ndim,
              const int64_t *shape, const void *data, char *err, size_t n) {
  struct out_set set;
  out_init(&set, 0);
  int i = out_add(&set, "output", path);
  int rc = out_check(&set, 0, NULL, NULL, err, n) != 0 ||
                   npy_stage(&set, i, descr, ndim, shape, data, err, n) != 0 ||
                   out_commit(&set, err, n) != 0
               ? -1
               : 0;
  out_discard(&set);
  return rc;
}
