"""The cost of one CPU step of `mlaprof run` on the default scenario: the metadata build, the split
analysis, the torch reference forward of every layer and the store write; the first step's sync
check and the process start are left out by difference.

Each repeat runs `mlaprof run --steps SHORT` and `--steps LONG` back to back in child processes
(the same start-up cost in both); a step costs (t_long - t_short) / (LONG - SHORT). Writes
bench/results/cpu_step.json with every repeat, the median, min and max, and the load average.

    python bench/cpu_step.py [--repeats 5] [--short 8] [--long 200]
"""

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
TARGET_MS = 50.0


def timed_run(steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res = subprocess.run(
            [sys.executable, "-m", "mlaprof", "run", "--steps", str(steps), "--traces", tmp],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        dt_s = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(res.stderr)
    return dt_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--short", type=int, default=8)
    ap.add_argument("--long", type=int, default=200)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "cpu_step.json"))
    args = ap.parse_args()
    reps = []
    for i in range(args.repeats):
        load = os.getloadavg()[0]
        t_short, t_long = timed_run(args.short), timed_run(args.long)
        ms = 1000.0 * (t_long - t_short) / (args.long - args.short)
        reps.append({"short_s": t_short, "long_s": t_long, "step_ms": ms, "load_1min": load})
        print(f"repeat {i + 1}: {args.short} steps {t_short:.2f} s, {args.long} steps "
              f"{t_long:.2f} s -> {ms:.1f} ms a step (load {load:.2f})", flush=True)  # fmt: skip
    import torch

    steps_ms = [r["step_ms"] for r in reps]
    doc = {
        "what": "one CPU step of `mlaprof run` (default scenario), by difference of two runs",
        "steps": [args.short, args.long],
        "repeats": reps,
        "median_step_ms": statistics.median(steps_ms),
        "min_step_ms": min(steps_ms),
        "max_step_ms": max(steps_ms),
        "median_default_run_s": statistics.median(r["short_s"] for r in reps),
        "target_step_ms": TARGET_MS,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": dt.date.today().isoformat(),
    }
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "repeats"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
