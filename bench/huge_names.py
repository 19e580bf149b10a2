"""Peak memory of every reading command on a trace whose kernel names are megabytes long,
this revision beside a baseline revision, each command in a fresh process (``wait4``'s peak
RSS, as ``bench/huge_trace.py`` measures it).

The trace: ``bench/import_bench.py``'s rocprofv3 kernel trace (FULL-graph decode replays, MLA
stage 1 and 2 among each layer's kernels), ``--dispatches`` of them, whose every kernel name
carries a ``--name-mb`` MB template argument (140 dispatches of 10 MB: 1.47 GB of CSV).

    nice python bench/huge_names.py --baseline cc4390e --name-mb 10 --runs 3 --json bench/results/huge_names.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from huge_trace import measure, results_doc, revision  # noqa: E402

COMMANDS = (
    ("report --json", ["report", "{run}", "--json"]),
    ("report", ["report", "{run}"]),
    ("tui --once", ["tui", "{run}", "--once"]),
    ("report --html", ["report", "{run}", "--html", "{out}/r.html", "--force"]),
)


def generate(path: Path, dispatches: int, mb: int) -> None:
    """Row by row: this process stays small, as every command it starts inherits its memory
    into its peak RSS (a forked child's high-water mark survives its exec)."""
    from import_bench import generate as plain_trace

    plain = path.with_name("plain.csv")
    plain_trace(plain, dispatches)
    pad = "x" * (mb << 20)
    with open(plain, newline="") as src, open(path, "w", newline="") as dst:
        rows = csv.reader(src)
        out = csv.writer(dst, quoting=csv.QUOTE_ALL)
        head = next(rows)
        out.writerow(head)
        i = head.index("Kernel_Name")
        for r in rows:
            r[i] = f"{r[i]}<{pad}>"
            out.writerow(r)
    plain.unlink()


def _rss_mib() -> float:
    """This process's resident memory now (what a child it forks starts its peak from)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return -1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main")
    ap.add_argument("--name-mb", type=int, default=10)
    ap.add_argument("--dispatches", type=int, default=140)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.json:
        args.json = args.json.resolve()  # the commands run from the scratch folder
    work = Path(tempfile.mkdtemp(prefix="mlaprof-names-"))
    base = work / "base"
    base.mkdir()
    arc = subprocess.run(["git", "archive", args.baseline, "mlaprof"], cwd=ROOT,
                         capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(base)], input=arc, check=True)
    os.chdir(work)  # python -m puts the working folder first: never a checkout
    revs = {"this": (str(ROOT), revision("HEAD")), "baseline": (str(base), revision(args.baseline))}
    try:
        csv_path = work / "1_kernel_trace.csv"
        generate(csv_path, args.dispatches, args.name_mb)
        results: dict[str, dict[str, object]] = {}
        for label, (pythonpath, rev) in revs.items():
            env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
            traces = work / f"t-{label}"
            imp = measure(["import", "rocprof", str(csv_path), "--traces", str(traces),
                           "--name", "huge"], env)  # fmt: skip
            print(f"import          {label:8s} {json.dumps(imp)}", flush=True)
            results.setdefault("import", {})[label] = {"revision": rev, "runs": [imp]}
            fill = {"run": str(traces / "huge"), "out": str(work)}
            for cmd, argv in COMMANDS:
                runs = []
                for _ in range(args.runs if label == "this" else 1):
                    res = measure([a.format(**fill) for a in argv], env)
                    runs.append(res)
                    print(f"{cmd:15s} {label:8s} {json.dumps(res)}", flush=True)
                peaks = [r["peak_rss_mib"] for r in runs]
                results.setdefault(cmd, {})[label] = {
                    "revision": rev,
                    "runs": runs,
                    "median_peak_rss_mib": statistics.median(peaks),
                    "peak_range_mib": [min(peaks), max(peaks)],
                    "exit_codes": sorted({r["rc"] for r in runs}),
                }
        doc = results_doc(
            "whole-process peak RSS (wait4 ru_maxrss) of each command, fresh process "
            f"each, on {args.dispatches} dispatches whose names are {args.name_mb} MB each",
            results,
            args.baseline,
            parent_rss_mib_at_end=_rss_mib(),
            csv_bytes=csv_path.stat().st_size,
        )
        if args.json:
            args.json.write_text(json.dumps(doc, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
