"""The live path's cost: a poll of the rows committed since the last one plus the provisional
summary (mlaprof.analysis.live: the full analysis' own code over the folded rows), beside the full
pass (load + build_summary) of the same run. CPU time per repeat (contention on a shared machine
inflates wall time, not CPU time).

    OMP_NUM_THREADS=1 python bench/live_fold_bench.py [--steps 1000] [--layers 30] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlaprof.analysis.run_summary import build_summary  # noqa: E402
from mlaprof.store import create_run, load  # noqa: E402
from mlaprof.synthetic.dashboard import meta, write_step  # noqa: E402
from mlaprof.tui.follower import RunFollower  # noqa: E402


def _cpu(fn) -> float:  # noqa: ANN001
    c = time.process_time()
    fn()
    return time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "live_fold.json"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    w = create_run(tmp, "r", meta("r", True))
    for s in range(args.steps):
        write_step(w, s, args.layers, True)
    f = RunFollower(tmp / "r")
    catch_up = _cpu(f.catch_up)
    live, full = [], []
    for i in range(args.repeats):
        write_step(w, args.steps + i, args.layers, True)
        live.append(_cpu(lambda: (f.poll(), f.summarise())))

        def full_pass() -> None:
            with load(tmp / "r") as run:
                build_summary(run)

        full.append(_cpu(full_pass))
    w.finish()

    def stats(xs: list[float]) -> dict:
        return {"median_s": statistics.median(xs), "min_s": min(xs), "max_s": max(xs), "n": len(xs)}

    doc = {
        "what": "CPU seconds: poll + provisional summary vs full pass, one new step per repeat",
        "steps": args.steps,
        "layers": args.layers,
        "rows": dict(f.fold.rows),
        "catch_up_cpu_s": catch_up,
        "poll_and_provisional": stats(live),
        "full_pass": stats(full),
        "device": "CPU only (the live path never touches a GPU)",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
