"""Shared helpers of the trace I/O tests: fixture paths, independent CSV readers, synthetic
traces built from the documented field lists, and a small mlaprof run with every table."""

from __future__ import annotations

import csv
import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from mlaprof.exporters.csv_export import KERNEL_HEADER
from mlaprof.store import create_run
from mlaprof.store.schema import TABLES
from mlaprof.synthetic import pid_fleet as synthetic_fleet

DATA = Path(__file__).resolve().parent / "data"
ROCPROF = DATA / "rocprof"
KINETO_REAL = DATA / "kineto_graph_replay.json.gz"


def fixture(name: str) -> Path:
    return ROCPROF / name


def csv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows with the csv module (independent of the importer)."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    return rows[0], rows[1:]


def column(path: Path, name: str) -> list[str]:
    header, rows = csv_rows(path)
    i = [h.lower() for h in header].index(name.lower())
    return [r[i] for r in rows]


def db_rows(run_dir: Path, table: str, rank: int = 0) -> list[tuple[Any, ...]]:
    """Exact stored rows (no pandas NaN conversion), storage order, without ``rank``: the
    database's, then those of the columnar file its meta table names (read here with pyarrow
    directly, independent of mlaprof's reader)."""
    cols = [c for c, _ in TABLES[table]]
    con = sqlite3.connect(f"file:{run_dir / f'rank{rank}.db'}?mode=ro", uri=True)
    try:
        out = con.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY rowid").fetchall()
        side = con.execute(
            "SELECT value FROM meta WHERE key = ?", ("columnar:" + table,)
        ).fetchone()
    finally:
        con.close()
    if side:
        doc = json.loads(side[0])
        tab = pq.read_table(str(run_dir / doc["file"]))
        assert tab.num_rows == doc["rows"] and tab.column_names == ["rank", *cols]
        assert tab.column("rank").to_pylist() == [rank] * tab.num_rows
        out += list(zip(*(tab.column(c).to_pylist() for c in cols), strict=True))
    return out


def kernel_dicts(run_dir: Path) -> list[dict[str, Any]]:
    cols = [c for c, _ in TABLES["kernels"]]
    return [dict(zip(cols, r, strict=True)) for r in db_rows(run_dir, "kernels")]


# -- rocprofv3 kernel traces with graph replays ------------------------------------------------------
KERNEL_HEADER_7 = list(KERNEL_HEADER)  # rocprofv3 7.x kernel_trace.csv layout


def replay_kernel_csv(
    path: Path, replays: int, layers: int, splits: int, heads: int = 16, rows: int = 4
) -> list[dict[str, Any]]:
    """A rocprofv3 7.x kernel trace of graph replays of a vLLM Triton MLA decode: per layer a
    stage-1 kernel (grid in work-items: rows*64 x ceil(H/16) x S) and a stage-2 kernel, plus an
    RMSNorm kernel per replay; every kernel of a replay shares the graph launch's correlation id.
    Returns the expected kernels in trace order."""
    exp = []
    t = 1_700_000_000_123_456_789
    disp = 0
    lines = [",".join(f'"{h}"' for h in KERNEL_HEADER_7)]
    for r in range(replays):
        corr = 1000 + 7 * r
        seq = [("rmsnorm_kernel<bf16>", None, (rows * 256, 1, 1), (256, 1, 1))]
        for _ in range(layers):
            seq.append(
                (
                    "_fwd_grouped_kernel_stage1",
                    "main",
                    (rows * 64, -(-heads // 16), splits),
                    (64, 1, 1),
                )
            )
            seq.append(("_fwd_kernel_stage2", "reduce", (rows * 64, heads, 1), (64, 1, 1)))
        layer = -1
        for name, role, grid, block in seq:
            disp += 1
            start, end = t, t + 1234 + disp
            t = end + 17
            if role == "main":
                layer += 1
            exp.append(
                {
                    "name": name,
                    "start_ns": start,
                    "end_ns": end,
                    "correlation": corr,
                    "replay": r,
                    "layer": layer if role else None,
                    "splits": splits if role == "main" else None,
                    "grid": grid,
                }
            )
            lines.append(
                f'"KERNEL_DISPATCH","Agent 2",1,3,4242,{disp},{hash(name) % 100},"{name}",{corr},'
                f"{start},{end},0,0,32,0,48,{block[0]},{block[1]},{block[2]},{grid[0]},{grid[1]},"
                f"{grid[2]}"
            )
    path.write_text("\n".join(lines) + "\n")
    return exp


# -- Kineto ----------------------------------------------------------------------------------------
def kineto_trace(
    replays: int = 3, layers: int = 4, splits: int = 8, heads: int = 16, graph_ids: bool = True
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Kineto trace of CUDA-graph replays with the fields PyTorch CUDA graph behaviour measured on an H200 lists: every kernel node
    a ``cat: kernel`` event correlated to its ``cudaGraphLaunch``. Returns (trace, expected)."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python"}},
    ]
    exp = []
    t_us = 1_700_000_123_456  # whole microseconds; fractions added per event
    node = 0
    for r in range(replays):
        corr = 50_000 + 11 * r
        launch_ts = f"{t_us}.125"
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaGraphLaunch",
                "pid": 4242,
                "tid": 4242,
                "ts": launch_ts,
                "dur": "7.5",
                "args": {"cbid": 311, "correlation": corr},
            }
        )
        t_us += 10
        seq = [("void rmsnorm_kernel<c10::BFloat16>(...)", None, [4, 1, 1])]
        for _ in range(layers):
            seq.append(("_fwd_grouped_kernel_stage1", "main", [4, -(-heads // 16), splits]))
            seq.append(("_fwd_kernel_stage2", "reduce", [4, heads, 1]))
        layer = -1
        for name, role, grid in seq:
            node += 1
            if role == "main":
                layer += 1
            ts = f"{t_us}.{node % 1000:03d}"
            dur = f"{3 + node % 5}.{(7 * node) % 1000:03d}"
            args = {
                "queued": 0,
                "device": 0,
                "context": 1,
                "stream": 7,
                "correlation": corr,
                "registers per thread": 128,
                "shared memory": 65536,
                "blocks per SM": 0.25,
                "warps per SM": 1.0,
                "grid": grid,
                "block": [128, 1, 1],
                "est. achieved occupancy %": 6,
            }
            if graph_ids:
                args["graph id"] = 3
                args["graph node id"] = 100 + node % len(seq)
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": ts,
                    "dur": dur,
                    "args": args,
                }  # fmt: skip
            )
            whole, frac = ts.split(".")
            dwhole, dfrac = dur.split(".")
            start = int(whole) * 1000 + int(frac)
            exp.append(
                {
                    "name": name,
                    "start_ns": start,
                    "end_ns": start + int(dwhole) * 1000 + int(dfrac),
                    "replay": r,
                    "layer": layer if role else None,
                    "splits": splits if role == "main" else None,
                    "correlation": corr,
                    "graph_id": 3 if graph_ids else None,
                }
            )
            t_us += 20
        t_us += 500
    # an eager kernel outside any graph launch
    events.append(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 4242,
            "tid": 4242,
            "ts": f"{t_us}",
            "dur": 2,
            "args": {"correlation": 99},
        }  # fmt: skip
    )
    events.append(
        {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7,
         "ts": f"{t_us + 5}", "dur": 1, "args": {"correlation": 99, "grid": [1, 1, 1],
                                                  "block": [128, 1, 1], "stream": 7, "device": 0}}
    )  # fmt: skip
    exp.append(
        {"name": "vectorized_elementwise_kernel", "start_ns": (t_us + 5) * 1000,
         "end_ns": (t_us + 6) * 1000, "replay": None, "layer": None, "splits": None,
         "correlation": 99, "graph_id": None}
    )  # fmt: skip
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
             "traceEvents": events}  # fmt: skip
    return trace, exp


def write_kineto(path: Path, trace: dict[str, Any]) -> Path:
    """Write with the fractional microseconds as bare JSON numbers (as Kineto does)."""
    text = json.dumps(trace)
    # the builder stores ts/dur as strings to keep their digits; make them JSON numbers
    import re

    text = re.sub(r'"(ts|dur)": "([0-9.]+)"', r'"\1": \2', text)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


# -- a small native run with every table -------------------------------------------------------------
def make_run(traces: Path, name: str = "native") -> Path:
    w = create_run(traces, name, {"scenario": {"name": "unit"}, "backend": "triton"})
    t0 = 5_000_000_000_000_001
    with w.transaction():
        for step in range(2):
            st = t0 + step * 1_000_000
            w.add("steps", step=step, t_start_ns=st, duration_ns=400_000, num_reqs=4,
                  num_real_reqs=3, qlen=2, real_tokens=6, padded_tokens=8, graph_mode="FULL",
                  backend="triton", timing="graph-replay")  # fmt: skip
            w.add("padding", step=step, capture_size=8, real_rows=3, padding_rows=1,
                  real_tokens=6, padding_tokens=2, kv_bytes_real=1000, kv_bytes_padding=10)  # fmt: skip
            w.add("splits", step=step, capture_size=8, policy="gluon-v0.1.19", used=1,
                  deserved=17, frozen=1, target="MI355X", note="collapsed")  # fmt: skip
            w.add("api", domain="HIP_RUNTIME_API_EXT", function="hipGraphLaunch", pid=77, tid=78,
                  correlation=900 + step, start_ns=st - 5000, end_ns=st - 1000)  # fmt: skip
            for layer in range(3):
                lt = st + 10_000 + layer * 100_000
                w.add("layers", step=step, layer=layer, t_start_ns=lt, duration_ns=90_000,
                      syncs=0, splits_used=1, splits_deserved=17)  # fmt: skip
                # two kernels of one layer overlap on the same stream (concurrent graph nodes)
                w.add("kernels", step=step, layer=layer, replay=step,
                      name="mla_verify_stage1", start_ns=lt, end_ns=lt + 60_000, device=0,
                      stream=7, correlation=900 + step, grid_x=4, grid_y=1, grid_z=1,
                      block_x=128, block_y=1, block_z=1, splits=1, graph_id=5,
                      graph_node_id=layer * 2)  # fmt: skip
                w.add("kernels", step=step, layer=layer, replay=step,
                      name="mla_verify_stage2", start_ns=lt + 50_000, end_ns=lt + 85_000,
                      device=0, stream=7, correlation=900 + step, grid_x=4, grid_y=2,
                      grid_z=16, block_x=64, block_y=1, block_z=1, splits=None,
                      graph_id=5, graph_node_id=layer * 2 + 1)  # fmt: skip
        w.add("memory", capture_size=8, graph_mode="FULL", pool_bytes=2_265_972_736,
              allocator_bytes=2_000_000_000, driver_bytes=2_265_972_736, capture_ns=3_000_000)  # fmt: skip
        w.add("captures", capture_size=8, graph_mode="FULL", status="captured")
        w.add("syncs", step=0, layer=1, kind="sync", op="aten._local_scalar_dense",
              location="x.py:12", function="f", detail="item")  # fmt: skip
        w.add("events", t_ns=t0, source="mlaprof", kind="note", message="hello", data="{}")
        w.add("counters", source="mlaprof", name="c", key="k", value=1.5, t_ns=t0)
        w.add("transfers", kind="MEMORY_COPY", operation="MEMORY_COPY_HOST_TO_DEVICE",
              src_agent="Agent 0", dst_agent="Agent 2", size_bytes=4096, address=None,
              correlation=5, start_ns=t0 - 100, end_ns=t0 - 50)  # fmt: skip
    w.finish()
    return w.run_dir


AITER_BUG = Path(__file__).resolve().parent / "data" / "aiter" / "gluon_v0119_bug"


def pid_fleet(dst: Path, ranks: int) -> Path:
    """``ranks`` processes of the AITER bug trace (mlaprof.synthetic.pid_fleet)."""
    return synthetic_fleet.pid_fleet(AITER_BUG, dst, ranks)


def launched_kernels(ranks: int) -> int:
    return synthetic_fleet.launched_kernels(AITER_BUG, ranks)


def reimports_with_its_ranks(
    out: Path, run_dir: Path, before: list[tuple[Any, ...]], tmp: Path, tables: tuple[str, ...]
) -> Path:
    """Import an export ``out`` of the 8-rank fleet ``run_dir`` back and check it keeps every
    rank, its (rank, host, pid) as ``before`` and, rank by rank, the rows of ``tables``."""
    from mlaprof.importers.rocprof import import_rocprof
    from mlaprof.store import load

    back, _ = import_rocprof(out, tmp, "back")
    with load(back) as b:
        after = [(r["rank"], r["host"], r["pid"]) for r in b.meta["rank_sources"]]
        assert b.ranks == list(range(8))
    assert after == before
    for r in range(8):
        for table in tables:
            assert db_rows(back, table, r) == db_rows(run_dir, table, r), (table, r)
    return back


def import_and_report(
    folder: Path, tmp: Path, capsys: Any, kind: str = "rocprof"
) -> tuple[Path, dict]:
    """``mlaprof import <kind> folder`` into ``tmp/t``, then its ``report --json`` (the run's
    folder, the document)."""
    from mlaprof.cli import main

    traces = tmp / "t"
    if main(["import", kind, str(folder), "--traces", str(traces), "--name", "r"]) != 0:
        raise AssertionError(f"import {kind} {folder} failed: {capsys.readouterr()}")
    capsys.readouterr()
    if main(["report", str(traces / "r"), "--json"]) != 0:
        raise AssertionError(f"report failed: {capsys.readouterr()}")
    return traces / "r", json.loads(capsys.readouterr().out)
