"""Merging several parts' top-16 lists: m3idx_merge_topk(3)."""

import ctypes

import numpy as np

from ._library import TOPK, check, lib

__all__ = ["merge_topk"]


def _host(x, name, dtype):
    """x as a C-contiguous numpy array of dtype (a CPU torch tensor too)."""
    if hasattr(x, "device") and hasattr(x, "numpy"):
        if x.device.type != "cpu":
            raise ValueError("%s is on %s: merge_topk reads host memory" % (name, x.device))
        x = x.numpy()
    a = np.asarray(x)
    if a.dtype != dtype:
        raise TypeError("%s is %s, expected %s" % (name, a.dtype, np.dtype(dtype).name))
    if a.ndim < 1 or a.shape[-1] != TOPK:
        raise ValueError("%s has shape %s, expected [..., %d]" % (name, list(a.shape), TOPK))
    return np.ascontiguousarray(a)


def merge_topk(ids, scores):
    """The top-16 of the union of several parts' top-16 lists, per pair.

    ids and scores are sequences of P arrays, all of one shape [..., 16]:
    part p's block ids (int32, -1 after its last) and the score each was
    ranked by (float32, pinned where the forced blocks were pinned).
    Returns (ids, scores), new arrays of that shape, in SPEC section 7's
    order (score descending, -0 as +0, NaN last, ties by the smaller id),
    -1 and -inf after the last.  Exact: when each list is its part's
    top-16, the result is the whole row's, however the blocks were split.
    """
    ids, scores = list(ids), list(scores)
    if len(ids) == 0 or len(ids) != len(scores):
        raise ValueError("merge_topk takes one scores array per ids array, at least one "
                         "(got %d ids and %d scores)" % (len(ids), len(scores)))
    a = [_host(x, "ids[%d]" % p, np.int32) for p, x in enumerate(ids)]
    s = [_host(x, "scores[%d]" % p, np.float32) for p, x in enumerate(scores)]
    for p in range(len(a)):
        if a[p].shape != a[0].shape or s[p].shape != a[0].shape:
            raise ValueError("ids[%d] %s and scores[%d] %s: every part's arrays have the "
                             "shape of ids[0] %s" % (p, list(a[p].shape), p, list(s[p].shape),
                                                      list(a[0].shape)))
    out_ids = np.empty(a[0].shape, np.int32)
    out_scores = np.empty(a[0].shape, np.float32)
    pairs = out_ids.size // TOPK
    id_ptrs = (ctypes.c_void_p * len(a))(*[x.ctypes.data for x in a])
    score_ptrs = (ctypes.c_void_p * len(s))(*[x.ctypes.data for x in s])
    check(lib.m3idx_merge_topk(pairs, len(a), id_ptrs, score_ptrs, out_ids.ctypes.data,
                               out_scores.ctypes.data))
    return out_ids, out_scores
