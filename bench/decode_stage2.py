"""Where decode's last percent goes at (B 8, ctx 131072, qlen 1, page 64), beside FlashMLA.

mlaprof's decode on sm_90 and FlashMLA read the KV cache at the same rate (96-97% of the copy
ceiling), and whole times tie within +-0.5%. This call splits mlaprof's time into stage 1 alone
(``TritonBackend.skip_stage2``) and stage 1 + stage 2 at the default and at other stage-2 launch
shapes (heads and latent columns per program, warps), each checked against the fp32 torch
reference first, then timed as the median of CUDA-graph replays, two rounds alternating, the
lower of the two medians (the rule of ``bench/verify_vs_flashmla.py``). Needs FlashMLA
(``pip install --no-deps sgl-flash-mla==1.0.0``) for the ratio; runs without it.

    PYTHONPATH=. python bench/decode_stage2.py --out $OUT
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_suite import eff_tbs, graph_time_us, policy_s, results_start  # noqa: E402
from verify_vs_flashmla import (  # noqa: E402
    errors,
    flash_entry,
    load_flash_mla,
    page64_case,
    reference,
)

from mlaprof.backends.triton_backend import TritonBackend, default_config  # noqa: E402

B, CTX, QLEN = 8, 131072, 1

# name -> stage-2 fields over the decode default (None: the default itself)
STAGE2 = {
    "default": None,
    "s2-h1": {"stage2_heads": 1},  # one head a stage-2 program (verify's sm_90 default before)
    "s2-d256": {"stage2_block_d": 256},
    "s2-d512": {"stage2_block_d": 512},
    "s2-h4": {"stage2_heads": 4},
    "s2-h4-d256": {"stage2_heads": 4, "stage2_block_d": 256},
    "s2-w8-d512": {"stage2_warps": 8, "stage2_block_d": 512},
    "s2-d64": {"stage2_block_d": 64},
    "s2-h2-d256": {"stage2_heads": 2, "stage2_block_d": 256},
    "s2-h4-d512": {"stage2_heads": 4, "stage2_block_d": 512},
    "s2-h16": {"stage2_heads": 16},
    "s2-w2-d256": {"stage2_warps": 2, "stage2_block_d": 256},
    "s2-w8-d256": {"stage2_warps": 8, "stage2_block_d": 256},
    "default-again": None,  # the default once more, last: the order of the timings checked
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/results"))
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--name", default="decode_stage2.json")
    ap.add_argument("--qlen", type=int, default=QLEN, help="query rows per request (1: decode)")
    args = ap.parse_args()
    qlen = args.qlen
    res, outdir = results_start(args.out)
    meta, inp, q = page64_case(B, CTX, qlen, seed=B * 10 + qlen)
    ref, ref_lse = reference(meta, inp)
    s = policy_s("mlaprof-triton", meta)
    base = default_config(qlen, hopper=True)
    out = torch.full((B, qlen, 16, 512), float("nan"), device="cuda", dtype=torch.bfloat16)
    lse = torch.full((B, qlen, 16), float("nan"), device="cuda")
    entries: dict[str, dict] = {}
    for name, fields in STAGE2.items():
        cfg = base if fields is None else dataclasses.replace(base, **fields)
        be = TritonBackend(cfg)
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        try:
            be.forward(inp, meta, out, lse, num_splits=s)
            torch.cuda.synchronize()
            row = {"S": s, "cfg": {k: getattr(cfg, k) for k in ("stage2_heads", "stage2_block_d",
                                                               "stage2_warps")}}  # fmt: skip
            row.update(errors(out, lse, ref, ref_lse))
        except Exception as e:  # a launch shape the kernel refuses is a result
            entries[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:400]}
            continue
        row["_fn"] = lambda be=be: be.forward(inp, meta, out, lse, num_splits=s)
        entries[name] = row
    alone = TritonBackend(base)
    alone.skip_stage2 = True
    entries["stage1-alone"] = {
        "S": s,
        "timing_only": True,
        "_fn": lambda: alone.forward(inp, meta, out, lse, num_splits=s),
    }
    fm, info = load_flash_mla()
    res["flash_mla"] = info
    if fm is not None:
        entries["flash_mla"] = flash_entry(fm, meta, q, inp.kv_c, ref, ref_lse)
    timed = [e for e in entries.values() if "_fn" in e]
    for rnd in ("us_round1", "us_round2"):
        for e in timed:
            e[rnd] = graph_time_us(e["_fn"], reps=args.reps)
    for e in entries.values():
        e.pop("_fn", None)
        e.pop("_out", None)
        if "us_round1" in e:
            e["us"] = min(e["us_round1"], e["us_round2"])
            e["tb_s"] = eff_tbs(B, CTX, e["us"])
    flash_us = entries.get("flash_mla", {}).get("us")
    for name, e in entries.items():
        if flash_us and "us" in e and name != "flash_mla":
            e["ratio_vs_flash_mla"] = e["us"] / flash_us
        print(name, {k: v for k, v in e.items() if k not in ("cfg",)}, flush=True)
    res.update({"B": B, "ctx": CTX, "qlen": qlen, "page": 64, "reps": args.reps,
                "entries": entries, "all_ok": all(e.get("ok", True) for e in entries.values()
                                                  if not e.get("timing_only"))})  # fmt: skip
    (outdir / args.name).write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
