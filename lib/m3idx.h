/*
 * m3idx.h - the MiniMax M3 lightning-indexer over MXFP4 index-K pages.
 *
 * For every query row of a sparse-attention layer, m3idx scores each causal
 * 128-token key block and returns the top-k block ids.  The CPU reference and
 * the HIP backend return the same bytes for the same call.  See m3idx(7).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_H
#define M3IDX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(M3IDX_BUILDING_LIBRARY) && defined(__GNUC__)
#define M3IDX_API __attribute__((visibility("default")))
#else
#define M3IDX_API
#endif

/* ---- Version ----------------------------------------------------------- */
#define M3IDX_VERSION_MAJOR 0
#define M3IDX_VERSION_MINOR 2
#define M3IDX_VERSION_PATCH 0
#define M3IDX_VERSION_STRING "0.2.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define M3IDX_VERSION_NUMBER \
  (M3IDX_VERSION_MAJOR * 10000 + M3IDX_VERSION_MINOR * 100 + M3IDX_VERSION_PATCH)

/* The version of the library actually linked, as "MAJOR.MINOR.PATCH". */
M3IDX_API const char *m3idx_version(void);
/* The same as M3IDX_VERSION_NUMBER computes, for the linked library. */
M3IDX_API int m3idx_version_number(void);

/* ---- Constants (SPEC section 1) ---------------------------------------- */
#define M3IDX_BLOCK_SIZE 128 /* tokens in one page = one sparse key block */
#define M3IDX_HEAD_DIM 128   /* elements of one index key / query head */
#define M3IDX_MX_GROUP 32    /* elements sharing one e8m0 scale */
#define M3IDX_TOPK 16        /* block ids selected per (head, row) */
#define M3IDX_PAGE_BYTES 8704 /* 128 tokens x (64 data + 4 scale bytes) */
#define M3IDX_PAGE_DATA_BYTES 8192 /* offset of the scale bytes in a page */

/* Forced-block sentinels and the clamp applied to computed scores. */
#define M3IDX_SENTINEL_INIT 1e30f        /* bits 0x7149f2ca */
#define M3IDX_SENTINEL_LOCAL 1e29f       /* bits 0x6fa18f08 */
#define M3IDX_SCORE_CLAMP_BITS 0x6fa18f07u /* largest float below 1e29 */

/* ---- Status codes ------------------------------------------------------ */
/* Negative, explicitly numbered, never reused. */
typedef enum m3idx_status {
  M3IDX_OK = 0,
  M3IDX_ERR_NULL_POINTER = -1,      /* a required pointer is NULL */
  M3IDX_ERR_INVALID_SIZE = -2,      /* a count or length is negative or out of range */
  M3IDX_ERR_INCONSISTENT = -3,      /* lengths that must agree do not */
  M3IDX_ERR_PAGE_ID = -4,           /* a block-table entry is outside [0, num_pages) */
  M3IDX_ERR_FORCED_BLOCKS = -5,     /* init/local blocks negative or I + L > TOPK */
  M3IDX_ERR_SCALE = -6,             /* the score scale is not finite */
  M3IDX_ERR_UNSUPPORTED = -7,       /* configuration or dtype not supported */
  M3IDX_ERR_BACKEND_UNAVAILABLE = -8, /* the backend asked for cannot be used */
  M3IDX_ERR_LIMIT = -9,             /* the call exceeds the context's limits */
  M3IDX_ERR_NO_MEMORY = -10,        /* host or device allocation failed */
  M3IDX_ERR_WORK_MAP = -11,         /* work map too small or not built for this batch */
  M3IDX_ERR_OPTIONS = -12,          /* the options struct is invalid */
  M3IDX_ERR_DEVICE = -13,           /* the GPU runtime reported an error */
  M3IDX_ERR_DEVICE_INPUT = -14,     /* a kernel found bad input in device memory */
  M3IDX_ERR_INVALID_ARGUMENT = -15  /* an enum or flag value is not valid */
} m3idx_status;

/* A constant sentence for a status; never NULL. */
M3IDX_API const char *m3idx_strerror(m3idx_status status);

/* ---- Enumerations ------------------------------------------------------ */
typedef enum m3idx_backend {
  M3IDX_BACKEND_AUTO = 0, /* HIP when usable, else CPU; M3IDX_BACKEND overrides */
  M3IDX_BACKEND_CPU = 1,  /* the bit-exact OpenMP reference */
  M3IDX_BACKEND_HIP = 2   /* the GPU plugin */
} m3idx_backend;

typedef enum m3idx_dtype {
  M3IDX_DTYPE_BF16 = 1, /* uint16_t: the top 16 bits of an IEEE binary32 */
  M3IDX_DTYPE_E4M3 = 2  /* uint8_t: OCP FP8 E4M3 ("fn") */
} m3idx_dtype;

typedef enum m3idx_mode {
  M3IDX_MODE_DECODE = 1, /* every request has query_len new rows at its end */
  M3IDX_MODE_PREFILL = 2 /* ragged rows after a per-request context */
} m3idx_mode;

/* ---- Context ----------------------------------------------------------- */
typedef struct m3idx_context m3idx_context;

/* The context works on device pointers (HIP) unless this flag is set; with
 * it, every pointer is a host pointer and the call is synchronous. */
#define M3IDX_FLAG_HOST_POINTERS 0x1u
/* Do not use libnuma placement even where it is available. */
#define M3IDX_FLAG_NO_NUMA 0x2u

/* The most CPU worker threads a context takes (opts->threads). */
#define M3IDX_MAX_THREADS 1024

typedef struct m3idx_options {
  size_t size;            /* sizeof(m3idx_options): set by m3idx_options_init */
  m3idx_backend backend;  /* AUTO, CPU or HIP */
  int32_t threads;        /* CPU worker threads, <= M3IDX_MAX_THREADS; 0 = default */
  int32_t device;         /* HIP device ordinal */
  void *stream;           /* hipStream_t of the calls; NULL = the null stream */
  int32_t max_reqs;       /* most requests in one call */
  int32_t max_model_len;  /* most tokens of one request (max_seq_len) */
  int32_t max_rows;       /* most query rows in one call */
  int32_t max_heads;      /* most index heads in one call */
  uint32_t flags;         /* M3IDX_FLAG_* */
} m3idx_options;

/* Fill *opts with the defaults (AUTO backend, 256 requests, 131072 tokens,
 * 1024 rows, 4 heads, no flags) and set opts->size. */
M3IDX_API void m3idx_options_init(m3idx_options *opts);

/* Create a context: picks the backend, allocates all scratch for the
 * limits.  On failure *ctx is set to NULL and m3idx_last_error(NULL) says
 * why. */
M3IDX_API m3idx_status m3idx_context_create(const m3idx_options *opts,
                                            m3idx_context **ctx);
M3IDX_API void m3idx_context_destroy(m3idx_context *ctx);

/* The backend a context runs on (CPU or HIP); AUTO for a NULL ctx. */
M3IDX_API m3idx_backend m3idx_context_backend(const m3idx_context *ctx);

/* Wait for the context's stream; report errors found by kernels since the
 * last synchronising call (M3IDX_ERR_DEVICE_INPUT, M3IDX_ERR_DEVICE). */
M3IDX_API m3idx_status m3idx_synchronize(m3idx_context *ctx);

/* The detailed message of the last failed call on ctx ("" if none); with
 * ctx == NULL, of the calling thread's last failed call that takes no
 * context (m3idx_context_create, format helpers, work-map capacity). */
M3IDX_API const char *m3idx_last_error(const m3idx_context *ctx);

/* NULL when the backend can be used here, else a sentence saying why not. */
M3IDX_API const char *m3idx_backend_unavailable_reason(m3idx_backend backend);

/* NULL for the one supported configuration (topk 16, block size 128,
 * head dim 128, score type "max"), else a sentence naming what differs. */
M3IDX_API const char *m3idx_config_unsupported_reason(int32_t topk,
                                                      int32_t block_size,
                                                      int32_t head_dim,
                                                      const char *score_type);

/* ---- Call descriptions ------------------------------------------------- */
/* Which query rows a call has and where they sit (SPEC section 5). */
typedef struct m3idx_batch {
  m3idx_mode mode;
  int32_t num_reqs;     /* requests, >= 1 */
  int32_t num_heads;    /* index heads H, >= 1 */
  int32_t num_rows;     /* query rows; decode: num_reqs * query_len;
                           prefill: cu_seqlens_q[num_reqs] */
  int32_t max_seq_len;  /* >= every seq_lens[r]; width = ceil(max_seq_len / 128) */
  const int32_t *seq_lens;     /* [num_reqs] tokens of each request */
  int32_t query_len;           /* decode: new rows per request, >= 1 */
  const int32_t *cu_seqlens_q; /* prefill: [num_reqs + 1], starts at 0 */
  const int32_t *context_lens; /* prefill: [num_reqs] tokens before the rows */
} m3idx_batch;

/* Where the index keys live (SPEC section 3). */
typedef struct m3idx_kcache {
  const uint8_t *pages;        /* [num_pages, 8704] */
  int32_t num_pages;
  const int32_t *block_table;  /* [num_reqs, bt_stride] page ids */
  int32_t bt_stride;
} m3idx_kcache;

/* The query rows and the logit scale. */
typedef struct m3idx_query {
  const void *data;  /* [num_rows, num_heads, 128] elements of dtype */
  m3idx_dtype dtype;
  float scale;       /* finite; logit = dot * scale */
} m3idx_query;

/* ---- Stages (SPEC section 10) ------------------------------------------ */
/* Scores are fp32 [num_heads, num_rows, score_stride]; score_stride 0 means
 * width = ceil(max_seq_len / 128).  Entries at or past a row's causal block
 * count are left untouched.  m3idx_score_* write clamped, unpinned scores. */
M3IDX_API m3idx_status m3idx_score_decode(m3idx_context *ctx,
                                          const m3idx_batch *batch,
                                          const m3idx_query *query,
                                          const m3idx_kcache *kcache,
                                          const int32_t *work_map,
                                          int32_t work_map_capacity,
                                          float *scores, int64_t score_stride);

M3IDX_API m3idx_status m3idx_score_prefill(m3idx_context *ctx,
                                           const m3idx_batch *batch,
                                           const m3idx_query *query,
                                           const m3idx_kcache *kcache,
                                           float *scores, int64_t score_stride);

/* Clamp, then pin init blocks (1e30) and local blocks (1e29), in place. */
M3IDX_API m3idx_status m3idx_pin_forced_blocks(m3idx_context *ctx,
                                               const m3idx_batch *batch,
                                               int32_t init_blocks,
                                               int32_t local_blocks,
                                               float *scores,
                                               int64_t score_stride);

/* int32 [num_heads, num_rows, 16] block ids: score descending, ties by the
 * smaller id, NaN last, -1 past the row's causal block count. */
M3IDX_API m3idx_status m3idx_topk_from_scores(m3idx_context *ctx,
                                              const m3idx_batch *batch,
                                              const float *scores,
                                              int64_t score_stride,
                                              int32_t *topk);

/* The top-k of the union of `parts' top-k lists, per (head, row) pair, as
 * a context-parallel indexer merges its ranks' candidates: part p gives
 * ids[p] [pairs, 16] (block ids of the whole row, then -1 to the end) and
 * scores[p] [pairs, 16], the score each id was ranked by (pinned where
 * the forced blocks were pinned).  out_ids [pairs, 16] receives the
 * top-16 in SPEC section 7's order (score descending, -0 as +0, NaN last,
 * ties by the smaller id), -1 after the last; out_scores (may be NULL)
 * their scores, -inf after the last.  Exact by construction when each
 * list is its part's top-16.  A block listed twice in a pair is refused. */
M3IDX_API m3idx_status m3idx_merge_topk(int64_t pairs, int32_t parts,
                                        const int32_t *const *ids,
                                        const float *const *scores,
                                        int32_t *out_ids, float *out_scores);

/* Fused: score, pin, top-k.  scores may be NULL (context scratch is used);
 * when given, it receives the pinned scores. */
M3IDX_API m3idx_status m3idx_index_topk_decode(m3idx_context *ctx,
                                               const m3idx_batch *batch,
                                               const m3idx_query *query,
                                               const m3idx_kcache *kcache,
                                               int32_t init_blocks,
                                               int32_t local_blocks,
                                               const int32_t *work_map,
                                               int32_t work_map_capacity,
                                               int32_t *topk, float *scores,
                                               int64_t score_stride);

M3IDX_API m3idx_status m3idx_index_topk_prefill(m3idx_context *ctx,
                                                const m3idx_batch *batch,
                                                const m3idx_query *query,
                                                const m3idx_kcache *kcache,
                                                int32_t init_blocks,
                                                int32_t local_blocks,
                                                int32_t *topk, float *scores,
                                                int64_t score_stride);

/* ---- Decode work map (SPEC section 9) ---------------------------------- */
/* Entry e of the map is int32 [2]: {request, first_block | count << 24},
 * or {-1, 0} when unused.  The capacity bounds every decode batch of at
 * most max_reqs requests of at most max_blocks blocks. */
M3IDX_API m3idx_status m3idx_work_map_capacity(int32_t max_reqs,
                                               int32_t max_blocks,
                                               int32_t query_len,
                                               int32_t num_heads,
                                               int32_t *capacity);

/* Rebuild the map in place from batch->seq_lens (a kernel on the HIP
 * backend, so it can be captured in a graph). */
M3IDX_API m3idx_status m3idx_work_map_build(m3idx_context *ctx,
                                            const m3idx_batch *batch,
                                            int32_t *work_map,
                                            int32_t work_map_capacity);

/* ---- Verifying another indexer's top-k (SPEC section 13) ---------------- */
/* The order a candidate's ids come in. */
typedef enum m3idx_verify_order {
  M3IDX_ORDER_DESC = 0,  /* by score descending, as m3idx writes them */
  M3IDX_ORDER_ANY = 1    /* any order (ascending ids, say) */
} m3idx_verify_order;

/* How the candidate may have rounded the query before its products. */
typedef enum m3idx_query_rounding {
  M3IDX_QUERY_ROUNDING_NONE = 0,
  M3IDX_QUERY_ROUNDING_BF16 = 1,  /* to bf16, after any per-row scale */
  M3IDX_QUERY_ROUNDING_E4M3 = 2   /* to e4m3, after any per-row scale */
} m3idx_query_rounding;

typedef struct m3idx_verify_options {
  size_t size;                  /* sizeof(m3idx_verify_options): set by _init */
  m3idx_verify_order order;
  m3idx_query_rounding query_rounding;
  double tolerance_rel;         /* extra bound: this fraction of |score| */
  double tolerance_ulps;        /* extra bound: this many fp32 ulps of the score */
  uint32_t flags;               /* M3IDX_VERIFY_* */
  /* Decode: the batch's work map, as the fused call takes it (NULL: the
     call builds its own); a prefill batch takes none. */
  const int32_t *work_map;
  int32_t work_map_capacity;
} m3idx_verify_options;

/* Verdicts only: summary->max_score_deviation is not computed (NaN), which
 * spares the bound's terms of blocks no verdict depends on. */
#define M3IDX_VERIFY_NO_MAX_DEVIATION 1u

/* Defaults: ORDER_DESC, no query rounding, no tolerance; sets opts->size. */
M3IDX_API void m3idx_verify_options_init(m3idx_verify_options *opts);

typedef enum m3idx_verdict {
  M3IDX_VERDICT_EXACT = 0,       /* m3idx's output, slot for slot */
  M3IDX_VERDICT_EQUIVALENT = 1,  /* a top-k of scores within the bounds */
  M3IDX_VERDICT_WRONG = 2
} m3idx_verdict;

typedef enum m3idx_verify_reason {
  M3IDX_REASON_NONE = 0,
  M3IDX_REASON_ID_RANGE = 1,      /* an id outside [0, n) (not causal) where one belongs */
  M3IDX_REASON_DUPLICATE = 2,     /* an id twice */
  M3IDX_REASON_COUNT = 3,         /* -1 before min(16, n) ids */
  M3IDX_REASON_PADDING = 4,       /* past min(16, n) ids, a slot not -1 */
  M3IDX_REASON_FORCED = 5,        /* a forced block missing */
  M3IDX_REASON_SET = 6,           /* a block left out beats one taken, beyond the bounds */
  M3IDX_REASON_ORDER = 7,         /* adjacent ids out of order beyond the bounds */
  M3IDX_REASON_SCORE = 8          /* a candidate score outside X +- E */
} m3idx_verify_reason;

/* One (head, row)'s verdict.  For SET and ORDER, block_a is the block that
 * was taken (or came first), slot its slot, and block_b the one that beats
 * it; gap is (X(b) - X(a)) / (E(a) + E(b)), above 1.  For SCORE, block_a
 * is the block and gap its deviation |s - X| / E.  For the structural
 * reasons, slot is the first slot at fault and block_a its id (or the
 * missing forced block, slot -1).  Fields that name nothing are -1, gap 0. */
typedef struct m3idx_verify_row {
  int32_t verdict;   /* m3idx_verdict */
  int32_t reason;    /* m3idx_verify_reason */
  int32_t slot;
  int32_t block_a, block_b;
  float gap;
} m3idx_verify_row;

typedef struct m3idx_verify_summary {
  int64_t rows;                 /* (head, row) pairs */
  int64_t exact, equivalent, wrong;
  double max_score_deviation;   /* candidate scores: largest |s - X| / E (0 without) */
} m3idx_verify_summary;

/* Decide, per (head, row) of the batch (decode or prefill, by its mode),
 * whether candidate [H, rows, 16] is exact, equivalent or wrong, from the
 * exact scores and the bound of SPEC section 13.  candidate_scores
 * [H, rows, stride] (may be NULL) are the candidate's clamped, unpinned
 * block scores; stride 0 means the width.  rows (may be NULL) receives
 * [H, rows] verdicts, summary (may be NULL) the counts.  On a HIP context
 * device pointers are read where they are and the call waits for them;
 * the verdicts are the CPU's, bit for bit. */
M3IDX_API m3idx_status m3idx_verify_topk(m3idx_context *ctx, const m3idx_batch *batch,
                                         const m3idx_query *query,
                                         const m3idx_kcache *kcache,
                                         int32_t init_blocks, int32_t local_blocks,
                                         const int32_t *candidate,
                                         const float *candidate_scores,
                                         int64_t score_stride,
                                         const m3idx_verify_options *opts,
                                         m3idx_verify_row *rows,
                                         m3idx_verify_summary *summary);

/* ---- Format helpers (SPEC sections 2 and 3) ---------------------------- */
M3IDX_API float m3idx_bf16_to_float(uint16_t x);
M3IDX_API uint16_t m3idx_float_to_bf16(float x);   /* nearest, ties to even */
M3IDX_API float m3idx_e4m3_to_float(uint8_t x);
M3IDX_API uint8_t m3idx_float_to_e4m3(float x);    /* nearest-even, saturating */
M3IDX_API float m3idx_e2m1_to_float(uint8_t code); /* low 4 bits */
M3IDX_API uint8_t m3idx_float_to_e2m1(float x);    /* nearest-even, saturating */
M3IDX_API float m3idx_e8m0_to_float(uint8_t e);    /* 255 is NaN */
/* The smallest e with amax / 2^(e-127) <= 6; 255 when amax is not finite. */
M3IDX_API uint8_t m3idx_e8m0_for_amax(float amax);

/* Quantise one 128-element key row into slot `slot` of a page. */
M3IDX_API m3idx_status m3idx_page_encode_f32(uint8_t *page, int32_t slot,
                                             const float *key);
M3IDX_API m3idx_status m3idx_page_encode_bf16(uint8_t *page, int32_t slot,
                                              const uint16_t *key);
/* Dequantise slot `slot` of a page: key[d] = e2m1 * e8m0 in fp32. */
M3IDX_API m3idx_status m3idx_page_decode(const uint8_t *page, int32_t slot,
                                         float *key);
/* The same values in fp64, where every one of them is exact (in fp32,
 * magnitudes of 2^128 or more, e2m1 >= 2 at scale byte 254 or >= 4 at
 * 253, become inf). */
M3IDX_API m3idx_status m3idx_page_decode_f64(const uint8_t *page, int32_t slot,
                                             double *key);
/* Encode num_tokens fp32 rows [num_tokens, 128] into ceil(num_tokens/128)
 * pages in token order, unused slots zero.  num_pages must be that count. */
M3IDX_API m3idx_status m3idx_encode_keys_f32(const float *keys,
                                             int64_t num_tokens,
                                             uint8_t *pages,
                                             int64_t num_pages);

#ifdef __cplusplus
}
#endif
#endif /* M3IDX_H */
