"""The CPU cost of a run's typed summary (``mlaprof.analysis.run_summary.build_summary``, behind
every ``mlaprof report``, ``report --json``, ``--html`` and ``tui --once``): per shipped run (the
runs tests/shipped_runs.py lists, found here from the same data folders and imported once, outside
the timing: the demo runs, every AITER, Kineto and rocprofv3 trace, vLLM log and recorded engine
run of tests/data) and on a 16-rank fleet import (``mlaprof.synthetic.pid_fleet`` of the AITER bug
trace, 16 processes on 16 GPUs; ``--fleet-csv`` times another rocprofv3 folder instead, e.g. the
dp2_tp8 step shape of tests/step_shapes.py written as CSV). One repeat opens the run and builds
its summary; CPU seconds of this process (time.process_time, every thread: a shared machine's
contention inflates wall time, not CPU time), median of ``--repeats`` after one warm-up.

    OMP_NUM_THREADS=1 python bench/summary_bench.py [--repeats 5]
    # the same measurement over another checkout's code (e.g. the commit before a change), the
    # two trees alternating run by run, both quoted side by side:
    OMP_NUM_THREADS=1 python bench/summary_bench.py --compare OLD_TREE [--repeats 5]

``--tree`` runs the measurement with ``mlaprof`` imported from that folder (a ``git archive`` of
an older commit, say); ``--compare`` runs this tree and OLD_TREE in child processes, ``--rounds``
times each, alternating, and keeps every repeat of both. (bench/ never imports tests/.)
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
FLEET = "fleet-16-ranks"
FLEET_RANKS = 16


def shipped(root: Path, tmp: Path) -> dict[str, Path]:
    """The shipped runs, as tests/shipped_runs.py names them, each imported into ``tmp``."""
    from mlaprof.importers.kineto import import_kineto
    from mlaprof.importers.rocprof import import_rocprof
    from mlaprof.importers.vllm_log import import_vllm_log

    data = root / "tests" / "data"
    runs: dict[str, Path] = {}
    for p in sorted((root / "traces" / "demo").iterdir()):
        if (p / "run.json").is_file():
            runs[f"demo-{p.name}"] = p
    for p in sorted(q for q in (data / "aiter").iterdir() if q.is_dir()):
        runs[f"aiter-{p.name}"] = import_rocprof(p, tmp, f"aiter-{p.name}")[0]
    kineto = {
        "kineto_graph_replay": data / "kineto_graph_replay.json.gz",
        "vllm_cpu_mla_profile": data / "vllm" / "cpu_mla_profile",
        "vllm_cpu_mtp_profile": data / "vllm" / "cpu_mtp_profile",
    }
    for name, src in kineto.items():
        runs[name] = import_kineto(src, tmp, name)[0]
    for p in sorted((data / "vllm").glob("*.log")):
        name = f"log-{p.name.removesuffix('.log')}"
        runs[name] = import_vllm_log(p, tmp, name)[0]
    for p in sorted((data / "vllm").glob("*/run.json")):
        runs[f"engine-{p.parent.name}"] = p.parent
    for p in sorted((data / "rocprof").glob("*kernel_trace.csv")):
        name = f"rocprof-{p.stem}"
        runs[name] = import_rocprof(p, tmp, name)[0]
    return {k: Path(v) for k, v in runs.items()}


def _measure(
    tree: Path, repeats: int, only: list[str] | None, fleet_csv: Path | None
) -> dict[str, list[float]]:
    """Per run name, the CPU seconds of each repeat (open + build_summary), in this process."""
    sys.path.insert(0, str(tree))
    import torch

    torch.set_num_threads(1)
    import mlaprof
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.importers.rocprof import import_rocprof
    from mlaprof.synthetic.pid_fleet import pid_fleet

    if not str(Path(mlaprof.__file__).resolve()).startswith(str(tree.resolve())):
        raise SystemExit(f"mlaprof imported from {mlaprof.__file__}, not from {tree}")
    tmp = Path(tempfile.mkdtemp(prefix="summary-bench-"))
    # the runs and traces of this checkout (HERE), read by the code of ``tree``
    runs = {n: p for n, p in shipped(HERE, tmp).items() if not only or n in only}
    if not only or FLEET in only:
        src = fleet_csv or pid_fleet(
            HERE / "tests" / "data" / "aiter" / "gluon_v0119_bug", tmp / "fleet-csv", FLEET_RANKS
        )
        runs[FLEET] = Path(import_rocprof(src, tmp, "fleet")[0])
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


def _child(
    tree: Path, repeats: int, only: list[str] | None, fleet_csv: Path | None
) -> dict[str, list[float]]:
    cmd = [sys.executable, __file__, "--tree", str(tree), "--repeats", str(repeats), "--raw"]
    if fleet_csv:
        cmd += ["--fleet-csv", str(fleet_csv)]
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


def _fleet_text(fleet_csv: Path | None) -> str:
    if fleet_csv is not None:
        return f"rocprofv3 folder {fleet_csv.name} (--fleet-csv), imported"
    return (
        f"mlaprof.synthetic.pid_fleet of tests/data/aiter/gluon_v0119_bug: {FLEET_RANKS} "
        "processes on as many GPUs, imported"
    )


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
    ap.add_argument("--only", nargs="*", help=f"these run names only (the fleet: {FLEET})")
    ap.add_argument("--fleet-csv", type=Path, help="a rocprofv3 folder to import as the fleet")
    ap.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.raw:  # a child of --compare: the repeats only, as one JSON line
        print(json.dumps(_measure(args.tree, args.repeats, args.only, args.fleet_csv)))
        return
    if args.compare is None:
        doc = {
            "what": "CPU seconds per build_summary (open + summary), median of repeats",
            "fleet": _fleet_text(args.fleet_csv),
            "code": _git(args.tree),
            **_table(_measure(args.tree, args.repeats, args.only, args.fleet_csv)),
        }
    else:
        trees = {"before": args.compare, "after": args.tree}
        per: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
        for _ in range(args.rounds):
            for label, tree in trees.items():
                for name, xs in _child(tree, args.repeats, args.only, args.fleet_csv).items():
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
            "fleet": _fleet_text(args.fleet_csv),
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
