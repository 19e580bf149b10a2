"""The sm_90 Gluon verify stage 1 against the fp32 torch reference at the suite's shapes (H200).

    PYTHONPATH=. python bench/verify_gluon.py --out $OUT

The kernel is forced (``LaunchConfig(kernel="gluon")``, an error where it cannot run) at: the
timed shapes (S from ``mlaprof-triton``), qlen 2 and 8 (32 of 64 rows used; two head blocks),
ragged rows with two padding rows, a KV pool of more than 2^31 elements, S = 1, S at the
backend's cap (1024), pages of 16 slots, fp16, and device-decided S. The output is poisoned
with NaN before each run; padding rows must come back 0 with lse -inf. Graph safety (captured
with the dummy run's lengths, replayed at the real ones) is ``bench/device_splits.py``, whose
backends take the Gluon kernel on sm_90 by default. Writes ``verify_gluon.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_suite import BF16_REL_BOUND, H, make_case, policy_s, rel_err, results_start  # noqa: E402

from mlaprof.backends.base import VerifyInputs  # noqa: E402
from mlaprof.backends.torch_ref import TorchReference  # noqa: E402
from mlaprof.backends.triton_backend import MAX_SPLITS, LaunchConfig, TritonBackend  # noqa: E402
from mlaprof.metadata import BatchShape, build_metadata, kv_pool_pages  # noqa: E402
from mlaprof.scenario import KV_DIM, LATENT  # noqa: E402

DEV = "cuda"


def log(*a: object) -> None:
    print(*a, flush=True)


def custom_case(lens, qlen, rows, page=1, seed=0, dtype=torch.bfloat16, heads=H):
    shape = BatchShape(list(lens), qlen, rows, None, "FULL")
    meta = build_metadata(shape, page, "active-rows", "cpu", seed=seed).to(DEV)
    g = torch.Generator(device=DEV).manual_seed(seed)
    kv = torch.empty(kv_pool_pages(meta) * page, KV_DIM, device=DEV, dtype=dtype)
    kv.normal_(0, 0.5, generator=g)
    q = torch.randn(rows, qlen, heads, KV_DIM, device=DEV, dtype=dtype, generator=g)
    inp = VerifyInputs(q[..., :LATENT].contiguous(), q[..., LATENT:].contiguous(), kv, KV_DIM**-0.5)
    return meta, inp


def check(meta, inp, s, cfg, device_splits=False, heads=H) -> dict:
    b, qlen = meta.num_reqs, meta.qlen
    be = TritonBackend(cfg, device_splits=device_splits)
    out = torch.full((b, qlen, heads, LATENT), float("nan"), device=DEV, dtype=inp.q_nope.dtype)
    lse = torch.full((b, qlen, heads), float("nan"), device=DEV)
    be.forward(inp, meta, out, lse, num_splits=s)
    ref = torch.empty(b, qlen, heads, LATENT, device=DEV)
    ref_lse = torch.empty(b, qlen, heads, device=DEV)
    TorchReference().forward(inp, meta, ref, ref_lse)
    torch.cuda.synchronize()
    fin = torch.isfinite(ref_lse)
    pad = [i for i, n in enumerate(meta.host_qo_lens) if n == 0]
    r = {
        "kernel": be.last_launch["stage1"]["kernel"],
        "registers": be.last_launch["stage1"].get("registers"),
        "spills": be.last_launch["stage1"].get("spills"),
        "unwritten": int(out.isnan().sum().item()),
        "rel_err": rel_err(out, ref),
        "lse_max_abs_err": (lse[fin] - ref_lse[fin]).abs().max().item() if fin.any() else 0.0,
        "lse_inf_where_ref_inf": bool(torch.equal(torch.isinf(lse), torch.isinf(ref_lse))),
        "padding_rows_zero": all(int(torch.count_nonzero(out[i].float())) == 0 for i in pad),
    }
    r["ok"] = (
        r["unwritten"] == 0
        and r["rel_err"] < BF16_REL_BOUND
        and r["lse_max_abs_err"] < 1e-2
        and r["lse_inf_where_ref_inf"]
        and r["padding_rows_zero"]
        and r["kernel"] == "gluon"
    )
    if be.last_launch.get("dynamic_tiles"):  # the counters the launch left: zero, and a
        # second launch on them (poisoned output again) gives the same result
        # (the tiles each program takes vary from launch to launch: rounding differs)
        r["counters_zero"] = int(be.workspace.ctr.count_nonzero().item()) == 0
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        be.forward(inp, meta, out, lse, num_splits=s)
        torch.cuda.synchronize()
        r["again_unwritten"] = int(out.isnan().sum().item())
        r["again_rel_err"] = rel_err(out, ref)
        r["again_lse_max_abs_err"] = (
            (lse[fin] - ref_lse[fin]).abs().max().item() if fin.any() else 0.0
        )
        r["ok"] = (
            r["ok"]
            and r["counters_zero"]
            and r["again_unwritten"] == 0
            and r["again_rel_err"] < BF16_REL_BOUND
            and r["again_lse_max_abs_err"] < 1e-2
            and int(be.workspace.ctr.count_nonzero().item()) == 0
        )
    return r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/results"))
    ap.add_argument("--block-n", type=int, default=LaunchConfig().gluon_block_n)
    ap.add_argument("--buffers", type=int, default=LaunchConfig().gluon_buffers)
    ap.add_argument("--overlap", action="store_true", help="the overlapped loop (gluon_overlap)")
    ap.add_argument("--eager-sum", action="store_true", help="row sums reduced per tile")
    ap.add_argument("--name", default="verify_gluon.json")
    args = ap.parse_args()
    res, out = results_start(args.out, bound_rel_l2=BF16_REL_BOUND, heads=H, cases=[])
    kw = dict(gluon_block_n=args.block_n, gluon_buffers=args.buffers, gluon_overlap=args.overlap)
    if args.overlap or args.eager_sum:
        kw["gluon_lazy_sum"] = False
    res["config"] = kw
    cfg = LaunchConfig(kernel="gluon", **kw)
    small = LaunchConfig(kernel="gluon", split_min_chunk=64, **kw)
    cases = []
    for b, ctx, qlen in ((8, 131072, 4), (1, 131072, 4), (64, 32768, 4)):
        cases.append((f"B={b} ctx={ctx} qlen={qlen} S=policy", lambda b=b, c=ctx, q=qlen: (
            make_case(b, c, q, seed=b + q), None, cfg, False)))  # fmt: skip
    cases += [
        ("B=3 ctx=5000 qlen=4 S=7", lambda: (make_case(3, 5000, 4, seed=3), 7, cfg, False)),
        ("B=3 ctx=3000 qlen=2 S=4", lambda: (make_case(3, 3000, 2, seed=4), 4, cfg, False)),
        ("B=2 ctx=3000 qlen=8 S=3", lambda: (make_case(2, 3000, 8, seed=5), 3, cfg, False)),
        ("B=2 ctx=3000 qlen=3 S=5", lambda: (make_case(2, 3000, 3, seed=6), 5, cfg, False)),
        (
            "ragged [4100,70,9000] + 2 padding rows, S=16",
            lambda: (custom_case([4100, 70, 9000], 4, 5, seed=9), 16, cfg, False),
        ),  # fmt: skip
        ("S=1 B=2 ctx=3000", lambda: (make_case(2, 3000, 4, seed=7), 1, cfg, False)),
        (
            f"S={MAX_SPLITS} (cap) B=1 ctx=131072",
            lambda: (make_case(1, 131072, 4, seed=8), MAX_SPLITS, cfg, False),
        ),  # fmt: skip
        (
            "pool > 2^31 elements B=1 ctx=4096 S=8",
            lambda: (
                make_case(1, 4096, 4, seed=11, page_offset=(2**31) // KV_DIM + 1000),
                8,
                cfg,
                False,
            ),
        ),  # fmt: skip
        (
            "page 16, ragged [1000,37,5000], S=4",
            lambda: (custom_case([1000, 37, 5000], 4, 3, page=16, seed=12), 4, cfg, False),
        ),  # fmt: skip
        (
            "fp16 B=2 ctx=3000 S=4",
            lambda: (custom_case([3000, 2999], 4, 2, seed=13, dtype=torch.float16), 4, cfg, False),
        ),
        (
            "device S (cap 64), ragged [9000,100,70000,5] + 1 padding row",
            lambda: (custom_case([9000, 100, 70000, 5], 4, 5, seed=14), 64, small, True),
        ),  # fmt: skip
        (
            "qlen 4 at 1 key short of the causal bound: ctx=4 (every row its own bound)",
            lambda: (make_case(2, 4, 4, seed=15), 2, cfg, False),
        ),  # fmt: skip
    ]
    for name, make in cases:
        try:
            (meta, inp), s, c, dev = make()
            s = policy_s("mlaprof-triton", meta) if s is None else s
            r = check(meta, inp, s, c, device_splits=dev)
            r.update(case=name, S=s, pool_elements=inp.kv_c.numel())
            del meta, inp
        except Exception as e:  # keep the other cases' results
            r = {"case": name, "ok": False, "error": f"{type(e).__name__}: {e}"[:800]}
        torch.cuda.empty_cache()
        log(f"correct {name}: {r}")
        res["cases"].append(r)
        (out / args.name).write_text(json.dumps(res, indent=1, default=str))
    res["all_ok"] = all(r["ok"] for r in res["cases"])
    (out / args.name).write_text(json.dumps(res, indent=1, default=str))
    log(f"all correct: {res['all_ok']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
