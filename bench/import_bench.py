"""Import benchmark: a generated 1M-dispatch rocprofv3 kernel_trace.csv, imported by mlaprof's
importer and by a plain pandas.read_csv + DataFrame.to_sql route, side by side in one run.

Each route runs in its own child process (so that peak RSS is per route), alternating, several
times; both write a complete run (same store, same MLA annotation step) and the kernels of the
runs, as mlaprof reads them back, are checked to be identical. Two references are timed alongside:
the same pandas parse stored through mlaprof's Arrow side file (``pandas-columnar``: isolates the
store from the parser) and ``pandas.read_csv`` alone (parse only, nothing stored). Timing starts after the interpreter and the modules are
loaded (``run.json`` records library versions, which imports torch once per process; that fixed
cost is reported separately as ``cold_cli_s``).

    python bench/import_bench.py [--dispatches 1000000] [--reps 3] [--out bench/results/import_bench.json]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlaprof.exporters.csv_export import KERNEL_HEADER  # noqa: E402

HEADER = list(KERNEL_HEADER)  # rocprofv3 7.x kernel_trace.csv layout
# one decode step under FULL graph replay: per layer RMSNorm, a GEMM, MLA stage 1 + stage 2
LAYER_KERNELS = [
    ("void rms_norm_kernel<c10::BFloat16, 128>(c10::BFloat16*, c10::BFloat16 const*, float, int)",
     (512, 1, 1), (512, 1, 1)),
    ("Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN_1LDSB0_GRVW8_WG32_8_1", (8192, 4, 1),
     (256, 1, 1)),
    ("_fwd_grouped_kernel_stage1", (4 * 64, 1, 16), (64, 1, 1)),
    ("_fwd_kernel_stage2", (4 * 64, 16, 1), (64, 1, 1)),
]  # fmt: skip
LAYERS = 61


def generate(path: Path, n: int) -> None:
    """rocprofv3 7.x layout, strings quoted, numbers bare; replays share a correlation id."""
    per_replay = LAYERS * len(LAYER_KERNELS)
    t = 1_750_000_000_000_000_000
    with open(path, "w") as f:
        f.write(",".join(f'"{h}"' for h in HEADER) + "\n")
        buf = []
        for i in range(n):
            r, j = divmod(i, per_replay)
            name, grid, block = LAYER_KERNELS[j % len(LAYER_KERNELS)]
            dur = 2000 + (i * 7919) % 5000
            buf.append(
                f'"KERNEL_DISPATCH","Agent 2",1,1,4242,{i + 1},{j % 4 + 10},"{name}",{r + 1},'
                f"{t},{t + dur},0,0,64,0,96,{block[0]},{block[1]},{block[2]},{grid[0]},"
                f"{grid[1]},{grid[2]}\n"
            )
            t += dur + 150
            if len(buf) == 100_000:
                f.writelines(buf)
                buf.clear()
        f.writelines(buf)


def route_mlaprof(csv_path: Path, traces: Path) -> Path:
    from mlaprof.importers.rocprof import import_rocprof

    run, _ = import_rocprof(csv_path, traces, "mlaprof")
    return run


def route_pandas(csv_path: Path, traces: Path, columnar: bool = False) -> Path:
    """The plain route: pandas.read_csv, the same annotation, DataFrame.to_sql into the run's
    kernels table. ``columnar``: the same parse, stored through mlaprof's Arrow side file instead
    (a reference that isolates the parser from the store)."""
    import numpy as np
    import pandas as pd

    from mlaprof.importers.annotate import NULL, KernelColumns, annotate, store_derived
    from mlaprof.importers.common import ImportSummary
    from mlaprof.kernel_table import KernelMatcher
    from mlaprof.portable import portable_path
    from mlaprof.store.staging import staged_run

    df = pd.read_csv(csv_path)
    df.columns = [c.lower() for c in df.columns]
    src = {
        "start_ns": "start_timestamp",
        "end_ns": "end_timestamp",
        "stream": "stream_id",
        "correlation": "correlation_id",
        "grid_x": "grid_size_x",
        "grid_y": "grid_size_y",
        "grid_z": "grid_size_z",
        "block_x": "workgroup_size_x",
        "block_y": "workgroup_size_y",
        "block_z": "workgroup_size_z",
    }
    out = pd.DataFrame({"rank": 0, "name": df["kernel_name"]})
    for col, s_ in src.items():
        out[col] = df[s_].astype("int64")
    out["device"] = df["agent_id"].str.extract(r"(\d+)$", expand=False).astype("int64")
    codes, uniq = pd.factorize(out["name"])
    kc = KernelColumns(list(uniq), codes.astype(np.int64), {c: out[c].to_numpy() for c in src}, {})
    summary = ImportSummary(source="pandas")
    derived, steps, layers = annotate(kc, KernelMatcher(), summary, True)
    for c, arr in derived.items():
        out[c] = pd.array(np.where(arr == NULL, None, arr), dtype="Int64")
    # the run's meta as the rocprof importer writes it (the analysis reads its source)
    meta = {"source": "rocprof", "kind": "trace", "format": "csv", "grid_units": "workitems",
            "imported_from": portable_path(str(csv_path.resolve()))}  # fmt: skip
    with staged_run(traces, "pandas", meta) as (bulk, _final):
        if columnar:
            cols = {c: (out[c].to_numpy(), None) for c in src}
            cols["device"] = (out["device"].to_numpy(), None)
            cols.update({c: (arr, arr == NULL) for c, arr in derived.items()})
            bulk.write_columnar("kernels", len(out), cols, {"name": (list(uniq), codes)})
        else:
            out.to_sql("kernels", bulk.con, if_exists="append", index=False)
        bulk.write_trace_checks(summary.checks)  # the store's per-rank checks, as an import's
        store_derived(bulk, steps, layers, summary)
    return traces / "pandas"


def route_read_csv(csv_path: Path, traces: Path) -> None:
    """Reference: pandas.read_csv alone (parse only, nothing annotated or stored)."""
    import pandas as pd

    pd.read_csv(csv_path)


ROUTES = {
    "mlaprof": route_mlaprof,
    "pandas": route_pandas,
    "pandas-columnar": lambda c, t: route_pandas(c, t, columnar=True),
    "read_csv-only": route_read_csv,
}
STORING = ("mlaprof", "pandas", "pandas-columnar")


def child(route: str, csv_path: Path, traces: Path) -> None:
    # load everything a route needs before the clock starts (same for both routes)
    import pandas  # noqa: F401

    import mlaprof.store.runmeta as rm

    rm.versions()
    import mlaprof.importers.rocprof  # noqa: F401

    with contextlib.suppress(ImportError):
        import pyarrow.csv  # noqa: F401
        import pyarrow.ipc  # noqa: F401
    base = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    run = ROUTES[route](csv_path, traces)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    peak = _vm_hwm_mib()  # before the read-back below allocates
    back = read_back(run) if run is not None else {}
    digest = kernels_digest(run) if run is not None else None
    print(
        json.dumps(
            {
                "route": route,
                "wall_s": wall,
                "cpu_s": (ru.ru_utime - base.ru_utime) + (ru.ru_stime - base.ru_stime),
                "peak_rss_mib": peak,
                "run": None if run is None else str(run),
                "kernels": digest,
                **back,
            }
        )
    )


def _vm_hwm_mib() -> float:
    """This process's peak resident set. (ru_maxrss is not used: Linux carries the parent's
    high-water mark over fork/exec into the child's.)"""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def read_back(run: Path) -> dict[str, float]:
    """What opening the imported run costs: the kernels as a DataFrame, and a full analysis."""
    from mlaprof import load
    from mlaprof.analysis import analyze

    with load(run) as r:
        t = time.perf_counter()
        r.table("kernels")
        kernels_df = time.perf_counter() - t
        t = time.perf_counter()
        analyze(r)
        return {"read_kernels_df_s": kernels_df, "analyze_s": time.perf_counter() - t}


def kernels_digest(run: Path) -> tuple[int, str]:
    """Every kernel row as mlaprof reads it back (SQLite rows and Arrow side file alike)."""
    from mlaprof import load
    from mlaprof.store.rows import rows

    h = hashlib.sha256()
    with load(run) as r:
        ks = rows(r, "kernels")
    for row in ks:
        h.update(repr(tuple(row.values())).encode())
    return len(ks), h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dispatches", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/import_bench.json")
    ap.add_argument("--child", nargs=3, metavar=("ROUTE", "CSV", "TRACES"))
    a = ap.parse_args()
    if a.child:
        child(a.child[0], Path(a.child[1]), Path(a.child[2]))
        return
    with tempfile.TemporaryDirectory(prefix="mlaprof-bench-") as tmp:
        csv_path = Path(tmp) / "kernel_trace.csv"
        t = time.perf_counter()
        generate(csv_path, a.dispatches)
        print(f"generated {a.dispatches} dispatches ({csv_path.stat().st_size / 2**20:.0f} MiB) "
              f"in {time.perf_counter() - t:.1f} s", flush=True)  # fmt: skip
        results: dict[str, list[dict]] = {r: [] for r in ROUTES}
        digests = {}
        for rep in range(a.reps):
            order = list(ROUTES) if rep % 2 == 0 else list(ROUTES)[::-1]
            for route in order:
                traces = Path(tmp) / f"traces-{route}-{rep}"
                out = subprocess.run(
                    [sys.executable, __file__, "--child", route, str(csv_path), str(traces)],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                if out.returncode != 0:
                    raise SystemExit(f"{route} failed:\n{out.stderr}")
                r = json.loads(out.stdout.strip().splitlines()[-1])
                results[route].append(r)
                if route in STORING:
                    digests[route] = tuple(r["kernels"])
                print(f"rep {rep} {route:15s} wall {r['wall_s']:.2f} s  cpu {r['cpu_s']:.2f} s  "
                      f"peak RSS {r['peak_rss_mib']:.0f} MiB  "
                      f"read back {r.get('read_kernels_df_s', 0):.2f} s", flush=True)  # fmt: skip
                if rep < a.reps - 1 and traces.exists():
                    import shutil

                    shutil.rmtree(traces)
        same = len(set(digests.values())) == 1
        if not same:
            raise SystemExit(f"the two routes stored different kernels: {digests}")
        # a cold CLI run, interpreter start and torch import (run.json versions) included
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "mlaprof", "import", "rocprof", str(csv_path), "--traces",
             str(Path(tmp) / "cold"), "--name", "cold"], check=True, capture_output=True,
        )  # fmt: skip
        cold = time.perf_counter() - t

    def med(route: str, key: str) -> float:
        return statistics.median(r[key] for r in results[route])

    summary = {
        "benchmark": "import a generated rocprofv3 kernel_trace.csv (7.x layout)",
        "dispatches": a.dispatches,
        "reps": a.reps,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_at_end": os.getloadavg(),
        },
        "versions": _versions(),
        "mlaprof_wall_s": med("mlaprof", "wall_s"),
        "pandas_wall_s": med("pandas", "wall_s"),
        "speedup_wall": med("pandas", "wall_s") / med("mlaprof", "wall_s"),
        "mlaprof_cpu_s": med("mlaprof", "cpu_s"),
        "pandas_cpu_s": med("pandas", "cpu_s"),
        "speedup_cpu": med("pandas", "cpu_s") / med("mlaprof", "cpu_s"),
        "mlaprof_peak_rss_mib": max(r["peak_rss_mib"] for r in results["mlaprof"]),
        "pandas_peak_rss_mib": max(r["peak_rss_mib"] for r in results["pandas"]),
        "reference_pandas_columnar_wall_s": med("pandas-columnar", "wall_s"),
        "read_kernels_df_s": {r: med(r, "read_kernels_df_s") for r in STORING},
        "analyze_s": {r: med(r, "analyze_s") for r in STORING},
        "reference_read_csv_only_wall_s": med("read_csv-only", "wall_s"),
        "same_output": same,
        "kernels_rows": digests["mlaprof"][0],
        "cold_cli_s": cold,
        "runs": results,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=2))


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("pandas", "pyarrow", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    out["sqlite"] = sqlite3.sqlite_version
    return out


if __name__ == "__main__":
    main()
