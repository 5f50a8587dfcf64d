"""Objects that only expose __array_interface__ or __dlpack__ are taken
without a copy; arrays on different devices are refused."""

import numpy as np
import pytest

import m3idx
from conftest import make_case


class OnlyArrayInterface:
    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


class OnlyDLPack:
    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@pytest.mark.parametrize("wrap", [OnlyArrayInterface, OnlyDLPack])
def test_protocols(wrap):
    case = make_case(41, "decode")
    want = np.empty((case["heads"], case["rows"], 16), np.int32)
    kw = dict(max_seq_len=case["max_seq_len"], query_len=1, scale=case["scale"])
    m3idx.mxfp4_index_topk_decode(case["q"], case["pages"], case["bt"], case["seq"], None, want,
                                  **kw)
    got = np.zeros_like(want)
    m3idx.mxfp4_index_topk_decode(wrap(case["q"]), wrap(case["pages"]), wrap(case["bt"]),
                                  wrap(case["seq"]), None, wrap(got), **kw)
    assert got.tobytes() == want.tobytes()


def test_devices_must_agree():
    case = make_case(42, "decode")

    class OnGpu:
        __cuda_array_interface__ = {"shape": case["seq"].shape, "typestr": "<i4",
                                    "data": (4096, False), "version": 3}
    topk = np.zeros((case["heads"], case["rows"], 16), np.int32)
    with pytest.raises(ValueError, match="different devices"):
        m3idx.mxfp4_index_topk_decode(case["q"], case["pages"], case["bt"], OnGpu(), None, topk,
                                      max_seq_len=case["max_seq_len"], query_len=1, scale=1.0)
    with pytest.raises(ValueError, match="backend='cpu' takes host arrays"):
        m3idx.work_map(OnGpu(), 10, 1, 1, backend="cpu")
    assert not topk.any()
