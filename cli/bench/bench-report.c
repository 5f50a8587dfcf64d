/*
 * bench-report.c - the bench's one report: a table for people, or JSON.
 * A figure whose repeats spread too widely, whose ceilings moved between
 * the two measurements, or which lies above a ceiling is printed without
 * its ratios, with the reason.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct bench_result *bench_report_add(struct bench_report *rep) {
  if (rep->count == rep->capacity) {
    int cap = rep->capacity ? 2 * rep->capacity : 64;
    struct bench_result *r = realloc(rep->results, sizeof *r * (size_t)cap);
    if (r == NULL)
      return NULL;
    rep->results = r;
    rep->capacity = cap;
  }
  struct bench_result *r = &rep->results[rep->count++];
  memset(r, 0, sizeof *r);
  r->verified = "-";
  return r;
}

void bench_report_free(struct bench_report *rep) {
  free(rep->results);
  memset(rep, 0, sizeof *rep);
}

static void print_table(const struct bench_report *rep) {
  const struct bench_ceilings *cpu = &rep->ceilings[0], *gpu = &rep->ceilings[1];
  printf("m3idx %s bench\n", m3idx_version());
  if (rep->device[0][0])
    printf("cpu ceilings (%s): read %.1f GB/s (8704-byte pages in shuffled order, as\n"
           "  decode reads them: %.1f GB/s), fp32 FMA %.1f GFLOP/s; measured before and after\n"
           "  the cases, the higher taken (they moved %.0f%%)\n",
           rep->device[0], cpu->bytes_per_s / 1e9, cpu->page_bytes_per_s / 1e9,
           cpu->flops_per_s / 1e9, 100.0 * rep->ceiling_moved[0]);
  if (rep->device[1][0])
    printf("gpu ceilings (%s): read only %.1f GB/s (the roof), copy %.1f GB/s (read +\n"
           "  write), fp32 FMA %.1f TFLOP/s; measured before and after the cases, the higher\n"
           "  taken (they moved %.0f%%)\n",
           rep->device[1], gpu->page_bytes_per_s / 1e9, gpu->bytes_per_s / 1e9,
           gpu->flops_per_s / 1e12, 100.0 * rep->ceiling_moved[1]);
  printf("\n%-40s %-4s %11s %10s %9s %7s %10s %7s %-10s %s\n", "case", "", "median", "Mkeys/s",
         "GB/s", "roof", "GFLOP/s", "peak", "same bytes", "note");
  int unreliable = 0;
  for (int i = 0; i < rep->count; i++) {
    const struct bench_result *r = &rep->results[i];
    char t[32], roof[16], peak[16], note[96] = "";
    if (r->median_s < 1e-3)
      snprintf(t, sizeof t, "%.2f us", r->median_s * 1e6);
    else
      snprintf(t, sizeof t, "%.3f ms", r->median_s * 1e3);
    snprintf(roof, sizeof roof, "%.2f%%", 100.0 * r->roofline_ratio);
    snprintf(peak, sizeof peak, "%.2f%%",
             r->peak_flops_per_s > 0 ? 100.0 * r->flops_per_s / r->peak_flops_per_s : 0.0);
    if (r->of_fused > 0.0)
      snprintf(note, sizeof note, "%.2fx the fused call", r->of_fused);
    if (r->unreliable) {
      unreliable++;
      snprintf(roof, sizeof roof, "?");
      snprintf(peak, sizeof peak, "?");
      snprintf(note, sizeof note, "unreliable: %s (repeats spread %.0f%%)", r->unreliable,
               100.0 * r->spread);
    }
    printf("%-40s %-4s %11s %10.1f %9.2f %7s %10.1f %7s %-10s %s\n", r->name, r->backend, t,
           r->keys_per_s / 1e6, r->bytes_per_s / 1e9, roof, r->flops_per_s / 1e9, peak,
           r->verified, note);
  }
  if (unreliable)
    printf("\n%d figure%s marked unreliable: the machine was busy or its ceilings moved during "
           "the run;\nrun the case again (--case) on a quiet machine before quoting it.\n",
           unreliable, unreliable == 1 ? "" : "s");
}

static void print_json(const struct bench_report *rep) {
  printf("[\n");
  for (int i = 0; i < rep->count; i++) {
    const struct bench_result *r = &rep->results[i];
    printf("  {\"name\": \"%s\", \"backend\": \"%s\", \"median_s\": %.9g, \"keys_per_s\": %.6g, "
           "\"bytes_per_s\": %.6g, \"roofline_bytes_per_s\": %.6g, \"roofline_ratio\": %.4f, "
           "\"flops_per_s\": %.6g, \"peak_flops_per_s\": %.6g, \"peak_ratio\": %.4f, "
           "\"page_read_bytes_per_s\": %.6g, \"verified\": \"%s\", \"spread\": %.4f, "
           "\"unreliable\": %s%s%s, \"of_fused\": %.4f}%s\n",
           r->name, r->backend, r->median_s, r->keys_per_s, r->bytes_per_s,
           r->roofline_bytes_per_s, r->roofline_ratio, r->flops_per_s, r->peak_flops_per_s,
           r->peak_flops_per_s > 0 ? r->flops_per_s / r->peak_flops_per_s : 0.0,
           r->page_read_bytes_per_s, r->verified, r->spread, r->unreliable ? "\"" : "",
           r->unreliable ? r->unreliable : "null", r->unreliable ? "\"" : "", r->of_fused,
           i + 1 < rep->count ? "," : "");
  }
  printf("]\n");
}

void bench_report_print(const struct bench_report *rep, int json) {
  if (json)
    print_json(rep);
  else
    print_table(rep);
}
