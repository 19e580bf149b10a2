"""``mlaprof run --device cuda --ranks N`` on every visible GPU: per-rank capture memory, replay
step time, S, syncs, and whether the all-reduce ran inside the captured graph (NCCL kernels in the
profiled graph steps' kernel timeline). Writes one JSON (argv[1]) with device, versions and date.

    python bench/multirank_gpu.py OUT.json [--ranks N] [--steps 40] [--layers 8]

With one GPU this is the one-rank run of the same code path (world size 1: NCCL's all-reduce of a
single rank moves no data, so the timeline may hold no NCCL kernel)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--kv-lens", default="4096,8192,16384")
    a = ap.parse_args()
    import torch

    from mlaprof.store.reader import load

    n = a.ranks or torch.cuda.device_count()
    traces = Path(tempfile.mkdtemp(prefix="tp-bench-"))
    cmd = [sys.executable, "-m", "mlaprof", "run", "--device", "cuda", "--backend", "triton",
           "--ranks", str(n), "--steps", str(a.steps), "--layers", str(a.layers),
           "--kv-lens", a.kv_lens, "--name", f"tp{n}", "--traces", str(traces), "-q"]  # fmt: skip
    t0 = time.perf_counter()
    p = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    wall = time.perf_counter() - t0
    doc: dict = {
        "bench": "multirank_gpu",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0),
        "gpus_visible": torch.cuda.device_count(),
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "python": platform.python_version(),
        },  # fmt: skip
        "command": " ".join(["mlaprof", *cmd[3:-5], "-q"]),
        "ranks": n,
        "exit": p.returncode,
        "stderr_tail": p.stderr[-2000:],
        "wall_s": round(wall, 2),
    }
    try:
        import triton

        doc["versions"]["triton"] = triton.__version__
    except ImportError:
        pass
    run_dir = traces / f"tp{n}"
    if run_dir.is_dir():
        rep = subprocess.run([sys.executable, "-m", "mlaprof", "report", str(run_dir), "--json"],
                             capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
        summ = json.loads(rep.stdout) if rep.returncode == 0 else {}
        doc["status"] = summ.get("status")
        doc["capture"] = summ.get("capture")
        per_rank = []
        with load(run_dir) as run:
            steps, mem, kernels, layers = run.steps, run.memory, run.kernels, run.layers
            for r in sorted(steps["rank"].unique()):
                st = steps[steps["rank"] == r]
                timed = st[st["timing"].astype(str).str.startswith("graph")]
                k = kernels[kernels["rank"] == r] if not kernels.empty else kernels
                names = sorted(set(k["name"].astype(str))) if not k.empty else []
                m = mem[mem["rank"] == r] if not mem.empty else mem
                per_rank.append(
                    {
                        "rank": int(r),
                        "steps": int(len(st)),
                        "timings": sorted(set(st["timing"].astype(str))),
                        "step_us_median": round(statistics.median(timed["duration_ns"]) / 1e3, 2)
                        if len(timed)
                        else None,
                        "step_us_min_max": [
                            round(timed["duration_ns"].min() / 1e3, 2),
                            round(timed["duration_ns"].max() / 1e3, 2),
                        ]
                        if len(timed)
                        else None,  # fmt: skip
                        "memory": m.drop(columns=[c for c in m.columns if c == "rank"]).to_dict(
                            "records"
                        ),
                        "splits_used": sorted(
                            {int(x) for x in layers[layers["rank"] == r]["splits_used"].dropna()}
                        ),
                        "nccl_kernels_in_timeline": [x for x in names if "nccl" in x.lower()],
                        "kernels_in_timeline": len(names),
                    }
                )
        doc["per_rank"] = per_rank
    Path(a.out).write_text(json.dumps(doc, indent=2, default=str))
    print(json.dumps(doc, indent=2, default=str)[:6000])
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
