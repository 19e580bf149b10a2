"""CPU of a rocprofv3 kernel-trace import's annotation and kernel-file build, per function, for two
trees side by side (issue: the annotation's share of a 1M-dispatch import).

Each tree runs in its own child process (``PYTHONPATH=<tree>``), alternating, ``--rounds`` times.
A child reads the CSV once (``rocprof_csv.read_kernel_file``), then times ``annotate`` ``--reps``
times and the kernel file's write (``write_kernels`` + ``columnar.write``, the path the import's
background thread runs) ``--reps`` times. Per function: the CPU of the thread that ran it
(``time.thread_time``, inclusive of what it calls, summed over its calls in one repeat) and its
minor page faults (fresh memory touched: a big temporary costs its pages' faults too), the min
over repeats; totals also as process CPU (``time.process_time``: the annotation reads the grids
in a second thread), and the annotation's peak of traced memory (tracemalloc, above what was
held before it; one untimed repeat). OMP_NUM_THREADS=1 is set for the children.

    python bench/annotate_cpu.py --csv kernel_trace.csv --trees /path/main /path/mine \
        [--rounds 3] [--reps 5] [--out bench/results/annotate_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (module, function) timed per call; classmethods and nested helpers as named
TIMED = [
    ("annotate", "annotate"),
    ("annotate", "replays_by_correlation"),
    ("annotate", "_device_codes"),
    ("annotate", "_number_steps"),
    ("annotate", "_layers_in_groups"),
    ("annotate", "_trim_edges"),
    ("annotate", "_pin_qlen_from_stage2"),
    ("annotate", "_stage2_heads"),
    ("annotate", "_replay_checks"),
    ("annotate", "_derived"),
    ("annotate", "_groups"),
    ("annotate", "_stage2_checks"),
    ("annotate", "_segment_spans"),
    ("annotate", "_holds_pieces"),
    ("annotate", "_step_checks"),
    ("step_model", "plan_steps"),
    ("step_model", "graph_identity"),
    ("step_model", "replay_order"),
    ("step_model", "replay_runs"),
    ("step_model", "ascending_runs"),
    ("step_model", "replay_sequences"),
    ("step_model", "_repeats"),
]


def child(csv: Path, reps: int) -> dict:
    import numpy as np

    from mlaprof.importers import annotate as ann
    from mlaprof.importers import rocprof_csv, step_model
    from mlaprof.importers.common import ImportSummary
    from mlaprof.kernel_table import KernelMatcher
    from mlaprof.store import columnar

    mods = {"annotate": ann, "step_model": step_model}
    acc: dict[str, float] = {}

    def faults() -> int:
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt

    def wrap(key: str, fn):
        def timed(*a, **k):
            t, f = time.thread_time(), faults()
            try:
                return fn(*a, **k)
            finally:
                acc[key] = acc.get(key, 0.0) + time.thread_time() - t
                acc[key + " faults"] = acc.get(key + " faults", 0.0) + faults() - f

        return timed

    for m, f in TIMED:  # a function one tree lacks is left out of its timings
        if hasattr(mods[m], f):
            setattr(mods[m], f, wrap(f, getattr(mods[m], f)))

    kc0 = rocprof_csv.read_kernel_file(csv)
    lazy = kc0.ints
    spill = lazy.spill
    if spill is not None:
        spill.discard = lambda: None  # kept for every repeat's write
    ready = {c: lazy[c] for c in lazy if c not in lazy.spilled()}

    def fresh():
        return ann.KernelColumns(
            list(kc0.names), kc0.name_idx, ann.LazyInts(ready, {}, spill), dict(kc0.masks)
        )

    matcher = KernelMatcher()
    host = step_model.HostTrace()
    per: dict[str, list[float]] = {}
    outs = []
    for _ in range(reps):
        acc.clear()
        kc = fresh()
        summary = ImportSummary(source="bench")
        p0, t0 = time.process_time(), time.thread_time()
        derived, steps, layers = ann.annotate(kc, matcher, summary, True, None, None, host)
        t1, p1 = time.thread_time(), time.process_time()
        row = dict(acc)
        row["annotate_thread"] = t1 - t0
        row["annotate_process"] = p1 - p0
        for k, v in row.items():
            per.setdefault(k, []).append(v)
        outs.append((derived, steps, layers, summary.checks))

    # the annotation's peak of traced memory (NumPy reports its buffers to tracemalloc), in a
    # repeat of its own: tracing slows every allocation, so it is not one of the timed ones
    import tracemalloc

    tracemalloc.start()
    base_mem = tracemalloc.get_traced_memory()[0]
    ann.annotate(fresh(), matcher, ImportSummary(source="bench"), True, None, None, host)
    peak_mib = (tracemalloc.get_traced_memory()[1] - base_mem) / 2**20
    tracemalloc.stop()
    per["annotate_peak_traced_MiB"] = [peak_mib / 1e3]  # printed as ms: x1e3

    class Bulk:  # what write_kernels calls: the queued part, as the import's writer keeps it
        part = None

        def write_columnar(self, table, n, numbers, text=None, spill=None):
            self.part = (
                columnar.Pending(table, 0, n, numbers, text, *spill)
                if spill is not None
                else columnar.build(table, 0, n, numbers, text)
            )
            return n

    derived = outs[-1][0]
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(reps):
            kc = fresh()
            p0, t0 = time.process_time(), time.thread_time()
            bulk = Bulk()
            ann.write_kernels(bulk, kc, ImportSummary(source="bench"), derived)
            t1 = time.thread_time()
            side = columnar.write(Path(tmp), 0, "kernels", [bulk.part])
            t2, p2 = time.thread_time(), time.process_time()
            per.setdefault("write_kernels(queue)", []).append(t1 - t0)
            per.setdefault("write_thread", []).append(t2 - t0)
            per.setdefault("write_process", []).append(p2 - p0)
        size = side.path.stat().st_size
    # a fingerprint of the outputs: the trees must agree
    h = []
    for d, s, l_, _c in outs[:1]:
        for part in (d, s, l_):
            for k in sorted(part):
                a = np.asarray(part[k])
                h.append((k, str(a.dtype), a.tolist()[:3], int(len(a))))
    return {
        "min_s": {k: min(v) for k, v in per.items()},
        "all_s": per,
        "kernel_file_bytes": size,
        "checks": json.dumps(outs[0][3], sort_keys=True, default=str),
        "shape": repr(h),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", type=Path, required=True)
    ap.add_argument("--trees", type=Path, nargs="+", default=[])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--labels",
        nargs="+",
        help="a name per tree for the table and the results "
        "file (default: the folders' names; no machine paths are recorded)",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.csv, a.reps)))
        return
    env = dict(os.environ, OMP_NUM_THREADS="1")
    labels = a.labels or [Path(t).name for t in a.trees]
    if len(labels) != len(a.trees) or len(set(labels)) != len(labels):
        raise SystemExit("--labels: one distinct name per tree")
    name_of = dict(zip(map(str, a.trees), labels, strict=True))
    runs: dict[str, list[dict]] = {lab: [] for lab in labels}
    loads = []
    for _ in range(a.rounds):
        for t in a.trees:
            loads.append(os.getloadavg()[0])
            cmd = [sys.executable, __file__, "--child", "--csv", str(a.csv), "--reps", str(a.reps)]
            got = subprocess.run(
                cmd, env={**env, "PYTHONPATH": str(t)}, capture_output=True, text=True, check=True
            )
            runs[name_of[str(t)]].append(json.loads(got.stdout.strip().splitlines()[-1]))
    first = runs[labels[0]][0]
    same = all(r["checks"] == first["checks"] and r["shape"] == first["shape"]
               for rs in runs.values() for r in rs)  # fmt: skip
    keys = list(first["min_s"])
    print(f"load (1 min) over the runs: {min(loads):.2f}-{max(loads):.2f}; outputs agree: {same}")
    print(f"{'ms (min of reps; median of rounds)':40s}" + "".join(f"{t:>14s}" for t in runs))
    table = {}
    for k in keys:
        vals = [statistics.median(r["min_s"].get(k, 0.0) for r in rs) * 1e3 for rs in runs.values()]
        table[k] = vals
        if k.endswith(" faults"):
            vals = [v / 1e3 for v in vals]  # counts, not ms
        print(f"{k:40s}" + "".join(f"{v:14.1f}" for v in vals))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        import datetime as dt
        import platform

        doc = {"benchmark": "annotate + kernel-file build CPU per function (bench/annotate_cpu.py)",
               "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "csv_bytes": a.csv.stat().st_size, "cpus": os.cpu_count(),
               "python": platform.python_version(), "rounds": a.rounds, "reps": a.reps,
               "trees": list(runs), "loads": loads, "same": same,
               "median_of_min_ms": table, "runs": runs}  # fmt: skip
        a.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
