"""Fleet-scale trace benchmark: an 8-rank, 10M-dispatch rocprofv3 output, as CSV and
as rocpd databases, imported, analysed and reported; SQL over its kernels; the dashboard opening
it; and a single 1M-dispatch import beside ``pandas.read_csv`` alone on the same file.

``parsers``: whole processes timed from outside (interpreter start and imports included):
``mlaprof import`` (+ ``mlaprof report`` for the fleet) beside the parsers a user could use
instead on the same files, pandas ``read_csv``, pyarrow's CSV reader to Parquet and DuckDB's CSV
reader to Parquet, in rotated order, ``--reps`` times; the summary's ``ratios`` compare medians.

The data is generated here, in a scratch folder (never committed): one rank's trace of FULL-graph
replays of a 61-layer DeepSeek-V3-like decode (16 kernels per layer: norms, GEMMs, RoPE, KV-cache
write, vLLM Triton MLA stage 1 + 2, all-reduces, MoE), every kernel of a replay correlated to its
graph launch; the other ranks are copies of it on other GPUs (``Agent N``), under rocprofv3's
names (``<host>/<pid>_kernel_trace.csv``, ``<host>/<pid>_results.db``, pids in the reverse order
of the GPUs, so rank numbering by GPU is exercised).

Every measured phase runs in its own child process (peak RSS = the child's ``VmHWM``), the
target and its reference alternating, ``--reps`` times; medians and min/max are reported, with
the CPU time of the child (which the machine's load does not inflate) beside the wall time and
the load average at each measurement.

    python bench/fleet_bench.py [--dispatches 10000000] [--ranks 8] [--reps 3]
        [--work /tmp/mlaprof-fleet] [--out bench/results/fleet_bench.json]
"""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import io
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlaprof.exporters.csv_export import KERNEL_HEADER  # noqa: E402

LAYERS = 61
# one decoder layer of a DeepSeek-V3-like model at TP8 under FULL graph replay (name, grid, block)
LAYER_KERNELS = [
    ("void vllm::rms_norm_kernel<c10::BFloat16, 16, 4>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)", (512, 1, 1), (512, 1, 1)),
    ("Cijk_Alik_Bljk_BBS_BH_MT64x64x64_MI16x16x16x1_SN_1LDSB0_GRVW8_WG16_16_1_qkv_a", (2048, 2, 1), (256, 1, 1)),
    ("void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)", (256, 1, 1), (256, 1, 1)),
    ("void vllm::rms_norm_kernel<c10::BFloat16, 4, 4>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)", (128, 1, 1), (128, 1, 1)),
    ("Cijk_Alik_Bljk_BBS_BH_MT128x64x64_MI32x32x8x1_SN_1LDSB0_GRVW8_WG32_8_1_q_b", (4096, 2, 1), (256, 1, 1)),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)", (16, 1, 1), (256, 1, 1)),
    ("void vllm::concat_and_cache_mla_kernel<c10::BFloat16, c10::BFloat16, (vllm::Fp8KVCacheDataType)0>(c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16*, long const*, int, int, int, int, int, int, float const*)", (16, 1, 1), (512, 1, 1)),
    ("_fwd_grouped_kernel_stage1", (4 * 64, 1, 16), (64, 1, 1)),
    ("_fwd_kernel_stage2", (4 * 64, 16, 1), (64, 1, 1)),
    ("Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN_1LDSB0_GRVW8_WG32_8_1_o_proj", (8192, 4, 1), (256, 1, 1)),
    ("void ncclDevKernel_Generic_4<ncclFuncAllReduce, ncclDevRedSum, __hip_bfloat16>(ncclDevKernelArgsStorage<4096ul>)", (64, 1, 1), (256, 1, 1)),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)", (512, 1, 1), (512, 1, 1)),
    ("Cijk_Alik_Bljk_BBS_BH_MT16x16x64_MI16x16x16x1_SN_1LDSB0_GRVW8_WG16_16_1_gate", (256, 1, 1), (256, 1, 1)),
    ("void vllm::moe::grouped_topk_kernel<__hip_bfloat16>(__hip_bfloat16*, float const*, int*, float*, long, long, int, int, int, float, bool)", (4, 1, 1), (256, 1, 1)),
    ("fused_moe_kernel", (15360, 1, 1), (256, 1, 1)),
    ("void ncclDevKernel_Generic_4<ncclFuncAllReduce, ncclDevRedSum, __hip_bfloat16>(ncclDevKernelArgsStorage<4096ul>)", (64, 1, 1), (256, 1, 1)),
]  # fmt: skip
PER_REPLAY = LAYERS * len(LAYER_KERNELS)
T0 = 1_750_000_000_000_000_000
HOST = "node0"
SUFFIX = "_00000000_0000_7000_8000_000000000001"  # rocpd tables' uuid suffix


def _kernel_rows(n: int) -> Any:
    """(dispatch, name index, correlation, stream, start, end) per kernel, in trace order."""
    t = T0
    for i in range(n):
        r, j = divmod(i, PER_REPLAY)
        k = j % len(LAYER_KERNELS)
        dur = 1500 + (i * 7919) % 6000
        yield i + 1, k, r + 1, k % 4 + 10, t, t + dur
        t += dur + 150
        if j == PER_REPLAY - 1:
            t += 200_000  # host time between steps


def write_csv(path: Path, n: int, agent: int) -> None:
    """One rank's ``kernel_trace.csv`` (rocprofv3 7.x layout, strings quoted, numbers bare)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pre = [
        (f'"{n_}",', f",{b[0]},{b[1]},{b[2]},{g[0]},{g[1]},{g[2]}\n") for n_, g, b in LAYER_KERNELS
    ]
    with open(path, "w") as f:
        f.write(",".join(f'"{h}"' for h in KERNEL_HEADER) + "\n")
        buf = []
        for d, k, corr, stream, start, end in _kernel_rows(n):
            name, tail = pre[k]
            buf.append(
                f'"KERNEL_DISPATCH","Agent {agent}",1,{stream},4242,{d},{k},{name}{corr},'
                f"{start},{end},0,0,64,0,96{tail}"
            )
            if len(buf) == 100_000:
                f.writelines(buf)
                buf.clear()
        f.writelines(buf)


def write_rocpd(path: Path, n: int, agent: int, external: bool = False) -> None:
    """One rank's ``results.db`` (rocpd schema 3.0.x, as rocprofv3 writes it: no extdata).
    ``external``: the external correlation id set to the launch's too (what an application that
    pushes its own correlation ids may get), for readers that take the launch from
    ``correlation_id`` (mlaprof before it read ``stack_id``): both then see the same replays."""
    from mlaprof.formats import rocpd_schema as rs

    path.parent.mkdir(parents=True, exist_ok=True)
    suffix, guid = SUFFIX, "00000000-0000-7000-8000-000000000001"
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("BEGIN")
    for ddl in rs.table_ddl(suffix, guid):
        con.execute(ddl)
    t = {name: f'"rocpd_{name}{suffix}"' for name in rs.TABLES}
    md = f'"rocpd_metadata{suffix}"'
    for tag, value in (("schema_version", rs.SCHEMA_VERSION), ("uuid", suffix), ("guid", guid)):
        con.execute(f"INSERT INTO {md} (tag, value) VALUES (?, ?)", (tag, value))
    con.execute(
        f"INSERT INTO {t['info_node']} (id, hash, machine_id, hostname) VALUES (1, 1, 'm', ?)",
        (HOST,),
    )
    con.execute(f"INSERT INTO {t['info_process']} (id, nid, pid) VALUES (1, 1, 4242)")
    con.execute(f"INSERT INTO {t['info_thread']} (id, nid, pid, tid) VALUES (1, 1, 1, 4242)")
    con.execute(
        f"INSERT INTO {t['info_agent']} (id, nid, pid, type, absolute_index, logical_index, "
        "type_index, name) VALUES (1, 1, 1, 'GPU', ?, ?, ?, 'gfx942')",
        (agent, agent, agent - 2),
    )
    con.execute(f"INSERT INTO {t['info_queue']} (id, nid, pid) VALUES (1, 1, 1)")
    con.execute(f"INSERT INTO {t['info_code_object']} (id, nid, pid, agent_id) VALUES (1, 1, 1, 1)")
    for s in range(10, 14):
        con.execute(f"INSERT INTO {t['info_stream']} (id, nid, pid) VALUES (?, 1, 1)", (s,))
    for k, (name, _g, _b) in enumerate(LAYER_KERNELS):
        con.execute(
            f"INSERT INTO {t['info_kernel_symbol']} (id, nid, pid, code_object_id, kernel_name, "
            "display_name) VALUES (?, 1, 1, 1, ?, ?)",
            (k + 1, name, name),
        )
    con.execute(f"INSERT INTO {t['string']} (id, string) VALUES (1, 'KERNEL_DISPATCH')")
    # the launch correlation as rocprofv3 writes it (rocprofiler-sdk source/lib/output/
    # generateRocpd.cpp): stack_id = the internal correlation id, correlation_id = the external
    # id, 0 unless kernel rename or stream correlation is on
    con.executemany(
        f"INSERT INTO {t['event']} (id, category_id, stack_id, correlation_id) VALUES (?, 1, ?, ?)",
        ((d, corr, corr if external else 0) for d, _k, corr, _s, _t0, _t1 in _kernel_rows(n)),
    )
    gb = [(g, b) for _n, g, b in LAYER_KERNELS]
    con.executemany(
        f"INSERT INTO {t['kernel_dispatch']} (id, nid, pid, tid, agent_id, kernel_id, "
        "dispatch_id, queue_id, stream_id, start, end, workgroup_size_x, workgroup_size_y, "
        "workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, event_id) "
        "VALUES (?, 1, 1, 1, 1, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (d, k + 1, d, s, t0, t1, *gb[k][1], *gb[k][0], d)
            for d, k, _c, s, t0, t1 in _kernel_rows(n)
        ),
    )
    con.execute("COMMIT")
    con.close()


def make_fleet(
    work: Path, total: int, ranks: int, formats: tuple[str, ...] = ("csv", "rocpd")
) -> dict[str, Path]:
    """``work/csv`` and ``work/rocpd``: ``ranks`` processes of ``total / ranks`` dispatches each
    (only the ``formats`` asked for are written; ``rocpd_ext``: rocpd with the external
    correlation id set, see :func:`write_rocpd`)."""
    per = total // ranks
    out = {fmt: work / fmt for fmt in formats}
    for fmt, base in out.items():
        marker = base / f".complete-{total}-{ranks}-v2"  # v2: the launch correlation in stack_id
        if marker.exists():
            continue
        shutil.rmtree(base, ignore_errors=True)
        first = work / f"rank-template.{fmt}"
        first.unlink(missing_ok=True)
        if fmt == "csv":
            write_csv(first, per, 2)
        else:
            write_rocpd(first, per, 2, external=fmt == "rocpd_ext")
        for r in range(ranks):
            pid = 9000 - r  # pids in the reverse order of the GPUs
            name = "kernel_trace.csv" if fmt == "csv" else "results.db"
            dst = base / HOST / f"{pid}_{name}"
            dst.parent.mkdir(parents=True, exist_ok=True)
            if fmt == "csv":
                data = first.read_bytes()
                head, body = data.split(b"\n", 1)
                dst.write_bytes(
                    head + b"\n" + body.replace(b'"Agent 2"', f'"Agent {r + 2}"'.encode())
                )
            else:
                shutil.copyfile(first, dst)
                con = sqlite3.connect(dst)
                con.execute(f"UPDATE rocpd_info_agent{SUFFIX} SET absolute_index = ?, logical_index = ?, "
                            "type_index = ?", (r + 2, r + 2, r))  # fmt: skip
                con.commit()
                con.close()
        first.unlink()
        marker.touch()
    return out


# -- the measured phases (each in a child process) ------------------------------------------------
def _vm_hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _preload() -> None:
    """Modules every phase needs, loaded before the clock starts."""
    import duckdb  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow.csv  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import mlaprof.analysis  # noqa: F401
    import mlaprof.importers.rocprof  # noqa: F401
    import mlaprof.reporters.terminal  # noqa: F401
    import mlaprof.store.runmeta as rm

    rm.versions()  # run.json records versions (imports torch once per process)


def _report(run_dir: Path) -> dict[str, float]:
    """Analyse and render the terminal report (what ``mlaprof report`` prints) to a buffer."""
    from rich.console import Console

    from mlaprof.reporters.terminal import print_report
    from mlaprof.store import load

    t = time.perf_counter()
    buf = io.StringIO()
    with load(run_dir) as run:
        print_report(run, Console(file=buf, width=120))
    return {"report_s": time.perf_counter() - t, "report_chars": len(buf.getvalue())}


def phase_fleet(src: Path, traces: Path) -> dict[str, Any]:
    """Import the whole fleet output, then analyse + report it (the issue's 15 s target)."""
    from mlaprof.importers.rocprof import import_rocprof
    from mlaprof.store import load

    c0, t0 = time.process_time(), time.perf_counter()
    run, summary = import_rocprof(src, traces, "fleet")
    c1, t1 = time.process_time(), time.perf_counter()
    rep = _report(run)
    rep["report_cpu_s"] = time.process_time() - c1
    with load(run) as r:
        ranks, kernels = len(r.ranks), r.count("kernels")
    return {
        "import_s": t1 - t0,
        "import_cpu_s": c1 - c0,
        **rep,
        "ranks": ranks,
        "kernels": kernels,
        "steps": summary.replays,
        "layers": summary.layers,
    }


def phase_read_csv_fleet(src: Path, _traces: Path) -> dict[str, Any]:
    """Reference for the CSV fleet import: ``pandas.read_csv`` alone over the same files."""
    import pandas as pd

    rows = 0
    for f in sorted(src.rglob("*_kernel_trace.csv")):
        rows += len(pd.read_csv(f))
    return {"rows": rows}


def phase_rocpd_row_by_row(src: Path, traces: Path) -> dict[str, Any]:
    """Reference for the rocpd fleet import: the row-by-row reader (what every rocpd import used
    before, and still the path without the ADBC driver), on ONE rank's database."""
    from mlaprof.importers import rocpd_sqlite
    from mlaprof.importers.rocprof import import_rocprof

    rocpd_sqlite.read_dispatches = lambda _p: None  # this child process only
    one = sorted(src.rglob("*_results.db"))[0]
    run, summary = import_rocprof(one, traces, "one-rank")
    return {"kernels": summary.rows.get("kernels", 0)}


QUERIES = {  # run.query: once over all ranks as one relation (DuckDB on the Parquet files)
    "kernel time by name": (
        "SELECT name, COUNT(*) AS n, SUM(end_ns - start_ns) AS busy_ns FROM kernels "
        "GROUP BY name ORDER BY busy_ns DESC"
    ),
    "one step's kernels, every rank": "SELECT * FROM kernels WHERE step = 700 ORDER BY rank, start_ns",
    "10 longest MLA kernels": (
        "SELECT rank, step, layer, splits, end_ns - start_ns AS d FROM kernels "
        "WHERE splits IS NOT NULL ORDER BY d DESC LIMIT 10"
    ),
    "per-layer MLA time joined with layers": (
        "SELECT l.layer, AVG(k.end_ns - k.start_ns) AS mean_ns, MAX(l.splits_used) AS s "
        "FROM kernels k JOIN layers l ON l.rank = k.rank AND l.step = k.step "
        "AND l.layer = k.layer WHERE k.splits IS NOT NULL GROUP BY l.layer ORDER BY l.layer"
    ),
    "slowest rank per step (straggler)": (
        "SELECT step, arg_max(rank, busy) AS slowest, MAX(busy) - MIN(busy) AS spread_ns FROM "
        "(SELECT rank, step, SUM(end_ns - start_ns) AS busy FROM kernels WHERE step IS NOT NULL "
        "GROUP BY rank, step) GROUP BY step ORDER BY spread_ns DESC LIMIT 20"
    ),
}
PER_RANK = {  # run.query grouped by rank: each rank's own rows apart
    "run.query: kernel time by name, per rank": (
        "SELECT rank, name, COUNT(*) AS n, SUM(end_ns - start_ns) AS busy_ns FROM kernels "
        "GROUP BY rank, name ORDER BY rank, busy_ns DESC"
    ),
}


def phase_query(run_dir: Path) -> dict[str, Any]:
    """Each query once, on a freshly opened run."""
    from mlaprof.store import load

    out: dict[str, Any] = {}
    with load(run_dir) as run:
        for label, sql in {**QUERIES, **PER_RANK}.items():
            c0, t0 = time.process_time(), time.perf_counter()
            df = run.query(sql)
            out[label] = {
                "wall_s": time.perf_counter() - t0,
                "cpu_s": time.process_time() - c0,
                "rows": len(df),
            }
    return out


def phase_query_sqlite_copy(run_dir: Path) -> dict[str, Any]:
    """Reference: what ``run.query`` did before, for ONE rank: copy its kernels into an SQLite
    TEMP table (the multi-row inserts of mlaprof.store.bulk), then run the first query."""
    import numpy as np
    import pyarrow as pa

    from mlaprof.store import columnar, load
    from mlaprof.store.bulk import insert_columns
    from mlaprof.store.schema import columns

    with load(run_dir) as run:
        side = run.side_tables(0)["kernels"]
        con = sqlite3.connect(run_dir / "rank0.db")
        c0, t0 = time.process_time(), time.perf_counter()
        con.execute(f"CREATE TEMP TABLE kernels AS SELECT {', '.join(columns('kernels'))} "
                    "FROM main.kernels")  # fmt: skip
        for batch in columnar.read(side).to_batches():
            arrays: dict[str, Any] = {}
            for name, col in zip(batch.schema.names, batch.columns, strict=True):
                if name == "rank":
                    continue
                mask = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
                if pa.types.is_dictionary(col.type):
                    lut = np.array(col.dictionary.to_pylist() + [None], dtype=object)
                    idx = col.indices.fill_null(len(lut) - 1).to_numpy(zero_copy_only=False)
                    arrays[name] = (lut[idx], mask)
                else:
                    arrays[name] = (col.fill_null(0).to_numpy(zero_copy_only=False), mask)
            insert_columns(con, "kernels", 0, arrays, batch.num_rows, schema="temp")
        copy = time.perf_counter() - t0
        con.execute(QUERIES["kernel time by name"]).fetchall()
        total = time.perf_counter() - t0
        cpu = time.process_time() - c0
        con.close()
        return {"rows": side.rows, "copy_s": copy, "copy_and_query_s": total, "cpu_s": cpu}


def phase_tui(run_dir: Path, refreshes: int = 30) -> dict[str, Any]:
    """The dashboard's data path on the fleet run: open (catch up over every rank) and refresh."""
    from mlaprof.tui.follower import RunFollower

    c0, t0 = time.process_time(), time.perf_counter()
    f = RunFollower(run_dir)
    f.poll()
    while f.behind:
        f.poll()
    v = f.view()
    open_s, open_cpu = time.perf_counter() - t0, time.process_time() - c0
    ref, ref_cpu = [], []
    for _ in range(refreshes):
        c1, t1 = time.process_time(), time.perf_counter()
        f.poll()
        f.view()
        ref.append(time.perf_counter() - t1)
        ref_cpu.append(time.process_time() - c1)
    return {
        "open_s": open_s,
        "open_cpu_s": open_cpu,
        "steps_seen": v.steps,
        "refresh_median_ms": statistics.median(ref) * 1e3,
        "refresh_max_ms": max(ref) * 1e3,
        "refresh_cpu_median_ms": statistics.median(ref_cpu) * 1e3,
    }


def phase_tui_app(run_dir: Path, refreshes: int = 30) -> dict[str, Any]:
    """The dashboard itself, headless (160x48): from app start until the dashboard shows the
    whole run (caught up), then refreshes (poll + view + every widget, as tui_bench.py times)."""
    import asyncio

    from mlaprof.tui.app import MlaprofApp
    from mlaprof.tui.screens.dashboard import DashboardScreen

    async def go() -> dict[str, Any]:
        c0, t0 = time.process_time(), time.perf_counter()
        app = MlaprofApp(run_dir, interval=3600)  # refreshes driven here
        async with app.run_test(size=(160, 48)) as pilot:
            d = None
            for _ in range(4000):
                d = app.screen
                if (
                    isinstance(d, DashboardScreen)
                    and d.follower.view().steps
                    and not d.follower.behind
                ):
                    break
                await pilot.pause(0.01)
            if not isinstance(d, DashboardScreen):
                raise SystemExit("the dashboard did not open")
            await pilot.pause()
            open_s, open_cpu = time.perf_counter() - t0, time.process_time() - c0
            ref, ref_cpu = [], []
            for _ in range(refreshes):
                c1, t1 = time.process_time(), time.perf_counter()
                d.follower.poll()
                d.refresh_views()
                ref.append(time.perf_counter() - t1)
                ref_cpu.append(time.process_time() - c1)
                await pilot.pause()
            d.stop.set()
        return {
            "open_s": open_s,
            "open_cpu_s": open_cpu,
            "refresh_median_ms": statistics.median(ref) * 1e3,
            "refresh_max_ms": max(ref) * 1e3,
            "refresh_cpu_median_ms": statistics.median(ref_cpu) * 1e3,
        }

    return asyncio.run(go())


def phase_import_1m(src: Path, traces: Path) -> dict[str, Any]:
    from mlaprof.importers.rocprof import import_rocprof

    import_rocprof(src, traces, "one")
    return {}


def phase_read_csv(src: Path, _traces: Path) -> dict[str, Any]:
    import pandas as pd

    pd.read_csv(src)
    return {}


# -- whole processes, timed from outside (interpreter start and imports included) -------------
# the parsers a user could reach for instead, each writing what an import keeps (Parquet) or
# only parsing (pandas); FILES is the list of kernel-trace CSVs
BASELINES = {
    "pandas-read_csv": "import pandas as pd\nfor f in FILES: pd.read_csv(f)",
    "arrow-csv-to-parquet": (
        "import pyarrow.csv as c, pyarrow.parquet as pq\n"
        "for i, f in enumerate(FILES): pq.write_table(c.read_csv(f), f'{OUT}/{i}.parquet')"
    ),
    "duckdb-csv-to-parquet": (
        "import duckdb\n"
        "for i, f in enumerate(FILES): duckdb.sql("
        "f\"COPY (SELECT * FROM read_csv('{f}')) TO '{OUT}/{i}.parquet' (FORMAT parquet)\")"
    ),
}


def whole_process(argv: list[str]) -> dict[str, Any]:
    """One child process timed from outside: wall, CPU (user + system of the child) and the
    load average when it ended."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed:\n{err[-3000:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mib": usage.ru_maxrss / 1024,
        "loadavg": os.getloadavg()[0],
    }


def baseline(kind: str, files: list[Path], out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    code = f"FILES = {[str(f) for f in files]!r}\nOUT = {str(out)!r}\n" + BASELINES[kind]
    return whole_process([sys.executable, "-c", code])


def mlaprof_cli(src: Path, traces: Path, report: bool) -> dict[str, Any]:
    """``mlaprof import rocprof SRC`` (and ``mlaprof report`` of it), each its own process."""
    shutil.rmtree(traces, ignore_errors=True)
    cli = [sys.executable, "-m", "mlaprof"]
    imp = whole_process([*cli, "import", "rocprof", str(src), "--traces", str(traces),
                         "--name", "x"])  # fmt: skip
    out = {"import_wall_s": imp["wall_s"], "import_cpu_s": imp["cpu_s"]}
    if report:
        rep = whole_process([*cli, "report", "x", "--traces", str(traces)])
        out.update(report_wall_s=rep["wall_s"], report_cpu_s=rep["cpu_s"])
    out["wall_s"] = out["import_wall_s"] + out.get("report_wall_s", 0.0)
    out["loadavg"] = os.getloadavg()[0]
    return out


PHASES: dict[str, Callable[..., dict[str, Any]]] = {
    "fleet": phase_fleet,
    "read_csv-fleet": phase_read_csv_fleet,
    "rocpd-row-by-row-1rank": phase_rocpd_row_by_row,
    "query": phase_query,
    "query-sqlite-copy": phase_query_sqlite_copy,
    "tui": phase_tui,
    "tui-app": phase_tui_app,
    "import-1m": phase_import_1m,
    "read_csv-1m": phase_read_csv,
}


def child(phase: str, args: list[str]) -> None:
    _preload()
    c0 = time.process_time()
    t0 = time.perf_counter()
    res = PHASES[phase](*(Path(a) for a in args))
    res.update(
        wall_s=time.perf_counter() - t0,
        cpu_s=time.process_time() - c0,
        peak_rss_mib=_vm_hwm_mib(),
        loadavg=os.getloadavg()[0],
    )
    print(json.dumps(res))


def run_child(phase: str, *args: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", phase, *map(str, args)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"{phase} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(xs: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(xs), 3),
        "min": round(min(xs), 3),
        "max": round(max(xs), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dispatches", type=int, default=10_000_000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mlaprof-fleet"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/fleet_bench.json")
    ap.add_argument("--only", choices=["parsers", "fleet", "query", "tui", "1m"], action="append")
    ap.add_argument("--child", nargs="+")
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1:])
        return
    only = set(a.only or ["parsers", "fleet", "query", "tui", "1m"])
    a.work.mkdir(parents=True, exist_ok=True)
    # timed as an installed package runs: its modules compiled once (pip install does that, and
    # the baselines' packages came so), never recompiled by every child process
    for pkg in ("mlaprof",):
        compileall.compile_dir(str(ROOT / pkg), quiet=1)
    t = time.perf_counter()
    src = make_fleet(a.work, a.dispatches, a.ranks)
    print(f"fleet data ready in {time.perf_counter() - t:.0f} s under {a.work}", flush=True)
    res: dict[str, Any] = {
        "benchmark": "fleet-scale rocprofv3 traces",
        "dispatches": a.dispatches,
        "ranks": a.ranks,
        "kernels_per_replay": PER_REPLAY,
        "reps": a.reps,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_at_start": os.getloadavg(),
        },
        "versions": _versions(),
        "bytecode": "mlaprof and tui compiled before timing, as a pip install compiles them",
    }
    runs: dict[str, list[dict[str, Any]]] = {}

    def rec(key: str, r: dict[str, Any]) -> None:
        runs.setdefault(key, []).append(r)
        short = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                 if not isinstance(v, dict)}  # fmt: skip
        print(f"{key}: {json.dumps(short)}", flush=True)

    traces = a.work / "traces"
    if "parsers" in only:
        csvs = sorted(src["csv"].rglob("*_kernel_trace.csv"))
        one = _one_million(a.work)
        for rep in range(a.reps):
            # the same order is never first twice: mlaprof, then each baseline, rotated
            kinds = ["mlaprof", *BASELINES]
            kinds = kinds[rep % len(kinds) :] + kinds[: rep % len(kinds)]
            for kind in kinds:
                for label, files, source in (("fleet", csvs, src["csv"]), ("1m", [one], one)):
                    if kind == "mlaprof":
                        r = mlaprof_cli(source, a.work / "cli", report=label == "fleet")
                    else:
                        shutil.rmtree(a.work / "base", ignore_errors=True)
                        r = baseline(kind, files, a.work / "base")
                    rec(f"{kind}-{label}", r)
        rec("mlaprof-rocpd-fleet", mlaprof_cli(src["rocpd"], a.work / "cli", report=True))
        for _ in range(a.reps - 1):
            rec("mlaprof-rocpd-fleet", mlaprof_cli(src["rocpd"], a.work / "cli", report=True))
    if "fleet" in only or "query" in only or "tui" in only:
        for rep in range(a.reps if "fleet" in only else 1):
            for fmt in ("csv", "rocpd") if rep % 2 == 0 else ("rocpd", "csv"):
                shutil.rmtree(traces / fmt, ignore_errors=True)
                imported = run_child("fleet", src[fmt], traces / fmt)
                if "fleet" in only:  # else the import only sets up the query and TUI runs
                    rec(f"fleet-{fmt}", imported)
                if "fleet" in only:  # the references, right after
                    ref = "read_csv-fleet" if fmt == "csv" else "rocpd-row-by-row-1rank"
                    shutil.rmtree(traces / "ref", ignore_errors=True)
                    rec(ref, run_child(ref, src[fmt], traces / "ref"))
    run_dir = traces / "csv" / "fleet"
    if "query" in only:
        for rep in range(a.reps):
            order = ("query", "query-sqlite-copy") if rep % 2 == 0 else ("query-sqlite-copy", "query")  # fmt: skip
            for phase in order:
                rec(phase, run_child(phase, run_dir))
    if "tui" in only:
        for _ in range(a.reps):
            rec("tui", run_child("tui", run_dir))
            rec("tui-app", run_child("tui-app", run_dir))
    if "1m" in only:
        one = _one_million(a.work)
        for rep in range(max(a.reps, 5)):
            order = ("import-1m", "read_csv-1m") if rep % 2 == 0 else ("read_csv-1m", "import-1m")
            for phase in order:
                shutil.rmtree(a.work / "t1m", ignore_errors=True)
                rec(phase, run_child(phase, one, a.work / "t1m"))
    res["runs"] = runs
    res["summary"] = _summarise(runs)
    res["machine"]["loadavg_at_end"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    prev = json.loads(a.out.read_text()) if a.out.exists() and a.only else {}
    if prev:  # --only: keep the other sections of an earlier full run
        prev["runs"].update(runs)
        prev["summary"] = _summarise(prev["runs"])
        prev.setdefault("partial_updates", []).append({"date": res["date"], "only": sorted(only),
                                                       "machine": res["machine"]})  # fmt: skip
        res = prev
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res["summary"], indent=2))


def _one_million(work: Path) -> Path:
    one = work / "one" / "kernel_trace.csv"
    if not one.exists():
        import import_bench

        one.parent.mkdir(parents=True, exist_ok=True)
        import_bench.generate(one, 1_000_000)  # the 1M file of bench/import_bench.py
    return one


def _summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    s: dict[str, Any] = {}
    for key, rs in runs.items():
        keys = [k for k, v in rs[0].items() if isinstance(v, float)]
        s[key] = {k: spread([r[k] for r in rs]) for k in keys}
        if key == "query":
            for k in ("wall_s", "cpu_s"):
                s[key][f"per_query_{k}"] = {
                    q: spread([r[q][k] for r in rs]) for q in {**QUERIES, **PER_RANK} if q in rs[0]
                }
    # whole processes side by side: mlaprof's import against each parser alone, same files
    for label in ("1m", "fleet"):
        mine = runs.get(f"mlaprof-{label}")
        if not mine:
            continue
        key = "import_wall_s"
        for kind in BASELINES:
            base = runs.get(f"{kind}-{label}")
            if base:
                ratio = statistics.median(r[key] for r in mine) / statistics.median(
                    r["wall_s"] for r in base
                )
                s.setdefault("ratios", {})[f"mlaprof import / {kind} ({label})"] = round(ratio, 3)
    return s


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    from import_bench import _versions as base  # pandas, pyarrow, numpy, SQLite

    out = base()
    for pkg in ("duckdb", "adbc-driver-sqlite", "textual"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


if __name__ == "__main__":
    main()
