"""CPU step times that do not scale with machine load: the default `mlaprof run` (default
scenario, torch backend, CPU, one thread) repeated, alternately quiet and under a synthetic load
(one busy process per core), comparing the two clocks every run records:

- ``cpu-thread``: the stepping thread's CPU time (``steps.duration_ns``; what every view shows);
- wall: ``counters`` ``step_wall_ns``, recorded beside it.

Per run the median step on each clock; per clock the spread (max/min of the run medians over
every repeat, quiet and loaded) and the ratio loaded/quiet of the medians of run medians. The
process CPU time of each step (``step_process_cpu_ns``) is compared with the thread's: equal
when torch's intra-op work runs in the stepping thread, as it does at one thread.

The 1-minute load average is recorded before and after each repeat: a shared machine is never
quiet, "quiet" means without the synthetic load.

    python bench/cpu_step_stability.py [--repeats 4] [--load-procs 2]
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
BUSY = "while True: pass"  # one core's worth of load


def one_run(tmp: str, name: str) -> dict:
    import mlaprof

    load = os.getloadavg()[0]
    cmd = [sys.executable, "-m", "mlaprof", "run", "-q", "--traces", tmp, "--name", name]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if res.returncode != 0:
        raise SystemExit(res.stderr)
    with mlaprof.load(Path(tmp) / name) as run:
        steps = run.steps
        c = run.table("counters")
        threads = run.meta.get("threads")
    by = {
        n: g.set_index("key")["value"] for n, g in c[c["source"] == "mlaprof.cpu"].groupby("name")
    }
    keys = [str(s) for s in steps["step"]]
    thread = [float(v) / 1e6 for v in steps["duration_ns"]]
    wall = [float(by["step_wall_ns"][k]) / 1e6 for k in keys]
    proc = [float(by["step_process_cpu_ns"][k]) / 1e6 for k in keys]
    return {
        "load_1min_before": load,
        "load_1min_after": os.getloadavg()[0],
        "threads_recorded": threads,
        "timing": sorted(set(steps["timing"])),
        "thread_median_ms": statistics.median(thread),
        "wall_median_ms": statistics.median(wall),
        "process_cpu_median_ms": statistics.median(proc),
        "thread_over_process_cpu": sum(thread) / sum(proc),
        "thread_ms": thread,
        "wall_ms": wall,
        "process_cpu_ms": proc,
    }


def loaded(procs: int) -> list[subprocess.Popen]:
    out = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(procs)]
    time.sleep(2)  # let the scheduler spread them
    return out


def clock_stats(quiet: list[dict], busy: list[dict], key: str) -> dict:
    allm = [r[key] for r in quiet + busy]
    q = statistics.median(r[key] for r in quiet)
    b = statistics.median(r[key] for r in busy)
    return {
        "quiet_median_ms": q,
        "loaded_median_ms": b,
        "loaded_over_quiet": b / q,
        "spread_max_over_min": max(allm) / min(allm),
        "quiet_run_medians_ms": [r[key] for r in quiet],
        "loaded_run_medians_ms": [r[key] for r in busy],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=4, help="runs per condition")
    ap.add_argument("--load-procs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "cpu_step_stability.json"))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    quiet, busy = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):  # alternate, so drifting background load hits both
            quiet.append(one_run(tmp, f"q{i}"))
            gen = loaded(args.load_procs)
            try:
                busy.append(one_run(tmp, f"l{i}"))
            finally:
                for p in gen:
                    p.kill()
                    p.wait()
            for tag, r in (("quiet", quiet[-1]), ("loaded", busy[-1])):
                print(f"{i + 1} {tag}: thread {r['thread_median_ms']:.1f} ms, wall "
                      f"{r['wall_median_ms']:.1f} ms, load {r['load_1min_before']:.2f}",
                      flush=True)  # fmt: skip
    import torch

    import mlaprof
    from mlaprof.store.runmeta import git_revision

    doc = {
        "what": "median step of the default `mlaprof run -q` (default scenario, torch backend, "
        "cpu, 1 thread), quiet vs under a synthetic load, on both recorded clocks",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mlaprof": mlaprof.__version__,
        "mlaprof_git": git_revision(),
        "synthetic_load": f"{args.load_procs} busy Python processes (`{BUSY}`)",
        "note": "a shared machine with other engineers' jobs running: 'quiet' is without the "
        "synthetic load, never idle (load averages below)",
        "load_1min_quiet": [r["load_1min_before"] for r in quiet],
        "load_1min_loaded": [r["load_1min_before"] for r in busy],
        "cpu-thread": clock_stats(quiet, busy, "thread_median_ms"),
        "wall": clock_stats(quiet, busy, "wall_median_ms"),
        "process-cpu": clock_stats(quiet, busy, "process_cpu_median_ms"),
        "thread_over_process_cpu": [r["thread_over_process_cpu"] for r in quiet + busy],
        "repeats": {"quiet": quiet, "loaded": busy},
    }
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "repeats"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
