"""Where decode's time beside FlashMLA goes at (B 8, ctx 131072, qlen 1, page 64), and variants.

mlaprof's decode on sm_90 and FlashMLA read the KV cache at the same rate; whole times tie. This
call splits the time four ways, in one process on one GPU:

- the two ceilings: the device-to-device copy (read + write) and a read-only kernel (every byte
  of a 2 GiB buffer read once, nothing written but one float per program);
- stage 1 alone, stage 2 alone (on stage 1's partials) and both, as CUDA-graph replays;
- kernel durations from the profiler (CUPTI): mlaprof's two kernels, FlashMLA's kernels;
- when each stage-1 program starts and ends (the GPU's global timer, written by the roles kernel
  itself: ``TritonBackend.stamps``): the ramp before the last program starts, the spread of
  the ends (the tail), per row of the batch.

Variants (``--variants``) are launch configurations over the decode default, checked against
the fp32 torch reference first (output poisoned with NaN), then timed: median of ``--reps``
graph replays, ``--rounds`` rounds alternating every kernel, the lower median kept (the rule of
``bench/verify_vs_flashmla.py``). Needs FlashMLA (``pip install --no-deps sgl-flash-mla==1.0.0``)
for the ratio; runs without it.

    PYTHONPATH=. python bench/decode_gap.py --out $OUT
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpu_suite  # noqa: E402
from gpu_suite import eff_tbs, graph_time_us, policy_s, results_start  # noqa: E402
from verify_vs_flashmla import (  # noqa: E402
    errors,
    flash_entry,
    load_flash_mla,
    page64_case,
    reference,
)

from mlaprof.backends.triton_backend import (  # noqa: E402
    HOPPER_SCHEDULE,
    LaunchConfig,
    TritonBackend,
    default_config,
)

# name -> LaunchConfig fields over the decode default (qlen 1) or the verify default (qlen > 1)
VARIANTS: dict[str, dict] = {
    # the sm_90 defaults before dynamic tiles (HOPPER_SCHEDULE all off), and without the spread
    "fixed": {k: getattr(LaunchConfig(), k) for k in HOPPER_SCHEDULE},
    "spread": {"gluon_spread_rows": True},
    "early-q": {"gluon_early_q": True},
    "idx-ahead": {"gluon_idx_ahead": True},
    "early-q+idx-ahead": {"gluon_early_q": True, "gluon_idx_ahead": True},
    # the programs of a row take its tiles from a device counter (the loader's index load
    # ahead is part of that loader)
    "dynamic": {"gluon_dynamic": True},
    "dynamic+early-q": {"gluon_dynamic": True, "gluon_early_q": True},
    # stage 2 with every load issued at once (S <= block_s)
    "s2-one-pass": {"stage2_one_pass": True},
    "dynamic+early-q+s2-one-pass": {
        "gluon_dynamic": True,
        "gluon_early_q": True,
        "stage2_one_pass": True,
    },
}


def log(*a: object) -> None:
    print(*a, flush=True)


@triton.jit
def _read_all(x, out, n, BLOCK: tl.constexpr):
    """Every element of ``x`` read once (grid-strided), one sum per program written."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(pid * BLOCK, n, step, num_stages=3):
        acc += tl.load(x + start + offs, mask=start + offs < n, other=0.0).to(tl.float32)
    tl.store(out + pid, tl.sum(acc, 0))


def read_ceiling() -> dict:
    """Read-only bandwidth: a 2 GiB bf16 buffer (random) read by programs in several grid
    sizes, and ``torch.sum``; the best is the ceiling."""
    n = 1024**3  # 2 GiB of bf16 (int32 offsets)
    x = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.empty(sms * 16, dtype=torch.float32, device="cuda")
    res = {"bytes": 2 * n, "tb_s": {}}
    for per_sm in (2, 4, 8):
        for block in (4096, 8192):
            grid = (sms * per_sm,)
            us = graph_time_us(
                lambda g=grid, bl=block: _read_all[g](x, out, n, BLOCK=bl, num_warps=8), reps=20
            )
            res["tb_s"][f"triton-{per_sm}x-{block}"] = 2 * n / (us * 1e-6) / 1e12
    us = graph_time_us(lambda: x.sum(dtype=torch.float32), reps=20)
    res["tb_s"]["torch.sum"] = 2 * n / (us * 1e-6) / 1e12
    res["best_tb_s"] = max(res["tb_s"].values())
    log(f"read ceiling: {res}")
    return res


def kernel_durations(fn, iters: int = 20) -> dict:
    """Device durations (us) of every kernel ``fn`` launches, from the profiler: name -> median."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    per: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time > 0:
            per.setdefault(ev.name[:90], []).append(ev.device_time)
    return {k: {"median_us": statistics.median(v), "count": len(v)} for k, v in per.items()}


def stamps_summary(st: torch.Tensor, b: int, s: int) -> dict:
    """Ramp and tail of one stage-1 launch from its programs' stamps (ns, grid order
    (split, row)): start spread, end spread, per-row last end, all relative to the first start."""
    st = st.view(s, b, -1, 4)[:, :, 0, :].cpu()
    ran = st[..., 1] > 0
    t0 = st[..., 0][ran].min().item()
    starts = (st[..., 0][ran] - t0).float() / 1e3
    ends = (st[..., 1][ran] - t0).float() / 1e3
    row_end = [(st[:, r, 1][ran[:, r]] - t0).max().item() / 1e3 for r in range(b)]
    q = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0])
    return {
        "programs": int(ran.sum()),
        "start_us_quantiles": torch.quantile(starts, q).tolist(),
        "end_us_quantiles": torch.quantile(ends, q).tolist(),
        "row_last_end_us": row_end,
        "sms": len(set(st[..., 2][ran].tolist())),
    }


def replay_check(cfg, b: int, ctx: int, qlen: int, cap: int) -> dict:
    """A graph of the kernel pair with device-decided S (``cap`` the grid's), captured with
    every row's KV length set to ``qlen`` (a capture runner's dummy), then replayed three
    times at the real lengths (output poisoned before each) and checked against the fp32
    reference; the dynamic tiles' counters must be zero after every replay."""
    meta, inp, _ = page64_case(b, ctx, qlen, seed=7)
    ref, ref_lse = reference(meta, inp)
    h = inp.q_nope.shape[2]
    be = TritonBackend(cfg, device_splits=True)
    out = torch.full((b, qlen, h, 512), float("nan"), device="cuda", dtype=torch.bfloat16)
    lse = torch.full((b, qlen, h), float("nan"), device="cuda")
    real = meta.seq_lens.clone()
    meta.seq_lens.fill_(qlen)
    be.forward(inp, meta, out, lse, num_splits=cap)  # eager: workspace and counters
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        be.forward(inp, meta, out, lse, num_splits=cap)
    torch.cuda.current_stream().wait_stream(st)
    with torch.cuda.graph(g):
        be.forward(inp, meta, out, lse, num_splits=cap)
    meta.seq_lens.copy_(real)
    runs = []
    for _ in range(3):
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        r = errors(out, lse, ref, ref_lse)
        ctr = be.workspace.ctr
        r["counters_zero"] = ctr is None or int(ctr.count_nonzero().item()) == 0
        r["ok"] = r["ok"] and r["counters_zero"]
        runs.append(r)
    res = {"B": b, "ctx": ctx, "qlen": qlen, "cap": cap, "dynamic": be.last_launch.get("dynamic_tiles"),
           "runs": runs, "ok": all(r["ok"] for r in runs)}  # fmt: skip
    log("replay check", json.dumps(res))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/results"))
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="names of VARIANTS ('' none)")
    ap.add_argument("--shape", default="8x131072x1", help="BxCTXxQLEN")
    ap.add_argument("--name", default="decode_gap.json")
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument("--no-stamps", action="store_true")
    ap.add_argument(
        "--checks", default="", help="variants given the TMA path's extra cases and a replay check"
    )
    args = ap.parse_args()
    b, ctx, qlen = (int(v) for v in args.shape.split("x"))
    res, outdir = results_start(args.out)
    res.update({"B": b, "ctx": ctx, "qlen": qlen, "page": 64, "reps": args.reps})
    checked = [v for v in args.checks.split(",") if v]
    if checked:
        from verify_vs_flashmla import tma_correctness

        cfgs = {}
        for v in checked:
            cfg = LaunchConfig(kernel="gluon", **VARIANTS[v])
            cfgs[v] = cfg
            cfgs[f"{v}-decode"] = dataclasses.replace(cfg, gluon_decode=True)
        res["tma_checks"] = tma_correctness(cfgs)
        res["replay_checks"] = [
            replay_check(dataclasses.replace(default_config(q, hopper=True), **VARIANTS[v]), bb, c, q, cap)
            for v in checked
            for bb, c, q, cap in ((8, 131072, 1, 16), (8, 131072, 4, 16), (3, 20000, 4, 64))
        ]  # fmt: skip
        (outdir / args.name).write_text(json.dumps(res, indent=1, default=str))
    if not args.no_ceilings:
        gpu_suite.sec_copy()
        res["copy"] = gpu_suite.RESULTS["copy"]
        res["read"] = read_ceiling()
        torch.cuda.empty_cache()
    meta, inp, q = page64_case(b, ctx, qlen, seed=b * 10 + qlen)
    ref, ref_lse = reference(meta, inp)
    s = policy_s("mlaprof-triton", meta)
    base = default_config(qlen, hopper=True)
    h = inp.q_nope.shape[2]
    entries: dict[str, dict] = {}
    backends: dict[str, TritonBackend] = {}

    def add(name: str, cfg) -> None:
        be = TritonBackend(cfg)
        out = torch.full((b, qlen, h, 512), float("nan"), device="cuda", dtype=torch.bfloat16)
        lse = torch.full((b, qlen, h), float("nan"), device="cuda")
        try:
            be.forward(inp, meta, out, lse, num_splits=s)
            torch.cuda.synchronize()
            row = {"S": s, "cfg": {k: v for k, v in dataclasses.asdict(cfg).items()
                                   if v != getattr(base, k)}}  # fmt: skip
            row["kernel"] = be.last_launch["stage1"].get("kernel")
            row.update(errors(out, lse, ref, ref_lse))
        except Exception as e:  # a variant that fails is a result, the others go on
            entries[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:800]}
            log(name, entries[name])
            return
        row["_fn"] = lambda: be.forward(inp, meta, out, lse, num_splits=s)
        entries[name] = row
        backends[name] = be
        log(name, {k: v for k, v in row.items() if not k.startswith("_")})

    add("default", base)
    for name in [v for v in args.variants.split(",") if v]:
        add(name, dataclasses.replace(base, **VARIANTS[name]))
    for name in list(backends):
        alone = TritonBackend(backends[name].config)
        alone.skip_stage2 = True
        out = torch.empty(b, qlen, h, 512, device="cuda", dtype=torch.bfloat16)
        entries[f"{name}:stage1-alone"] = {"timing_only": True, "_fn": lambda a=alone, o=out: a.forward(inp, meta, o, None, num_splits=s)}  # fmt: skip
    for s2name, s2cfg in (("stage2-alone", base),
                          ("stage2-alone-one-pass", dataclasses.replace(base, stage2_one_pass=True))):  # fmt: skip
        s2 = TritonBackend(s2cfg)
        o2 = torch.empty(b, qlen, h, 512, device="cuda", dtype=torch.bfloat16)
        l2 = torch.empty(b, qlen, h, device="cuda")
        s2.forward(inp, meta, o2, l2, num_splits=s)
        s2.skip_stage1 = True  # its own workspace holds the partials of the call above
        entries[s2name] = {"timing_only": True, "_fn": lambda s2=s2, o2=o2, l2=l2: s2.forward(inp, meta, o2, l2, num_splits=s)}  # fmt: skip
    fm, info = load_flash_mla()
    res["flash_mla"] = info
    if fm is not None:
        entries["flash_mla"] = flash_entry(fm, meta, q, inp.kv_c, ref, ref_lse)
    timed = [e for e in entries.values() if "_fn" in e]
    for r in range(args.rounds):
        for e in timed:
            e[f"us_round{r + 1}"] = graph_time_us(e["_fn"], reps=args.reps)
    flash_us = None
    for e in entries.values():
        rounds = [v for k, v in e.items() if k.startswith("us_round")]
        if rounds:
            e["us"] = min(rounds)
            e["tb_s"] = eff_tbs(b, ctx, e["us"])
    flash_us = entries.get("flash_mla", {}).get("us")
    for name, e in entries.items():
        if flash_us and "us" in e and name != "flash_mla":
            e["ratio_vs_flash_mla"] = e["us"] / flash_us
            # per round too: the rounds alternate, so round r of each is side by side
            e["ratio_per_round"] = [e[f"us_round{r + 1}"] / entries["flash_mla"][f"us_round{r + 1}"]
                                    for r in range(args.rounds)]  # fmt: skip
    try:
        prof = {"mlaprof-default": kernel_durations(entries["default"]["_fn"])}
        if "flash_mla" in entries and "_fn" in entries["flash_mla"]:
            prof["flash_mla"] = kernel_durations(entries["flash_mla"]["_fn"])
        for name in backends:
            if name != "default":
                prof[name] = kernel_durations(entries[name]["_fn"])
        res["profiler"] = prof
        log("profiler", json.dumps(prof, indent=1))
    except Exception as ex:  # the profiler is a diagnosis, not the result
        res["profiler_error"] = f"{type(ex).__name__}: {ex}"[:400]
    stamps = {}
    for name, be in [] if args.no_stamps else backends.items():
        if be.last_launch["stage1"].get("kernel") != "gluon":
            continue
        grid = be.last_launch["stage1"]["grid"]
        be.stamps = torch.zeros(grid[0] * grid[1] * grid[2] * 4, dtype=torch.int64, device="cuda")
        runs = []
        try:
            for _ in range(5):
                be.stamps.zero_()
                entries[name]["_fn"]()
                torch.cuda.synchronize()
                runs.append(stamps_summary(be.stamps, b, s))
        except Exception as ex:
            runs.append({"error": f"{type(ex).__name__}: {ex}"[:400]})
        be.stamps = None
        stamps[name] = runs
        log("stamps", name, json.dumps(runs[-1]))
    res["stamps"] = stamps
    for e in entries.values():
        e.pop("_fn", None)
        e.pop("_out", None)
    for name, e in entries.items():
        log(name, {k: v for k, v in e.items() if k != "cfg"})
    res["entries"] = entries
    res["all_ok"] = all(
        e.get("ok", True) for e in entries.values() if not e.get("timing_only")
    ) and all(r.get("ok") for r in res.get("tma_checks", []) + res.get("replay_checks", []))
    (outdir / args.name).write_text(json.dumps(res, indent=1, default=str))
    log("all_ok", res["all_ok"])


if __name__ == "__main__":
    main()
