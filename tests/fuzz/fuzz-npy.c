/*
 * fuzz-npy.c - libFuzzer harness for the .npy header parser of the m3idx
 * command: any bytes either parse into a header whose data size matches
 * the file exactly, or fail with a message; never a crash or an overread.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const descr[4] = {"<u2", "|u1", "<i4", "<f4"};
  if (size < 1)
    return 0;
  /* The first byte picks what the caller expects; the rest is the file. */
  const char *want = descr[data[0] & 3];
  int ndim = 1 + (data[0] >> 2) % 3;
  const uint8_t *file = data + 1;
  size_t len = size - 1;
  /* An exact-size copy, so that any read past the end is caught. */
  uint8_t *copy = malloc(len ? len : 1);
  memcpy(copy, file, len);
  struct npy_array a;
  size_t off = 0;
  char err[512] = "";
  if (npy_parse_header(copy, len, len, "fuzz", want, ndim, &a, &off, err, sizeof err) == 0) {
    if (off > len || a.count * a.itemsize != len - off || a.ndim != ndim || a.data != NULL)
      abort();
  } else if (err[0] == '\0') {
    abort(); /* a failure always says why */
  }
  free(copy);
  return 0;
}
