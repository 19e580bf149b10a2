"""A whole-process trace holds vLLM's capture phase before the served steps: per FULL decode
capture size (largest first) one eager warm-up forward (vLLM 0.32 ``gpu_model_runner.py``
``_capture_cudagraphs`` -> ``_dummy_run(..., CUDAGraphMode.NONE, force_attention=True)``), then
``hipStreamBeginCapture``, launch calls that dispatch nothing (a captured launch is recorded,
not run), ``hipStreamEndCapture``, ``hipGraphInstantiate``; then the served ``hipGraphLaunch``
replays. Written as rocprofv3 7.x writes its CSVs (tests/conformance/rocprof_csv.py) plus its
memory-allocation trace (header of rocprofiler-sdk ``source/docs/data/memory_allocation_trace.csv``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlaprof.cli import main
from tests.conformance import render
from tests.conformance.model import Builder, Trace
from tests.conformance.shapes import STAGE1, STAGE2

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

LAYERS, QLEN, HEADS = 4, 4, 16
WARM = [(8, 8), (6, 12), (4, 16), (2, 32)]  # (batch rows, S) per capture size, largest first
ALLOC = 64 * 2**20  # bytes each capture allocates (its graph's memory pool)


def _layer(b: Builder, rows: int, S: int, corr: tuple[int, int]) -> None:
    b.kernel(STAGE1, (rows * 64, -(-HEADS // 16), S), (64, 1, 1), corr[0], 9_000)
    b.kernel(STAGE2, (rows * 64, HEADS, 1), (64, 1, 1), corr[1], 2_000)


def whole_process(replays: int = 6) -> tuple[Trace, list[tuple[int, int, int]]]:
    """(the trace, the allocation records (start, size, corr)): 4 warm-ups + captures, then
    ``replays`` FULL replays of 8 rows at S 8 (the batch the server then serves)."""
    tr = Trace("whole_process")
    b = Builder(tr)
    allocs = []
    for rows, S in WARM:
        for _ in range(LAYERS):  # the eager warm-up forward: every kernel its own launch
            ids = (b.api("hipLaunchKernel", 1_500).corr, b.api("hipLaunchKernel", 1_500).corr)
            _layer(b, rows, S, ids)
        b.advance(400_000)
        b.api("hipStreamBeginCapture", 3_000)
        a = b.api("hipMallocAsync", 2_000)
        allocs.append((a.start, ALLOC, a.corr))
        for _ in range(LAYERS * 2):  # captured: recorded into the graph, nothing dispatched
            b.api("hipLaunchKernel", 1_500)
        b.api("hipStreamEndCapture", 5_000)
        b.api("hipGraphInstantiate", 90_000)
        b.advance(2_000_000)
    for _ in range(replays):
        launch = b.api("hipGraphLaunch", 4_000)
        for _ in range(LAYERS):
            _layer(b, 8, 8, (launch.corr, launch.corr))
        b.advance(3_000_000)
    return b.finish(), allocs


def _write_allocs(folder: Path, tr: Trace, allocs: list[tuple[int, int, int]]) -> None:
    head = '"Kind","Operation","Agent_Id","Allocation_Size","Address","Correlation_Id",' \
        '"Start_Timestamp","End_Timestamp"'  # fmt: skip
    rows = [
        f'"MEMORY_ALLOCATION","MEMORY_ALLOCATION_ALLOCATE","Agent {tr.agent}",{size},'
        f'"0x00007ffb{i:08x}",{corr},{start},{start + 1_000}'
        for i, (start, size, corr) in enumerate(allocs)
    ]
    (folder / tr.host / f"{tr.pid}_memory_allocation_trace.csv").write_text(
        "\n".join([head, *rows]) + "\n"
    )


def _rocpd_allocs(db: Path, tr: Trace, allocs: list[tuple[int, int, int]]) -> None:
    """The allocation records in the database, as rocprofv3 writes them (rocprofiler-sdk
    generateRocpd.cpp: ``memtype_to_db`` makes MEMORY_ALLOCATION_ALLOCATE type ``ALLOC`` level
    ``REAL``; each row with an event of its kind, the call's correlation as ``stack_id``), and
    beside them rows that are no allocation: a FREE and a scratch-memory ALLOC (level SCRATCH)."""
    import sqlite3

    con = sqlite3.connect(db)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        mem = next(t for t in tables if t.startswith("rocpd_memory_allocate_"))
        evt = next(t for t in tables if t.startswith("rocpd_event_"))
        strs = next(t for t in tables if t.startswith("rocpd_string_"))
        guid = con.execute(f'SELECT guid FROM "{evt}" LIMIT 1').fetchone()[0]
        cat = con.execute(f'INSERT INTO "{strs}" (guid, string) VALUES (?, ?)',
                          (guid, "MEMORY_ALLOCATION")).lastrowid  # fmt: skip
        rows = [(start, size, corr, "ALLOC", "REAL") for start, size, corr in allocs]
        rows += [(allocs[0][0] + 10, 0, allocs[0][2], "FREE", "REAL"),
                 (allocs[0][0] + 20, 4096, allocs[0][2], "ALLOC", "SCRATCH")]  # fmt: skip
        for i, (start, size, corr, typ, level) in enumerate(rows):
            ev = con.execute(
                f'INSERT INTO "{evt}" (guid, category_id, stack_id, parent_stack_id, '
                "correlation_id, extdata) VALUES (?, ?, ?, ?, 0, '{}')",
                (guid, cat, corr, corr),
            ).lastrowid
            con.execute(
                f'INSERT INTO "{mem}" (guid, nid, pid, tid, agent_id, type, level, start, "end", '
                "address, size, queue_id, stream_id, event_id, extdata) "
                "VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, ?, '{}')",
                (guid, tr.pid, tr.tid, tr.agent, typ, level, start, start + 1_000,
                 0x7FFB0000 + i, size, ev),
            )  # fmt: skip
        con.commit()
    finally:
        con.close()


def _report(
    tmp: Path, capsys: pytest.CaptureFixture[str], allocs: bool = True, fmt: str = "csv-7"
) -> dict:
    tr, al = whole_process()
    path, _ = render(tr, fmt, tmp / "in")
    if allocs and fmt == "csv-7":
        _write_allocs(tmp / "in", tr, al)
    if allocs and fmt.startswith("rocpd"):
        _rocpd_allocs(path, tr, al)
    assert main(["import", "rocprof", str(path), "--traces", str(tmp / "t"), "--name", "x"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp / "t" / "x"), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("fmt", ["csv-7", "csv-convert", "rocpd-3.0.1"])
def test_warmups_are_the_capture_phase_not_served_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    rep = _report(tmp_path, capsys, fmt=fmt)
    steps = rep["trace"]["steps"]
    assert len(steps) == 6
    assert {(s["capture"], s["rows"], s["S"]) for s in steps} == {("FULL", 8, 8)}
    cap = rep["capture"]
    assert cap["status"] == "replayed" and (cap["graph_steps"], cap["eager_steps"]) == (6, 0)
    assert not [f for f in rep["findings"] if "eagerly" in f["title"]]
    (ph,) = rep["trace"]["capture_phase"]["ranks"]
    assert (ph["graphs_captured"], ph["instantiated"], ph["warmup_steps"]) == (4, 4, 4)
    assert ph["warmup_rows"] == [r for r, _ in WARM]
    if fmt in ("csv-7", "rocpd-3.0.1"):  # the memory-allocation trace beside the kernels
        assert (ph["allocations"], ph["allocated_bytes"]) == (4, 4 * ALLOC)
    assert ph["duration_ms"] > 6.0  # four warm-ups and captures, 2 ms apart at least
    assert "4 graphs captured" in rep["trace"]["capture_phase"]["text"]


def test_capture_phase_without_allocation_trace_says_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rep = _report(tmp_path, capsys, allocs=False)
    (ph,) = rep["trace"]["capture_phase"]["ranks"]
    assert ph["allocations"] is None and ph["allocated_bytes"] is None
    assert "allocations unknown" in rep["trace"]["capture_phase"]["text"]


def test_terminal_report_shows_the_phase(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _report(tmp_path, capsys)
    assert main(["report", str(tmp_path / "t" / "x")]) == 0
    out = capsys.readouterr().out
    assert "capture phase" in out and "batch rows 8, 6, 4, 2" in out
    assert "attention ran eagerly" not in out


def test_rocpd_allocation_rows_are_named_as_the_csv_names_them() -> None:
    """generateRocpd.cpp ``memtype_to_db`` cuts MEMORY_ALLOCATION_ (and VMEM_, level VIRTUAL) or
    SCRATCH_MEMORY_ (level SCRATCH) off the operation and writes ALLOCATE as ALLOC: the names
    come back whole, and only a real or virtual ALLOCATE is an allocation the phase counts."""
    from mlaprof.importers.rocpd_sqlite import allocation_kind

    assert allocation_kind("ALLOC", "REAL") == ("MEMORY_ALLOCATION", "MEMORY_ALLOCATION_ALLOCATE")
    assert allocation_kind("FREE", "REAL") == ("MEMORY_ALLOCATION", "MEMORY_ALLOCATION_FREE")
    assert allocation_kind("ALLOC", "VIRTUAL") == (
        "MEMORY_ALLOCATION", "MEMORY_ALLOCATION_VMEM_ALLOCATE")  # fmt: skip
    assert allocation_kind("ALLOC", "SCRATCH") == ("SCRATCH_MEMORY", "SCRATCH_MEMORY_ALLOC")
    assert allocation_kind(None, None) == ("MEMORY_ALLOCATION", None)
