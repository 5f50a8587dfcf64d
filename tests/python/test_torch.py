"""torch tensors: host tensors give the numpy path's bytes; CUDA/HIP
tensors run on the GPU backend (their device, torch's current stream) and
give the CPU reference's bytes.  Skipped without torch, or without a GPU
the HIP backend can use."""

import numpy as np
import pytest

import m3idx
from conftest import make_case, positions

torch = pytest.importorskip("torch")


def tensors(case, device, e4m3=False):
    t = {k: torch.from_numpy(np.ascontiguousarray(case[k])).to(device)
         for k in ("pages", "bt", "seq") + (("cu", "ctx") if case["mode"] == "prefill" else ())}
    q = torch.from_numpy(case["q"].view(np.int16 if not case["e4m3"] else np.uint8))
    q = q.view(torch.float8_e4m3fn if case["e4m3"] else torch.bfloat16)
    t["q"] = q.to(device)
    return t


def run(case, t, topk, device):
    if case["mode"] == "decode":
        return m3idx.mxfp4_index_topk_decode(
            t["q"], t["pages"], t["bt"], t["seq"], None, topk, max_seq_len=case["max_seq_len"],
            query_len=case["query_len"], scale=case["scale"], init_blocks=case["init"],
            local_blocks=case["local"])
    nvalid = torch.tensor(np.array(positions(case)) // 128 + 1, dtype=torch.int32, device=device)
    return m3idx.mxfp4_index_topk_prefill(
        t["q"], t["pages"], t["bt"], t["cu"], t["seq"], t["ctx"], nvalid, topk,
        max_query_len=int(np.diff(case["cu"]).max()), max_seq_len=case["max_seq_len"],
        scale=case["scale"], init_blocks=case["init"], local_blocks=case["local"])


SPECS = [dict(seed=51, mode="decode"), dict(seed=52, mode="decode", e4m3=True, special=True),
         dict(seed=53, mode="prefill", heads=2), dict(seed=54, mode="decode", heads=4, query_len=4)]


def reference(case):
    topk = np.empty((case["heads"], case["rows"], 16), np.int32)
    run(case, {"q": case["q"], "pages": case["pages"], "bt": case["bt"], "seq": case["seq"],
               "cu": case.get("cu"), "ctx": case.get("ctx")}, topk, "cpu")
    return topk


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: "%s-%d" % (s["mode"], s["seed"]))
def test_host_tensors(spec):
    case = make_case(**spec)
    topk = torch.zeros((case["heads"], case["rows"], 16), dtype=torch.int32)
    run(case, tensors(case, "cpu"), topk, "cpu")
    assert topk.numpy().tobytes() == reference(case).tobytes()


def gpu_or_skip():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    why = m3idx.backend_unavailable_reason("hip")
    if why:
        pytest.skip("the HIP backend is unavailable: " + why)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: "%s-%d" % (s["mode"], s["seed"]))
def test_device_tensors_match_the_cpu(spec):
    gpu_or_skip()
    case = make_case(**spec)
    dev = torch.device("cuda", torch.cuda.current_device())
    topk = torch.full((case["heads"], case["rows"], 16), 5, dtype=torch.int32, device=dev)
    side = torch.cuda.Stream(dev)
    with torch.cuda.stream(side):      # the call follows torch's current stream
        run(case, tensors(case, dev), topk, dev)
    assert topk.cpu().numpy().tobytes() == reference(case).tobytes()


def test_device_stages_and_work_map():
    gpu_or_skip()
    case = make_case(55, "decode", heads=2, query_len=2, lens=(5000, 300, 129))
    dev = torch.device("cuda", torch.cuda.current_device())
    t = tensors(case, dev)
    blocks = -(-case["max_seq_len"] // 128)
    wm = m3idx.work_map(t["seq"], blocks, 2, 2)
    assert wm.device == dev
    host_wm = m3idx.work_map(case["seq"], blocks, 2, 2)
    assert wm.cpu().numpy().tobytes() == host_wm.tobytes()
    scores = torch.full((2, case["rows"], blocks), float("-inf"), device=dev)
    m3idx.score_decode(t["q"], t["pages"], t["bt"], t["seq"], wm, scores,
                       max_seq_len=case["max_seq_len"], query_len=2, scale=case["scale"])
    want = np.full((2, case["rows"], blocks), -np.inf, np.float32)
    m3idx.score_decode(case["q"], case["pages"], case["bt"], case["seq"], None, want,
                       max_seq_len=case["max_seq_len"], query_len=2, scale=case["scale"])
    assert scores.cpu().numpy().tobytes() == want.tobytes()


def test_device_errors_leave_outputs():
    gpu_or_skip()
    case = make_case(56, "decode")
    dev = torch.device("cuda", torch.cuda.current_device())
    t = tensors(case, dev)
    topk = torch.full((case["heads"], case["rows"], 16), 3, dtype=torch.int32, device=dev)
    with pytest.raises(ValueError, match="different devices"):
        m3idx.mxfp4_index_topk_decode(t["q"], case["pages"], t["bt"], t["seq"], None, topk,
                                      max_seq_len=case["max_seq_len"], query_len=1, scale=1.0)
    with pytest.raises(m3idx.Error):
        m3idx.mxfp4_index_topk_decode(t["q"], t["pages"], t["bt"], t["seq"], None, topk,
                                      max_seq_len=case["max_seq_len"], query_len=1,
                                      scale=float("nan"))
    assert (topk.cpu() == 3).all()


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_verify_device_tensors_where_they_are(mode):
    """verify_topk on CUDA/HIP tensors runs on the GPU without copying them
    first and gives the CPU's report: counts, verdicts, reasons, proofs."""
    gpu_or_skip()
    case = make_case(57, mode, heads=2, query_len=2)
    dev = torch.device("cuda", torch.cuda.current_device())
    width = -(-case["max_seq_len"] // 128)
    scores = np.empty((case["heads"], case["rows"], width), np.float32)
    topk = np.empty((case["heads"], case["rows"], 16), np.int32)
    rows_kw = (dict(query_len=case["query_len"]) if mode == "decode"
               else dict(cu_seqlens_q=case["cu"], context_lens=case["ctx"]))
    if mode == "decode":
        m3idx.score_decode(case["q"], case["pages"], case["bt"], case["seq"], None, scores,
                           max_seq_len=case["max_seq_len"], query_len=case["query_len"],
                           scale=case["scale"])
    else:
        m3idx.score_prefill(case["q"], case["pages"], case["bt"], case["cu"], case["seq"],
                            case["ctx"], scores, max_seq_len=case["max_seq_len"],
                            scale=case["scale"])
    near = np.nextafter(scores, np.where(np.arange(scores.size).reshape(scores.shape) % 3,
                                         np.inf, -np.inf).astype(np.float32))
    near[~np.isfinite(scores)] = scores[~np.isfinite(scores)]
    pinned = near.copy()
    m3idx.pin_forced_blocks(pinned, case["seq"], max_seq_len=case["max_seq_len"],
                            init_blocks=case["init"], local_blocks=case["local"], **rows_kw)
    m3idx.topk_from_scores(pinned, case["seq"], topk, max_seq_len=case["max_seq_len"], **rows_kw)
    topk[-1, -1, -1] = topk[-1, -1, 0]                       # a duplicate: wrong
    kw = dict(max_seq_len=case["max_seq_len"], scale=case["scale"], init_blocks=case["init"],
              local_blocks=case["local"])
    want = m3idx.verify_topk(case["q"], case["pages"], case["bt"], case["seq"], topk,
                             candidate_scores=near, **kw, **rows_kw)
    t = tensors(case, dev)
    dev_rows = {k: torch.from_numpy(np.ascontiguousarray(v)).to(dev) for k, v in rows_kw.items()
                if k != "query_len"}
    if mode == "decode":
        dev_rows["query_len"] = case["query_len"]
    got = m3idx.verify_topk(t["q"], t["pages"], t["bt"], t["seq"],
                            torch.from_numpy(topk).to(dev),
                            candidate_scores=torch.from_numpy(near).to(dev), **kw, **dev_rows)
    assert (got.exact, got.equivalent, got.wrong) == (want.exact, want.equivalent, want.wrong)
    assert got.wrong >= 1 and got.max_score_deviation == want.max_score_deviation
    assert got.verdicts.tobytes() == want.verdicts.tobytes()
    assert got.reasons.tobytes() == want.reasons.tobytes()
    assert got.wrong_rows == want.wrong_rows
