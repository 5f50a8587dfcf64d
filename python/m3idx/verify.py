"""Another indexer's top-k against the exact scores (SPEC section 13):
exact, equivalent (a top-k of scores within the proven bound of another
summation order) or wrong, with the proof; and a pytest assertion."""

import ctypes

import numpy as np

from . import _describe as D
from ._arrays import adapt, expect_shape
from ._contexts import backend_for, context
from ._library import TOPK, VerifyOptions, VerifyRow, VerifySummary, check, lib
from .indexer import _work_map
from .stages import _rows_batch

__all__ = ["verify_topk", "VerifyReport", "REASONS", "VERDICTS"]

VERDICTS = ("exact", "equivalent", "wrong")
REASONS = ("none", "id-range", "duplicate", "count", "padding", "forced", "set", "order",
           "score")
_ORDERS = {"desc": 0, "any": 1}
_ROUNDINGS = {"none": 0, "bf16": 1, "e4m3": 2}
_NO_MAX_DEVIATION = 1  # M3IDX_VERIFY_NO_MAX_DEVIATION


class VerifyReport:
    """What verify_topk found.  verdicts [H, rows] int8 (0 exact, 1
    equivalent, 2 wrong) and reasons [H, rows] (indices into REASONS);
    counts exact, equivalent, wrong, rows; max_score_deviation (candidate
    scores, in units of the bound); wrong_rows: a dict per wrong (head,
    row) with its reason and proof (slot, block_a, block_b, gap)."""

    def __init__(self, heads, rows, verdict_rows, summary):
        flat = np.ctypeslib.as_array(verdict_rows)[:heads * rows] if heads * rows else None
        self.verdicts = np.zeros((heads, rows), np.int8)
        self.reasons = np.zeros((heads, rows), np.int8)
        self.wrong_rows = []
        if flat is not None:
            self.verdicts[:] = flat["verdict"].reshape(heads, rows)
            self.reasons[:] = flat["reason"].reshape(heads, rows)
            for i in np.nonzero(flat["verdict"] == 2)[0]:
                v = flat[i]
                self.wrong_rows.append(dict(head=int(i // rows), row=int(i % rows),
                                            reason=REASONS[int(v["reason"])],
                                            slot=int(v["slot"]), block_a=int(v["block_a"]),
                                            block_b=int(v["block_b"]), gap=float(v["gap"])))
        self.rows = int(summary.rows)
        self.exact = int(summary.exact)
        self.equivalent = int(summary.equivalent)
        self.wrong = int(summary.wrong)
        self.max_score_deviation = float(summary.max_score_deviation)

    def proof(self, w):
        """One wrong row's proof, in words."""
        where = "head %d row %d: " % (w["head"], w["row"])
        if w["reason"] == "set":
            return where + ("block %d, left out, beats block %d, taken, by %.3g bounds"
                            % (w["block_b"], w["block_a"], w["gap"]))
        if w["reason"] == "order":
            return where + ("block %d (slot %d) beats block %d before it by %.3g bounds"
                            % (w["block_b"], w["slot"] + 1, w["block_a"], w["gap"]))
        if w["reason"] == "score":
            return where + ("block %d's score is %.3g bounds from the exact one"
                            % (w["block_a"], w["gap"]))
        if w["reason"] == "forced":
            return where + "forced block %d is missing" % w["block_a"]
        return where + "slot %d holds %d (%s)" % (w["slot"], w["block_a"], w["reason"])

    def __str__(self):
        lines = ["%d (head, row) pairs: %d exact, %d equivalent, %d wrong"
                 % (self.rows, self.exact, self.equivalent, self.wrong)]
        lines += ["wrong: " + self.proof(w) for w in self.wrong_rows[:20]]
        if self.wrong > 20:
            lines.append("... and %d more wrong rows" % (self.wrong - 20))
        return "\n".join(lines)


def verify_topk(index_query, index_pages, block_table, seq_lens, candidate, *, max_seq_len,
                scale, query_len=None, cu_seqlens_q=None, context_lens=None, init_blocks=0,
                local_blocks=1, candidate_scores=None, order="desc", query_rounding="none",
                tolerance_ulps=0.0, tolerance_rel=0.0, max_deviation=True, work_map=None,
                backend=None):
    """Judge candidate [H, rows, 16] (request-relative block ids) for the
    call the other arguments describe: decode rows with query_len, prefill
    rows with cu_seqlens_q and context_lens (as topk_from_scores).
    candidate_scores [H, rows, >= width] (optional): the candidate's
    clamped block scores (forced blocks' entries are not read).  order
    'desc' or 'any'; query_rounding 'none', 'bf16' or 'e4m3' (the
    candidate rounded the query first); tolerances on top of the bound;
    max_deviation=False leaves max_score_deviation NaN (verdicts only,
    which spares the bound's terms of blocks no verdict depends on).
    work_map (decode): the batch's map from work_map(), as the fused call
    takes it; None builds one.  backend as the indexer calls: host arrays run on the CPU reference,
    CUDA/HIP tensors on the GPU backend where they are (no copy; the
    verdicts are the same bits).  Returns a VerifyReport; raises
    TypeError/ValueError for bad arguments and m3idx.Error when the
    library refuses the call."""
    if order not in _ORDERS:
        raise ValueError("order is %r, not 'desc' or 'any'" % (order,))
    if query_rounding not in _ROUNDINGS:
        raise ValueError("query_rounding is %r, not 'none', 'bf16' or 'e4m3'" % (query_rounding,))
    q, qd = D.query(index_query, scale)
    sl, cu, cl, batch = _rows_batch(q.shape[1], q.shape[0], seq_lens, max_seq_len, query_len,
                                    cu_seqlens_q, context_lens)
    pages, bt, kc = D.kcache(index_pages, block_table, sl.shape[0])
    rows, heads = q.shape[0], q.shape[1]
    cand = adapt(candidate, "candidate", ("i32",), 3)
    expect_shape(cand, (heads, rows, TOPK))
    cs, stride = None, 0
    if candidate_scores is not None:
        cs = adapt(candidate_scores, "candidate_scores", ("f32",), 3)
        if cs.shape[0] != heads or cs.shape[1] != rows or cs.shape[2] < D.width(batch.max_seq_len):
            raise ValueError("candidate_scores has shape %s, expected [%d, %d, >= %d]"
                             % (list(cs.shape), heads, rows, D.width(batch.max_seq_len)))
        stride = cs.shape[2]
    opts = VerifyOptions()
    lib.m3idx_verify_options_init(ctypes.byref(opts))
    opts.order = _ORDERS[order]
    opts.query_rounding = _ROUNDINGS[query_rounding]
    opts.tolerance_ulps = D.real(tolerance_ulps, "tolerance_ulps")
    opts.tolerance_rel = D.real(tolerance_rel, "tolerance_rel")
    if not isinstance(max_deviation, (bool, np.bool_)):
        raise TypeError("max_deviation is %r, not True or False" % (max_deviation,))
    opts.flags = 0 if max_deviation else _NO_MAX_DEVIATION
    wm, cap = _work_map(work_map)
    if wm is not None:
        opts.work_map, opts.work_map_capacity = wm.ptr, cap
    ib = D.integer(init_blocks, "init_blocks")
    lb = D.integer(local_blocks, "local_blocks")
    device = D.device_of(q, pages, bt, sl, cu, cl, cand, cs, wm)
    out = (VerifyRow * max(heads * rows, 1))()
    summary = VerifySummary()
    ctx = context(backend_for(backend, device), device, batch)
    check(lib.m3idx_verify_topk(ctx, ctypes.byref(batch), ctypes.byref(qd), ctypes.byref(kc), ib,
                                lb, cand.ptr, cs.ptr if cs else None, stride,
                                ctypes.byref(opts), out, ctypes.byref(summary)), ctx)
    return VerifyReport(heads, rows, out, summary)
