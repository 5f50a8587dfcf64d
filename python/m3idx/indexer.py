"""The fused indexer calls, with the names, argument order, keyword-only
arguments and in-place outputs of vLLM's ROCm MXFP4 indexer, plus the
decode work map and the support questions."""

import ctypes

import numpy as np

from . import _describe as D
from ._arrays import adapt, apart, expect_shape
from ._contexts import backend_for, context
from ._library import BACKENDS, BLOCK_SIZE, TOPK, check, lib

__all__ = ["mxfp4_index_topk_decode", "mxfp4_index_topk_prefill", "work_map_capacity",
           "work_map", "indexer_unsupported_reason", "backend_unavailable_reason"]


def _finish(ctx, device):
    """Device calls are queued on torch's current stream; wait for them so
    that errors kernels find in device memory are raised here."""
    if device is not None:
        check(lib.m3idx_synchronize(ctx), ctx)


def _work_map(work_map):
    if work_map is None:
        return None, 0
    wm = adapt(work_map, "work_map", ("i32",), 2)
    expect_shape(wm, (None, 2))
    return wm, wm.shape[0]


def mxfp4_index_topk_decode(index_query, index_pages, block_table, seq_lens, work_map, topk_out,
                            *, max_seq_len, query_len, scale, init_blocks=0, local_blocks=1,
                            backend=None):
    """Top-16 block ids of every decode row, written into topk_out.

    index_query  [rows, H, 128]: bf16 (torch.bfloat16, ml_dtypes.bfloat16 or
                 its uint16 bits) or e4m3 (torch.float8_e4m3fn or uint8);
                 rows = len(seq_lens) * query_len, request-major.
    index_pages  [pages, 8704] uint8 MXFP4 pages (SPEC section 3).
    block_table  [reqs, >= blocks] int32 page ids.
    seq_lens     [reqs] int32 tokens of each request, its new rows included.
    work_map     None, or an int32 [capacity, 2] map from work_map().
    topk_out     [H, rows, 16] int32, written in place: block ids by score
                 descending, -1 past a row's causal blocks.
    max_seq_len >= every seq_len; query_len new rows per request; scale the
    logit scale; init_blocks / local_blocks the forced blocks (I + L <= 16).
    backend: None or 'auto' (host data: the CPU reference; CUDA/HIP tensors:
    the GPU backend on their device and torch's current stream), 'cpu', 'hip'.
    Raises TypeError/ValueError for a bad argument and m3idx.Error when the
    library refuses the call; topk_out is untouched then.
    """
    q, qd = D.query(index_query, scale)
    sl = D.lengths(seq_lens)
    pages, bt, kc = D.kcache(index_pages, block_table, sl.shape[0])
    wm, cap = _work_map(work_map)
    rows, heads = q.shape[0], q.shape[1]
    out = adapt(topk_out, "topk_out", ("i32",), 3, writable=True)
    expect_shape(out, (heads, rows, TOPK))
    batch = D.decode_batch(sl, heads, rows, max_seq_len, query_len)
    ib = D.integer(init_blocks, "init_blocks")
    lb = D.integer(local_blocks, "local_blocks")
    device = D.device_of(q, pages, bt, sl, wm, out)
    apart([out], [q, pages, bt, sl, wm])
    be = backend_for(backend, device)
    ctx = context(be, device, batch)
    check(lib.m3idx_index_topk_decode(ctx, ctypes.byref(batch), ctypes.byref(qd),
                                      ctypes.byref(kc), ib, lb, wm.ptr if wm else None, cap,
                                      out.ptr, None, 0), ctx)
    _finish(ctx, device)
    return topk_out


def mxfp4_index_topk_prefill(index_query, index_pages, block_table, cu_seqlens_q, seq_lens,
                             context_lens, num_valid_pages, topk_out, *, max_query_len,
                             max_seq_len, scale, init_blocks=0, local_blocks=1, backend=None):
    """Top-16 block ids of every prefill row, written into topk_out.

    Request r owns rows cu_seqlens_q[r] .. cu_seqlens_q[r+1]-1 of index_query
    [rows, H, 128]; row i of it sits at context_lens[r] + i, and seq_lens[r]
    = context_lens[r] + its row count.  cu_seqlens_q [reqs + 1], seq_lens and
    context_lens [reqs] are int32.  num_valid_pages [rows] int32 must equal
    each row's causal block count (pos // 128 + 1): it is checked, and a
    difference is a ValueError.  max_query_len must be at least every
    request's row count.  Otherwise as mxfp4_index_topk_decode.
    """
    q, qd = D.query(index_query, scale)
    sl = D.lengths(seq_lens)
    pages, bt, kc = D.kcache(index_pages, block_table, sl.shape[0])
    cu = adapt(cu_seqlens_q, "cu_seqlens_q", ("i32",), 1)
    cl = adapt(context_lens, "context_lens", ("i32",), 1)
    nv = adapt(num_valid_pages, "num_valid_pages", ("i32",), 1)
    rows, heads = q.shape[0], q.shape[1]
    out = adapt(topk_out, "topk_out", ("i32",), 3, writable=True)
    expect_shape(out, (heads, rows, TOPK))
    expect_shape(nv, (rows,))
    batch = D.prefill_batch(sl, cu, cl, heads, rows, max_seq_len)
    mq = D.integer(max_query_len, "max_query_len", 0)
    ib = D.integer(init_blocks, "init_blocks")
    lb = D.integer(local_blocks, "local_blocks")
    device = D.device_of(q, pages, bt, sl, cu, cl, nv, out)
    apart([out], [q, pages, bt, sl, cu, cl, nv])
    be = backend_for(backend, device)
    want = D.causal_blocks(batch, sl, cu, cl)
    got = np.asarray(nv.host_numpy(), dtype=np.int64)
    bad = np.nonzero(got != want)[0]
    if bad.size:
        i = int(bad[0])
        raise ValueError("num_valid_pages[%d] is %d, but row %d sees %d blocks (pos // 128 + 1)"
                         % (i, got[i], i, want[i]))
    q_lens = np.diff(np.asarray(cu.host_numpy(), dtype=np.int64))
    if q_lens.size and int(q_lens.max()) > mq:
        raise ValueError("max_query_len is %d, but a request has %d rows" % (mq, q_lens.max()))
    ctx = context(be, device, batch)
    check(lib.m3idx_index_topk_prefill(ctx, ctypes.byref(batch), ctypes.byref(qd),
                                       ctypes.byref(kc), ib, lb, out.ptr, None, 0), ctx)
    _finish(ctx, device)
    return topk_out


def work_map_capacity(max_reqs, max_blocks, query_len, num_heads):
    """Entries of a decode work map that serves every batch of at most
    max_reqs requests of at most max_blocks blocks (SPEC section 9)."""
    cap = ctypes.c_int32()
    check(lib.m3idx_work_map_capacity(D.integer(max_reqs, "max_reqs"),
                                      D.integer(max_blocks, "max_blocks"),
                                      D.integer(query_len, "query_len"),
                                      D.integer(num_heads, "num_heads"), ctypes.byref(cap)))
    return cap.value


def work_map(seq_lens, max_blocks, query_len, num_heads, out=None, *, backend=None):
    """Build the decode work map of seq_lens into out (int32 [capacity, 2],
    allocated with work_map_capacity(len(seq_lens), ...) when None: a numpy
    array for host seq_lens, a torch tensor on their device otherwise) and
    return it."""
    sl = D.lengths(seq_lens)
    reqs = sl.shape[0]
    max_blocks = D.integer(max_blocks, "max_blocks", 1)
    query_len = D.integer(query_len, "query_len", 1)
    heads = D.integer(num_heads, "num_heads", 1)
    be = backend_for(backend, sl.device)
    if out is None:
        cap = work_map_capacity(reqs, max_blocks, query_len, heads)
        if sl.device is None:
            out = np.empty((cap, 2), dtype=np.int32)
        else:
            import torch
            out = torch.empty((cap, 2), dtype=torch.int32, device=sl.owner.device)
    wm = adapt(out, "out", ("i32",), 2, writable=True)
    expect_shape(wm, (None, 2))
    device = D.device_of(sl, wm)
    apart([wm], [sl])
    be = backend_for(backend, device)
    model_len = min(max_blocks * BLOCK_SIZE, D.INT32_MAX)
    batch = D.decode_batch(sl, heads, reqs * query_len, model_len, query_len)
    ctx = context(be, device, batch)
    check(lib.m3idx_work_map_build(ctx, ctypes.byref(batch), wm.ptr, wm.shape[0]), ctx)
    _finish(ctx, device)
    return out


def indexer_unsupported_reason(*, topk_blocks, sparse_block_size, num_index_heads, index_head_dim,
                               score_type="max"):
    """None when m3idx computes this indexer configuration, else a sentence
    saying what differs (m3idx computes top-k 16 over 128-token blocks of
    128-element keys, score type 'max', with any number of index heads)."""
    heads = D.integer(num_index_heads, "num_index_heads")
    if heads < 1:
        return "num_index_heads is %d; m3idx needs at least 1" % heads
    why = lib.m3idx_config_unsupported_reason(D.integer(topk_blocks, "topk_blocks"),
                                              D.integer(sparse_block_size, "sparse_block_size"),
                                              D.integer(index_head_dim, "index_head_dim"),
                                              str(score_type).encode())
    return why.decode() if why else None


def backend_unavailable_reason(backend):
    """None when backend ('cpu', 'hip' or 'auto') can be used here, else a
    sentence saying why not."""
    if backend not in BACKENDS:
        raise ValueError("backend is %r, not 'cpu', 'hip' or 'auto'" % (backend,))
    why = lib.m3idx_backend_unavailable_reason(BACKENDS[backend])
    return why.decode() if why else None
