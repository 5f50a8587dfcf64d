"""Bad arguments: TypeError / ValueError naming the argument, m3idx.Error
with the library's status and message, and outputs untouched."""

import numpy as np
import pytest

import m3idx
from conftest import make_case


@pytest.fixture
def case():
    return make_case(31, "decode", heads=2, lens=(700, 300))


def call(case, topk, **over):
    args = dict(q=case["q"], pages=case["pages"], bt=case["bt"], seq=case["seq"], wm=None)
    kw = dict(max_seq_len=case["max_seq_len"], query_len=1, scale=0.5, init_blocks=1,
              local_blocks=1)
    for k, v in over.items():
        (args if k in args else kw)[k] = v
    return m3idx.mxfp4_index_topk_decode(args["q"], args["pages"], args["bt"], args["seq"],
                                         args["wm"], topk, **kw)


def sentinel(case):
    return np.full((case["heads"], case["rows"], 16), 12345, dtype=np.int32)


BAD = [
    ("q", lambda c: c["q"].astype(np.float32), TypeError, "index_query has dtype float32"),
    ("q", lambda c: c["q"][:, :, :64], ValueError, "index_query"),
    ("q", lambda c: c["q"].transpose(1, 0, 2), ValueError, "index_query"),
    ("pages", lambda c: c["pages"].astype(np.int8), TypeError, "index_pages has dtype int8"),
    ("pages", lambda c: c["pages"][:, :8000], ValueError, "index_pages"),
    ("bt", lambda c: c["bt"].astype(np.int64), TypeError, "block_table has dtype int64"),
    ("bt", lambda c: c["bt"][:1], ValueError, "block_table has shape"),
    ("seq", lambda c: c["seq"].astype(np.uint32), TypeError, "seq_lens"),
    ("seq", lambda c: [700, 300], TypeError, "seq_lens is a list"),
    ("wm", lambda c: np.zeros((4, 3), np.int32), ValueError, "work_map has shape"),
    ("max_seq_len", lambda c: 700.0, TypeError, "max_seq_len is 700.0, not an integer"),
    ("query_len", lambda c: 2, ValueError, "query_len 2"),
    ("scale", lambda c: "x", TypeError, "scale"),
]


@pytest.mark.parametrize("arg,make,exc,text", BAD, ids=lambda v: v if isinstance(v, str) else "")
def test_bad_arguments_name_themselves(case, arg, make, exc, text):
    topk = sentinel(case)
    with pytest.raises(exc, match=text.replace("[", r"\[")):
        call(case, topk, **{arg: make(case)})
    assert (topk == 12345).all()


def test_bad_outputs(case):
    with pytest.raises(ValueError, match="topk_out has shape"):
        call(case, np.zeros((2, 2, 8), np.int32))
    ro = sentinel(case)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="topk_out is read-only"):
        call(case, ro)
    with pytest.raises(TypeError, match="topk_out has dtype int64"):
        call(case, np.zeros((2, 2, 16), np.int64))


@pytest.mark.parametrize("damage,status,text", [
    (lambda c: {"scale": float("nan")}, -6, "scale"),
    (lambda c: {"init_blocks": 9, "local_blocks": 8}, -5, "init_blocks 9"),
    (lambda c: {"bt": np.where(c["bt"] >= 0, 10 ** 6, c["bt"]).astype(np.int32)}, -4,
     "block_table"),
    (lambda c: {"seq": np.array([700, 0], np.int32)}, -3, "seq_lens[1] is 0"),
])
def test_library_errors(case, damage, status, text):
    topk = sentinel(case)
    with pytest.raises(m3idx.Error) as e:
        call(case, topk, **damage(case))
    assert e.value.status == status
    assert e.value.status_name.startswith("M3IDX_ERR_")
    assert text in e.value.message
    assert (topk == 12345).all()


def test_prefill_checks_num_valid_pages():
    case = make_case(32, "prefill", ctx_lens=(0, 200), q_lens=(5, 3))
    topk = np.full((case["heads"], case["rows"], 16), 9, np.int32)
    nvalid = np.array([1, 1, 1, 1, 1, 2, 2, 2], np.int32)
    args = (case["q"], case["pages"], case["bt"], case["cu"], case["seq"], case["ctx"])
    kw = dict(max_query_len=5, max_seq_len=case["max_seq_len"], scale=1.0)
    m3idx.mxfp4_index_topk_prefill(*args, nvalid, topk, **kw)
    bad = nvalid.copy()
    bad[6] = 3
    before = topk.copy()
    with pytest.raises(ValueError, match=r"num_valid_pages\[6\] is 3, but row 6 sees 2 blocks"):
        m3idx.mxfp4_index_topk_prefill(*args, bad, topk, **kw)
    with pytest.raises(ValueError, match="max_query_len is 4"):
        m3idx.mxfp4_index_topk_prefill(*args, nvalid, topk, **dict(kw, max_query_len=4))
    assert topk.tobytes() == before.tobytes()


def test_keyword_only(case):
    with pytest.raises(TypeError):
        m3idx.mxfp4_index_topk_decode(case["q"], case["pages"], case["bt"], case["seq"], None,
                                      sentinel(case), case["max_seq_len"], 1, 0.5)
