"""``gluon_spread_rows`` beside the same launch config without it, in one process on one GPU.

    PYTHONPATH=. python bench/verify_gluon_spread.py --out $OUT --commit $(git rev-parse HEAD)

``LaunchConfig.gluon_spread_rows`` (the roles kernel's ``SPREAD_ROWS``) renumbers the programs
of a dynamic-tile launch so that a row's splits launch next to each other. It acts only where
the dynamic tiles do (TMA pages, S <= ``gluon_dynamic_max_splits``); elsewhere both configs run
the same code (the B 1 shapes at S 128 here: a control for the timer's noise). The configs are
``bench/verify_vs_flashmla.py``'s ``page64-spread`` (verify) and ``page64-spread-decode``
(qlen 1); "nospread" is each with the option off (the sm_90 defaults, ``default_config``).

1. Correctness against the fp32 torch reference (bf16 bound ``BF16_REL_BOUND``): the TMA
   path's extra cases of ``bench/verify_vs_flashmla.py`` (ragged rows with NaN page tails,
   padding rows, qlen 2/3/4/8, S 1..256, device-decided S, fp16, page 128) for both configs,
   and ``bench/decode_gap.py``'s graph replay check (captured at dummy lengths, replayed at the
   real ones, the tile counters back to 0).
2. At ``bench/verify_vs_flashmla.py``'s five shapes (page 64, S from the mlaprof-triton policy):
   both configs checked (NaN-poisoned output), then timed, the whole call and stage 1 alone:
   median of ``--reps`` CUDA-graph replays, ``--rounds`` rounds alternating the kernels; the
   ratio spread / nospread per round, of the lower round medians (the scripts' rule) and the
   median of the per-round ratios.
3. The stage-1 programs' start/end stamps (``TritonBackend.stamps``, summarised as in
   ``bench/decode_gap.py``) of both, where spread acts: how far apart the rows end.

Writes ``verify_gluon_spread.json`` (``--name``). ``--cpu-dry-run`` (with ``TRITON_INTERPRET=1``)
runs the plumbing at tiny shapes on the CPU: the Triton fallback kernel on fp32 inputs (the
interpreter gets bf16 wrong), wall-clock timing, no Gluon, graphs or stamps; its times mean
nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpu_suite  # noqa: E402
import verify_gluon  # noqa: E402
import verify_vs_flashmla as vvf  # noqa: E402
from gpu_suite import BF16_REL_BOUND, eff_tbs, graph_samples  # noqa: E402

from mlaprof.backends.base import VerifyInputs  # noqa: E402
from mlaprof.backends.triton_backend import (  # noqa: E402
    LaunchConfig,
    TritonBackend,
    default_config,
)

ROOT = Path(__file__).resolve().parents[1]
SPREAD = {1: vvf.VARIANTS["page64-spread-decode"][1], 4: vvf.VARIANTS["page64-spread"][1]}
FILES = ("mlaprof/kernels/mla_verify_gluon.py", "mlaprof/backends/triton_backend.py")


def log(*a: object) -> None:
    print(*a, flush=True)


def cfg_pair(qlen: int) -> dict[str, LaunchConfig]:
    spread = SPREAD[1 if qlen == 1 else 4]
    return {"nospread": dataclasses.replace(spread, gluon_spread_rows=False), "spread": spread}


def provenance(commit: str) -> dict:
    """The commit, and the hashes of the kernel files that ran (the tree may not be the commit)."""
    res: dict = {"commit": commit or None}
    try:
        res["commit_git"] = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        res["commit_git"] = None
    res["sha256"] = {f: hashlib.sha256((ROOT / f).read_bytes()).hexdigest() for f in FILES}
    return res


def wall_samples(fn, reps: int) -> list[float]:
    """The dry run's stand-in: wall-clock us per eager call."""
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6)
    return times


def quantiles(v: list[float]) -> dict:
    q = statistics.quantiles(v, n=20) if len(v) > 1 else [v[0]] * 19
    return {"p5": q[0], "p25": q[4], "median": statistics.median(v), "p75": q[14], "p95": q[18]}


def stamps_runs(be: TritonBackend, fn, b: int, s: int, runs: int = 5) -> dict:
    """Program start/end stamps of ``runs`` eager launches (``decode_gap.stamps_summary``), and
    per run how far apart the rows' last programs end (``row_end_spread_us``)."""
    from decode_gap import stamps_summary

    grid = be.last_launch["stage1"]["grid"]
    be.stamps = torch.zeros(grid[0] * grid[1] * grid[2] * 4, dtype=torch.int64, device="cuda")
    out = []
    try:
        for _ in range(runs):
            be.stamps.zero_()
            fn()
            torch.cuda.synchronize()
            r = stamps_summary(be.stamps, b, s)
            ends = r["row_last_end_us"]
            r["row_end_spread_us"] = max(ends) - min(ends)
            r["last_end_us"] = max(ends)
            out.append(r)
    finally:
        be.stamps = None
    return {
        "runs": out,
        "row_end_spread_us_median": statistics.median(r["row_end_spread_us"] for r in out),
        "last_end_us_median": statistics.median(r["last_end_us"] for r in out),
    }


def run_shape(b: int, ctx: int, qlen: int, args, dry: bool) -> dict:
    """Both configs at one shape: checked, timed side by side, stamped."""
    meta, inp, _ = vvf.page64_case(b, ctx, qlen, seed=b * 10 + qlen)
    dt = torch.bfloat16
    if dry:  # the interpreter computes bf16 wrongly (numpy has no bf16): fp32 there
        dt = torch.float32
        inp = VerifyInputs(inp.q_nope.float(), inp.q_pe.float(), inp.kv_c.float(), inp.sm_scale)
    ref, ref_lse = vvf.reference(meta, inp)
    s = 2 if dry else gpu_suite.policy_s("mlaprof-triton", meta)
    h = inp.q_nope.shape[2]
    res: dict = {"B": b, "ctx": ctx, "qlen": qlen, "page": 64, "S": s, "configs": {}}
    fns: dict[str, object] = {}
    backends: dict[str, TritonBackend] = {}
    for name, cfg in cfg_pair(qlen).items():
        be = TritonBackend(cfg)
        out = torch.full((b, qlen, h, 512), float("nan"), device=vvf.DEV, dtype=dt)
        lse = torch.full((b, qlen, h), float("nan"), device=vvf.DEV)
        row: dict = {}
        try:
            be.forward(inp, meta, out, lse, num_splits=s)
            if not dry:
                torch.cuda.synchronize()
            st1 = be.last_launch["stage1"]
            row = {k: st1.get(k) for k in ("kernel", "grid", "registers", "spills")}
            row["dynamic_tiles"] = be.last_launch.get("dynamic_tiles")
            row.update(vvf.errors(out, lse, ref, ref_lse))
        except Exception as e:  # a config that fails is a result; the other goes on
            row = {"ok": False, "error": f"{type(e).__name__}: {e}"[:800]}
        res["configs"][name] = row
        log(f"B={b} ctx={ctx} qlen={qlen} S={s} check {name}: {row}")
        if "error" in row:
            continue
        backends[name] = be
        fns[name] = lambda be=be, o=out, lo=lse: be.forward(inp, meta, o, lo, num_splits=s)
        alone = TritonBackend(cfg)
        alone.skip_stage2 = True
        o1 = torch.empty(b, qlen, h, 512, device=vvf.DEV, dtype=dt)
        fns[f"{name}:stage1"] = lambda a=alone, o=o1: a.forward(inp, meta, o, None, num_splits=s)
    timer = wall_samples if dry else graph_samples
    samples: dict[str, list[list[float]]] = {k: [] for k in fns}
    for _ in range(args.rounds):  # rounds alternate the kernels
        for k, fn in fns.items():
            samples[k].append(timer(fn, args.reps))
    timing: dict = {}
    for k, rounds in samples.items():
        meds = [statistics.median(r) for r in rounds]
        pooled = [x for r in rounds for x in r]
        timing[k] = {
            "us": min(meds),  # the scripts' rule: the lower round median
            "round_medians_us": meds,
            "pooled": quantiles(pooled),
            "tb_s": eff_tbs(b, ctx, min(meds)),
        }
    for part in ("", ":stage1"):
        a, z = timing.get(f"nospread{part}"), timing.get(f"spread{part}")
        if a and z:
            per = [
                zz / aa for aa, zz in zip(a["round_medians_us"], z["round_medians_us"], strict=True)
            ]
            timing[f"ratio{part or ':whole'}"] = {
                "spread_over_nospread_min_rule": z["us"] / a["us"],
                "per_round": per,
                "median_of_rounds": statistics.median(per),
            }
    res["timing"] = timing
    for k, v in timing.items():
        log(f"B={b} ctx={ctx} qlen={qlen} {k}: {json.dumps(v)}")
    if not dry and not args.no_stamps:
        stamps = {}
        for name, be in backends.items():
            acts = res["configs"][name].get("dynamic_tiles")
            if res["configs"][name].get("kernel") != "gluon" or not acts:
                continue
            try:
                stamps[name] = stamps_runs(be, fns[name], b, s)
            except Exception as e:  # a diagnosis, not the result
                stamps[name] = {"error": f"{type(e).__name__}: {e}"[:400]}
            log(f"B={b} ctx={ctx} qlen={qlen} stamps {name}: "
                f"{ {k: v for k, v in stamps[name].items() if k != 'runs'} }")  # fmt: skip
        res["stamps"] = stamps
    return res


def dry_setup() -> None:
    """Point the shared bench modules at the CPU (they hold DEV = "cuda")."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("--cpu-dry-run needs TRITON_INTERPRET=1")
    for mod in (gpu_suite, verify_gluon, vvf):
        mod.DEV = "cpu"


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/results"))
    ap.add_argument("--name", default="verify_gluon_spread.json")
    ap.add_argument("--commit", default="", help="the commit the tree was taken from")
    ap.add_argument("--shapes", default="", help=f"indices into {vvf.SHAPES} (default: all)")
    ap.add_argument("--extra-shapes", default="", help="more shapes: BxCTXxQLEN,...")
    ap.add_argument("--reps", type=int, default=100, help="CUDA-graph replays a round's median")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-checks", action="store_true", help="skip section 1")
    ap.add_argument("--no-stamps", action="store_true")
    ap.add_argument("--cpu-dry-run", action="store_true", help="plumbing only (see above)")
    args = ap.parse_args()
    dry = args.cpu_dry_run
    if dry:
        dry_setup()
        res = {"env": {"device": "cpu (dry run: numbers mean nothing)"}}
        outdir = Path(args.out)
        outdir.mkdir(parents=True, exist_ok=True)
    else:
        res, outdir = gpu_suite.results_start(args.out)
    res.update(provenance(args.commit))
    res["bound_rel_l2"] = BF16_REL_BOUND
    res["heads"] = gpu_suite.H
    res["configs"] = {
        "verify (qlen > 1)": {k: dataclasses.asdict(c) for k, c in cfg_pair(4).items()},
        "decode (qlen 1)": {k: dataclasses.asdict(c) for k, c in cfg_pair(1).items()},
    }
    # "nospread" must be what mlaprof runs on sm_90 by default, or the comparison is not the
    # option's alone
    res["nospread_is_default"] = {
        str(q): cfg_pair(q)["nospread"] == default_config(q, hopper=True) for q in (1, 4)
    }
    res["method"] = (
        f"per shape and config: median of {args.reps} CUDA-graph replays, {args.rounds} rounds "
        "alternating spread / nospread (whole call, then stage 1 alone); us = the lower round "
        "median; ratio = spread / nospread; bf16 inputs, 16 heads, page 64, S from the "
        "mlaprof-triton policy"
    )
    path = outdir / args.name

    def save() -> None:
        path.write_text(json.dumps(res, indent=1, default=str))

    save()
    if not args.no_checks and not dry:
        from decode_gap import replay_check

        cfgs = {**{f"{k}-decode": c for k, c in cfg_pair(1).items()}, **cfg_pair(4)}
        res["tma_checks"] = vvf.tma_correctness(cfgs)
        save()
        res["replay_checks"] = []
        for name in ("spread", "nospread"):
            for bb, c, q, cap in ((8, 131072, 1, 16), (8, 131072, 4, 16), (3, 20000, 4, 64)):
                try:
                    r = replay_check(cfg_pair(q)[name], bb, c, q, cap)
                except Exception as e:
                    r = {"B": bb, "ctx": c, "qlen": q, "ok": False}
                    r["error"] = f"{type(e).__name__}: {e}"[:800]
                r["cfg"] = name
                res["replay_checks"].append(r)
                torch.cuda.empty_cache()
        save()
    if dry:
        shapes = [(2, 256, 4), (2, 256, 1)]
    else:
        picked = gpu_suite.pick(args.shapes, vvf.SHAPES)
        extra = [tuple(int(v) for v in x.split("x")) for x in args.extra_shapes.split(",") if x]
        shapes = list(picked) + extra
    res["shapes"] = []
    for b, ctx, qlen in shapes:
        res["shapes"].append(run_shape(b, ctx, qlen, args, dry))
        if not dry:
            torch.cuda.empty_cache()
        save()
    res["summary"] = [
        {
            "B": r["B"], "ctx": r["ctx"], "qlen": r["qlen"], "S": r["S"],
            "spread_acts": bool(r["configs"].get("spread", {}).get("dynamic_tiles")),
            **{f"{k}_ok": v.get("ok") for k, v in r["configs"].items()},
            **{f"{k}_rel_err": v.get("rel_err") for k, v in r["configs"].items()},
            **{f"{k}_us": v["us"] for k, v in r["timing"].items() if "us" in v},
            **{k: v["median_of_rounds"] for k, v in r["timing"].items() if k.startswith("ratio")},
            **{f"{k}_row_end_spread_us": v.get("row_end_spread_us_median")
               for k, v in r.get("stamps", {}).items()},
        }
        for r in res["shapes"]
    ]  # fmt: skip
    res["all_ok"] = all(c.get("ok") for r in res["shapes"] for c in r["configs"].values()) and all(
        r.get("ok") for r in res.get("tma_checks", []) + res.get("replay_checks", [])
    )
    save()
    log(json.dumps(res["summary"], indent=1))
    log(f"all_ok {res['all_ok']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
