"""Run-to-run spread of CPU reference timings: the same `mlaprof run` (default scenario, CPU,
torch backend) repeated N times; per run the median step time, then the spread as max/min of
those medians. ``mlaprof report --compare`` treats a CPU timing difference smaller than this
spread as "within run-to-run spread" (``mlaprof.analysis.timing.CPU_SPREAD``).

    python bench/cpu_timing_spread.py [--repeats 6]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "cpu_timing_spread.json"))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import mlaprof

    medians = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            cmd = [sys.executable, "-m", "mlaprof", "run", "--traces", tmp, "--name", f"r{i}"]
            res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if res.returncode != 0:
                print(res.stderr, file=sys.stderr)
                return 1
            with mlaprof.load(Path(tmp) / f"r{i}") as run:
                medians.append(float(run.steps["duration_ns"].median()) / 1e3)
    doc = {
        "what": "median CPU step time of identical `mlaprof run` (default scenario, torch, cpu)",
        "date": dt.date.today().isoformat(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "note": "a shared 2-core machine with other jobs running: an honest upper range",
        "step_median_us": medians,
        "spread_max_over_min": max(medians) / min(medians),
        "median_of_medians_us": statistics.median(medians),
    }
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
