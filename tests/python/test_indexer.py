"""The fused calls, the stages and the work map against the command-line
tool (the C library's bytes by another road) and the exact oracle."""

import numpy as np
import pytest

import m3idx
import oracle
from conftest import make_case, positions, run_cli

CASES = [
    dict(seed=1, mode="decode"),
    dict(seed=2, mode="decode", heads=3, query_len=2),
    dict(seed=3, mode="decode", e4m3=True),
    dict(seed=4, mode="decode", special=True),
    dict(seed=5, mode="prefill"),
    dict(seed=6, mode="prefill", heads=1, e4m3=True, special=True),
]


def fused(case, topk):
    if case["mode"] == "decode":
        return m3idx.mxfp4_index_topk_decode(
            case["q"], case["pages"], case["bt"], case["seq"], None, topk,
            max_seq_len=case["max_seq_len"], query_len=case["query_len"], scale=case["scale"],
            init_blocks=case["init"], local_blocks=case["local"])
    nvalid = (np.array(positions(case)) // 128 + 1).astype(np.int32)
    return m3idx.mxfp4_index_topk_prefill(
        case["q"], case["pages"], case["bt"], case["cu"], case["seq"], case["ctx"], nvalid, topk,
        max_query_len=int(np.diff(case["cu"]).max()), max_seq_len=case["max_seq_len"],
        scale=case["scale"], init_blocks=case["init"], local_blocks=case["local"])


def staged(case):
    """score, pin and top-k as three calls; scores start at -inf as the CLI's."""
    width = -(-case["max_seq_len"] // 128)
    scores = np.full((case["heads"], case["rows"], width), -np.inf, dtype=np.float32)
    rows = {}
    if case["mode"] == "decode":
        m3idx.score_decode(case["q"], case["pages"], case["bt"], case["seq"], None, scores,
                           max_seq_len=case["max_seq_len"], query_len=case["query_len"],
                           scale=case["scale"])
        rows["query_len"] = case["query_len"]
    else:
        m3idx.score_prefill(case["q"], case["pages"], case["bt"], case["cu"], case["seq"],
                            case["ctx"], scores, max_seq_len=case["max_seq_len"],
                            scale=case["scale"])
        rows["cu_seqlens_q"], rows["context_lens"] = case["cu"], case["ctx"]
    m3idx.pin_forced_blocks(scores, case["seq"], max_seq_len=case["max_seq_len"],
                            init_blocks=case["init"], local_blocks=case["local"], **rows)
    topk = np.empty((case["heads"], case["rows"], 16), dtype=np.int32)
    m3idx.topk_from_scores(scores, case["seq"], topk, max_seq_len=case["max_seq_len"], **rows)
    return topk, scores


@pytest.mark.parametrize("spec", CASES, ids=lambda s: "%s-%d" % (s["mode"], s["seed"]))
def test_matches_the_command(spec, cli, tmp_path):
    case = make_case(**spec)
    want_topk, want_scores = run_cli(cli, case, tmp_path)
    topk = np.full((case["heads"], case["rows"], 16), 7, dtype=np.int32)
    assert fused(case, topk) is topk
    assert topk.tobytes() == want_topk.tobytes()
    s_topk, s_scores = staged(case)
    assert s_topk.tobytes() == want_topk.tobytes()
    assert s_scores.tobytes() == want_scores.tobytes()


@pytest.mark.parametrize("spec", [CASES[0], CASES[2], CASES[4]],
                         ids=lambda s: "%s-%d" % (s["mode"], s["seed"]))
def test_matches_the_exact_oracle(spec):
    case = make_case(**spec, lens=(300, 129), ctx_lens=(0, 130), q_lens=(3, 2))
    topk = np.empty((case["heads"], case["rows"], 16), dtype=np.int32)
    fused(case, topk)
    _, scores = staged(case)
    scale_bits = int(np.float32(case["scale"]).view(np.uint32))
    pos = positions(case)
    req_of = np.repeat(np.arange(len(case["seq"])),
                       case["query_len"] if case["mode"] == "decode" else np.diff(case["cu"]))
    for h in range(case["heads"]):
        for i, p in enumerate(pos):
            bits = case["q"][i, h].astype(np.uint32)
            parts = [oracle.e4m3_parts(int(b)) for b in bits] if case["e4m3"] else \
                [oracle.f32_parts(int(b) << 16) for b in bits]
            table = case["bt"][req_of[i]]

            def keys(b):
                page = case["pages"][table[b]].tobytes()
                return [page[64 * t:64 * t + 64] + page[8192 + 4 * t:8192 + 4 * t + 4]
                        for t in range(128)]
            raw = oracle.block_scores(parts, keys, scale_bits, p)
            pinned, ids = oracle.pin_and_topk(raw, case["init"], case["local"])
            assert list(topk[h, i]) == ids, (h, i)
            got = scores[h, i, :len(pinned)]
            assert got.tobytes() == np.array(pinned, dtype=np.float32).tobytes(), (h, i)


def test_work_map_gives_the_same_bytes():
    case = make_case(11, "decode", heads=2, query_len=2, lens=(5000, 300, 129, 2000))
    blocks = -(-case["max_seq_len"] // 128)
    cap = m3idx.work_map_capacity(4, blocks, 2, 2)
    wm = m3idx.work_map(case["seq"], blocks, 2, 2)
    assert wm.shape == (cap, 2) and wm.dtype == np.int32
    out = np.empty((cap, 2), dtype=np.int32)
    assert m3idx.work_map(case["seq"], blocks, 2, 2, out=out) is out
    assert out.tobytes() == wm.tobytes()
    with_map = np.empty((2, case["rows"], 16), dtype=np.int32)
    without = np.empty_like(with_map)
    m3idx.mxfp4_index_topk_decode(case["q"], case["pages"], case["bt"], case["seq"], wm, with_map,
                                  max_seq_len=case["max_seq_len"], query_len=2,
                                  scale=case["scale"])
    m3idx.mxfp4_index_topk_decode(case["q"], case["pages"], case["bt"], case["seq"], None, without,
                                  max_seq_len=case["max_seq_len"], query_len=2,
                                  scale=case["scale"])
    assert with_map.tobytes() == without.tobytes()


def test_contexts_grow():
    small = make_case(12, "decode", lens=(200,))
    big = make_case(13, "decode", heads=4, lens=(9000, 9000, 9000, 9000, 9000))
    for case in (small, big, small):
        topk = np.empty((case["heads"], case["rows"], 16), dtype=np.int32)
        fused(case, topk)
        assert (topk[:, :, 0] >= 0).all()


def test_support_questions():
    assert m3idx.indexer_unsupported_reason(topk_blocks=16, sparse_block_size=128,
                                            num_index_heads=4, index_head_dim=128,
                                            score_type="max") is None
    why = m3idx.indexer_unsupported_reason(topk_blocks=32, sparse_block_size=128,
                                           num_index_heads=4, index_head_dim=128)
    assert why and "top-k" in why
    assert m3idx.backend_unavailable_reason("cpu") is None
    hip = m3idx.backend_unavailable_reason("hip")
    assert hip is None or isinstance(hip, str) and hip
    with pytest.raises(ValueError, match="backend"):
        m3idx.backend_unavailable_reason("gpu")
