/*
 * agree.h - the message of a failed m3idx_mpi_ call, and the agreement
 * that gives every rank the same status and message.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_MPI_AGREE_H
#define M3IDX_MPI_AGREE_H

#include "m3idx_mpi.h"

#define AGREE_MSG 768

/* Record this rank's failure (the message m3idx_mpi_last_error gives);
 * returns st. */
m3idx_status agree_fail(m3idx_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* An MPI call that failed, as M3IDX_ERR_DEVICE with MPI's words. */
m3idx_status agree_mpi_failed(const char *what, int e);

/* Collective: M3IDX_OK when every rank's status is, else the status of
 * the lowest failing rank, whose message ("rank K: ...") every rank then
 * holds. */
m3idx_status agree(MPI_Comm comm, m3idx_status mine);

#endif
