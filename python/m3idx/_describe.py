"""The C descriptions of a call (m3idx_batch, m3idx_query, m3idx_kcache)
built from its arrays, with every shape, dtype and device checked first:
a problem raises TypeError or ValueError naming the argument before the
library is called, so no output is touched."""

import numbers

import numpy as np

from ._arrays import QUERY_KINDS, adapt, expect_shape, same_device
from ._library import (BLOCK_SIZE, DTYPE_BF16, DTYPE_E4M3, HEAD_DIM, MODE_DECODE, MODE_PREFILL,
                       PAGE_BYTES, Batch, KCache, Query)

INT32_MAX = 2**31 - 1


def integer(value, name, lo=None, hi=INT32_MAX):
    if type(value) is int and (lo is None or value >= lo) and value <= hi:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s is %r, not an integer" % (name, value))
    value = int(value)
    if (lo is not None and value < lo) or value > hi:
        raise ValueError("%s is %d, outside [%s, %d]" % (name, value, lo, hi))
    return value


def real(value, name):
    if type(value) is float:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s is %r, not a number" % (name, value))
    return float(value)


def query(index_query, scale, name="index_query"):
    q = adapt(index_query, name, QUERY_KINDS, 3)
    if q.shape[2] != HEAD_DIM or q.shape[1] < 1:
        raise ValueError("%s has shape %s, expected [rows, heads >= 1, %d]"
                         % (name, list(q.shape), HEAD_DIM))
    dtype = DTYPE_BF16 if QUERY_KINDS[q.kind] == 1 else DTYPE_E4M3
    return q, Query(q.ptr, dtype, real(scale, "scale"))


def kcache(index_pages, block_table, reqs):
    pages = adapt(index_pages, "index_pages", ("u8",), 2)
    expect_shape(pages, (None, PAGE_BYTES))
    bt = adapt(block_table, "block_table", ("i32",), 2)
    if bt.shape[0] != reqs or bt.shape[1] < 1:
        raise ValueError("block_table has shape %s, expected [%d requests, >= 1]"
                         % (list(bt.shape), reqs))
    if pages.shape[0] > INT32_MAX or bt.shape[1] > INT32_MAX:
        raise ValueError("index_pages or block_table is larger than int32 ids address")
    return pages, bt, KCache(pages.ptr, pages.shape[0], bt.ptr, bt.shape[1])


def lengths(seq_lens):
    sl = adapt(seq_lens, "seq_lens", ("i32",), 1)
    if sl.shape[0] < 1:
        raise ValueError("seq_lens is empty; a call needs at least 1 request")
    return sl


def decode_batch(sl, heads, rows, max_seq_len, query_len):
    max_seq_len = integer(max_seq_len, "max_seq_len", 1)
    query_len = integer(query_len, "query_len", 1)
    reqs = sl.shape[0]
    if rows != reqs * query_len:
        raise ValueError("index_query has %d rows, but %d requests x query_len %d need %d"
                         % (rows, reqs, query_len, reqs * query_len))
    return Batch(MODE_DECODE, reqs, heads, rows, max_seq_len, sl.ptr, query_len, None, None)


def prefill_batch(sl, cu, cl, heads, rows, max_seq_len):
    max_seq_len = integer(max_seq_len, "max_seq_len", 1)
    reqs = sl.shape[0]
    expect_shape(cu, (reqs + 1,))
    expect_shape(cl, (reqs,))
    return Batch(MODE_PREFILL, reqs, heads, rows, max_seq_len, sl.ptr, 0, cu.ptr, cl.ptr)


def causal_blocks(batch, sl, cu=None, cl=None):
    """Each row's causal block count n = pos / 128 + 1 (SPEC section 5),
    from host copies of the lengths; ValueError when they cannot be
    right (the library says more when called)."""
    seq = np.asarray(sl.host_numpy(), dtype=np.int64)
    if batch.mode == MODE_DECODE:
        q = batch.query_len
        pos = (seq[:, None] - q + np.arange(q)[None, :]).reshape(-1)
    else:
        cus = np.asarray(cu.host_numpy(), dtype=np.int64)
        ctx = np.asarray(cl.host_numpy(), dtype=np.int64)
        if cus[0] != 0 or np.any(np.diff(cus) < 0) or cus[-1] != batch.num_rows:
            raise ValueError("cu_seqlens_q must start at 0, never decrease and end at the %d "
                             "rows of index_query" % batch.num_rows)
        req = np.repeat(np.arange(len(ctx)), np.diff(cus))
        pos = ctx[req] + (np.arange(batch.num_rows) - cus[req])
    return pos // BLOCK_SIZE + 1


def width(max_seq_len):
    return -(-max_seq_len // BLOCK_SIZE)


def device_of(*arrs):
    return same_device(arrs)
