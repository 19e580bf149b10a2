"""What one summary reads: the analyzers' tables in one pass over each rank database (one ADBC
connection per database, tables it holds no row of not read), and a fleet's per-rank timeline
as one DuckDB query per rank (its kernel count and its first kernels on one cursor). The reads
used to be per table and per query: 136 ADBC connections and 27 DuckDB queries for an 8-rank
import's summary (bench/summary_bench.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mlaprof.analysis.evidence.common import TABLES, load_tables
from mlaprof.analysis.run_summary import build_summary
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load, sqlengine
from tests import shipped_runs
from tests.trace_io_helpers import DATA

adbc = pytest.importorskip("adbc_driver_sqlite.dbapi")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run, _ = import_rocprof(DATA / "aiter" / "fleet_dp2_tp4", tmp_path_factory.mktemp("f"), "f")
    return run


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    opened: list[object] = []
    real = adbc.connect
    monkeypatch.setattr(adbc, "connect", lambda *a, **k: opened.append(a) or real(*a, **k))
    return opened


def test_the_tables_are_read_in_one_connection_per_database(fleet: Path, connections) -> None:
    with load(fleet) as run:
        dbs = len(run.databases)
        load_tables(run)
    assert dbs == 8
    assert len(connections) <= dbs, len(connections)  # was 8 tables x 8 databases


def test_a_summary_opens_few_connections_and_runs_a_query_per_rank(
    fleet: Path, connections, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    real = sqlengine.query
    monkeypatch.setattr(
        sqlengine,
        "query",
        lambda sources, *a, **k: seen.append(len(sources)) or real(sources, *a, **k),
    )
    with load(fleet) as run:
        ranks, dbs = len(run.ranks), len(run.databases)
        build_summary(run)
    # the tables once, and a table an all-rank query reads from SQLite (empty ones are not read)
    assert len(connections) <= 2 * dbs, len(connections)
    # per rank: its timeline's count and kernels on one cursor; the replay-time join and the
    # kernel times per name are the sums the fleet import stored (analysis/replay_sums.py);
    # over all ranks: a few analyses (the capture phase's and the host calls' API reads, once
    # per rank in SQLite before the one query surface, are one query each over all ranks)
    assert seen.count(1) == ranks, seen
    assert len(seen) <= ranks + 6, seen


@pytest.mark.parametrize(
    "name",
    [
        "demo-bug-legacy-flat-syncs-break-capture",  # layers whose syncs the reader fills
        "demo-fix-padding-active-rows-c16",
        "aiter-two_ranks_one_lossy",  # two ranks, layers in Parquet
        "engine-engine_ngram_run",  # a recorded engine: kernels in SQLite, several roles
        "log-tp2_two_starts",
    ],
)
def test_tables_read_together_are_the_tables_read_alone(name: str) -> None:
    with load(shipped_runs.run_dir(name)) as run:
        together = run.read_tables(TABLES)
        for table in TABLES:
            alone = run.table(table)
            pd.testing.assert_frame_equal(together[table], alone, check_exact=True)
            assert list(together[table].dtypes.astype(str)) == list(alone.dtypes.astype(str))


def test_a_small_run_is_read_without_the_adbc_driver(connections) -> None:
    """A recorded run's tables are few rows each: read through the run's own SQLite connection
    (the driver's import pulls in pyarrow.dataset, and its connection costs more than the rows)."""
    with load(shipped_runs.run_dir("demo-fix-padding-active-rows-c16")) as run:
        t = load_tables(run)
    assert len(t["layers"]) and len(t["splits"])  # rows were read
    assert connections == []


@pytest.mark.parametrize(
    "name",
    [
        "demo-bug-legacy-flat-syncs-break-capture",
        "demo-fix-padding-active-rows-c16",
        "engine-engine_ngram_run",
        "log-tp2_two_starts",
    ],
)
def test_few_rows_read_as_the_driver_reads_them(
    name: str, monkeypatch: pytest.MonkeyPatch, connections
) -> None:
    """Both routes of a table's rows give the same frame, values and dtypes alike."""
    with load(shipped_runs.run_dir(name)) as run:
        few = run.read_tables(TABLES)
        assert connections == []
        monkeypatch.setattr(sqlengine, "few_rows", lambda con, table: False)
        bulk = run.read_tables(TABLES)
    assert connections  # the second read went through the driver
    for table in TABLES:
        pd.testing.assert_frame_equal(few[table], bulk[table], check_exact=True)
        assert list(few[table].dtypes.astype(str)) == list(bulk[table].dtypes.astype(str))
