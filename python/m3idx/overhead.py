"""How much the Python calls add to the C calls: `python3 -m m3idx.overhead`.

Times mxfp4_index_topk_decode on a decode batch (8 requests of 1 row and
1 head over 256 tokens, host arrays) against the same C function called
through ctypes with its structs built once, and prints the medians of
alternated runs and their difference: the overhead of checking and adapting
the arguments and finding the context.
"""

import ctypes
import statistics
import time

import numpy as np

from . import _describe as D
from ._contexts import context
from ._library import lib
from .indexer import mxfp4_index_topk_decode


def _alternated_us(fns, calls=1000, runs=15):
    """Per-call times of each fn, runs alternated so that a busy moment of
    the machine falls on all of them; the medians."""
    times = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[i].append((time.perf_counter() - t0) / calls * 1e6)
    return [statistics.median(t) for t in times], \
        statistics.median([a - b for a, b in zip(times[0], times[1])])


def main():
    rng = np.random.default_rng(1)
    reqs, seq = 8, 256
    q = (rng.standard_normal((reqs, 1, 128)).astype(np.float32).view(np.uint32) >> 16)
    q = q.astype(np.uint16)  # bf16 of N(0, 1): the fast path's data
    pages = rng.integers(0, 256, size=(reqs * 2, 8704), dtype=np.uint8)
    pages[:, 8192:] = 127
    bt = np.arange(reqs * 2, dtype=np.int32).reshape(reqs, 2)
    sl = np.full(reqs, seq, dtype=np.int32)
    topk = np.empty((1, reqs, 16), dtype=np.int32)
    kw = dict(max_seq_len=seq, query_len=1, scale=0.125)

    def wrapped():
        mxfp4_index_topk_decode(q, pages, bt, sl, None, topk, **kw)

    wrapped()
    qa, qd = D.query(q, 0.125)
    s = D.lengths(sl)
    _, _, kc = D.kcache(pages, bt, reqs)
    batch = D.decode_batch(s, 1, reqs, seq, 1)
    ctx = context("cpu", None, batch)
    fn = lib.m3idx_index_topk_decode
    args = (ctx, ctypes.byref(batch), ctypes.byref(qd), ctypes.byref(kc), 0, 1, None, 0,
            topk.ctypes.data, None, 0)

    def raw():
        fn(*args)

    (w, r), over = _alternated_us([wrapped, raw])
    print("decode 8 x 256 tokens, 1 row, 1 head, cpu; medians of 15 alternated runs "
          "of 1000 calls")
    print("  python call:  %8.2f us" % w)
    print("  C via ctypes: %8.2f us" % r)
    print("  overhead:     %8.2f us a call (median of the runs' differences)" % over)


if __name__ == "__main__":
    main()
