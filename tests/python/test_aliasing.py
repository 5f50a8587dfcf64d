"""Outputs that share memory with an input are refused, naming both, with
every array unchanged; calls with no rows size nothing."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import m3idx
from conftest import make_case


def _decode():
    c = make_case(31, "decode", heads=2, query_len=2)
    return c


def _carve(buf, shape, dtype, offset=0):
    """An array of shape/dtype laid over buf's bytes from offset on."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return buf.reshape(-1).view(np.uint8)[offset:offset + n].view(dtype).reshape(shape)


def _refused(call, must_name, *arrays):
    before = [a.copy() for a in arrays]
    with pytest.raises(ValueError) as e:
        call()
    for name in must_name:
        assert name in str(e.value), str(e.value)
    assert "overlaps" in str(e.value)
    for a, b in zip(arrays, before):
        assert np.array_equal(a, b)


def test_topk_out_inside_index_pages():
    c = _decode()
    pages = c["pages"].copy()
    topk = _carve(pages, (2, c["rows"], 16), np.int32, offset=8704)
    _refused(lambda: m3idx.mxfp4_index_topk_decode(
        c["q"], pages, c["bt"], c["seq"], None, topk, max_seq_len=c["max_seq_len"],
        query_len=2, scale=c["scale"]), ("topk_out", "index_pages"), pages)


def test_topk_out_over_seq_lens():
    c = _decode()
    buf = np.zeros(4096, np.int32)
    seq = buf[:len(c["seq"])]
    seq[:] = c["seq"]
    topk = _carve(buf, (2, c["rows"], 16), np.int32, offset=4)  # from seq_lens[1] on
    _refused(lambda: m3idx.mxfp4_index_topk_decode(
        c["q"], c["pages"], c["bt"], seq, None, topk, max_seq_len=c["max_seq_len"],
        query_len=2, scale=c["scale"]), ("topk_out", "seq_lens"), buf)


def test_scores_out_over_query():
    c = _decode()
    q = c["q"].copy()
    width = -(-c["max_seq_len"] // 128)
    scores = _carve(q, (2, c["rows"], width), np.float32)
    _refused(lambda: m3idx.score_decode(
        q, c["pages"], c["bt"], c["seq"], None, scores, max_seq_len=c["max_seq_len"],
        query_len=2, scale=c["scale"]), ("scores_out", "index_query"), q)


def test_topk_out_over_scores():
    c = _decode()
    width = -(-c["max_seq_len"] // 128)
    scores = np.zeros((2, c["rows"], width + 64), np.float32)
    topk = _carve(scores, (2, c["rows"], 16), np.int32, offset=64)
    _refused(lambda: m3idx.topk_from_scores(scores, c["seq"], topk, max_seq_len=c["max_seq_len"],
                                            query_len=2), ("topk_out", "scores"), scores)


def test_work_map_out_over_seq_lens():
    seq = np.zeros(512, np.int32)
    seq[:3] = (700, 129, 300)
    out = _carve(seq, (200, 2), np.int32)
    _refused(lambda: m3idx.work_map(seq[:3], 8, 1, 1, out=out), ("out", "seq_lens"), seq)


def test_encode_keys_out_over_keys():
    keys = np.zeros(300 * 128 + 3 * 8704 // 4, np.float32)
    out = _carve(keys, (3, 8704), np.uint8, offset=4 * 128)
    view = keys[:300 * 128].reshape(300, 128)
    _refused(lambda: m3idx.encode_keys(view, out=out), ("out", "keys"), keys)


def test_outputs_next_to_inputs_are_fine():
    c = _decode()
    want = np.empty((2, c["rows"], 16), np.int32)
    m3idx.mxfp4_index_topk_decode(c["q"], c["pages"], c["bt"], c["seq"], None, want,
                                  max_seq_len=c["max_seq_len"], query_len=2, scale=c["scale"])
    buf = np.zeros(len(c["seq"]) + 2 * c["rows"] * 16, np.int32)
    seq = buf[:len(c["seq"])]
    seq[:] = c["seq"]
    topk = buf[len(c["seq"]):].reshape(2, c["rows"], 16)
    m3idx.mxfp4_index_topk_decode(c["q"], c["pages"], c["bt"], seq, None, topk,
                                  max_seq_len=c["max_seq_len"], query_len=2, scale=c["scale"])
    assert np.array_equal(topk, want)


def test_no_rows_sizes_nothing():
    """0 rows x 4194304 heads used to fail with "no memory" under a 1 GiB
    address-space limit; a 0-row prefill of 2^31 - 1 tokens with a 1-column
    block table is fine too."""
    body = textwrap.dedent("""
        import resource
        import numpy as np
        import m3idx
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        heads = 4194304
        cu, cl = np.zeros(2, np.int32), np.zeros(1, np.int32)
        m3idx.topk_from_scores(np.empty((heads, 0, 1), np.float32), np.zeros(1, np.int32),
                               np.empty((heads, 0, 16), np.int32), max_seq_len=1,
                               cu_seqlens_q=cu, context_lens=cl)
        big = np.array([2**31 - 1], np.int32)
        m3idx.mxfp4_index_topk_prefill(
            np.empty((0, heads, 128), np.uint16), np.zeros((1, 8704), np.uint8),
            np.zeros((1, 1), np.int32), cu, big, big, np.zeros(0, np.int32),
            np.empty((heads, 0, 16), np.int32), max_query_len=0, max_seq_len=2**31 - 1,
            scale=1.0)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
