"""docs/store.md's queries run as written on an imported fleet: each SQL block in DuckDB and the
pyarrow block without mlaprof, the ``run.query`` block through mlaprof, from a folder holding
the run under traces/."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from mlaprof.importers.rocprof import import_rocprof
from tests.conftest import ROOT
from tests.trace_io_helpers import DATA

DOC = (ROOT / "docs" / "store.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, re.S)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store-doc")
    import_rocprof(DATA / "aiter" / "fleet_dp2_tp4", root / "traces", "fleet")
    import_rocprof(DATA / "aiter" / "gluon_v0119_bug", root / "traces", "bug")
    return root


def test_the_doc_has_its_examples() -> None:
    assert len(blocks("sql")) == 3 and len(blocks("python")) == 2


@pytest.mark.parametrize("i", [0, 1, 2])
def test_sql_examples_run_on_the_runs(
    folder: Path, i: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    rows = duckdb.sql(blocks("sql")[i]).fetchall()
    assert rows
    if i == 0:  # every rank of the fleet, under the hosts its folders named
        got = duckdb.sql(
            "SELECT DISTINCT host, rank FROM read_parquet('traces/fleet/kernels/*/*/*.parquet', "
            "hive_partitioning = true) ORDER BY rank"
        ).fetchall()
        assert [r for _, r in got] == list(range(8)) and {h for h, _ in got} == {"host0", "host1"}
    elif i == 1:  # each layer with its S, from the layer files, as mlaprof reads the run
        from mlaprof.store import load

        with load(folder / "traces" / "fleet") as run:
            want = run.query(
                "SELECT l.layer, l.splits_used AS s, MEDIAN(k.end_ns - k.start_ns) AS m "
                "FROM kernels k JOIN layers l ON k.rank = l.rank AND k.step = l.step "
                "AND k.layer = l.layer GROUP BY ALL ORDER BY l.layer, s"
            )
        assert sorted(rows) == sorted(want.itertuples(index=False, name=None))
        assert len({r[0] for r in rows}) == int(want["layer"].nunique()) > 1
    else:  # both runs, told apart by their folder
        assert {r[0] for r in rows} == {"fleet", "bug"}


def test_python_example_runs(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    scope: dict = {}
    exec(blocks("python")[0], scope)  # noqa: S102 - the doc's own example
    tab = scope["kernels"]
    assert tab.num_rows > 0 and set(tab.column("rank").to_pylist()) == set(range(8))


def test_query_example_runs(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-surface example: per-rank rows, one row over all ranks, each rank's checks."""
    monkeypatch.chdir(folder)
    example = blocks("python")[1]
    assert "run.query(" in example
    scope: dict = {}
    lines = example.strip().splitlines()
    exec("\n".join(lines[:-3]), scope)  # noqa: S102 - the doc's own example: load the run
    run = scope["run"]
    per_rank, whole, checks = (eval(line.split("  #")[0], scope) for line in lines[-3:])  # noqa: S307
    assert per_rank["rank"].tolist() == list(range(8))
    assert len(whole) == 1 and int(whole["kernels"][0]) == run.count("kernels")
    assert set(checks["rank"]) == set(range(8)) and checks["count"].notna().all()
