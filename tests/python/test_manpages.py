"""What the man pages promise, computed: m3idx(7)'s worked logits, and
m3idx_context(3)'s word on m3idx_context_backend(NULL)."""

import ctypes
import pathlib
import re

import numpy as np

import m3idx
from m3idx._library import lib

MAN = pathlib.Path(__file__).resolve().parents[2] / "man"


def _logit(query_bits):
    """Block 0's score of one decode row over one key: every element e2m1
    code 2 (1.0) at scale byte 127, the call's scale 0.5."""
    page = np.zeros((1, m3idx.PAGE_BYTES), np.uint8)
    page[0, :64] = 0x22
    page[0, 8192:8196] = 127
    q = np.array(query_bits, np.uint16).reshape(1, 1, 128)
    scores = np.zeros((1, 1, 1), np.float32)
    m3idx.score_decode(q, page, np.zeros((1, 1), np.int32), np.array([1], np.int32), None,
                       scores, max_seq_len=1, query_len=1, scale=0.5)
    return float(scores[0, 0, 0])


def test_worked_logits():
    text = (MAN / "m3idx.7").read_text()
    example = text[text.index(".SH EXAMPLES"):text.index(".SH SEE ALSO")]
    assert "Each group sums" not in example  # the v1 grouped order is gone
    assert "logit is 128 \\(mu 0.5 = 64" in example
    assert _logit([0x3f80] * 128) == 64.0
    assert "The exact sum is 2^24 + 1 \\- 2^24 = 1 and the logit 0.5" in example
    cancel = [0x4b80, 0x3f80, 0xcb80] + [0] * 125
    assert _logit(cancel) == 0.5
    # the naive fp32 order the page describes really does give 0
    f = np.float32
    assert (f(2.0 ** 24) + f(1.0)) - f(2.0 ** 24) == 0.0


def test_context_backend_of_null():
    lib.m3idx_context_backend.restype = ctypes.c_int
    assert lib.m3idx_context_backend(None) == 0  # M3IDX_BACKEND_AUTO
    page = (MAN / "m3idx_context.3").read_text()
    para = page[page.index(".BR m3idx_context_backend ()\nreturns"):]
    para = para[:para.index(".PP")]
    assert re.search(r"NULL\s+\.I ctx", para) and "M3IDX_BACKEND_AUTO" in para
