"""Time the README's main job: `mlaprof run` on the default scenario, end to end (process start,
imports, run, report), on this machine. Writes bench/results/cpu_default_run.json.

    python bench/cpu_default_run.py [--repeats 7]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "cpu_default_run.json"))
    args = ap.parse_args()
    times, loads = [], []
    for _ in range(args.repeats):
        loads.append(os.getloadavg()[0])
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            res = subprocess.run(
                [sys.executable, "-m", "mlaprof", "run", "--traces", tmp],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            times.append(time.perf_counter() - t0)
            if res.returncode != 0:
                print(res.stderr, file=sys.stderr)
                return 1
    import torch

    doc = {
        "what": "mlaprof run (default scenario), wall clock including interpreter start",
        "seconds": times,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "target_s": 5.0,
        "load_average_1min": loads,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": dt.date.today().isoformat(),
    }
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
