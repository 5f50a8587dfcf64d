/*
 * agree.c - one status and one message on every rank: each rank's own
 * failure is recorded here, and agree() makes every rank return the
 * first failing rank's (agree.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "agree.h"

static _Thread_local char message[AGREE_MSG];

const char *m3idx_mpi_last_error(void) { return message; }

m3idx_status agree_fail(m3idx_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return st;
}

m3idx_status agree_mpi_failed(const char *what, int e) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(e, text, &len);
  return agree_fail(M3IDX_ERR_DEVICE, "%s: %s", what, text);
}

m3idx_status agree(MPI_Comm comm, m3idx_status mine) {
  int rank = 0, size = 1, who = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int first = mine != M3IDX_OK ? rank : size;
  int e = MPI_Allreduce(&first, &who, 1, MPI_INT, MPI_MIN, comm);
  if (e != MPI_SUCCESS)
    return agree_mpi_failed("MPI_Allreduce (the ranks' statuses)", e);
  if (who == size)
    return M3IDX_OK;
  int st = mine;
  char text[AGREE_MSG + 32];
  if (rank == who)
    snprintf(text, sizeof text, "rank %d: %s", rank, message);
  e = MPI_Bcast(&st, 1, MPI_INT, who, comm);
  if (e == MPI_SUCCESS)
    e = MPI_Bcast(text, (int)sizeof text, MPI_CHAR, who, comm);
  if (e != MPI_SUCCESS)
    return agree_mpi_failed("MPI_Bcast (a failing rank's message)", e);
  snprintf(message, sizeof message, "%.*s", (int)sizeof message - 1, text);
  return (m3idx_status)st;
}
