"""rocprofv3 import: every real fixture with independently counted rows and names, both header
generations, rocpd-convert CSVs, the JSON output, rocpd databases, folders, MLA grouping."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.importers import rocprof_csv
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.portable import portable_path
from mlaprof.store import load
from tests.conformance.model import Builder, Trace
from tests.conformance.rocpd import write_rocpd
from tests.conformance.shapes import eager, graph_replays
from tests.trace_io_helpers import (
    DATA,
    ROCPROF,
    column,
    csv_rows,
    db_rows,
    fixture,
    kernel_dicts,
    replay_kernel_csv,
)

KERNEL_FIXTURES = [
    "rocprofiler-sdk-docs__kernel_trace.csv",
    "rocprof-unified-viewer__decode_kernel_trace.csv",
]
API_FIXTURES = [
    "rocprof-unified-viewer__decode_hip_api_trace.csv",
    "rocprofiler-sdk-docs__marker_api_trace.csv",
    "rocprofiler-sdk-docs__python_bindings.csv",
    "rocprofiler-sdk-docs__rocpd-to-csv.csv",
]


def test_every_fixture_is_covered() -> None:
    known = set(KERNEL_FIXTURES + API_FIXTURES) | {
        "rocprofiler-sdk-docs__hip_api_stats.csv",
        "rocprof-unified-viewer__decode_fetch_counter_collection.csv",
        "rocprofiler-sdk-docs__memory_copy_trace.csv",
        "rocprofiler-sdk-docs__memory_allocation_trace.csv",
    }
    assert {p.name for p in ROCPROF.glob("*.csv")} == known


@pytest.mark.parametrize("name", KERNEL_FIXTURES)
@pytest.mark.parametrize("arrow", [True, False])
def test_kernel_fixture(tmp_path: Path, name: str, arrow: bool) -> None:
    if arrow:
        pytest.importorskip("pyarrow")
    path = fixture(name)
    run, summary = import_rocprof(path, tmp_path, "k", use_arrow=arrow)
    ks = kernel_dicts(run)
    assert len(ks) == len(csv_rows(path)[1]) == summary.rows["kernels"]
    assert [k["name"] for k in ks] == column(path, "Kernel_Name")
    # timestamps exact: compare as Python ints parsed from the text
    assert [k["start_ns"] for k in ks] == [int(v) for v in column(path, "Start_Timestamp")]
    assert [k["end_ns"] for k in ks] == [int(v) for v in column(path, "End_Timestamp")]
    assert [k["correlation"] for k in ks] == [int(v) for v in column(path, "Correlation_Id")]
    assert [k["grid_y"] for k in ks] == [int(v) for v in column(path, "Grid_Size_Y")]
    assert [k["block_x"] for k in ks] == [int(v) for v in column(path, "Workgroup_Size_X")]
    assert [k["device"] for k in ks] == [int(v.split()[-1]) for v in column(path, "Agent_Id")]
    assert [k["stream"] for k in ks] == [int(v) for v in column(path, "Stream_Id")]
    assert all(isinstance(k["start_ns"], int) for k in ks)
    assert load(run).status == "finished"


def test_arrow_and_csv_module_paths_agree(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = fixture("rocprof-unified-viewer__decode_kernel_trace.csv")
    a, _ = import_rocprof(path, tmp_path, "a", use_arrow=True)
    b, _ = import_rocprof(path, tmp_path, "b", use_arrow=False)
    assert db_rows(a, "kernels") == db_rows(b, "kernels")


@pytest.mark.parametrize("name", API_FIXTURES)
def test_api_fixture(tmp_path: Path, name: str) -> None:
    path = fixture(name)
    run, _ = import_rocprof(path, tmp_path, "api")
    rows = db_rows(run, "api")
    header, raw = csv_rows(path)
    assert len(rows) == len(raw)
    assert [r[1] for r in rows] == column(path, "Function")
    assert [r[0] for r in rows] == column(path, "Domain")
    assert [r[5] for r in rows] == [int(v) for v in column(path, "Start_Timestamp")]
    assert [r[6] for r in rows] == [int(v) for v in column(path, "End_Timestamp")]
    assert [r[4] for r in rows] == [int(v) for v in column(path, "Correlation_Id")]


def test_stats_fixture(tmp_path: Path) -> None:
    path = fixture("rocprofiler-sdk-docs__hip_api_stats.csv")
    run, _ = import_rocprof(path, tmp_path, "stats")
    header, raw = csv_rows(path)
    rows = db_rows(run, "counters")
    assert len(rows) == len(raw) * (len(header) - 1)  # one counter per stat column per row
    calls = {(r[2]): r[3] for r in rows if r[1] == "Calls"}
    assert calls == {
        n: float(c) for n, c in zip(column(path, "Name"), column(path, "Calls"), strict=True)
    }
    assert {r[0] for r in rows} == {"rocprof-stats:rocprofiler-sdk-docs__hip_api_stats"}


def test_counter_fixture(tmp_path: Path) -> None:
    path = fixture("rocprof-unified-viewer__decode_fetch_counter_collection.csv")
    run, _ = import_rocprof(path, tmp_path, "ctr")
    rows = db_rows(run, "counters")
    assert len(rows) == len(csv_rows(path)[1])
    assert [r[1] for r in rows] == column(path, "Counter_Name")
    assert [r[2] for r in rows] == column(path, "Kernel_Name")
    assert [r[3] for r in rows] == [float(v) for v in column(path, "Counter_Value")]
    assert [r[4] for r in rows] == [int(v) for v in column(path, "Start_Timestamp")]


def test_memory_fixtures(tmp_path: Path) -> None:
    cp = fixture("rocprofiler-sdk-docs__memory_copy_trace.csv")
    al = fixture("rocprofiler-sdk-docs__memory_allocation_trace.csv")
    folder = tmp_path / "out" / "host"
    folder.mkdir(parents=True)
    shutil.copy(cp, folder / "123_memory_copy_trace.csv")
    shutil.copy(al, folder / "123_memory_allocation_trace.csv")
    run, _ = import_rocprof(tmp_path / "out", tmp_path, "mem")
    rows = db_rows(run, "transfers")
    copies = [r for r in rows if r[0] == "MEMORY_COPY"]
    allocs = [r for r in rows if r[0] == "MEMORY_ALLOCATION"]
    assert len(copies) == len(csv_rows(cp)[1]) and len(allocs) == len(csv_rows(al)[1])
    assert [r[1] for r in copies] == column(cp, "Direction")
    assert [r[2] for r in copies] == column(cp, "Source_Agent_Id")
    assert [r[4] for r in allocs] == [int(v) for v in column(al, "Allocation_Size")]
    assert [r[5] for r in allocs] == column(al, "Address")
    assert [r[7] for r in allocs] == [int(v) for v in column(al, "Start_Timestamp")]


def test_whole_fixture_folder(tmp_path: Path) -> None:
    run, summary = import_rocprof(ROCPROF, tmp_path, "all")
    expect_k = sum(len(csv_rows(fixture(n))[1]) for n in KERNEL_FIXTURES)
    expect_a = sum(len(csv_rows(fixture(n))[1]) for n in API_FIXTURES)
    r = load(run)
    assert r.count("kernels") == expect_k
    assert r.count("api") == expect_a
    assert r.count("transfers") == 8
    assert len(summary.files) == len(list(ROCPROF.glob("*.csv"))) == 10


def _rewrite_63(src: Path, dst: Path) -> None:
    """The ROCm 6.3 kernel-trace layout: no Stream_Id, Private/Group_Segment_Size instead of the
    LDS/Scratch/VGPR/SGPR columns; lower-case header, bare numbers."""
    header, rows = csv_rows(src)
    drop = {"Stream_Id", "LDS_Block_Size", "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count",
            "SGPR_Count"}  # fmt: skip
    keep = [i for i, h in enumerate(header) if h not in drop]
    new_h = [header[i].lower() for i in keep] + ["private_segment_size", "group_segment_size"]
    lines = [",".join(new_h)]
    for r in rows:
        vals = [r[i] for i in keep]
        vals = [f'"{v}"' if not v.isdigit() else v for v in vals]
        lines.append(",".join(vals + ["0", "0"]))
    dst.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("arrow", [True, False])
def test_rocm63_header(tmp_path: Path, arrow: bool) -> None:
    if arrow:
        pytest.importorskip("pyarrow")
    src = fixture("rocprofiler-sdk-docs__kernel_trace.csv")
    dst = tmp_path / "kernel_trace.csv"
    _rewrite_63(src, dst)
    run, _ = import_rocprof(dst, tmp_path, "k63", use_arrow=arrow)
    ks = kernel_dicts(run)
    assert [k["name"] for k in ks] == column(src, "Kernel_Name")
    assert [k["start_ns"] for k in ks] == [int(v) for v in column(src, "Start_Timestamp")]
    assert all(k["stream"] is None for k in ks)


@pytest.mark.parametrize("arrow", [True, False])
def test_rocpd_convert_kernel_csv(tmp_path: Path, arrow: bool) -> None:
    """`rocpd convert` layout: leading Guid, Lds_Block_Size/Vgpr_Count spelling, Duration, graph ids."""
    if arrow:
        pytest.importorskip("pyarrow")
    header = ("Guid,Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,"
              "Correlation_Id,Start_Timestamp,End_Timestamp,Duration,Lds_Block_Size,Scratch_Size,"
              "Vgpr_Count,Accum_Vgpr_Count,Sgpr_Count,Workgroup_Size_X,Workgroup_Size_Y,"
              "Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z,graph_exec_id,graph_node_id")  # fmt: skip
    g = "0000ddb5-8903-7903-b269-cd8d3745bb8a"
    rows = [
        f'"{g}","KERNEL_DISPATCH","Agent 4","1","2","137","{i + 1}","9","k{i}, with comma","{40 + i}",'
        f'"{9007199254740993 + 10 * i}","{9007199254740995 + 10 * i}","2","0","0","8","0","16",'
        f'"64","1","1","256","1","{i + 1}","{3 if i else 0}","{i}"'
        for i in range(3)
    ]
    p = tmp_path / "rocpd_kernels.csv"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    run, _ = import_rocprof(p, tmp_path, "conv", use_arrow=arrow)
    ks = kernel_dicts(run)
    # 2**53 + 1: would be rounded through a float
    assert [k["start_ns"] for k in ks] == [9007199254740993 + 10 * i for i in range(3)]
    assert [k["name"] for k in ks] == [f"k{i}, with comma" for i in range(3)]
    assert [k["graph_id"] for k in ks] == [0, 3, 3]
    assert [k["graph_node_id"] for k in ks] == [0, 1, 2]
    assert [k["grid_z"] for k in ks] == [1, 2, 3]


def _rocprof_json(tmp_path: Path) -> Path:
    doc = {
        "rocprofiler-sdk-tool": [
            {
                "metadata": {"pid": 321},
                "kernel_symbols": [
                    {
                        "kernel_id": 1,
                        "formatted_kernel_name": "_fwd_grouped_kernel_stage1",
                        "kernel_name": "_fwd_grouped_kernel_stage1.kd",
                    },
                    {"kernel_id": 2, "kernel_name": "copy_kernel"},
                ],  # fmt: skip
                "buffer_records": {
                    "kernel_dispatch": [
                        {
                            "correlation_id": {"internal": 10 + i, "external": 0},
                            "start_timestamp": 1_000_000_000_000_000_001 + 100 * i,
                            "end_timestamp": 1_000_000_000_000_000_051 + 100 * i,
                            "thread_id": 321,
                            "dispatch_info": {
                                "agent_id": {"handle": 2},
                                "queue_id": {"handle": 5},
                                "kernel_id": 1 + i % 2,
                                "dispatch_id": i + 1,
                                "grid_size": {"x": 256, "y": 1, "z": 8},
                                "workgroup_size": {"x": 64, "y": 1, "z": 1},
                            },
                        }
                        for i in range(4)
                    ],
                    "hip_api": [
                        {
                            "kind": "HIP_RUNTIME_API",
                            "operation": "hipLaunchKernel",
                            "thread_id": 321,
                            "correlation_id": {"internal": 10},
                            "start_timestamp": 5,
                            "end_timestamp": 9,
                        }
                    ],  # fmt: skip
                    "memory_copy": [
                        {
                            "operation": "MEMORY_COPY_DEVICE_TO_HOST",
                            "src_agent_id": {"handle": 2},
                            "dst_agent_id": {"handle": 0},
                            "bytes": 4096,
                            "correlation_id": {"internal": 12},
                            "start_timestamp": 20,
                            "end_timestamp": 30,
                        }
                    ],  # fmt: skip
                },
            }
        ]
    }
    p = tmp_path / "run_results.json"
    p.write_text(json.dumps(doc))
    return p


def test_rocprof_json(tmp_path: Path) -> None:
    p = _rocprof_json(tmp_path)
    run, _ = import_rocprof(p, tmp_path, "json")
    ks = kernel_dicts(run)
    assert [k["name"] for k in ks] == ["_fwd_grouped_kernel_stage1", "copy_kernel"] * 2
    assert [k["start_ns"] for k in ks] == [1_000_000_000_000_000_001 + 100 * i for i in range(4)]
    assert [k["correlation"] for k in ks] == [10, 11, 12, 13]
    assert {k["device"] for k in ks} == {2}
    # MLA kernels recognised, S from grid z (work-items / workgroup z = 8)
    assert [k["splits"] for k in ks] == [8, None, 8, None]
    api = db_rows(run, "api")
    assert api == [("HIP_RUNTIME_API", "hipLaunchKernel", 321, 321, 10, 5, 9)]
    xf = db_rows(run, "transfers")
    assert xf == [("MEMORY_COPY", "MEMORY_COPY_DEVICE_TO_HOST", "2", "0", 4096, None, 12, 20, 30)]


def test_graph_replays_layers_and_splits(tmp_path: Path) -> None:
    p = tmp_path / "kernel_trace.csv"
    exp = replay_kernel_csv(p, replays=3, layers=5, splits=17)
    run, summary = import_rocprof(p, tmp_path, "mla")
    ks = kernel_dicts(run)
    assert len(ks) == len(exp)
    for k, e in zip(ks, exp, strict=True):
        assert (k["name"], k["start_ns"], k["end_ns"]) == (e["name"], e["start_ns"], e["end_ns"])
        assert k["replay"] == e["replay"]
        assert k["layer"] == e["layer"], k
        assert k["splits"] == e["splits"]
    r = load(run)
    assert summary.replays == 3 and summary.mla_kernels == 15
    assert r.count("steps") == 3 and r.count("layers") == 15
    layers = db_rows(run, "layers")
    assert {row[5] for row in layers} == {17}  # splits_used
    assert [row[1] for row in layers] == list(range(5)) * 3


def _real_rocpd(tmp_path: Path) -> tuple[Trace, Path]:
    """A rocpd database laid out as rocprofv3 writes it (tests/conformance, from
    rocprofiler-sdk's generateRocpd.cpp and rocpd_tables.sql): 3 graph replays of 4 layers and
    an eager tail. Returns (the trace written, database)."""
    tr = graph_replays(steps=3, layers=4)
    tail = eager(steps=1, layers=2)
    b = Builder(tr)
    b.t, b._corr, b._dispatch = tr.t_end + 1_000_000, 1_000, len(tr.kernels)
    for k in tail.kernels:  # its own launches: one correlation id per kernel
        b.kernel(k.name, k.grid, k.block, b.api("hipLaunchKernel").corr)
    b.finish()
    return tr, write_rocpd(tr, tmp_path / "node0" / f"{tr.pid}_results.db")


def test_rocpd_database_import(tmp_path: Path) -> None:
    """A rocprofv3-written database: each dispatch's correlation is its event's stack_id (the
    launching call's id), never the external correlation_id, which rocprofv3 leaves 0."""
    tr, db = _real_rocpd(tmp_path)
    back, summary = import_rocprof(db, tmp_path, "back")
    got = [(k["name"], k["start_ns"], k["end_ns"], k["device"], k["correlation"],
            (k["grid_x"], k["grid_y"], k["grid_z"]), (k["block_x"], k["block_y"], k["block_z"]))
           for k in kernel_dicts(back)]  # fmt: skip
    assert got == [(k.name, k.start, k.end, tr.agent, k.corr, k.grid, k.block)
                   for k in tr.kernels]  # fmt: skip
    assert summary.replays == 3 and summary.eager_steps == 1


def test_cli_import_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "kernel_trace.csv"
    replay_kernel_csv(p, replays=2, layers=3, splits=4)
    rc = main(["import", "rocprof", str(p), "--traces", str(tmp_path / "t"), "--name", "x"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "14 kernels" in out and "MLA kernels: 6" in out and "graph replays with MLA: 2" in out
    assert (tmp_path / "t" / "x" / "run.json").is_file()
    # the same name again: refused, nothing changed
    rc = main(["import", "rocprof", str(p), "--traces", str(tmp_path / "t"), "--name", "x"])
    assert rc == 2
    assert sorted(q.name for q in (tmp_path / "t").iterdir()) == ["x"]


def test_report_of_an_imported_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No scenario, no split metadata: the report says where the trace came from and the S the
    trace's grids show, never a row of None fields or an 'as deserved' verdict."""
    p = tmp_path / "kernel_trace.csv"
    replay_kernel_csv(p, replays=2, layers=3, splits=4)
    assert main(["import", "rocprof", str(p), "--traces", str(tmp_path), "--name", "x"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["report", str(tmp_path / "x")]) == 0
    out = "".join(capsys.readouterr().out.split())  # whitespace-free: immune to wrapping
    assert f"importedfrom{portable_path(str(p.resolve()))}(csv)" in out  # no machine path
    # path, variant, steps (graph/eager), S, rows, qlen (not on this kernel's grid)
    assert "vllm-triton_fwd_grouped_kernel_stage12(2/0)44unknown" in out
    assert "Sfromgridaxiszof_fwd_grouped_kernel_stage1(importedfrom" in out
    # a kernel trace alone: replays are evidence of a graph; syncs are unknown, never 0
    assert "capture:replayedinagraph" in out and "syncs:unknown" in out
    # the report's own lines claim no FULL graph; the sections below them show the summary's
    # fields as they are (trace.steps[].capture still names a replayed step "FULL": the
    # analysis' step label, mlaprof.analysis.steps.CAPTURE_OF_MODE)
    own = out.split("Sections(everyfieldofthesummary")[0]
    assert "FULL" not in own and "(?)" not in out
    assert "padding:notrecorded" in out and "None" not in out and "asdeserved" not in out


def test_extra_mla_pattern(tmp_path: Path) -> None:
    p = tmp_path / "kernel_trace.csv"
    replay_kernel_csv(p, replays=1, layers=2, splits=4)
    text = p.read_text().replace("_fwd_grouped_kernel_stage1", "my_split_kv_kernel")
    p.write_text(text)
    from mlaprof.kernel_table import KernelMatcher

    # whole names: a fragment matches nothing
    _, s = import_rocprof(p, tmp_path, "frag", KernelMatcher().with_extra([r"my_split_kv"]))
    assert s.mla_kernels == 0
    run, s = import_rocprof(p, tmp_path, "pat", KernelMatcher().with_extra([r"z:my_split_kv.*"]))
    assert s.mla_kernels == 2
    assert [k["splits"] for k in kernel_dicts(run) if k["name"] == "my_split_kv_kernel"] == [4, 4]


def _process_trace(path: Path, replays: int, agent: int, layers: int = 3) -> list[dict]:
    path.parent.mkdir(parents=True, exist_ok=True)
    exp = replay_kernel_csv(path, replays=replays, layers=layers, splits=8)
    path.write_text(path.read_text().replace('"Agent 2"', f'"Agent {agent}"'))
    return exp


def test_processes_become_ranks(tmp_path: Path) -> None:
    """One rank per process (rocprofv3's <pid>_ prefix), numbered by the GPU it ran on, each with
    its own replays although correlation ids repeat across processes."""
    out = tmp_path / "out" / "host"
    exp_a = _process_trace(out / "100_kernel_trace.csv", replays=2, agent=5)
    exp_b = _process_trace(out / "300_kernel_trace.csv", replays=3, agent=3)
    run, summary = import_rocprof(tmp_path / "out", tmp_path / "t", "fleet")
    r = load(run)
    assert r.ranks == [0, 1]
    # Hive-partitioned by host and rank (docs/store.md)
    for rank in (0, 1):
        assert (run / "kernels" / "host=host" / f"rank={rank}" / "part-0.parquet").is_file()
    k0, k1 = (r.query(f"SELECT * FROM kernels WHERE rank = {i}") for i in (0, 1))
    assert set(k0["device"]) == {3} and len(k0) == len(exp_b)  # GPU 3 first: rank 0
    assert set(k1["device"]) == {5} and len(k1) == len(exp_a)
    assert [len(r.query(f"SELECT * FROM steps WHERE rank = {i}")) for i in (0, 1)] == [3, 2]
    assert summary.replays == 5 and summary.layers == 15 and summary.mla_kernels == 15
    # the analysis keeps the ranks' steps apart (each rank numbers its own from 0)
    from mlaprof.analysis import summary as analysis_summary

    rt = analysis_summary(r)["trace"]["replay_time"]
    assert rt["replays"] == 5
    assert {x["layer"]: x["steps"] for x in rt["layers"]} == {0: 5, 1: 5, 2: 5}
    assert r.count("kernels") == len(exp_a) + len(exp_b)
    # SQL grouped by rank, in DuckDB over each rank's file
    q = r.query("SELECT rank, COUNT(DISTINCT replay) AS n FROM kernels GROUP BY rank ORDER BY rank")
    assert q.values.tolist() == [[0, 3], [1, 2]]
    # SQL once over all ranks: kernels from the files, steps from the databases
    whole = "SELECT COUNT(*) AS n, COUNT(DISTINCT rank) AS nr, (SELECT COUNT(*) FROM steps) AS s FROM kernels"
    assert r.query(whole).values.tolist() == [[len(exp_a) + len(exp_b), 2, 5]]
    j = r.query("SELECT s.rank, COUNT(*) AS n FROM kernels k JOIN steps s "
              "ON s.rank = k.rank AND s.step = k.step GROUP BY s.rank ORDER BY s.rank")  # fmt: skip
    assert j["n"].tolist() == [len(exp_b), len(exp_a)]


def test_sql_reads_database_rows_without_adbc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Database rows reach DuckDB row by row when SQLite's ADBC driver is missing: same answer."""
    import sys

    _process_trace(tmp_path / "o" / "1_kernel_trace.csv", replays=2, agent=1)
    _process_trace(tmp_path / "o" / "2_kernel_trace.csv", replays=3, agent=2)
    run, _ = import_rocprof(tmp_path / "o", tmp_path / "t", "fleet")
    sql = "SELECT l.rank, COUNT(*) AS n, SUM(k.end_ns - k.start_ns) AS d FROM kernels k JOIN layers l ON l.rank = k.rank AND l.step = k.step AND l.layer = k.layer GROUP BY l.rank ORDER BY l.rank"
    with_adbc = load(run).query(sql)
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite.dbapi", None)
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)
    without = load(run).query(sql)
    assert with_adbc.equals(without) and with_adbc["n"].tolist() == [2 * 3 * 2, 3 * 3 * 2]


def test_rank_folders_number_the_ranks(tmp_path: Path) -> None:
    _process_trace(tmp_path / "o" / "rank_1" / "7_kernel_trace.csv", replays=1, agent=0)
    _process_trace(tmp_path / "o" / "rank_0" / "9_kernel_trace.csv", replays=2, agent=1)
    run, _ = import_rocprof(tmp_path / "o", tmp_path / "t", "fleet")
    r = load(run)
    assert [len(r.query(f"SELECT * FROM steps WHERE rank = {i}")) for i in (0, 1)] == [2, 1]


@pytest.mark.parametrize(("batch", "ranges"), [(None, None), (3, None), (None, 3), (3, 3)])
def test_rocpd_columnar_read_matches_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int | None, ranges: int | None
) -> None:
    """The ADBC reader (dispatches into NumPy a batch at a time, small tables joined in numpy,
    the event's stack_id in SQL) stores exactly what the row-by-row reader stores, NULLs from
    missing symbols, events and correlation ids included; in batches of 3 rows too (NULL masks
    laid out across many batches), and read as 3 id ranges at once (one of them empty: the ids
    it covers were deleted)."""
    pytest.importorskip("adbc_driver_sqlite")
    from mlaprof.importers import rocpd_sqlite

    if batch is not None:
        monkeypatch.setattr(rocpd_sqlite, "_BATCH_ROWS", batch)
    if ranges is not None:
        monkeypatch.setattr(rocprof_csv, "free_cores", lambda: ranges)
        monkeypatch.setattr(rocpd_sqlite, "RANGE_IDS", 4)
    read: list[tuple[int, int] | None] = []
    real = rocpd_sqlite._read_range
    monkeypatch.setattr(rocpd_sqlite, "_read_range", lambda *a: read.append(a[-1]) or real(*a))

    _tr, db = _real_rocpd(tmp_path)
    con = sqlite3.connect(db)
    (kd,) = con.execute("SELECT name FROM sqlite_master WHERE type='table' AND "
                        "name LIKE 'rocpd_kernel_dispatch_%'").fetchone()  # fmt: skip
    (ev,) = con.execute("SELECT name FROM sqlite_master WHERE type='table' AND "
                        "name LIKE 'rocpd_event_%'").fetchone()  # fmt: skip
    con.execute(f'UPDATE "{ev}" SET stack_id = NULL WHERE id % 3 = 0')
    con.execute(f'UPDATE "{kd}" SET kernel_id = 9999 WHERE id % 5 = 0')  # no such symbol
    con.execute(f'UPDATE "{kd}" SET event_id = NULL WHERE id % 7 = 0')
    if ranges is not None:  # the middle third's ids gone: its range reads no row
        lo, hi = con.execute(f'SELECT MIN(id), MAX(id) FROM "{kd}"').fetchone()
        span = hi - lo + 1
        con.execute(f'DELETE FROM "{kd}" WHERE id >= ? AND id < ?',
                    (lo + span // 3, lo + 2 * span // 3))  # fmt: skip
    con.commit()
    con.close()
    fast, _ = import_rocprof(db, tmp_path, "fast")
    assert len(read) == (1 if ranges is None else 3)  # the columnar path is taken, in ranges
    with sqlite3.connect(db) as con:
        (rows,) = con.execute("SELECT COUNT(*) FROM rocpd_kernel_dispatch").fetchone()
    kc = rocpd_sqlite.read_dispatches(db, ranges or 1)
    assert kc is not None and kc.n == rows  # each dispatch once, none at a range's edge twice
    monkeypatch.setattr(rocpd_sqlite, "read_dispatches", lambda *_a: None)
    slow, _ = import_rocprof(db, tmp_path, "slow")
    a, b = kernel_dicts(fast), kernel_dicts(slow)
    assert len(a) > 10 and a == b
    assert any(k["name"] is None for k in a) and any(k["correlation"] is None for k in a)
    for t in ("steps", "layers", "api", "transfers"):
        assert db_rows(fast, t) == db_rows(slow, t), t


def test_rocpd_columnar_read_without_event_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database without the rocpd_event view (a writer that left it out): the columnar read
    still runs and gives every dispatch a NULL correlation, as the row-by-row reader's
    missing join does."""
    pytest.importorskip("adbc_driver_sqlite")
    from mlaprof.importers import rocpd_sqlite

    _tr, db = _real_rocpd(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("DROP VIEW rocpd_event")
    kc = rocpd_sqlite.read_dispatches(db)
    assert kc is not None and kc.n > 10 and bool(kc.masks["correlation"].all())
    fast, _ = import_rocprof(db, tmp_path, "fast")
    monkeypatch.setattr(rocpd_sqlite, "read_dispatches", lambda *_a: None)
    slow, _ = import_rocprof(db, tmp_path, "slow")
    assert kernel_dicts(fast) == kernel_dicts(slow)


@pytest.mark.parametrize("ways", [1, 2, 3, 7])
@pytest.mark.parametrize(("first", "last"), [(1, 12), (5, 5), (0, 1000), (1, 37), (None, None)])
def test_rocpd_id_ranges_cover_every_id_once(
    monkeypatch: pytest.MonkeyPatch, ways: int, first: int | None, last: int | None
) -> None:
    """The id ranges read at once lie end to end from the first id to the last, none shorter
    than RANGE_IDS and no more than ``ways`` of them; one read (None) where no split pays."""
    from mlaprof.importers import rocpd_sqlite

    monkeypatch.setattr(rocpd_sqlite, "RANGE_IDS", 4)
    got = rocpd_sqlite.id_ranges(first, last, ways)
    if first is None or last is None or min(ways, (last - first + 1) // 4) < 2:
        assert got == [None]
        return
    spans = [r for r in got if r is not None]
    assert len(spans) == len(got) == min(ways, (last - first + 1) // 4)
    assert spans[0][0] == first and spans[-1][1] == last
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:], strict=False))
    assert all(hi - lo + 1 >= 4 for lo, hi in spans)


def test_rocpd_export_takes_the_row_by_row_path(tmp_path: Path) -> None:
    """An mlaprof export carries its own kernel fields in extdata: never the columnar reader."""
    from mlaprof.exporters.rocpd_export import export_rocpd
    from mlaprof.importers import rocpd_sqlite

    run, _ = import_rocprof(fixture("rocprof-unified-viewer__decode_kernel_trace.csv"), tmp_path)
    db = tmp_path / "export.db"
    with load(run) as r:
        export_rocpd(r, db)
    assert rocpd_sqlite.read_dispatches(db) is None


def test_rocpd_processes_become_ranks(tmp_path: Path) -> None:
    """Two processes' rocpd databases: one rank each, numbered by GPU (not by pid)."""
    tr, db = _real_rocpd(tmp_path / "src")
    out = tmp_path / "o" / "host"
    out.mkdir(parents=True)
    for pid, gpu in ((100, 7), (200, 3)):
        dst = out / f"{pid}_results.db"
        shutil.copyfile(db, dst)
        con = sqlite3.connect(dst)
        (t,) = con.execute("SELECT name FROM sqlite_master WHERE type='table' AND "
                           "name LIKE 'rocpd_info_agent_%'").fetchone()  # fmt: skip
        con.execute(f'UPDATE "{t}" SET absolute_index = ?', (gpu,))
        con.commit()
        con.close()
    run, _ = import_rocprof(tmp_path / "o", tmp_path / "t", "fleet")
    r = load(run)
    assert r.ranks == [0, 1]
    assert [set(r.query(f"SELECT * FROM kernels WHERE rank = {i}")["device"]) for i in (0, 1)] == [
        {3},
        {7},
    ]
    assert r.count("kernels") == 2 * len(tr.kernels)


@pytest.mark.parametrize("trace", ["gluon_v0119_bug", "persistent_switch", "fleet_dp2_tp4"])
def test_arrow_route_in_many_chunks_stores_what_the_csv_module_route_does(
    tmp_path: Path, trace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Arrow route leaves most columns in the parser's chunks (one per block read) and reads
    the MLA kernels' grids from them in place; cut into blocks of a few rows, every stored
    kernel, layer and step equals the csv module's route, and so do the trace checks."""
    from mlaprof.importers import rocprof_csv

    monkeypatch.setattr(rocprof_csv, "BLOCK_BYTES", 700)  # a few kernel rows per chunk
    src = DATA / "aiter" / trace
    a, _ = import_rocprof(src, tmp_path, "a", use_arrow=True)
    b, _ = import_rocprof(src, tmp_path, "b", use_arrow=False)
    ranks = sorted(int(p.stem[4:]) for p in a.glob("rank*.db"))
    for rank in ranks:
        for table in ("kernels", "layers", "steps"):
            assert db_rows(a, table, rank) == db_rows(b, table, rank), (table, rank)
    assert load(a).trace_checks() == load(b).trace_checks() != {}
    assert any(r[5] is not None for r in db_rows(a, "layers", ranks[0]))  # S read from grids


def test_an_import_hands_arrow_memory_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow's pool keeps freed blocks: an import releases them once a kernel file is parsed
    (before the annotation and the write allocate theirs: the import's peak is after the
    parse) and once its run is written (a report in the same process would otherwise add to
    them)."""
    import pyarrow as pa

    calls: list[str] = []

    class Pool:
        def release_unused(self) -> None:
            calls.append("release")

    monkeypatch.setattr(pa, "default_memory_pool", lambda: Pool())
    from mlaprof.importers import rocprof_csv

    parsed: list[str] = []
    read = rocprof_csv.read_kernel_file

    def reading(*a, **k):  # noqa: ANN002, ANN003, ANN202
        got = read(*a, **k)
        parsed.append(f"parsed after {len(calls)}")
        return got

    monkeypatch.setattr(rocprof_csv, "read_kernel_file", reading)
    import_rocprof(DATA / "aiter" / "gluon_v0119_bug", tmp_path, "b")
    # one kernel file: released as its parse ends (before the file is handed on), then at the end
    assert parsed == ["parsed after 1"]
    assert calls == ["release", "release"]
