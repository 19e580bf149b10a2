"""Whole-process peak memory of every command on a huge rocprofv3 kernel trace.

Generates a rocprofv3 7.x ``kernel_trace.csv`` (the layout and replay structure of
``bench/import_bench.py``: FULL-graph decode replays of 61 layers, 4 kernels each, MLA stage 1 and
2 among them; 11M dispatches make the 2 GB file), then runs, each in a fresh process:
``import rocprof``, ``report``, ``report --json``, ``tui --once``, ``report --html`` and each
``export``, and records the peak RSS of the whole process (``wait4``'s ``ru_maxrss``: the
interpreter, the libraries and every thread) with the wall time and the machine's load when it
ran. Run it at the priority the machine's other work has (``nice`` lengthens every wall time by
the share it gives away):

    python bench/huge_trace.py --dispatches 11000000 --json bench/results/huge_trace.json

``--only`` picks commands (e.g. ``--only "import,export csv"``), ``--timeout`` kills a command
that runs past it (recorded as ``timed_out``, with the peak so far), ``--repeat N`` runs each
command but the import N times (each run recorded with its load; the command's figures are
the medians, with the spread). The report document a run folder keeps (``report --json`` reads
it back instead of analysing again) is removed before every run: each run is a first report.

Targets (whole process): import <= 1.5 GB, every other command <= 1 GB.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from import_bench import generate  # noqa: E402

from mlaprof.store.summary_cache import CACHE_NAME  # noqa: E402

TARGET_MIB = {"import": 1536}  # every other command: 1024
COMMANDS = (
    ("import", ["import", "rocprof", "{csv}", "--traces", "{traces}", "--name", "huge"]),
    ("report", ["report", "huge", "--traces", "{traces}"]),
    ("report --json", ["report", "huge", "--traces", "{traces}", "--json"]),
    ("tui --once", ["tui", "{traces}/huge", "--once"]),
    ("report --html", ["report", "huge", "--traces", "{traces}", "--html", "{out}/r.html"]),
    ("export perfetto", ["export", "huge", "--traces", "{traces}", "--format", "perfetto",
                         "-o", "{out}/p.json"]),
    ("export csv", ["export", "huge", "--traces", "{traces}", "--format", "csv",
                    "-o", "{out}/csv"]),
    ("export rocpd", ["export", "huge", "--traces", "{traces}", "--format", "rocpd",
                      "-o", "{out}/r.db"]),
)  # fmt: skip


def measure(
    argv: list[str], env: dict[str, str], timeout: float | None = None
) -> dict[str, object]:
    """One command in a fresh process: exit code, wall seconds, peak RSS (MiB) of the process;
    past ``timeout`` seconds it is killed and marked ``timed_out`` (its peak is the peak so far)."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "mlaprof", *argv], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    timer = threading.Timer(timeout, p.kill) if timeout else None
    if timer:
        timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    timed_out = bool(timer) and not timer.is_alive()
    if timer:
        timer.cancel()
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    p.returncode = os.waitstatus_to_exitcode(status)
    return {
        "rc": p.returncode,
        "wall_s": round(wall, 2),
        "peak_rss_mib": round(ru.ru_maxrss / 1024, 1),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),  # the wall time is the load's
        "load_before": load,
        "load_after": os.getloadavg()[0],
        "nice": os.nice(0),  # the command's priority (it inherits this process's)
        **({"error": err.strip().splitlines()[-1][:300]} if p.returncode and err.strip() else {}),
        **({"timed_out": True, "timeout_s": timeout} if timed_out else {}),
    }


def summarise(runs: list[dict[str, object]]) -> dict[str, object]:
    """One command's runs: the first run's fields, the medians of wall, CPU and peak, the
    spread (max - min) of each, the load range, and every run (one run: that run)."""
    if len(runs) == 1:
        return dict(runs[0])
    out: dict[str, object] = dict(runs[0])
    for key in ("wall_s", "cpu_s", "peak_rss_mib"):
        vals = [float(r[key]) for r in runs]  # type: ignore[arg-type]
        out[key] = round(statistics.median(vals), 2)
        out[f"{key}_spread"] = round(max(vals) - min(vals), 2)
    out["peak_rss_mib_max"] = max(float(r["peak_rss_mib"]) for r in runs)  # type: ignore[arg-type]
    loads = [float(r[k]) for r in runs for k in ("load_before", "load_after")]  # type: ignore[arg-type]
    out["load_min"], out["load_max"] = round(min(loads), 2), round(max(loads), 2)
    out["rc"] = max(int(r["rc"]) for r in runs)  # type: ignore[call-overload]
    out["runs"] = runs
    return out


def _cpu() -> str:
    """The CPU's model name (Linux), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def revision(rev: str) -> str:
    """A commit as its 12-character name (what a results file records)."""
    return subprocess.run(["git", "rev-parse", "--short=12", rev], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip


def results_doc(what: str, results: dict, baseline: str, **extra: object) -> dict:
    """A side-by-side results file: what was measured, the results, the machine, the versions,
    the date and both revisions (this one and the baseline)."""
    return {
        **extra,
        "what": what,
        "results": results,
        "machine": {"device": _cpu(), "cpus": os.cpu_count(), "load_at_end": os.getloadavg()},
        "versions": _versions(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "revision": revision("HEAD"),
        "baseline": revision(baseline),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("numpy", "pyarrow", "pandas", "duckdb"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "absent"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dispatches", type=int, default=11_000_000)
    ap.add_argument("--only", help="comma-separated command labels to run (default: all)")
    ap.add_argument("--work", type=Path, help="scratch folder (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--timeout", type=float, help="kill a command after this many seconds")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each command but the import")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="mlaprof-huge-"))
    work.mkdir(parents=True, exist_ok=True)
    csv_path, traces, out = work / "kernel_trace.csv", work / "traces", work / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    try:
        if not csv_path.exists():
            t0 = time.perf_counter()
            generate(csv_path, args.dispatches)
            print(f"generated {csv_path.stat().st_size / 2**30:.2f} GiB in "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)  # fmt: skip
        only = set(args.only.split(",")) if args.only else None
        results = {}
        for label, argv in COMMANDS:
            if only and label not in only:
                continue
            if label == "import":
                shutil.rmtree(traces, ignore_errors=True)
            runs = []
            for _ in range(1 if label == "import" else max(1, args.repeat)):
                # each command its own output folder: several --only runs may share one --work
                dest = out / label.replace(" ", "_").replace("-", "")
                shutil.rmtree(dest, ignore_errors=True)
                dest.mkdir(parents=True)
                fill = {"csv": str(csv_path), "traces": str(traces), "out": str(dest)}
                (traces / "huge" / CACHE_NAME).unlink(missing_ok=True)  # analyse, not read back
                runs.append(measure([a.format(**fill) for a in argv], env, args.timeout))
                print(f"{label:16s} {json.dumps(runs[-1])}", flush=True)
                shutil.rmtree(dest, ignore_errors=True)  # an export of 11M kernels is GBs
            res = summarise(runs)
            res["target_mib"] = TARGET_MIB.get(label, 1024)
            res["within_target"] = all(
                r["rc"] == 0 and r["peak_rss_mib"] <= res["target_mib"] for r in runs
            )
            results[label] = res
        doc = {
            "what": "whole-process peak RSS (wait4 ru_maxrss) of each command, fresh process each",
            "dispatches": args.dispatches,
            "csv_bytes": csv_path.stat().st_size,
            "results": results,
            "targets_met": {k: r["within_target"] for k, r in results.items()},
            "machine": {
                "device": _cpu(),
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "load_at_end": os.getloadavg(),
            },  # fmt: skip
            "versions": _versions(),
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "revision": subprocess.run(
                ["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True
            ).stdout.strip(),  # fmt: skip
        }
        if args.json:
            args.json.write_text(json.dumps(doc, indent=2) + "\n")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
