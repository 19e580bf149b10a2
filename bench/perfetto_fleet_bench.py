"""Perfetto export of a multi-rank run: whole-process time and peak memory at 64 and 256 ranks,
and the flows it writes (one per launched kernel, keyed by rank and correlation).

The fleet is ``mlaprof.synthetic.pid_fleet`` over the AITER bug trace of ``tests/data``: N processes of one
server as rocprofv3 writes them (``<pid>_kernel_trace.csv`` + ``<pid>_hip_api_trace.csv``), each
a copy of a gluon graph-replay trace (54 dispatches, 9 HIP calls, correlation ids restarting in
every process), on its own GPU. It is imported once (not timed); then ``mlaprof export RUN
--format perfetto`` runs ``--reps`` times, each its own process, timed from outside (interpreter
start included): wall, CPU of the child and its peak RSS (``wait4``'s ``ru_maxrss``), and the load
average. ``--before`` also runs the exporter of a git revision (default ``main``) on the smaller
fleets, to show what keying flows by correlation alone cost. ``--single N`` also exports one
rank of N dispatches (``fleet_bench.write_csv``: FULL-graph replays of a 61-layer decode, no API
trace) to show the memory a big rank needs. Medians and min/max are reported.

    OMP_NUM_THREADS=1 python bench/perfetto_fleet_bench.py [--ranks 64 256] [--reps 3]
        [--before main --before-ranks 16 64] [--single 1000000 --single-reps 3]
        [--out bench/results/perfetto_fleet_bench.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fleet_bench import _versions, spread, whole_process, write_csv  # noqa: E402

from mlaprof.synthetic.pid_fleet import launched_kernels, pid_fleet  # noqa: E402

AITER_BUG = ROOT / "tests" / "data" / "aiter" / "gluon_v0119_bug"

OLD = """
import sys
sys.path.insert(0, {work!r})
from pathlib import Path
import perfetto_before
from mlaprof.store import load
with load({run!r}) as run:
    perfetto_before.export_perfetto(run, Path({out!r}))
"""


def _import(work: Path, ranks: int) -> Path:
    src = pid_fleet(AITER_BUG, work / f"in{ranks}", ranks)
    traces = work / "traces"
    cmd = [sys.executable, "-m", "mlaprof", "import", "rocprof", str(src), "--traces",
           str(traces), "--name", f"fleet{ranks}"]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(src)
    return traces / f"fleet{ranks}"


def _flows(path: Path) -> dict[str, int]:
    """What the file holds: kernel slices, flows, and kernels that end more than one flow."""
    ev = json.loads(path.read_text())["traceEvents"]
    ends: dict[tuple[Any, ...], int] = {}
    for e in ev:
        if e["ph"] == "f":
            key = (e["pid"], e["tid"], e["ts"])
            ends[key] = ends.get(key, 0) + 1
    return {
        "kernels": sum(1 for e in ev if e.get("cat") == "kernel"),
        "flows": sum(1 for e in ev if e["ph"] == "s"),
        "kernels_with_several_flows": sum(1 for n in ends.values() if n > 1),
        "bytes": path.stat().st_size,
    }


def _measure(argv: list[str], out: Path, reps: int, count: bool = True) -> dict[str, Any]:
    runs = []
    for _ in range(reps):
        out.unlink(missing_ok=True)
        runs.append(whole_process(argv))
    res = {k: spread([r[k] for r in runs]) for k in ("wall_s", "cpu_s", "peak_rss_mib")}
    res["loadavg"] = [round(r["loadavg"], 2) for r in runs]
    res["output"] = _flows(out) if count else {"bytes": out.stat().st_size}
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--before", default="main", help="git revision of the old exporter ('' = none)")
    ap.add_argument("--before-ranks", type=int, nargs="*", default=[16, 64])
    ap.add_argument("--single", type=int, default=0, help="dispatches of one big rank (0: none)")
    ap.add_argument("--single-reps", type=int, default=3)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "results" / "perfetto_fleet_bench.json"
    )
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    work = Path(tempfile.mkdtemp(prefix="mlaprof-perfetto-"))
    results: dict[str, Any] = {
        "what": "mlaprof export RUN --format perfetto, whole process, on an N-rank rocprofv3 "
        "fleet (mlaprof.synthetic.pid_fleet of tests/data/aiter/gluon_v0119_bug: 54 dispatches and 9 HIP calls per rank)",
        "revision": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),  # fmt: skip
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": f"CPU only ({platform.processor() or platform.machine()}, {os.cpu_count()} "
        "cores, shared with other jobs)",
        "python": platform.python_version(),
        "versions": _versions(),
        "omp_num_threads": os.environ["OMP_NUM_THREADS"],
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "reps": args.reps,
        "after": {},
        "before": {},
    }
    try:
        runs = {n: _import(work, n) for n in sorted({*args.ranks, *args.before_ranks})}
        for n in args.ranks:
            out = work / f"after{n}.json"
            argv = [sys.executable, "-m", "mlaprof", "export", str(runs[n]), "--format",
                    "perfetto", "-o", str(out)]  # fmt: skip
            res = _measure(argv, out, args.reps)
            res["launched_kernels"] = launched_kernels(AITER_BUG, n)
            results["after"][str(n)] = res
            print(n, "ranks:", json.dumps(res), flush=True)
        if args.single:
            src = work / "single" / "kernel_trace.csv"
            write_csv(src, args.single, 0)
            cmd = [sys.executable, "-m", "mlaprof", "import", "rocprof", str(src.parent),
                   "--traces", str(work / "traces"), "--name", "single"]  # fmt: skip
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            shutil.rmtree(src.parent)
            out = work / "single.json"
            argv = [sys.executable, "-m", "mlaprof", "export", str(work / "traces" / "single"),
                    "--format", "perfetto", "-o", str(out)]  # fmt: skip
            res = _measure(argv, out, args.single_reps, count=False)
            res["dispatches"] = args.single
            results["single_rank"] = res
            print("single rank:", json.dumps(res), flush=True)
        if args.before:
            code = subprocess.run(
                ["git", "show", f"{args.before}:mlaprof/exporters/perfetto.py"],
                cwd=ROOT, check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            (work / "perfetto_before.py").write_text(code)
            results["before_revision"] = subprocess.run(
                ["git", "rev-parse", "--short", args.before], cwd=ROOT, check=True,
                capture_output=True, text=True,
            ).stdout.strip()  # fmt: skip
            for n in args.before_ranks:
                out = work / f"before{n}.json"
                prog = OLD.format(work=str(work), run=str(runs[n]), out=str(out))
                res = _measure([sys.executable, "-c", prog], out, 1)
                res["launched_kernels"] = launched_kernels(AITER_BUG, n)
                results["before"][str(n)] = res
                print("before", n, "ranks:", json.dumps(res), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print("->", args.out)


if __name__ == "__main__":
    main()
