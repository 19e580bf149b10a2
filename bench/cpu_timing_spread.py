"""Run-to-run spread of CPU reference timings: the same `mlaprof run` (default scenario, CPU,
torch backend, ``--threads N``) repeated; per run the median step time, then the spread as
max/min of those medians. ``mlaprof report --compare`` treats a CPU timing difference smaller
than the spread measured at the runs' clock and thread count as "within run-to-run spread"
(``mlaprof.analysis.timing.CPU_SPREAD_BY_CLOCK``). The step time is the one the run records: the
stepping thread's CPU time at one thread (bench/cpu_step_stability.py compares it with wall time),
wall time at more.

Each repeat records the 1-minute load average before it and the CPU seconds the child used, so
a loaded repeat can be told from a quiet one: ``by_load`` compares the median step of the
quietest third of the repeats with the loadest third.

    python bench/cpu_timing_spread.py [--repeats 6] [--threads 1]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(tmp: str, name: str, threads: int) -> dict:
    import mlaprof

    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [sys.executable, "-m", "mlaprof", "run", "-q", "--traces", tmp, "--name", name,
           "--threads", str(threads)]  # fmt: skip
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(res.stderr)
    with mlaprof.load(Path(tmp) / name) as run:
        steps = run.steps["duration_ns"]
        recorded = run.meta.get("threads")
    return {
        "load_1min_before": load,
        "load_1min_after": os.getloadavg()[0],
        "wall_s": wall,
        "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "threads_recorded": recorded,
        "step_median_ms": float(steps.median()) / 1e6,
        "steps_ms": [float(v) / 1e6 for v in steps],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="default: bench/results/cpu_timing_spread_threadsN.json")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    out = Path(
        args.out or ROOT / "bench" / "results" / f"cpu_timing_spread_threads{args.threads}.json"
    )
    reps = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            reps.append(one_run(tmp, f"r{i}", args.threads))
            r = reps[-1]
            print(f"repeat {i + 1}: median step {r['step_median_ms']:.1f} ms, wall "
                  f"{r['wall_s']:.1f} s, load {r['load_1min_before']:.2f}", flush=True)  # fmt: skip
    medians = [r["step_median_ms"] for r in reps]
    by_load = sorted(reps, key=lambda r: r["load_1min_before"])
    third = max(1, len(reps) // 3)
    quiet, loaded = by_load[:third], by_load[-third:]

    def med(rs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    import torch

    doc = {
        "what": "median CPU step time of identical `mlaprof run -q --threads N` (default "
        "scenario, torch backend, cpu)",
        "threads": args.threads,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "note": "a shared 2-core machine with other engineers' jobs running (load below)",
        "repeats": reps,
        "step_median_ms": medians,
        "spread_max_over_min": max(medians) / min(medians),
        "median_of_medians_ms": statistics.median(medians),
        "by_load": {
            "quiet_load_1min": med(quiet, "load_1min_before"),
            "quiet_step_median_ms": med(quiet, "step_median_ms"),
            "loaded_load_1min": med(loaded, "load_1min_before"),
            "loaded_step_median_ms": med(loaded, "step_median_ms"),
            "loaded_over_quiet": med(loaded, "step_median_ms") / med(quiet, "step_median_ms"),
        },
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "repeats"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
