"""Every shape of the conformance corpus (tests/conformance: traces written the way rocprofv3 and
rocpd write them, from their source) in every format imports to the counts its writer put
there: steps, graph replays, eager steps, layers, S (``report --json``), HIP API calls and roctx
messages (the run's api table)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlaprof.cli import main
from tests.conformance import FORMATS, render
from tests.conformance.rocpd import write_rocpd
from tests.conformance.shapes import SHAPES, graph_replays
from tests.conftest import EACH_TEST
from tests.trace_io_helpers import db_rows, kernel_dicts

WORKER_GROUP = EACH_TEST  # the tests are independent: spread over the workers

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _import(path: Path, traces: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["import", "rocprof", str(path), "--traces", str(traces), "--name", "x"]) == 0
    capsys.readouterr()
    assert main(["report", str(traces / "x"), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _api(run: Path) -> tuple[int, list[str]]:
    """(HIP runtime calls, marker messages) of the imported run."""
    rows = db_rows(run, "api")
    hip = sum(1 for r in rows if r[0] and "HIP" in r[0].upper() and r[1] != "")
    marks = [r[1] for r in rows if r[0] and "MARKER" in r[0].upper()]
    return hip, marks


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_corpus_imports_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str, fmt: str
) -> None:
    trace = SHAPES[shape]()
    exp = trace.expected
    assert exp is not None
    path, markers = render(trace, fmt, tmp_path / "in")
    rep = _import(path, tmp_path / "t", capsys)
    steps = rep["trace"]["steps"]
    assert len(steps) == exp.steps, (fmt, [s["layers"] for s in steps])
    assert [s["layers"] for s in steps] == [exp.layers] * exp.steps
    assert {s["S"] for s in steps} == {exp.S}
    cap = rep["capture"]
    assert (cap["graph_steps"], cap["eager_steps"]) == (exp.graph_steps, exp.eager_steps)
    assert cap["status"] == ("replayed" if exp.graph_steps else "eager")
    # a kernel-only CSV folder holds the HIP trace too: every format carries the launches
    assert cap["graph_launches"] == exp.graph_launches
    hip, msgs = _api(tmp_path / "t" / "x")
    assert hip == exp.api_calls
    assert sorted(msgs) == sorted(markers)
    syncs = rep["trace"]["syncs"]
    assert (syncs["status"], syncs["count"]) == ("found" if exp.syncs else "none", exp.syncs)
    ks = kernel_dicts(tmp_path / "t" / "x")
    assert len(ks) == exp.kernels
    if fmt.startswith(("rocpd", "json")):  # the GPU's node id, through the agent tables
        assert {k["device"] for k in ks} == {trace.agent}
    if fmt.endswith("-type"):  # --agent-index type-relative: the GPU's index, and its name
        assert {k["device"] for k in ks} == {0}
        assert rep["device"] == f"{trace.arch} ({trace.product})", rep["device"]
    if fmt in ("rocpd-3.0.3", "csv-convert", "csv-convert-type"):  # graph node identity (3.0.2)
        got = [(k["graph_id"], k["graph_node_id"]) for k in ks]
        assert got == [(k.graph_exec, k.graph_node) for k in trace.kernels]


def test_rocpd_graph_replays_are_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """6 steps x 8 layers of graph replays in a rocpd file as rocprofv3 writes it: 6 graph
    steps of 8 layers, each replay's kernels tied to its hipGraphLaunch by ``stack_id``."""
    trace = graph_replays(6, 8)
    path, _ = render(trace, "rocpd-3", tmp_path / "in")
    rep = _import(path, tmp_path / "t", capsys)
    assert [s["layers"] for s in rep["trace"]["steps"]] == [8] * 6
    assert rep["capture"]["graph_launches"] == 6
    assert rep["trace"]["checks"]["launches"]["mla_replays_with_launch"] == 6
    # the TUI and the HTML report render the same analysis
    assert main(["tui", str(tmp_path / "t" / "x"), "--once"]) == 0
    assert "6 steps" in capsys.readouterr().out
    html = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "t" / "x"), "--html", str(html)]) == 0
    assert "6 of 6 carry the correlation id of a graph-launch call" in html.read_text()


def _wal_pair(tmp_path: Path) -> Path:
    """A WAL-mode rocpd database whose last transaction is still in its ``-wal`` file (the
    writer not yet checkpointed): copied while the writer holds it open."""
    import shutil
    import sqlite3

    src = write_rocpd(graph_replays(3, 4), tmp_path / "w" / "src.db", "3.0.1", wal=True)
    con = sqlite3.connect(src)
    con.execute("PRAGMA wal_autocheckpoint=0")
    (kd,) = con.execute(
        "SELECT name FROM sqlite_master WHERE name LIKE 'rocpd_kernel_dispatch_%'"
    ).fetchone()
    con.execute(f'UPDATE "{kd}" SET grid_size_z = 6 WHERE grid_size_z = 4')  # S 4 -> 6
    con.commit()
    ro = tmp_path / "ro"
    ro.mkdir()
    shutil.copyfile(src, ro / "1_results.db")
    shutil.copyfile(src.with_name("src.db-wal"), ro / "1_results.db-wal")
    con.close()
    return ro / "1_results.db"


@pytest.mark.parametrize("pending", [False, True])
def test_wal_database_read_without_writing_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pending: bool
) -> None:
    """A WAL-mode rocpd file is read without creating ``-shm``/``-wal`` files beside it (a
    read-only folder refuses them): opened immutable, or from a private copy when its ``-wal``
    holds committed pages, which are read (S 6, not the 4 of the main file)."""
    if pending:
        db = _wal_pair(tmp_path)
    else:
        db = write_rocpd(graph_replays(3, 4), tmp_path / "ro" / "1_results.db", "3.0.1", wal=True)
        assert not db.with_name(db.name + "-wal").exists()
    before = sorted(p.name for p in db.parent.iterdir())
    rep = _import(db, tmp_path / "t", capsys)
    assert sorted(p.name for p in db.parent.iterdir()) == before
    assert [s["S"] for s in rep["trace"]["steps"]] == [6 if pending else 4] * 3


def test_missing_optional_tables_import_and_are_named_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    omit = frozenset({"memory_copy", "memory_allocate", "info_stream", "info_thread"})
    db = write_rocpd(graph_replays(3, 4), tmp_path / "in" / "1_results.db", "3", omit=omit)
    args = ["import", "rocprof", str(db), "--traces", str(tmp_path / "t"), "--name", "x"]
    assert main(args) == 0
    out = capsys.readouterr().out
    for t in sorted(omit):
        assert out.count(f"rocpd_{t}") == 1, out
    assert main(["report", str(tmp_path / "t" / "x"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [s["layers"] for s in rep["trace"]["steps"]] == [4] * 3
    assert rep["capture"]["graph_launches"] == 3


@pytest.mark.parametrize("fmt", ["rocpd-3.0.1", "csv-7"])
def test_one_file_set_per_process_and_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    """rocprofv3 writes one output per process under its host's folder: two processes on two
    hosts are two ranks, numbered by host folder, then GPU, then pid (so a host's ranks stay
    together), each with its own replays (both reuse correlation ids from 1)."""
    a, b = graph_replays(2, 3), graph_replays(4, 3)
    a.pid, a.tid, a.agent, a.host = 100, 100, 5, "hostA"
    b.pid, b.tid, b.agent, b.host = 200, 200, 1, "hostB"
    for tr in (a, b):
        render(tr, fmt, tmp_path / "in")
    rep = _import(tmp_path / "in", tmp_path / "t", capsys)
    per_rank = {r: [s for s in rep["trace"]["steps"] if s["rank"] == r] for r in (0, 1)}
    assert [len(per_rank[0]), len(per_rank[1])] == [2, 4]  # rank 0: hostA's process
    hosts = [r["host"] for r in rep["fleet"]["per_rank"]]
    assert hosts == ["hostA", "hostB"]


@pytest.mark.parametrize("op", ["roctxThreadRangeA", "roctxRangePushA"])
def test_roctx_messages_whatever_the_range_operation_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], op: str
) -> None:
    """A range's message comes from its event's extdata, whether the marker kind names the
    push/pop operation roctxThreadRangeA (rocprofv3 7.x) or roctxRangePushA."""
    trace = graph_replays(2, 2, markers=True)
    db = write_rocpd(trace, tmp_path / "in" / "1_results.db", "3.0.1", range_op=op)
    _import(db, tmp_path / "t", capsys)
    _, msgs = _api(tmp_path / "t" / "x")
    assert sorted(msgs) == sorted(trace.expected.markers) and "step 1" in msgs


@pytest.mark.parametrize("schema", ["3.0.1", "3.0.3"])
def test_graph_launch_records_without_a_hip_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schema: str
) -> None:
    """Without HIP API tracing, schema 3.0.2+'s rocpd_graph_launch records (one per successful
    hipGraphLaunch, their event carrying its correlation id) confirm the replays; before 3.0.2
    nothing does, and the replays stand on their shared correlation ids alone."""
    trace = graph_replays(4, 3)
    db = write_rocpd(trace, tmp_path / "in" / "1_results.db", schema, hip_trace=False)
    rep = _import(db, tmp_path / "t", capsys)
    # before 3.0.2 the trace holds no launch record at all: the count is unknown, never 0
    n = 4 if schema == "3.0.3" else None
    assert rep["capture"]["graph_steps"] == 4 and rep["capture"]["graph_launches"] == n
    assert rep["trace"]["checks"]["launches"].get("mla_replays_with_launch") == n
    assert ("graph_launches_why" in rep["capture"]) == (n is None)
