/*
 * version.c - the version of the linked library.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "m3idx.h"

const char *m3idx_version(void) { return M3IDX_VERSION_STRING; }

int m3idx_version_number(void) { return M3IDX_VERSION_NUMBER; }
