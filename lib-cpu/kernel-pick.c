/*
 * kernel-pick.c - choose the page kernel at run time.
 *
 * M3IDX_CPU_ISA=scalar|avx512|avx512bf16 forces one (the tests run each
 * and compare bytes); otherwise the fastest the processor runs.  avx512
 * needs AVX-512 F; avx512bf16 also BW, VBMI and BF16, and must give the
 * scalar kernel's bytes on a probe first (pairs_probe below).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-features.h"
#include "cpu.h"
#include "formats.h"

#ifdef M3IDX_CPU_HAVE_AVX512_BF16
static uint64_t probe_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Does the avx512bf16 kernel give the scalar kernel's bits here?  The
 * instruction it rests on (vdpbf16ps) is specified as two multiply-adds in
 * turn, each rounded to nearest even; a processor that rounded the pair
 * once, or took its halves the other way round, fails this probe and gets
 * the avx512 kernel.  One key in slot 0 of a page, one row seeing it
 * (nkeys 1), so each trial compares one logit: first a key and query whose
 * sum rounds differently if a pair is rounded once (1 + 2^-24 + 2^-24),
 * then 512 random ones. */
static int pairs_probe(void) {
  _Alignas(64) uint8_t page[M3IDX_PAGE_BYTES]; /* on the stack: threads may probe at once */
  _Alignas(64) float q[M3IDX_HEAD_DIM];
  uint64_t rs = 0x9e3779b97f4a7c15u;
  memset(page, 0, sizeof page); /* each trial rewrites slot 0's 64 + 4 bytes */
  for (int trial = 0; trial <= 512; trial++) {
    if (trial == 0) {
      memset(q, 0, sizeof q);
      page[0] = 0x02; /* elements 0..3: 1.0, 0, 1.0, 1.0 */
      page[1] = 0x22;
      memset(page + M3IDX_PAGE_DATA_BYTES, 127, 4);
      q[0] = 1.0f;
      q[2] = q[3] = 0x1p-24f;
    } else {
      for (int i = 0; i < 64; i++)
        page[i] = (uint8_t)probe_rand(&rs);
      for (int g = 0; g < 4; g++)
        page[M3IDX_PAGE_DATA_BYTES + g] = (uint8_t)(120 + probe_rand(&rs) % 15);
      for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
        uint64_t r = probe_rand(&rs);
        uint16_t bits = (uint16_t)((r & 0x807fu) | ((107u + (r >> 16) % 41u) << 7));
        q[d] = m3idx__bf16_value(bits);
      }
    }
    float want = 0.0f, got = 1.0f;
    struct m3idx_cpu_row a = {q, 1, 0, 1, &want}, b = {q, 1, 0, 1, &got};
    m3idx__cpu_page_scores_scalar(page, NULL, &a, 1, 1.0f);
    m3idx__cpu_page_scores_avx512bf16(page, NULL, &b, 1, 1.0f);
    if (memcmp(&want, &got, sizeof want) != 0)
      return 0;
  }
  return 1;
}

/* The probe runs once a process (two threads racing both find the same). */
static int have_avx512bf16(void) {
  static int known = -1;
  int v = __atomic_load_n(&known, __ATOMIC_ACQUIRE);
  if (v < 0) {
    v = m3idx__cpu_has_avx512bf16() && pairs_probe();
    __atomic_store_n(&known, v, __ATOMIC_RELEASE);
  }
  return v;
}
#endif

static int always(void) { return 1; }

/* The kernels, fastest first: the first usable one is taken, unless
 * M3IDX_CPU_ISA names another. */
static const struct {
  const char *name;
  m3idx_cpu_page_kernel fn;
  int (*usable)(void);
} kernels[] = {
#ifdef M3IDX_CPU_HAVE_AVX512_BF16
    {"avx512bf16", m3idx__cpu_page_scores_avx512bf16, have_avx512bf16},
#endif
#ifdef M3IDX_CPU_HAVE_AVX512
    {"avx512", m3idx__cpu_page_scores_avx512, m3idx__cpu_has_avx512f},
#endif
    {"scalar", m3idx__cpu_page_scores_scalar, always},
};
#define NKERNELS (sizeof kernels / sizeof kernels[0])

m3idx_cpu_page_kernel m3idx__cpu_pick_kernel(const char **name,
                                             struct m3idx_errbuf *err) {
  const char *want = getenv("M3IDX_CPU_ISA");
  const int forced = want != NULL && *want != '\0';
  for (size_t i = 0; i < NKERNELS; i++)
    if ((!forced || strcmp(want, kernels[i].name) == 0) && kernels[i].usable()) {
      *name = kernels[i].name;
      return kernels[i].fn;
    }
  char usable[128] = "";
  for (size_t i = NKERNELS; i-- > 0;)
    if (kernels[i].usable())
      snprintf(usable + strlen(usable), sizeof usable - strlen(usable), "%s%s",
               usable[0] ? ", " : "", kernels[i].name);
#ifdef M3IDX_CPU_HAVE_AVX512_BF16
  const int refused = m3idx__cpu_has_avx512bf16() && !have_avx512bf16();
#else
  const int refused = 0;
#endif
  snprintf(err->msg, sizeof err->msg, "M3IDX_CPU_ISA is '%s': this processor and build run %s%s",
           want, usable,
           refused ? " (avx512bf16 refused: its probe gave other bits than the scalar kernel)"
                   : "");
  return NULL;
}
