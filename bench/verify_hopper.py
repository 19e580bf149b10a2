"""The verify kernel's stage-1 kernels and launch layouts side by side on the H200.

    PYTHONPATH=. python bench/verify_hopper.py --out $OUT

At H = 16 (bf16, page 1, S from ``mlaprof-triton``) per shape and layout: median replay time of the
kernel pair (CUDA graph, twice), stage 1 alone, registers and spills per thread, whether the PTX
holds ``wgmma`` or ``mma.sync``, and the error against the fp32 torch reference; first the
device-to-device copy ceiling, measured in the same call. ``VARIANTS`` holds the kernels of the
last run: the default (the Gluon stage 1 on sm_90 for verify), the Gluon kernel at other tile and
buffer counts, the Triton kernel's Hopper layout (64 rows / 8 warps / 3 stages) and its portable
32-row one; the exploration of the Triton layouts (q_nope in latent chunks, warp specialization, tiles of 32
or 64 keys, 2 or 3 stages, S x1/4 to x2) is in ``bench/results/verify_hopper_h200_sweep.json``
with the layout of each call. Writes ``verify_hopper.json``.
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

import gpu_suite  # noqa: E402
from gpu_suite import (  # noqa: E402
    BF16_REL_BOUND,
    H,
    eff_tbs,
    graph_time_us,
    make_case,
    pick,
    policy_s,
    rel_err,
    results_start,
)

from mlaprof.backends.torch_ref import TorchReference  # noqa: E402
from mlaprof.backends.triton_backend import (  # noqa: E402
    LaunchConfig,
    TritonBackend,
    default_config,
    is_hopper,
)
from mlaprof.scenario import LATENT  # noqa: E402

DEV = "cuda"
C = LaunchConfig
VARIANTS = {
    "default": None,  # default_config(qlen, hopper): the Gluon stage 1 on sm_90 for verify
    "gluon-eager-sum": C(kernel="gluon", gluon_lazy_sum=False),  # row sums reduced per tile
    "gluon-overlap": C(kernel="gluon", gluon_overlap=True, gluon_lazy_sum=False),
    "gluon-n32-b3": C(kernel="gluon", gluon_block_n=32, gluon_buffers=3),
    "gluon-n32-b3-overlap": C(
        kernel="gluon", gluon_block_n=32, gluon_buffers=3, gluon_overlap=True, gluon_lazy_sum=False
    ),
    "gluon-n32-b4": C(kernel="gluon", gluon_block_n=32, gluon_buffers=4),
    "gluon-n16-b6": C(kernel="gluon", gluon_block_n=16, gluon_buffers=6),
    # where the time goes (wrong output, timing only): the load pipeline alone, compute alone
    "gluon-loads-alone": C(kernel="gluon", gluon_phases=1),
    "gluon-compute-alone": C(kernel="gluon", gluon_phases=2),
    "gluon-eager-sum-compute-alone": C(kernel="gluon", gluon_phases=2, gluon_lazy_sum=False),
    # the Triton kernel's Hopper layout (the default before the Gluon kernel)
    "triton-r64": C(rows=64, num_warps=8, num_stages=3, rope_first=True, kernel="triton"),
    "r32-portable": C(rows=32, kernel="triton"),  # the portable verify layout (AMD, interpreter)
    # decode (16 rows) layouts around the default
    "decode-n32": C(block_n=32),
    "decode-n32-s3": C(block_n=32, num_stages=3),
    "decode-w8": C(num_warps=8),
    "decode-w2": C(num_warps=2),
    "decode-n128-s1": C(block_n=128, num_stages=1),
}
SHAPES = [
    (8, 131072, 4),
    (1, 131072, 4),
    (64, 32768, 4),
    (1, 131072, 1),
    (8, 131072, 1),
    (64, 32768, 1),
]


def log(*a: object) -> None:
    print(*a, flush=True)


def run_variant(meta, inp, qlen, s, cfg, ref) -> dict:
    b = meta.num_reqs
    be = TritonBackend(cfg)
    out = torch.full((b, qlen, H, LATENT), float("nan"), device=DEV, dtype=torch.bfloat16)
    lse = torch.empty(b, qlen, H, device=DEV)
    be.forward(inp, meta, out, lse, num_splits=s)
    torch.cuda.synchronize()
    c1 = be.compiled[0]
    ptx = getattr(c1, "asm", {}).get("ptx", "") if c1 is not None else ""
    row = {
        "kernel": be.last_launch["stage1"].get("kernel"),
        "unwritten": int(out.isnan().sum().item()),
        "rel_err": rel_err(out, ref),
        "registers": getattr(c1, "n_regs", None),
        "spills": getattr(c1, "n_spills", None),
        "wgmma": "wgmma" in ptx,
        "mma_sync": "mma.sync" in ptx,
    }
    row["us"] = graph_time_us(lambda: be.forward(inp, meta, out, lse, num_splits=s), reps=30)
    be1 = TritonBackend(cfg)
    be1.skip_stage2 = True
    row["stage1_us"] = graph_time_us(
        lambda: be1.forward(inp, meta, out, lse, num_splits=s), reps=30
    )
    row["us_again"] = graph_time_us(lambda: be.forward(inp, meta, out, lse, num_splits=s), reps=30)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/results"))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--shapes", default="", help="indices into SHAPES (default: all)")
    ap.add_argument("--no-copy", action="store_true", help="skip the copy ceiling")
    args = ap.parse_args()
    res, out = results_start(args.out, heads=H, rows=[])
    if not args.no_copy:
        gpu_suite.sec_copy()  # the ceiling, in the same call as the kernels
        res["copy"] = gpu_suite.RESULTS["copy"]
    shapes = pick(args.shapes, SHAPES)
    for b, ctx, qlen in shapes:
        meta, inp = make_case(b, ctx, qlen, heads=H, seed=b * 10 + qlen)
        s = policy_s("mlaprof-triton", meta)
        ref = torch.empty(b, qlen, H, LATENT, device=DEV)
        TorchReference().forward(inp, meta, ref, None)
        for name in args.variants.split(","):
            if qlen == 1 and name != "default" and not name.startswith("decode"):
                continue  # decode at H = 16 holds 16 rows: the verify layouts do not apply
            if qlen > 1 and name.startswith("decode"):
                continue
            cfg = VARIANTS[name] or default_config(qlen, hopper=is_hopper(torch.device(DEV)))
            div = 4 if name.endswith("S/4") else 2 if name.endswith("S/2") else 1
            s_v = max(1, s // div)
            row = {"B": b, "ctx": ctx, "qlen": qlen, "S": s_v, "variant": name}
            row["cfg"] = dataclasses.asdict(cfg)
            try:
                row.update(run_variant(meta, inp, qlen, s_v, cfg, ref))
                row["tb_s"] = eff_tbs(b, ctx, row["us"])
                row["ok"] = row["unwritten"] == 0 and row["rel_err"] < BF16_REL_BOUND
                if name.endswith("-alone"):
                    row["ok"] = None  # a timing diagnostic: its output is wrong by design
                log(
                    f"B={b} ctx={ctx} qlen={qlen} S={s_v} {name}: {row['us']:.1f} us "
                    f"(again {row['us_again']:.1f}, stage 1 {row['stage1_us']:.1f}) "
                    f"{row['tb_s']:.2f} TB/s {row['kernel']} regs {row['registers']} spills {row['spills']} "
                    f"wgmma {row['wgmma']} err {row['rel_err']:.2e}"
                )
            except Exception as e:  # a config may not compile (resources)
                row["error"] = f"{type(e).__name__}: {e}"[:500]
                log(f"B={b} qlen={qlen} {name}: {row['error']}")
            res["rows"].append(row)
            (out / "verify_hopper.json").write_text(json.dumps(res, indent=1, default=str))
        del meta, inp, ref
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
