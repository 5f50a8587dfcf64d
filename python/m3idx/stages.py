"""The single stages of SPEC section 10: block scores, pinning, top-k.
Scores are float32 [H, rows, stride] with stride >= ceil(max_seq_len / 128);
entries at or past a row's causal block count are left untouched."""

import ctypes

from . import _describe as D
from ._arrays import adapt, apart, expect_shape
from ._contexts import backend_for, context
from ._library import TOPK, check, lib
from .indexer import _finish, _work_map

__all__ = ["score_decode", "score_prefill", "pin_forced_blocks", "topk_from_scores"]


def _scores(scores, heads, rows, max_seq_len, name="scores_out", writable=True):
    s = adapt(scores, name, ("f32",), 3, writable=writable)
    if s.shape[0] != heads or s.shape[1] != rows or s.shape[2] < D.width(max_seq_len):
        raise ValueError("%s has shape %s, expected [%d, %d, >= %d]"
                         % (name, list(s.shape), heads, rows, D.width(max_seq_len)))
    return s


def score_decode(index_query, index_pages, block_table, seq_lens, work_map, scores_out, *,
                 max_seq_len, query_len, scale, backend=None):
    """Clamped, unpinned block scores of every decode row into scores_out."""
    q, qd = D.query(index_query, scale)
    sl = D.lengths(seq_lens)
    pages, bt, kc = D.kcache(index_pages, block_table, sl.shape[0])
    wm, cap = _work_map(work_map)
    rows, heads = q.shape[0], q.shape[1]
    batch = D.decode_batch(sl, heads, rows, max_seq_len, query_len)
    s = _scores(scores_out, heads, rows, batch.max_seq_len)
    device = D.device_of(q, pages, bt, sl, wm, s)
    apart([s], [q, pages, bt, sl, wm])
    ctx = context(backend_for(backend, device), device, batch)
    check(lib.m3idx_score_decode(ctx, ctypes.byref(batch), ctypes.byref(qd), ctypes.byref(kc),
                                 wm.ptr if wm else None, cap, s.ptr, s.shape[2]), ctx)
    _finish(ctx, device)
    return scores_out


def score_prefill(index_query, index_pages, block_table, cu_seqlens_q, seq_lens, context_lens,
                  scores_out, *, max_seq_len, scale, backend=None):
    """Clamped, unpinned block scores of every prefill row into scores_out."""
    q, qd = D.query(index_query, scale)
    sl = D.lengths(seq_lens)
    pages, bt, kc = D.kcache(index_pages, block_table, sl.shape[0])
    cu = adapt(cu_seqlens_q, "cu_seqlens_q", ("i32",), 1)
    cl = adapt(context_lens, "context_lens", ("i32",), 1)
    rows, heads = q.shape[0], q.shape[1]
    batch = D.prefill_batch(sl, cu, cl, heads, rows, max_seq_len)
    s = _scores(scores_out, heads, rows, batch.max_seq_len)
    device = D.device_of(q, pages, bt, sl, cu, cl, s)
    apart([s], [q, pages, bt, sl, cu, cl])
    ctx = context(backend_for(backend, device), device, batch)
    check(lib.m3idx_score_prefill(ctx, ctypes.byref(batch), ctypes.byref(qd), ctypes.byref(kc),
                                  s.ptr, s.shape[2]), ctx)
    _finish(ctx, device)
    return scores_out


def _rows_batch(scores_arr_heads, rows, seq_lens, max_seq_len, query_len, cu_seqlens_q,
                context_lens):
    sl = D.lengths(seq_lens)
    if cu_seqlens_q is None and context_lens is None:
        if query_len is None:
            raise TypeError("decode rows need query_len; prefill rows cu_seqlens_q and "
                            "context_lens")
        return sl, None, None, D.decode_batch(sl, scores_arr_heads, rows, max_seq_len, query_len)
    if query_len is not None or cu_seqlens_q is None or context_lens is None:
        raise TypeError("give query_len (decode) or cu_seqlens_q and context_lens (prefill)")
    cu = adapt(cu_seqlens_q, "cu_seqlens_q", ("i32",), 1)
    cl = adapt(context_lens, "context_lens", ("i32",), 1)
    return sl, cu, cl, D.prefill_batch(sl, cu, cl, scores_arr_heads, rows, max_seq_len)


def pin_forced_blocks(scores, seq_lens, *, max_seq_len, init_blocks, local_blocks, query_len=None,
                      cu_seqlens_q=None, context_lens=None, backend=None):
    """Clamp, then pin the init (1e30) and local (1e29) blocks of scores,
    in place.  The rows are decode rows (query_len) or prefill rows
    (cu_seqlens_q and context_lens)."""
    raw = adapt(scores, "scores", ("f32",), 3, writable=True)
    heads, rows = raw.shape[0], raw.shape[1]
    sl, cu, cl, batch = _rows_batch(heads, rows, seq_lens, max_seq_len, query_len, cu_seqlens_q,
                                    context_lens)
    s = _scores(scores, heads, rows, batch.max_seq_len, "scores")
    ib = D.integer(init_blocks, "init_blocks")
    lb = D.integer(local_blocks, "local_blocks")
    device = D.device_of(sl, cu, cl, s)
    apart([s], [sl, cu, cl])
    ctx = context(backend_for(backend, device), device, batch)
    check(lib.m3idx_pin_forced_blocks(ctx, ctypes.byref(batch), ib, lb, s.ptr, s.shape[2]), ctx)
    _finish(ctx, device)
    return scores


def topk_from_scores(scores, seq_lens, topk_out, *, max_seq_len, query_len=None,
                     cu_seqlens_q=None, context_lens=None, backend=None):
    """The top-16 block ids of (pinned) scores into topk_out [H, rows, 16]."""
    raw = adapt(scores, "scores", ("f32",), 3)
    heads, rows = raw.shape[0], raw.shape[1]
    sl, cu, cl, batch = _rows_batch(heads, rows, seq_lens, max_seq_len, query_len, cu_seqlens_q,
                                    context_lens)
    s = _scores(scores, heads, rows, batch.max_seq_len, "scores", writable=False)
    out = adapt(topk_out, "topk_out", ("i32",), 3, writable=True)
    expect_shape(out, (heads, rows, TOPK))
    device = D.device_of(sl, cu, cl, s, out)
    apart([out], [sl, cu, cl, s])
    ctx = context(backend_for(backend, device), device, batch)
    check(lib.m3idx_topk_from_scores(ctx, ctypes.byref(batch), s.ptr, s.shape[2], out.ptr), ctx)
    _finish(ctx, device)
    return topk_out
