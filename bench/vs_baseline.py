"""HEAD against a named baseline commit, side by side in the same run: so a regression shows in
the run it happens.

The baseline is checked out as a ``git worktree`` in a temporary folder; every figure is a whole
process (``python -m mlaprof ...``, interpreter start and imports included) of one tree or the
other, the two alternating (HEAD first in even pairs, the baseline first in odd ones), ``--pairs``
times. Each process is timed from outside with ``wait4``: CPU (user + system of the child, which
the machine's load does not inflate: the primary figure), wall, and peak RSS; the load average is
recorded before and after each. Ratios are HEAD / baseline of the medians, with the per-pair
ratios' min and max as their spread.

Figures (``--only`` picks some):
  import    1M-dispatch rocprofv3 CSV import (bench/import_bench.py's file), beside
            ``pandas.read_csv`` of the same file in the same rotation -> ``import_1m_ratio``,
            and Arrow's own ``pyarrow.csv.read_csv`` of it (the parser the import is built on,
            alone) -> ``read_arrow_per_read_csv``
  fleet_csv    8 ranks of rocprofv3 CSVs: ``import`` + ``report --json`` -> ``fleet_csv_ratio``
  fleet_rocpd  the same fleet as rocpd databases (launch correlation in ``stack_id``, as
            rocprofv3 writes it, and in the external ``correlation_id`` for a baseline that
            reads that one) -> ``fleet_rocpd_ratio``
  startup   ``--version``, ``report --json`` on a shipped demo run (its first report, and a later
            one that reads the document the run folder keeps), default ``run``; the first report
            again with no thread variable set (``report_json_demo_user_env``: as a user runs it);
            beside them a bare ``import pandas`` and ``import torch`` (``pandas_import_cpu_s``,
            ``torch_import_cpu_s``): what those floors hold before mlaprof runs a line
  export_perfetto, export_rocpd, export_csv  ``export`` of the 1M-dispatch import (each tree
            exports its own import of the same file, imported once, untimed) -> ``export_<format>_ratio``

    python bench/vs_baseline.py --baseline fcd03bf [--pairs 3] [--fleet-dispatches 2000000]
        [--only import,fleet_csv] [--out bench/results/vs_baseline_<date>.json]

Defaults fit a 2-core machine in a few minutes; the issue's fleet is ``--fleet-dispatches
10000000`` (run ``--only fleet_csv`` and ``--only fleet_rocpd`` separately: ~10 minutes each).
"""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

FIGURES = (
    "import",
    "fleet_csv",
    "fleet_rocpd",
    "startup",
    "export_perfetto",
    "export_rocpd",
    "export_csv",
)
DEMO_RUN = "traces/demo/fix-padding-active-rows-c16"
KEPT_REPORT = ".report-cache.json"  # mlaprof.store.summary_cache.CACHE_NAME (HEAD's name)
# numeric libraries single-threaded, so both trees run with the same thread counts whatever
# the machine; DuckDB and Arrow keep their own defaults (what a user gets), recorded below
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# imported once per tree before timing, so no timed process compiles a library's module
WARM_IMPORTS = (
    "import importlib\n"
    "for m in ('mlaprof.cli', 'numpy', 'pandas', 'pyarrow.csv', 'pyarrow.parquet', 'duckdb',\n"
    "          'adbc_driver_sqlite.dbapi', 'torch', 'mlaprof.analysis.run_summary'):\n"
    "    try:\n"
    "        importlib.import_module(m)\n"
    "    except ImportError:\n"
    "        pass\n"
)


def child(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> dict[str, Any]:
    """One whole process timed from outside: CPU and wall seconds, peak RSS (MiB), load."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)  # this child's own rusage, not every child's
        wall = time.perf_counter() - t0
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        said, errs = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if rc != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({rc}):\n{errs[-3000:]}")
    return {
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
        "wall_s": round(wall, 3),
        "peak_rss_mib": round(ru.ru_maxrss / 1024, 1),
        "load_before": round(load0, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "stdout_tail": said.strip().splitlines()[-3:],
    }


class Tree:
    """One checkout's CLI: ``python -m mlaprof`` with that tree first on the path."""

    def __init__(self, label: str, path: Path, commit: str) -> None:
        self.label, self.path, self.commit = label, path, commit
        self.env = {**os.environ, **THREAD_ENV, "PYTHONPATH": str(path)}
        # bytecode as an installed package has it, written once and read after: a process
        # told not to write bytecode (PYTHONDONTWRITEBYTECODE) under a cache prefix compiles
        # every module it imports every time (torch alone: ~1.4 s of a default run)
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        if sys.pycache_prefix:
            self.env["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix
        # as a user runs it: no thread variable, each library (and mlaprof) picks its own
        self.user_env = {k: v for k, v in self.env.items() if k not in THREAD_ENV}
        # timed as an installed package runs: compiled once, never by the timed processes
        compileall.compile_dir(str(path / "mlaprof"), quiet=1)
        # the libraries' modules too, by one untimed import of what the commands use
        subprocess.run([sys.executable, "-c", WARM_IMPORTS], env=self.env, cwd=path, check=True)
        # ``python -m`` puts the working folder first on the path: each tree's processes run
        # in that tree, and the package they import is checked to be that tree's
        got = subprocess.run([sys.executable, "-c", "import mlaprof; print(mlaprof.__file__)"],
                             env=self.env, cwd=path, capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
        if not Path(got).resolve().is_relative_to(path.resolve()):
            raise SystemExit(f"{label}: imports mlaprof from {got}, not from {path}")

    def cli(self, *args: str, user_env: bool = False) -> dict[str, Any]:
        env = self.user_env if user_env else self.env
        return child([sys.executable, "-m", "mlaprof", *args], env, cwd=self.path)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def pairs_of(n: int, trees: tuple[Tree, Tree], one: Any) -> list[dict[str, dict[str, Any]]]:
    """``n`` pairs of ``one(tree)``, HEAD first in even pairs, the baseline first in odd."""
    out = []
    for i in range(n):
        order = trees if i % 2 == 0 else trees[::-1]
        pair = {t.label: one(t) for t in order}
        out.append(pair)
        print(f"  pair {i + 1}: " + ", ".join(
            f"{k} cpu {v['cpu_s']:.2f} s wall {v['wall_s']:.2f} s {v['peak_rss_mib']:.0f} MiB"
            for k, v in pair.items()), flush=True)  # fmt: skip
    return out


def _generate(module: str, call: str) -> None:
    """A benchmark input written by a child process: on Linux a child's peak RSS (``wait4``)
    counts the address space it was forked from, so a parent grown by writing 10M rows would
    lend every timed process its own peak."""
    code = f"import sys; from pathlib import Path; sys.path.insert(0, {str(ROOT / 'bench')!r}); " \
           f"import {module}; {call}"  # fmt: skip
    subprocess.run(
        [sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )


def fig_import(trees: tuple[Tree, Tree], work: Path, n: int, pairs: int) -> dict[str, Any]:
    """1M import on each tree, with ``pandas.read_csv`` of the same file beside each."""
    src = work / "one" / "kernel_trace.csv"
    if not src.exists():
        src.parent.mkdir(parents=True, exist_ok=True)
        _generate("import_bench", f"import_bench.generate(Path({str(src)!r}), 1_000_000)")
    read_csv = [sys.executable, "-c", f"import pandas as pd; pd.read_csv({str(src)!r})"]
    # the parser an import is built on, alone: Arrow's read of the whole file into a table (no
    # annotation, no store), so a ratio to read_csv below it is one no Arrow-based import meets
    read_arrow = [sys.executable, "-c", f"import pyarrow.csv as c; c.read_csv({str(src)!r})"]

    def one(t: Tree) -> dict[str, Any]:
        traces = work / f"t-{t.label}"
        shutil.rmtree(traces, ignore_errors=True)
        r = t.cli("import", "rocprof", str(src), "--traces", str(traces), "--name", "one")
        # the parser alone, right after, under the same load
        r["read_csv"] = child(read_csv, t.env)
        r["read_arrow"] = child(read_arrow, t.env)
        shutil.rmtree(traces, ignore_errors=True)
        return r

    del n
    return {
        "source": "bench/import_bench.py generate(1_000_000)",
        "pairs": pairs_of(pairs, trees, one),
    }


def fig_fleet(trees: tuple[Tree, Tree], work: Path, fmt: str, total: int, ranks: int,
              pairs: int) -> dict[str, Any]:  # fmt: skip
    """The fleet imported then reported (``report --json``), each its own process."""
    # rocpd: the launch correlation in stack_id, as rocprofv3 writes it, and in the external
    # correlation_id too, which a baseline that reads the latter (before 2026-12-02) takes;
    # HEAD reads stack_id alone, so both trees see the same replays
    data = "rocpd_ext" if fmt == "rocpd" else fmt
    out = work / "fleet"
    _generate("fleet_bench", f"fleet_bench.make_fleet(Path({str(out)!r}), {total}, {ranks}, "
                             f"formats=({data!r},))")  # fmt: skip
    src = out / data

    def one(t: Tree) -> dict[str, Any]:
        traces = work / f"f-{t.label}"
        shutil.rmtree(traces, ignore_errors=True)
        imp = t.cli("import", "rocprof", str(src), "--traces", str(traces), "--name", "fleet")
        rep = t.cli("report", "fleet", "--traces", str(traces), "--json")
        shutil.rmtree(traces, ignore_errors=True)
        return {
            "cpu_s": round(imp["cpu_s"] + rep["cpu_s"], 3),
            "wall_s": round(imp["wall_s"] + rep["wall_s"], 3),
            "peak_rss_mib": max(imp["peak_rss_mib"], rep["peak_rss_mib"]),
            "import": {k: v for k, v in imp.items() if k != "stdout_tail"},
            "report": {k: v for k, v in rep.items() if k != "stdout_tail"},
            "import_says": imp["stdout_tail"],
        }

    return {"source": f"bench/fleet_bench.py make_fleet({total}, {ranks}) {fmt}",
            "pairs": pairs_of(pairs, trees, one)}  # fmt: skip


def fig_export(trees: tuple[Tree, Tree], work: Path, fmt: str, pairs: int) -> dict[str, Any]:
    """The 1M-dispatch import exported by each tree, each from its own import of the same file
    (imported once per tree, untimed: a store HEAD writes may be of a schema version the
    baseline cannot read)."""
    src = work / "one" / "kernel_trace.csv"
    if not src.exists():
        src.parent.mkdir(parents=True, exist_ok=True)
        _generate("import_bench", f"import_bench.generate(Path({str(src)!r}), 1_000_000)")
    for t in trees:
        if not (work / f"exp-{t.label}" / "one").exists():
            t.cli("import", "rocprof", str(src), "--traces", str(work / f"exp-{t.label}"),
                  "--name", "one")  # fmt: skip

    def one(t: Tree) -> dict[str, Any]:
        traces = work / f"exp-{t.label}"
        dst = work / f"x-{t.label}"
        shutil.rmtree(dst, ignore_errors=True)
        dst.mkdir(parents=True)
        r = t.cli("export", "one", "--traces", str(traces), "--format", fmt, "-o", str(dst / "out"))
        shutil.rmtree(dst, ignore_errors=True)
        # the export names its output file: the scratch folder's path stays off the record
        r["stdout_tail"] = [line.replace(str(work), "<work>") for line in r["stdout_tail"]]
        return r

    return {"source": "bench/import_bench.py generate(1_000_000), imported by each tree",
            "pairs": pairs_of(pairs, trees, one)}  # fmt: skip


def fig_startup(trees: tuple[Tree, Tree], work: Path, pairs: int) -> dict[str, Any]:
    """``--version``, ``report --json`` of a shipped demo run (a copy) as its first report
    (analysed) and as a later one (the document its folder keeps, where a tree keeps one),
    default ``run``."""
    out: dict[str, Any] = {}
    for label, build in (
        ("version", lambda t: ["--version"]),
        ("report_json_demo", lambda t: ["report", str(_demo_copy(t, work, kept=False)), "--json"]),
        ("report_json_demo_kept", lambda t: ["report", str(_demo_copy(t, work)), "--json"]),
        ("run_default", lambda t: ["run", "--traces", str(work / f"runs-{t.label}")]),
        # the first report again as a user runs it (no thread variable set): what a library's
        # own threads cost where nobody chose their count
        ("report_json_demo_user_env",
         lambda t: ["report", str(_demo_copy(t, work, kept=False)), "--json"]),
    ):  # fmt: skip
        print(f" {label}", flush=True)
        if label == "report_json_demo_kept":
            for t in trees:  # the first report, untimed: a tree that keeps the document does
                t.cli(*build(t))
        user = label.endswith("_user_env")
        out[label] = {
            "pairs": pairs_of(pairs, trees, lambda t, b=build, u=user: t.cli(*b(t), user_env=u))
        }
    return out


# what the start-up figures' floors are made of before mlaprof runs a line: the libraries'
# own imports, as a command takes them (the collector paused, mlaprof.import_gc; no
# interpreter teardown, mlaprof.quick_exit)
LIBRARY_IMPORTS = {"pandas": "pandas", "torch": "torch"}


def fig_libraries(env: dict[str, str], pairs: int) -> dict[str, Any]:
    """CPU of a bare interpreter importing each library (``LIBRARY_IMPORTS``), ``pairs`` times
    each, alternating: the part of a first report (pandas) and a default run (torch) that no
    change to mlaprof removes, measured on the machine of the hour."""
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in LIBRARY_IMPORTS}
    for _ in range(pairs):
        for name, module in LIBRARY_IMPORTS.items():
            code = f"import gc, os; gc.disable(); import {module}; os._exit(0)"
            runs[name].append(child([sys.executable, "-c", code], env))
    return {
        name: {"runs": rs, "cpu_s": _spread([r["cpu_s"] for r in rs])} for name, rs in runs.items()
    }


def _demo_copy(t: Tree, work: Path, kept: bool = True) -> Path:
    """The tree's copy of the demo run; ``kept=False``: without the report document a report
    keeps in it (mlaprof.store.summary_cache), so the report analyses the run."""
    dst = work / f"demo-{t.label}" / Path(DEMO_RUN).name
    if not dst.exists():
        shutil.copytree(t.path / DEMO_RUN, dst, ignore=shutil.ignore_patterns(KEPT_REPORT))
    if not kept:
        (dst / KEPT_REPORT).unlink(missing_ok=True)
    return dst


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def _spread(xs: list[float]) -> dict[str, float]:
    return {"median": _median(xs), "min": round(min(xs), 3), "max": round(max(xs), 3)}


def summarise(pairs: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Medians and spreads per tree; HEAD / baseline ratios of the medians (CPU and wall), with
    the per-pair ratios' range; peak memory per tree."""
    s: dict[str, Any] = {}
    for side in ("head", "baseline"):
        rows = [p[side] for p in pairs]
        s[side] = {k: _spread([r[k] for r in rows]) for k in ("cpu_s", "wall_s", "peak_rss_mib")}
        s[side]["load"] = _spread([r["load_before"] if "load_before" in r else
                                   r["import"]["load_before"] for r in rows])  # fmt: skip
        if "read_csv" in rows[0]:
            rc = [r["read_csv"] for r in rows]
            s[side]["read_csv"] = {k: _spread([r[k] for r in rc]) for k in ("cpu_s", "wall_s")}
            for k in ("cpu_s", "wall_s"):
                s[side][f"import_per_read_csv_{k[:-2]}"] = round(
                    s[side][k]["median"] / s[side]["read_csv"][k]["median"], 3)  # fmt: skip
        if "import" in rows[0]:
            for part in ("import", "report"):
                s[side][part] = {k: _spread([r[part][k] for r in rows])
                                 for k in ("cpu_s", "wall_s", "peak_rss_mib")}  # fmt: skip
    if "read_csv" in pairs[0]["head"]:
        # pandas' parse is bimodal on this machine (~1.0 and ~1.35 s CPU) and its slow mode
        # falls on the first read of a pair more often: each side's own rotation then gives a
        # side the odd pair's extra first slot. The pooled median of every read_csv of the run
        # (both rotations) is the denominator the ratios quote
        for k in ("cpu_s", "wall_s"):
            pooled = _median(
                [p[side]["read_csv"][k] for p in pairs for side in ("head", "baseline")]
            )
            s.setdefault("read_csv_pooled", {})[k] = pooled
            for side in ("head", "baseline"):
                s[side][f"import_per_read_csv_{k[:-2]}_pooled"] = round(
                    s[side][k]["median"] / pooled, 3)  # fmt: skip
            if "read_arrow" in pairs[0]["head"]:  # Arrow's read of the file, pooled alike
                arrow = _median(
                    [p[side]["read_arrow"][k] for p in pairs for side in ("head", "baseline")]
                )
                s.setdefault("read_arrow_pooled", {})[k] = arrow
                s.setdefault("read_arrow_per_read_csv", {})[k] = round(arrow / pooled, 3)
    for k in ("cpu_s", "wall_s", "peak_rss_mib"):
        per = [p["head"][k] / p["baseline"][k] for p in pairs if p["baseline"][k]]
        s[f"ratio_{k[:-2] if k != 'peak_rss_mib' else 'peak_rss'}"] = {
            "of_medians": round(s["head"][k]["median"] / s["baseline"][k]["median"], 3),
            "pairs_min": round(min(per), 3),
            "pairs_max": round(max(per), 3),
        }
    return s


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--baseline", default="fcd03bf", help="commit to compare HEAD with")
    ap.add_argument(
        "--pairs", type=int, default=3, help="alternating HEAD/baseline pairs a figure (>= 3)"
    )
    ap.add_argument(
        "--fleet-dispatches",
        type=int,
        default=2_000_000,
        help="kernel dispatches of the whole fleet (the issue's fleet: 10000000)",
    )
    ap.add_argument("--ranks", type=int, default=8, help="ranks of the fleet")
    ap.add_argument("--only", help=f"comma-separated figures of {','.join(FIGURES)}")
    ap.add_argument("--work", type=Path, help="scratch folder (kept; default: a temporary one)")
    ap.add_argument("--out", type=Path, help="default bench/results/vs_baseline_<date>.json")
    a = ap.parse_args()
    # a SIGTERM unwinds like Ctrl-C: the baseline's worktree is removed on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.pairs < 3:
        raise SystemExit("--pairs: at least 3 (a median of fewer is not a measurement)")
    only = a.only.split(",") if a.only else list(FIGURES)
    if bad := set(only) - set(FIGURES):
        raise SystemExit(f"--only: unknown figure(s) {sorted(bad)}")
    today = dt.datetime.now(dt.UTC).date().isoformat()
    out_path = a.out or ROOT / f"bench/results/vs_baseline_{today}.json"
    work = a.work or Path(tempfile.mkdtemp(prefix="mlaprof-vsbase-"))
    work.mkdir(parents=True, exist_ok=True)
    head_commit = _git("rev-parse", "HEAD")
    base_commit = _git("rev-parse", a.baseline)
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", "mlaprof"))
    base_dir = Path(tempfile.mkdtemp(prefix="mlaprof-baseline-"))
    _git("worktree", "add", "--detach", str(base_dir / "tree"), base_commit)
    try:
        trees = (Tree("head", ROOT, head_commit), Tree("baseline", base_dir / "tree", base_commit))
        res: dict[str, Any] = {}
        for fig in only:
            print(f"{fig}:", flush=True)
            if fig == "import":
                raw = fig_import(trees, work, 1_000_000, a.pairs)
            elif fig.startswith("fleet_"):
                raw = fig_fleet(trees, work, fig[6:], a.fleet_dispatches, a.ranks, a.pairs)
            elif fig.startswith("export_"):
                raw = fig_export(trees, work, fig[7:], a.pairs)
            else:
                raw = fig_startup(trees, work, a.pairs)
                print(" libraries", flush=True)
                libraries = fig_libraries(trees[0].env, a.pairs)
            if fig == "startup":
                res[fig] = {k: {**v, "summary": summarise(v["pairs"])} for k, v in raw.items()}
            else:
                res[fig] = {**raw, "summary": summarise(raw["pairs"])}
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base_dir / "tree")], cwd=ROOT,
                       check=False, capture_output=True)  # fmt: skip
        shutil.rmtree(base_dir, ignore_errors=True)
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    doc = json.loads(out_path.read_text()) if out_path.exists() else {}
    if doc and (doc.get("head"), doc.get("baseline")) != (head_commit, base_commit):
        doc = {}  # another pair of commits: start over
    doc.update({
        "what": "HEAD vs baseline, whole processes alternating; ratios HEAD / baseline of the "
                "medians (CPU primary: the child's user + system; wall beside it)",
        "head": head_commit,
        "head_dirty": dirty,
        "baseline": base_commit,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "fleet": {"dispatches": a.fleet_dispatches, "ranks": a.ranks},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_at_end": os.getloadavg()},
        "threads": THREAD_ENV,
        "bytecode": "cached: written once per tree (compileall, one untimed import of the "
        "libraries) and read by every timed process",
    })  # fmt: skip
    doc.pop("pairs", None)  # per figure (runs with --only may take different counts)
    for fig in res.values():
        for part in [fig] if "pairs" in fig else fig.values():
            part["n_pairs"] = len(part["pairs"])
    doc.setdefault("figures", {}).update(res)
    ratios = doc.setdefault("ratios", {})
    for fig, key in (("import", "import_1m"), ("fleet_csv", "fleet_csv"),
                     ("fleet_rocpd", "fleet_rocpd"), ("export_perfetto", "export_perfetto_1m"),
                     ("export_rocpd", "export_rocpd_1m"), ("export_csv", "export_csv_1m")):  # fmt: skip
        if fig in res:
            sm = res[fig]["summary"]
            ratios[f"{key}_ratio"] = sm["ratio_cpu"]["of_medians"]
            ratios[f"{key}_ratio_wall"] = sm["ratio_wall"]["of_medians"]
            ratios[f"{key}_ratio_peak_rss"] = sm["ratio_peak_rss"]["of_medians"]
    if "import" in res:
        for side in ("head", "baseline"):
            sm = res["import"]["summary"][side]
            # against every read_csv of the run (see summarise); the side's own rotation beside
            ratios[f"import_1m_per_read_csv_{side}"] = sm["import_per_read_csv_cpu_pooled"]
            ratios[f"import_1m_per_read_csv_{side}_wall"] = sm["import_per_read_csv_wall_pooled"]
            ratios[f"import_1m_per_read_csv_{side}_own_rotation"] = sm["import_per_read_csv_cpu"]
        if "read_arrow_per_read_csv" in res["import"]["summary"]:
            arrow = res["import"]["summary"]["read_arrow_per_read_csv"]
            ratios["read_arrow_per_read_csv"] = arrow["cpu_s"]
            ratios["read_arrow_per_read_csv_wall"] = arrow["wall_s"]
    if "startup" in res:
        for k, v in res["startup"].items():
            ratios[f"{k}_ratio"] = v["summary"]["ratio_cpu"]["of_medians"]
            ratios[f"{k}_cpu_s_head"] = v["summary"]["head"]["cpu_s"]["median"]
        doc["libraries"] = libraries
        for name, v in libraries.items():
            ratios[f"{name}_import_cpu_s"] = v["cpu_s"]["median"]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(ratios, indent=2))
    print(f"wrote {out_path.relative_to(ROOT) if out_path.is_relative_to(ROOT) else out_path}")


if __name__ == "__main__":
    main()
