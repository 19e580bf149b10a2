"""The CPU cost of a run's typed summary (``mlaprof.analysis.run_summary.build_summary``, behind
every ``mlaprof report``, ``report --json``, ``--html`` and ``tui --once``): per shipped run
(tests/shipped_runs.py, each imported once, outside the timing) and on a 16-rank fleet import
(tests/step_shapes.py's dp2_tp8 as rocprofv3 CSV, ``mlaprof import rocprof``). One repeat opens
the run and builds its summary; CPU seconds of this process (time.process_time: a shared machine's
contention inflates wall time, not CPU time), median of ``--repeats`` after one warm-up.

    OMP_NUM_THREADS=1 python bench/summary_bench.py [--repeats 5]
    # the same measurement over another checkout's code (e.g. the commit before a change), the
    # two trees alternating run by run, both quoted side by side:
    OMP_NUM_THREADS=1 python bench/summary_bench.py --compare OLD_TREE [--repeats 5]

``--tree`` runs the measurement with ``mlaprof`` and ``tests`` imported from that folder (a
``git archive`` of an older commit, say); ``--compare`` runs this tree and OLD_TREE in child
processes, ``--rounds`` times each, alternating, and keeps every repeat of both.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parents[1]
FLEET = "fleet-dp2_tp8"


def _measure(tree: Path, repeats: int, only: list[str] | None) -> dict[str, list[float]]:
    """Per run name, the CPU seconds of each repeat (open + build_summary), in this process."""
    sys.path.insert(0, str(tree))
    import torch

    torch.set_num_threads(1)
    import mlaprof
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.importers.rocprof import import_rocprof
    from tests import shipped_runs
    from tests import step_shapes as shapes

    if not str(Path(mlaprof.__file__).resolve()).startswith(str(tree.resolve())):
        raise SystemExit(f"mlaprof imported from {mlaprof.__file__}, not from {tree}")
    runs = {n: shipped_runs.run_dir(n) for n in shipped_runs.NAMES if not only or n in only}
    if not only or FLEET in only:
        tmp = Path(tempfile.mkdtemp(prefix="summary-bench-"))
        folder = shapes.write(shapes.dp2_tp8(), "csv", tmp / "csv")
        runs[FLEET] = Path(import_rocprof(folder, tmp, "dp2_tp8")[0])
    out: dict[str, list[float]] = {}
    for name, path in runs.items():

        def once(path: Path = path) -> float:
            c = time.process_time()
            with mlaprof.load(path) as run:
                build_summary(run)
            return time.process_time() - c

        once()  # warm-up: imports, the DuckDB database, the files in the page cache
        out[name] = [once() for _ in range(repeats)]
    return out


def _stats(xs: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(xs), 4),
        "min_s": round(min(xs), 4),
        "max_s": round(max(xs), 4),
        "n": len(xs),
    }


def _table(per_run: dict[str, list[float]]) -> dict[str, object]:
    small = [statistics.median(v) for k, v in per_run.items() if k != FLEET]
    doc: dict[str, object] = {"runs": {k: _stats(v) for k, v in per_run.items()}}
    if small:
        doc["small_runs"] = {
            "count": len(small),
            "sum_of_medians_s": round(sum(small), 4),
            "median_of_medians_s": round(statistics.median(small), 4),
        }
    if FLEET in per_run:
        doc["fleet_16_ranks_median_s"] = round(statistics.median(per_run[FLEET]), 4)
    return doc


def _child(tree: Path, repeats: int, only: list[str] | None) -> dict[str, list[float]]:
    cmd = [sys.executable, __file__, "--tree", str(tree), "--repeats", str(repeats), "--raw"]
    if only:
        cmd += ["--only", *only]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(tree)}
    got = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(got.stdout.strip().splitlines()[-1])


def _provenance() -> dict[str, object]:
    import duckdb
    import pandas
    import pyarrow
    import torch

    return {
        "device": "CPU only (a summary never touches a GPU)",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "pandas": pandas.__version__,
        "pyarrow": pyarrow.__version__,
        "duckdb": duckdb.__version__,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch_threads": 1,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _git(tree: Path) -> str:
    got = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return got.stdout.strip() or "unknown (not a git checkout)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tree", type=Path, default=HERE, help="import mlaprof and tests from here")
    ap.add_argument("--compare", type=Path, help="another tree, measured alternately with --tree")
    ap.add_argument("--compare-label", default="", help="what --compare is (e.g. its commit)")
    ap.add_argument("--rounds", type=int, default=2, help="child runs per tree with --compare")
    ap.add_argument("--only", nargs="*", help="these run names only (fleet: fleet-dp2_tp8)")
    ap.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.raw:  # a child of --compare: the repeats only, as one JSON line
        print(json.dumps(_measure(args.tree, args.repeats, args.only)))
        return
    if args.compare is None:
        doc = {
            "what": "CPU seconds per build_summary (open + summary), median of repeats",
            "code": _git(args.tree),
            **_table(_measure(args.tree, args.repeats, args.only)),
        }
    else:
        trees = {"before": args.compare, "after": args.tree}
        per: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
        for _ in range(args.rounds):
            for label, tree in trees.items():
                for name, xs in _child(tree, args.repeats, args.only).items():
                    per[label].setdefault(name, []).extend(xs)
        before, after = _table(per["before"]), _table(per["after"])
        ratio = {
            name: round(b["median_s"] / a["median_s"], 2)
            for name, b in before["runs"].items()
            if (a := after["runs"].get(name)) and a["median_s"] > 0
        }
        doc = {
            "what": "CPU seconds per build_summary (open + summary), median of repeats; before "
            "and after measured alternately in child processes on the same machine",
            "before_code": args.compare_label or _git(args.compare),
            "after_code": _git(args.tree),
            "before": before,
            "after": after,
            "speedup_per_run": ratio,
        }
        for key in ("sum_of_medians_s", "median_of_medians_s"):
            if "small_runs" in before and "small_runs" in after:
                doc[f"small_runs_{key}_speedup"] = round(
                    before["small_runs"][key] / after["small_runs"][key], 2
                )
        if "fleet_16_ranks_median_s" in before and "fleet_16_ranks_median_s" in after:
            doc["fleet_speedup"] = round(
                before["fleet_16_ranks_median_s"] / after["fleet_16_ranks_median_s"], 2
            )
    doc.update(_provenance())
    text = json.dumps(doc, indent=2) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
