#!/usr/bin/env python3
"""m3idx.verify_topk on vLLM's Triton M3 indexer (the peer in
../shared/peers/vllm-triton) as a candidate, on a GPU host: random and
tie-heavy data, decode and prefill; the candidate's ids and scores stay
on the device.  Prints one 'RESULT {json}' line a case: verdict counts,
reasons, the largest score deviation in units of the bound, the first
proofs; and whether the CPU reference gave the same verdicts.

usage: peer-verify-vllm-triton.py PEER_DIR [--seed S]
Needs torch, triton and an importable m3idx with its HIP backend."""

import argparse
import json
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("peer")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--cpu-check", type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, args.peer)
    import torch
    import harness as H
    import m3idx

    dev = "cuda"
    rng = np.random.default_rng(args.seed)

    def report(name, rep, extra):
        reasons = {}
        for w in rep.wrong_rows:
            reasons[w["reason"]] = reasons.get(w["reason"], 0) + 1
        out = dict(case=name, rows=rep.rows, exact=rep.exact, equivalent=rep.equivalent,
                   wrong=rep.wrong, reasons=reasons,
                   max_score_deviation=rep.max_score_deviation,
                   proofs=[rep.proof(w) for w in rep.wrong_rows[:5]], **extra)
        print("RESULT " + json.dumps(out), flush=True)

    for kind in ("random", "ties"):
        # decode: 64 requests of about 32K tokens, q1, 4 heads
        R, L, heads = 64, 32768, 4
        seq = [L - (r * 37) % 101 for r in range(R)]
        bt, P = H.gen_block_table(rng, seq)
        pages = H.gen_pages(rng, P) if kind == "random" else H.pages_ties(rng, P)
        q_u16 = H.gen_query_bf16(rng, R, heads) if kind == "random" else H.q_ties(rng, R, heads)
        pages_t = torch.from_numpy(pages).to(dev)
        kbf = H.dequant_f32(pages_t).to(torch.bfloat16)
        q = H.bf16_from_u16(q_u16, dev)
        bt_t = torch.from_numpy(bt).to(dev)
        sl_t = torch.tensor(seq, dtype=torch.int32, device=dev)
        plan = H.triton_decode_plan(kbf, q, bt_t, sl_t, max(seq), heads, 1)
        ids = plan.run()
        torch.cuda.synchronize()
        kw = dict(max_seq_len=max(seq), scale=1.0, init_blocks=0, local_blocks=1, query_len=1)
        for order in ("desc", "any"):
            rep = m3idx.verify_topk(q, pages_t, bt_t, sl_t, ids, candidate_scores=plan.score,
                                    order=order, **kw)
            extra = dict(order=order)
            if args.cpu_check and order == "desc":
                host = m3idx.verify_topk(q_u16, pages, bt, np.asarray(seq, np.int32),
                                         ids.cpu().numpy(),
                                         candidate_scores=plan.score.cpu().numpy(), **kw)
                extra["cpu_same_verdicts"] = bool(
                    host.verdicts.tobytes() == rep.verdicts.tobytes()
                    and host.reasons.tobytes() == rep.reasons.tobytes()
                    and host.wrong_rows == rep.wrong_rows
                    and host.max_score_deviation == rep.max_score_deviation)
            report("decode 64x32K q1 h4 %s triton-bf16" % kind, rep, extra)
        del kbf, plan
        # prefill: 2048 rows after 30000 tokens of context, 1 head
        rows, C = 2048, 30000
        seq = [C + rows]
        bt, P = H.gen_block_table(rng, seq)
        pages = H.gen_pages(rng, P) if kind == "random" else H.pages_ties(rng, P)
        q_u16 = H.gen_query_bf16(rng, rows, 1) if kind == "random" else H.q_ties(rng, rows, 1)
        pages_t = torch.from_numpy(pages).to(dev)
        kbf = H.dequant_f32(pages_t).to(torch.bfloat16)
        q = H.bf16_from_u16(q_u16, dev)
        bt_t = torch.from_numpy(bt).to(dev)
        cu_t = torch.tensor([0, rows], dtype=torch.int32, device=dev)
        sl_t = torch.tensor(seq, dtype=torch.int32, device=dev)
        cl_t = torch.tensor([C], dtype=torch.int32, device=dev)
        t, s = H.triton_prefill(kbf, q, bt_t, cu_t, sl_t, cl_t, rows, seq[0], 1)
        torch.cuda.synchronize()
        kw = dict(max_seq_len=seq[0], scale=1.0, init_blocks=0, local_blocks=1, order="any")
        rep = m3idx.verify_topk(q, pages_t, bt_t, sl_t, t, candidate_scores=s,
                                cu_seqlens_q=cu_t, context_lens=cl_t, **kw)
        extra = dict(order="any")
        if args.cpu_check:
            host = m3idx.verify_topk(q_u16, pages, bt, np.asarray(seq, np.int32), t.cpu().numpy(),
                                     candidate_scores=s.cpu().numpy(),
                                     cu_seqlens_q=np.array([0, rows], np.int32),
                                     context_lens=np.array([C], np.int32), **kw)
            extra["cpu_same_verdicts"] = bool(
                host.verdicts.tobytes() == rep.verdicts.tobytes()
                and host.wrong_rows == rep.wrong_rows
                and host.max_score_deviation == rep.max_score_deviation)
        report("prefill 2048 rows ctx 30000 h1 %s triton-bf16" % kind, rep, extra)
        del kbf
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
