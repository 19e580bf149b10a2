"""Issue 16 item 1 on the GPU: one captured graph right at every KV length.

    PYTHONPATH=. python bench/device_splits.py --out $OUT

Per shape (H = 16, bf16, page 1, shuffled pages), graphs of the kernel pair (stage 1 + stage 2):

- ``dev@dummy``: device-decided splits (``TritonBackend(device_splits=True)``, grid S = the capture
  size's cap), captured with the dummy run's metadata (every row KV = qlen), then the real
  metadata copied into the same buffers and replayed;
- ``host@real``: host-decided S from the ``mlaprof-triton`` policy at the real lengths, captured at
  the real lengths (the best a host policy can do);
- ``host@dummy``: host-decided S captured with the dummy metadata (S = 1 frozen), replayed at the
  real lengths: the bug class;
- ``dev@real``: the device-decided graph captured at the real lengths (same kernel, other capture).

Correctness of every replay against the fp32 torch reference at the real lengths (output poisoned
with NaN before the replay), and of ``dev@dummy`` at the dummy lengths as well. Times are medians
of interleaved replays. Writes ``device_splits.json`` (device, versions, date) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_suite import BF16_REL_BOUND, H, make_case, pick, rel_err, results_start  # noqa: E402

from mlaprof.backends.torch_ref import TorchReference  # noqa: E402
from mlaprof.backends.triton_backend import TritonBackend  # noqa: E402
from mlaprof.gpu.capture_runner import _timed_replay  # noqa: E402
from mlaprof.metadata import BatchShape, build_metadata  # noqa: E402
from mlaprof.scenario import LATENT  # noqa: E402
from mlaprof.splits.policies import SplitInput, mlaprof_triton, mlaprof_triton_cap  # noqa: E402

DEV = "cuda"
SHAPES = [  # (B, ctx or list of lengths, qlen)
    (1, 131072, 4),
    (8, 131072, 4),
    (64, 32768, 4),
    (1, 131072, 1),
    (8, 131072, 1),
    (8, [131072, 4096, 70000, 512, 17, 100000, 3000, 65536], 4),
]
FIELDS = ("seq_lens", "qo_lens", "kv_indptr", "qo_indptr", "last_page_len")


def log(*a: object) -> None:
    print(*a, flush=True)


def split_input(meta, units: int) -> SplitInput:
    lens = meta.host_seq_lens
    return SplitInput(meta.num_reqs, meta.qlen, H, min(lens), max(lens), sum(lens), units)


def snapshot(meta) -> dict:
    return {n: getattr(meta, n).clone() for n in FIELDS + ("kv_indices",)}


def load(meta, snap: dict) -> None:
    """Copy metadata values into the captured buffers (fixed addresses), as a step refresh does."""
    for n in FIELDS:
        getattr(meta, n).copy_(snap[n])
    k = snap["kv_indices"].numel()
    meta.kv_indices[:k].copy_(snap["kv_indices"])


def dummy_metadata(meta):
    """The capture-time dummy run: every row holds qlen KV tokens (vLLM's dummy batch), on
    valid slots of the real pool; returns its metadata (host values too, for the reference)."""
    b, qlen = meta.num_reqs, meta.qlen
    d = build_metadata(BatchShape([qlen] * b, qlen, b, None, "NONE"), 1, "active-rows", "cpu")
    d = d.to(DEV)
    d.kv_indices = meta.kv_indices[: b * qlen].clone()
    return d


def capture(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def replay_us(g) -> float:
    return _timed_replay(g, torch) / 1e3


def check(g, out, lse, ref, ref_lse) -> dict:
    out.fill_(float("nan"))
    lse.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    fin = torch.isfinite(ref_lse)
    return {
        "unwritten": int(out.isnan().sum().item()),
        "rel_err": rel_err(out, ref),
        "lse_max_abs_err": (lse[fin] - ref_lse[fin]).abs().max().item(),
    }


def reference(meta, inp, b, qlen):
    ref = torch.empty(b, qlen, H, LATENT, device=DEV)
    ref_lse = torch.empty(b, qlen, H, device=DEV)
    TorchReference().forward(inp, meta, ref, ref_lse)
    torch.cuda.synchronize()
    return ref, ref_lse


def one_shape(b: int, ctx, qlen: int, units: int, reps: int) -> dict:
    lens = ctx if isinstance(ctx, list) else [ctx] * b
    meta, inp = make_case(b, max(lens), qlen, heads=H, seed=b * 10 + qlen, lens=lens)
    x = split_input(meta, units)
    s_real, cap = mlaprof_triton(x), mlaprof_triton_cap(x)
    dmeta = dummy_metadata(meta)
    real, dummy = snapshot(meta), snapshot(dmeta)
    out = torch.empty(b, qlen, H, LATENT, device=DEV, dtype=torch.bfloat16)
    lse = torch.empty(b, qlen, H, device=DEV)
    dev, host = TritonBackend(device_splits=True), TritonBackend()
    graphs = {}
    load(meta, dummy)
    graphs["dev@dummy"] = capture(lambda: dev.forward(inp, meta, out, lse, num_splits=cap))
    s_dummy = mlaprof_triton(SplitInput(b, qlen, H, qlen, qlen, b * qlen, units))
    host_d = TritonBackend()
    graphs["host@dummy"] = capture(lambda: host_d.forward(inp, meta, out, lse, num_splits=s_dummy))
    # the dummy lengths, replayed through the device-decided graph: right there too
    ref_d, ref_lse_d = reference(dmeta, inp, b, qlen)
    at_dummy = check(graphs["dev@dummy"], out, lse, ref_d, ref_lse_d)
    del ref_d, ref_lse_d
    load(meta, real)
    graphs["host@real"] = capture(lambda: host.forward(inp, meta, out, lse, num_splits=s_real))
    dev2 = TritonBackend(device_splits=True)
    graphs["dev@real"] = capture(lambda: dev2.forward(inp, meta, out, lse, num_splits=cap))
    ref, ref_lse = reference(meta, inp, b, qlen)
    correct = {k: check(g, out, lse, ref, ref_lse) for k, g in graphs.items()}
    correct["dev@dummy replayed at dummy lengths"] = at_dummy
    del ref, ref_lse
    for g in graphs.values():
        for _ in range(3):
            g.replay()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {k: [] for k in graphs}
    slow = ("host@dummy",)
    for i in range(reps):
        for k, g in graphs.items():
            if k in slow and i >= 5:  # the collapsed graph is slow: a few replays suffice
                continue
            times[k].append(replay_us(g))
    med = {k: statistics.median(v) for k, v in times.items()}
    # where a difference comes from: stage 1 alone, and each stage's registers / spills
    stage1 = {}
    for name, be_ in (("dev", TritonBackend(device_splits=True)), ("host", TritonBackend())):
        be_.skip_stage2 = True
        n_s = cap if name == "dev" else s_real
        g1 = capture(lambda be_=be_, n_s=n_s: be_.forward(inp, meta, out, lse, num_splits=n_s))
        stage1[name] = statistics.median(replay_us(g1) for _ in range(reps))
        del g1
    if os.environ.get("DUMP_STAGE2"):  # the two stage-2 kernels' machine code, to compare
        for name, be_ in (("dev", dev), ("host", host)):
            c2 = be_.compiled[1]
            if c2 is not None and "cubin" in getattr(c2, "asm", {}):
                Path(os.environ["DUMP_STAGE2"], f"stage2_{name}.cubin").write_bytes(c2.asm["cubin"])
    resources = {
        name: {st: {k: v for k, v in be_.last_launch[st].items() if k in ("registers", "spills")}
               for st in ("stage1", "stage2")}
        for name, be_ in (("dev", dev), ("host", host))
    }  # fmt: skip
    kv_tokens = sum(lens)
    row = {
        "B": b,
        "ctx": ctx if not isinstance(ctx, list) else "ragged",
        "seq_lens": lens,
        "qlen": qlen,
        "S_host_real": s_real,
        "S_host_dummy": s_dummy,
        "S_cap_device": cap,
        "us": med,
        "eff_tb_s": {k: kv_tokens * 576 * 2 / (v * 1e-6) / 1e12 for k, v in med.items()},
        "dev_dummy_over_host_real": med["dev@dummy"] / med["host@real"],
        "dev_dummy_over_dev_real": med["dev@dummy"] / med["dev@real"],
        "host_dummy_over_host_real": med["host@dummy"] / med["host@real"],
        "stage1_us": stage1,
        "resources": resources,
        "correct": correct,
        "ok": all(c["unwritten"] == 0 and c["rel_err"] < BF16_REL_BOUND for c in correct.values()),
        "within_5pct": med["dev@dummy"] <= 1.05 * med["host@real"],
    }
    log(
        f"B={b} ctx={row['ctx']} qlen={qlen} S host {s_real} / dummy {s_dummy} / cap {cap}: "
        + ", ".join(f"{k} {v:.1f} us" for k, v in med.items())
        + f"; dev@dummy/host@real {row['dev_dummy_over_host_real']:.3f} ok={row['ok']}"
        + f"; stage 1 alone dev {stage1['dev']:.1f} host {stage1['host']:.1f}; {resources}"
    )
    del graphs
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/results"))
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--shapes", default="", help="indices into SHAPES (default: all)")
    args = ap.parse_args()
    res, out = results_start(args.out, bound_rel_l2=BF16_REL_BOUND, rows=[])
    shapes = pick(args.shapes, SHAPES)
    for b, ctx, qlen in shapes:
        try:
            res["rows"].append(one_shape(b, ctx, qlen, res["env"]["sms"], args.reps))
        except Exception as e:  # keep the other shapes' numbers
            import traceback

            traceback.print_exc()
            res["rows"].append({"B": b, "qlen": qlen, "error": f"{type(e).__name__}: {e}"[:1000]})
        torch.cuda.empty_cache()
        (out / "device_splits.json").write_text(json.dumps(res, indent=1, default=str))
    ok = [r for r in res["rows"] if "ok" in r]
    res["all_correct"] = all(r["ok"] for r in ok) and len(ok) == len(shapes)
    res["all_within_5pct"] = all(r["within_5pct"] for r in ok) and len(ok) == len(shapes)
    (out / "device_splits.json").write_text(json.dumps(res, indent=1, default=str))
    log(f"all correct {res['all_correct']}, all within 5% {res['all_within_5pct']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
