"""m3idx: the MiniMax M3 lightning indexer over MXFP4 index-K pages, as a
golden reference for pytest suites (ctypes over libm3idx; no compiled
extension).

Every logit is the exact score scale * sum(q[d] * k[d]) rounded once to
fp32, so results are the same bits on every backend (see m3idx(7)).

Fused calls, with vLLM's ROCm MXFP4 indexer's signatures (outputs in place):
    mxfp4_index_topk_decode(index_query, index_pages, block_table, seq_lens,
                            work_map, topk_out, *, max_seq_len, query_len,
                            scale, init_blocks=0, local_blocks=1, backend=None)
    mxfp4_index_topk_prefill(index_query, index_pages, block_table,
                             cu_seqlens_q, seq_lens, context_lens,
                             num_valid_pages, topk_out, *, max_query_len,
                             max_seq_len, scale, init_blocks=0,
                             local_blocks=1, backend=None)
Verification (SPEC section 13): verify_topk(..., candidate, ...) says per
(head, row) whether another indexer's top-k is exact, equivalent or wrong,
with the proof; m3idx.testing.assert_topk_equivalent raises
AssertionError on a wrong row.
Work map: work_map_capacity(...), work_map(seq_lens, max_blocks, query_len,
num_heads, out=None).  Support: indexer_unsupported_reason(...),
backend_unavailable_reason(backend).  Stages: score_decode, score_prefill,
pin_forced_blocks, topk_from_scores.  Merging parts' top-16 lists (context
parallel): merge_topk(ids, scores).  Formats: encode_keys, decode_pages
and the element conversions.

Arrays: numpy arrays or torch tensors, zero-copy, C-contiguous; host memory
runs on the CPU reference, CUDA/HIP tensors on the GPU backend (their
device, torch's current stream; the call waits for its result).  Anything
with __dlpack__, __array_interface__ or __cuda_array_interface__ is taken
too.  bf16 queries are torch.bfloat16, ml_dtypes.bfloat16 or their uint16
bits; e4m3 queries torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn or uint8.

Errors: TypeError / ValueError name the argument and are raised before
anything is written (an output that shares memory with an input, or with
another output, is a ValueError naming both); m3idx.Error carries the library's status and message.
Outputs are untouched on every error.  Contexts are made once per thread,
backend, device and stream, and grown when a call needs more; a thread's
contexts are freed when it ends, those of threads still running at
interpreter exit are left to the operating system (they may be inside a
call), and a child made by fork makes its own.

The library is the one installed with this package; M3IDX_LIBRARY names
another (a build tree's lib/.libs/libm3idx.so).
"""

from ._library import BLOCK_SIZE, HEAD_DIM, MAX_THREADS, PAGE_BYTES, TOPK, Error
from ._library import lib as _lib
from .formats import (bf16_to_float, decode_pages, e2m1_to_float, e4m3_to_float, e8m0_for_amax,
                      e8m0_to_float, encode_keys, float_to_bf16, float_to_e2m1, float_to_e4m3)
from .indexer import (backend_unavailable_reason, indexer_unsupported_reason,
                      mxfp4_index_topk_decode, mxfp4_index_topk_prefill, work_map,
                      work_map_capacity)
from .merge import merge_topk
from .stages import pin_forced_blocks, score_decode, score_prefill, topk_from_scores
from .verify import VerifyReport, verify_topk
from . import testing

__version__ = _lib.m3idx_version().decode()

__all__ = ["Error", "BLOCK_SIZE", "HEAD_DIM", "PAGE_BYTES", "TOPK", "MAX_THREADS",
           "mxfp4_index_topk_decode", "mxfp4_index_topk_prefill", "work_map_capacity",
           "work_map", "indexer_unsupported_reason", "backend_unavailable_reason",
           "score_decode", "score_prefill", "pin_forced_blocks", "topk_from_scores",
           "merge_topk",
           "verify_topk", "VerifyReport", "testing",
           "encode_keys", "decode_pages", "bf16_to_float", "float_to_bf16", "e4m3_to_float",
           "float_to_e4m3", "e2m1_to_float", "float_to_e2m1", "e8m0_to_float", "e8m0_for_amax"]
