"""Shared data for the Python tests: seeded batches (as numpy arrays), the
command-line tool as an independent path to the C library's bytes."""

import os
import subprocess

import numpy as np
import pytest

import m3idx

PAGE = m3idx.PAGE_BYTES


def bf16_bits(x):
    """uint16 bf16 bits of float32 values, nearest-even (numpy, not m3idx)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = u + 0x7fff + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


def make_pages(rng, n, special=False):
    pages = rng.integers(0, 256, size=(n, PAGE), dtype=np.uint8)
    lo, hi = (0, 256) if special else (112, 138)
    pages[:, 8192:] = rng.integers(lo, hi, size=(n, 512), dtype=np.uint8)
    return pages


def make_case(seed, mode="decode", heads=2, query_len=1, special=False, e4m3=False,
              lens=(700, 129, 300), ctx_lens=(0, 200), q_lens=(70, 33)):
    """A batch: dict of arrays and call arguments."""
    rng = np.random.default_rng(seed)
    if mode == "decode":
        seq = np.array(lens, dtype=np.int32)
        rows = len(lens) * query_len
    else:
        ctx = np.array(ctx_lens, dtype=np.int32)
        ql = np.array(q_lens, dtype=np.int32)
        seq = ctx + ql
        rows = int(ql.sum())
    blocks = -(-seq // 128)
    width = int(blocks.max()) + 2
    npages = int(blocks.sum()) + 3
    bt = np.full((len(seq), width), -1, dtype=np.int32)
    perm = rng.permutation(npages).astype(np.int32)
    k = 0
    for r, nb in enumerate(blocks):
        bt[r, :nb] = perm[k:k + nb]
        k += nb
    pages = make_pages(rng, npages, special)
    if e4m3:
        q = rng.integers(0, 256, size=(rows, heads, 128), dtype=np.uint8)
        if not special:
            q[(q & 0x7f) == 0x7f] = 0x38  # no NaN
    else:
        q = bf16_bits(rng.standard_normal((rows, heads, 128)).astype(np.float32) *
                      np.float32(2.0) ** rng.integers(-20, 20, size=(rows, heads, 1)))
        if special:
            flat = q.reshape(-1)
            flat[rng.integers(0, flat.size, 20)] = 0x7fc0  # NaN
            flat[rng.integers(0, flat.size, 20)] = 0x7f80  # +inf
            flat[rng.integers(0, flat.size, 20)] = 0x0001  # subnormal
    case = dict(mode=mode, q=q, pages=pages, bt=bt, seq=seq, heads=heads, rows=rows,
                max_seq_len=int(seq.max()), scale=0.0883883, init=1, local=2, e4m3=e4m3)
    if mode == "decode":
        case["query_len"] = query_len
    else:
        case["cu"] = np.concatenate([[0], np.cumsum(ql)]).astype(np.int32)
        case["ctx"] = ctx
    return case


def positions(case):
    if case["mode"] == "decode":
        ql = case["query_len"]
        return [int(s) - ql + j for s in case["seq"] for j in range(ql)]
    return [int(c) + i for c, n in zip(case["ctx"], np.diff(case["cu"])) for i in range(n)]


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("M3IDX", "m3idx")
    return path


def run_cli(cli, case, tmp_path):
    """m3idx topk on the case's arrays: (topk, pinned scores) as numpy."""
    names = {"query": case["q"], "pages": case["pages"], "block-table": case["bt"],
             "seq-lens": case["seq"]}
    args = [cli, "topk", "--backend", "cpu", "--mode", case["mode"], "--query-dtype",
            "e4m3" if case["e4m3"] else "bf16", "--scale", repr(case["scale"]),
            "--init-blocks", str(case["init"]), "--local-blocks", str(case["local"])]
    if case["mode"] == "decode":
        args += ["--query-len", str(case["query_len"])]
    else:
        names["cu-seqlens-q"], names["context-lens"] = case["cu"], case["ctx"]
    for opt, arr in names.items():
        path = tmp_path / (opt + ".npy")
        np.save(path, arr)
        args += ["--" + opt, str(path)]
    args += ["--out", str(tmp_path / "topk.npy"), "--scores-out", str(tmp_path / "scores.npy")]
    subprocess.run(args, check=True, capture_output=True)
    return np.load(tmp_path / "topk.npy"), np.load(tmp_path / "scores.npy")
