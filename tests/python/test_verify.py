"""m3idx.verify_topk and m3idx.testing.assert_topk_equivalent: the same
verdicts as `m3idx verify', honest candidates pass, bugs are flagged with
a message a person can act on."""

import json
import subprocess

import numpy as np
import pytest

import m3idx
from conftest import make_case


def _topk_and_scores(case):
    heads, rows = case["heads"], case["rows"]
    width = -(-case["max_seq_len"] // 128)
    topk = np.empty((heads, rows, 16), np.int32)
    scores = np.empty((heads, rows, width), np.float32)
    if case["mode"] == "decode":
        m3idx.score_decode(case["q"], case["pages"], case["bt"], case["seq"], None, scores,
                           max_seq_len=case["max_seq_len"], query_len=case["query_len"],
                           scale=case["scale"])
        rows_kw = dict(query_len=case["query_len"])
    else:
        m3idx.score_prefill(case["q"], case["pages"], case["bt"], case["cu"], case["seq"],
                            case["ctx"], scores, max_seq_len=case["max_seq_len"],
                            scale=case["scale"])
        rows_kw = dict(cu_seqlens_q=case["cu"], context_lens=case["ctx"])
    pinned = scores.copy()
    m3idx.pin_forced_blocks(pinned, case["seq"], max_seq_len=case["max_seq_len"],
                            init_blocks=case["init"], local_blocks=case["local"], **rows_kw)
    m3idx.topk_from_scores(pinned, case["seq"], topk, max_seq_len=case["max_seq_len"], **rows_kw)
    return topk, scores, rows_kw


def _verify(case, candidate, scores=None, **kw):
    _, _, rows_kw = _topk_and_scores(case)
    return m3idx.verify_topk(case["q"], case["pages"], case["bt"], case["seq"], candidate,
                             max_seq_len=case["max_seq_len"], scale=case["scale"],
                             init_blocks=case["init"], local_blocks=case["local"],
                             candidate_scores=scores, **rows_kw, **kw)


def _command(cli, tmp_path, case, candidate, scores=None, *extra):
    """`m3idx verify --json` on a decode case (query_len 2) and a candidate."""
    files = {"query": case["q"], "pages": case["pages"], "block-table": case["bt"],
             "seq-lens": case["seq"], "candidate": candidate}
    if scores is not None:
        files["candidate-scores"] = scores
    args = [cli, "verify", "--mode", "decode", "--query-dtype", "bf16", "--scale",
            repr(case["scale"]), "--init-blocks", str(case["init"]), "--local-blocks",
            str(case["local"]), "--query-len", "2", "--json", *extra]
    for opt, arr in files.items():
        np.save(tmp_path / (opt + ".npy"), arr)
        args += ["--" + opt, str(tmp_path / (opt + ".npy"))]
    return subprocess.run(args, capture_output=True, text=True)


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_exact_candidate(mode):
    case = make_case(41, mode, heads=2, query_len=2)
    topk, scores, _ = _topk_and_scores(case)
    report = _verify(case, topk, scores)
    assert (report.exact, report.equivalent, report.wrong) == (report.rows, 0, 0)
    assert report.rows == case["heads"] * case["rows"]
    assert (report.verdicts == 0).all() and report.max_score_deviation == 0.0


def test_mutants_flagged_with_reasons_and_agree_with_the_command(cli, tmp_path):
    case = make_case(42, "decode", heads=2, query_len=2)
    topk, _, _ = _topk_and_scores(case)
    bad = topk.copy()
    bad[0, 0, 1] = bad[0, 0, 0]          # a duplicate
    bad[1, 1, 15] = -7                   # not an id
    order = topk.copy()
    order[0, 0, 3:6] = order[0, 0, 3:6][::-1].copy()  # row 0's 6 blocks: 3 forced, then reversed
    report = _verify(case, bad)
    assert report.wrong == 2
    reasons = {(w["head"], w["row"]): w["reason"] for w in report.wrong_rows}
    assert reasons[(0, 0)] == "duplicate"
    assert reasons[(1, 1)] in ("id-range", "padding")
    rev = _verify(case, order)
    assert rev.verdicts[0, 0] == 2 and rev.wrong_rows[0]["reason"] == "order"
    assert _verify(case, order, order="any").verdicts[0, 0] != 2
    # the command says the same
    r = _command(cli, tmp_path, case, bad)
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert (out["exact"], out["equivalent"], out["wrong"]) == \
        (report.exact, report.equivalent, report.wrong)
    assert {(w["head"], w["row"]): w["reason"] for w in out["wrong_rows"]} == reasons


def test_assertion_message_names_the_proof():
    case = make_case(43, "decode", heads=1, query_len=1, lens=(3000,))
    topk, scores, _ = _topk_and_scores(case)
    m3idx.testing.assert_topk_equivalent(
        case["q"], case["pages"], case["bt"], case["seq"], topk,
        max_seq_len=case["max_seq_len"], scale=case["scale"], query_len=1,
        init_blocks=case["init"], local_blocks=case["local"])
    # the weakest block taken swapped for the strongest left out
    row = scores[0, 0]
    n = -(-3000 // 128)
    taken = set(topk[0, 0].tolist())
    out = max((b for b in range(n) if b not in taken), key=lambda b: row[b])
    weakest = 15
    bad = topk.copy()
    bad[0, 0, weakest] = out
    with pytest.raises(AssertionError) as e:
        m3idx.testing.assert_topk_equivalent(
            case["q"], case["pages"], case["bt"], case["seq"], bad,
            max_seq_len=case["max_seq_len"], scale=case["scale"], query_len=1,
            init_blocks=case["init"], local_blocks=case["local"], order="any")
    msg = str(e.value)
    assert "wrong on 1 of 1" in msg and "left out, beats block" in msg, msg


def test_work_map_as_the_fused_call_takes_it():
    case = make_case(45, "decode", heads=2, query_len=2)
    topk, scores, _ = _topk_and_scores(case)
    blocks = -(-case["max_seq_len"] // 128)
    wm = m3idx.work_map(case["seq"], blocks, 2, case["heads"])
    with_map = _verify(case, topk, scores, work_map=wm)
    without = _verify(case, topk, scores)
    assert (with_map.exact, with_map.wrong) == (without.exact, without.wrong) == (without.rows, 0)
    assert (with_map.verdicts == without.verdicts).all()
    wm[0, 0] = 1 - wm[0, 0]  # built for other lengths
    with pytest.raises(m3idx.Error, match="work_map entry 0"):
        _verify(case, topk, scores, work_map=wm)


def test_bad_arguments():
    case = make_case(44, "decode", heads=1, query_len=1)
    topk, _, _ = _topk_and_scores(case)
    with pytest.raises(ValueError, match="order"):
        _verify(case, topk, order="up")
    with pytest.raises(ValueError, match="candidate"):
        _verify(case, topk[:, :, :8].copy())
    with pytest.raises(m3idx.Error, match="tolerance_ulps"):
        _verify(case, topk, tolerance_ulps=-1.0)


def test_verdicts_only_skip_the_largest_deviation(cli, tmp_path):
    """max_deviation=False (--no-max-deviation): the same verdicts and
    proofs, max_score_deviation NaN (JSON null); the default computes it."""
    case = make_case(44, "decode", heads=2, query_len=2, lens=(9000, 4000, 700))
    topk, scores, _ = _topk_and_scores(case)
    near = np.nextafter(scores, np.float32(np.inf)) * np.float32(1)
    near[~np.isfinite(scores)] = scores[~np.isfinite(scores)]
    near[0, 0, 5] = scores[0, 0, 5] * 2 + 1    # a score far off: wrong (score)
    full = _verify(case, topk, near)
    fast = _verify(case, topk, near, max_deviation=False)
    assert full.max_score_deviation > 1.0 and np.isnan(fast.max_score_deviation)
    assert fast.verdicts.tobytes() == full.verdicts.tobytes()
    assert fast.wrong_rows == full.wrong_rows and fast.wrong >= 1
    with pytest.raises(TypeError, match="max_deviation"):
        _verify(case, topk, near, max_deviation="no")
    r = _command(cli, tmp_path, case, topk, near, "--no-max-deviation")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["max_score_deviation"] is None and out["wrong"] == fast.wrong
