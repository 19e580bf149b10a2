"""The run's one SQL surface and the store's trace_checks table.

- ``Run.query(sql)`` runs once over every rank as one relation: each table holds every rank's
  rows with ``rank``, an aggregate spans the ranks; the same without duckdb (vLLM's own
  environment), where SQLite attaches the rank databases as one view per table.
- An import stores its trace checks per rank in ``trace_checks`` (written by
  mlaprof/importers/annotate.py ``store_kernels`` through the bulk writer, one rank at a time),
  never summed; a run written before the table keeps them in run.json, read as the table.
- The analysis imports no importer: it reads the checks from the store.
"""

from __future__ import annotations

import ast
import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from mlaprof.errors import MlaprofError
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import create_run, load, runmeta, sqlengine, trace_checks
from mlaprof.store.trace_checks import SUMMED_RANKS, TraceChecks
from tests import shipped_demo
from tests.unit.test_import_rocprof import _process_trace

ROOT = Path(__file__).resolve().parents[2]


def _no_duckdb(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a missing install: ``import duckdb`` fails (mlaprof.store.sqlengine.duckdb_module)."""
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(MlaprofError, match="pip install duckdb"):
        sqlengine.duckdb_module()


def _two_ranks(tmp_path: Path) -> Path:
    """A recorded run of two ranks: rank 0 three steps, rank 1 two (each numbers its own)."""
    for rank, n in ((0, 3), (1, 2)):
        w = create_run(tmp_path, "two", {"source": "test", "ranks": 2}, rank=rank)
        w.add_many("steps", [{"step": s, "duration_ns": 100 * (rank + 1)} for s in range(n)])
        w.finish()
    return tmp_path / "two"


@pytest.mark.parametrize("engine", ["duckdb", "sqlite"])
def test_query_is_one_relation_over_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    run_dir = _two_ranks(tmp_path)
    if engine == "sqlite":
        _no_duckdb(monkeypatch)
    with load(run_dir) as run:
        rows = run.query("SELECT rank, step FROM steps ORDER BY rank, step")
        assert rows.values.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]]
        # an aggregate spans the ranks (one row), grouping by rank keeps them apart
        whole = run.query("SELECT COUNT(*) AS n, SUM(duration_ns) AS d FROM steps")
        assert whole.values.tolist() == [[5, 3 * 100 + 2 * 200]]
        per = run.query("SELECT rank, COUNT(*) AS n FROM steps GROUP BY rank ORDER BY rank")
        assert per.values.tolist() == [[0, 3], [1, 2]]
        # parameters, a join across tables, and one rank's rows only
        assert run.query("SELECT COUNT(*) AS n FROM steps WHERE step >= ?", (1,))["n"][0] == 3
        only = run.query("SELECT COUNT(*) AS n FROM steps", ranks=[1])
        assert only["n"].tolist() == [2]
    # the old entries are gone: one query surface
    for old in ("sql", "queries", "query_ranks", "tables"):
        assert not hasattr(run, old), old


def test_without_duckdb_sql_over_an_imports_kernel_files_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out" / "host"
    _process_trace(out / "100_kernel_trace.csv", replays=2, agent=5)
    run_dir, _ = import_rocprof(tmp_path / "out", tmp_path / "t", "one")
    _no_duckdb(monkeypatch)
    with load(run_dir) as run:
        with pytest.raises(MlaprofError, match="pip install duckdb"):
            run.query("SELECT COUNT(*) AS n FROM kernels")
        # a table in the databases still reads
        assert int(run.query("SELECT COUNT(*) AS n FROM steps")["n"][0]) == 2


def test_a_two_rank_import_stores_each_ranks_checks_apart(tmp_path: Path) -> None:
    out = tmp_path / "out" / "host"
    _process_trace(out / "100_kernel_trace.csv", replays=2, agent=5)  # rank 1 (GPU 5)
    _process_trace(out / "300_kernel_trace.csv", replays=3, agent=3)  # rank 0 (GPU 3)
    run_dir, _ = import_rocprof(tmp_path / "out", tmp_path / "t", "fleet")
    meta = json.loads((run_dir / "run.json").read_text())
    assert not {"trace_checks", "trace_checks_by_rank", "trace_records_by_rank"} & set(meta)
    with load(run_dir) as run:
        got = run.query(
            "SELECT rank, count FROM trace_checks WHERE check_name = 'replays' "
            "AND item = 'replays' ORDER BY rank"
        )
        assert got.values.tolist() == [[0, 3], [1, 2]]  # each rank's own, never their sum
        checks = run.trace_checks()
    assert sorted(checks) == [0, 1]
    assert [checks[r].group("replays")["replays"] for r in (0, 1)] == [3, 2]
    assert checks[0].group("steps")["source"]  # a text item survives as itself
    from mlaprof.analysis.run_checks import RunChecks

    both = RunChecks(checks)
    assert both.fleet().rank == SUMMED_RANKS and both.group("replays")["replays"] == 5


def test_a_check_written_again_replaces_its_rows_and_keeps_the_others(tmp_path: Path) -> None:
    """An import adds a rank's next file to its counts by writing the group again (importers/
    duplicates.py ``check_records``): the group's rows are replaced, never kept beside the new
    ones (a reader keeping the last row would hide it; a SUM over the table would not)."""
    run_dir = _two_ranks(tmp_path)
    con = sqlite3.connect(run_dir / "rank0.db")
    with con:
        trace_checks.write(con, 0, {"replays": {"replays": 3}})
        trace_checks.write(con, 0, {"records": {"dispatches": 10, "repeated_dispatches": 1}})
        trace_checks.write(con, 0, {"records": {"dispatches": 25, "repeated_dispatches": 2}})
    con.close()
    with load(run_dir) as run:
        got = run.query(
            "SELECT rank, check_name, item, count FROM trace_checks ORDER BY check_name, item"
        )
        checks = run.trace_checks()
    assert got.values.tolist() == [
        [0, "records", "dispatches", 25],
        [0, "records", "repeated_dispatches", 2],
        [0, "replays", "replays", 3],
    ]
    assert checks == {
        0: TraceChecks(
            0, {"replays": {"replays": 3}, "records": {"dispatches": 25, "repeated_dispatches": 2}}
        )  # fmt: skip
    }


def test_an_older_runs_checks_in_run_json_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run written before the table (schema 2: the shipped demo runs' databases) with its
    checks in run.json, as importers wrote them then: read as the table, nothing written."""
    run_dir = tmp_path / "old"
    shutil.copytree(shipped_demo.run("fix-padding-active-rows-c16"), run_dir)
    checks = {
        "launches": {"graph_launches": 3, "runtime_api_calls": 8},
        "steps": {"source": "graph-launches", "graphs": [{"graph": 0, "kind": "verify"}]},
        "heads": {},
    }
    records = {"0": {"dispatches": 24, "repeated_dispatches": 1, "nameless_dispatches": 0}}
    runmeta.update(run_dir, trace_checks=checks, trace_records_by_rank=records)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir())
    with load(run_dir) as run:
        assert run.ranks == [0]
        got = run.trace_checks()
        assert got == {0: TraceChecks(0, {**checks, "records": records["0"]})}
        assert run.count_per_rank("trace_checks") == {0: 2 + 2 + 1 + 3}
        n = run.query("SELECT SUM(count) AS n FROM trace_checks WHERE check_name = 'launches'")
        assert int(n["n"][0]) == 11
    _no_duckdb(monkeypatch)  # the SQLite route serves the same rows
    with load(run_dir) as run:
        n = run.query("SELECT SUM(count) AS n FROM trace_checks WHERE check_name = 'records'")
        assert int(n["n"][0]) == 25
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir()) == before


def test_an_older_fleet_without_per_rank_checks_keeps_its_sum_apart(tmp_path: Path) -> None:
    run_dir = _two_ranks(tmp_path)
    for db in run_dir.glob("rank*.db"):  # as written before the table
        con = sqlite3.connect(db)
        con.execute("DROP TABLE trace_checks")
        con.execute("PRAGMA user_version=2")
        con.commit()
        con.close()
    runmeta.update(run_dir, trace_checks={"replays": {"replays": 5}})
    with load(run_dir) as run:
        got = run.trace_checks()
        per = run.query("SELECT rank, count FROM trace_checks")
    assert got == {SUMMED_RANKS: TraceChecks(SUMMED_RANKS, {"replays": {"replays": 5}})}
    assert per.values.tolist() == [[SUMMED_RANKS, 5]]  # no rank is given the fleet's sum


def test_no_analysis_module_imports_an_importer() -> None:
    """The analysis reads what importers stored through the store, never their modules."""
    bad = []
    for path in sorted((ROOT / "mlaprof" / "analysis").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(n == "mlaprof.importers" or n.startswith("mlaprof.importers.") for n in names):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bad == []
