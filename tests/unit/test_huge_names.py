"""Huge kernel names (MB each) are stored and queried without carrying them whole through a
sort: the report's timeline query asked DuckDB to order every kernel's full name, which ran out
of memory on 4-10 MB names ("failed to allocate data of size 1.0 GiB"). Here the SQL engine's
memory cap is scaled down with the names (512 KB names, a 24 MB cap)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.store import sqlengine
from mlaprof.textsafe import short
from tests.trace_io_helpers import replay_kernel_csv

NAME = 512 << 10


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    p = tmp_path / "in" / "1_kernel_trace.csv"
    p.parent.mkdir()
    replay_kernel_csv(p, replays=20, layers=3, splits=8)
    with open(p, newline="") as f:
        rows = list(csv.reader(f))
    i = rows[0].index("Kernel_Name")
    for n, r in enumerate(rows[1:]):
        r[i] = f"{r[i]}<{n % 7}{'x' * NAME}>"  # seven distinct huge names
    with open(p, "w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    traces = tmp_path / "t"
    assert main(["import", "rocprof", str(p), "--traces", str(traces), "--name", "h"]) == 0
    return traces / "h"


def test_reports_of_huge_names_stay_within_the_sql_cap(
    huge: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(sqlengine.MEMORY_ENV, "24MB")
    monkeypatch.setattr(sqlengine, "RETRY_MEMORY", "24MB")
    # a database of this test's own: the process's shared one keeps its settings for the others
    monkeypatch.setattr(sqlengine, "_SHARED", {})
    capsys.readouterr()
    assert main(["report", str(huge), "--json"]) == 0, capsys.readouterr().err
    json.loads(capsys.readouterr().out)
    page = huge.parent / "r.html"
    assert main(["report", str(huge), "--html", str(page)]) == 0, capsys.readouterr().err
    # the timeline's names, shortened with their length (the name and its template's < >)
    assert re.search(r"\.\.\. \(52\d,\d{3} chars\)", page.read_text())
    assert main(["tui", str(huge), "--once"]) == 0
    out = capsys.readouterr().out
    assert "analysis failed" not in out


@pytest.mark.parametrize("engine", ["duckdb", "sqlite"])
def test_the_sql_shortening_is_textsafe_short(engine: str) -> None:
    """The head and length a query selects give what textsafe.short gives (both engines)."""
    import sqlite3

    import duckdb

    from mlaprof.textsafe import short_of, sql_head

    con = duckdb.connect() if engine == "duckdb" else sqlite3.connect(":memory:")
    for s in ("", "a" * 2000, "b" * 2001, "é" * 5000):
        head, n = con.execute(f"SELECT {sql_head('n')} FROM (SELECT ? AS n)", [s]).fetchone()
        assert short_of(head, n) == short(s)
    con.close()
