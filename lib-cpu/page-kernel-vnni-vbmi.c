/*
 * page-kernel-vnni-vbmi.c - the vnni page kernel built again for
 * processors with AVX-512 VBMI too (Ice Lake and later, Zen 4 and later;
 * not Cascade Lake): its code bytes come from vpermb, which needs no mask
 * before the lookup.  Same bytes as vnni.
 *
 * SPDX-License-Identifier: MIT
 */
#define M3IDX_VNNI_VBMI 1
#include "page-kernel-vnni.c"
