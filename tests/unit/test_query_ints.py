"""``run.query`` gives an integer column that holds NULLs as integers (pandas' nullable
``Int64``), in DuckDB and in SQLite alike: a step number reads 3, never 3.0, and an int64 past
2**53 stays exact (float64 would round it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlaprof.store import load
from tests.trace_io_helpers import make_run

BIG = 2**60 + 1  # not a float64: 2**60 + 1 rounds to 2**60


@pytest.mark.parametrize("portable", [False, True])  # DuckDB; SQLite (a small run's rows)
def test_an_int_column_with_nulls_comes_back_as_ints(tmp_path: Path, portable: bool) -> None:
    run = make_run(tmp_path)
    sql = ("SELECT CASE WHEN step = 0 THEN NULL ELSE step + 3 END AS s, "
           "CASE WHEN step = 0 THEN NULL ELSE CAST(? AS BIGINT) END AS big, step "
           "FROM steps ORDER BY step")  # fmt: skip
    with load(run) as r:
        got = r.query(sql, (BIG,), portable=portable)
    assert len(got) >= 2 and int(got["step"].iloc[0]) == 0
    assert str(got["s"].dtype) == "Int64" and str(got["big"].dtype) == "Int64"
    assert got["s"].isna().iloc[0] and not got["s"].iloc[1:].isna().any()
    assert [int(v) for v in got["s"].iloc[1:]] == [int(v) + 3 for v in got["step"].iloc[1:]]
    assert int(got["big"].iloc[1]) == BIG
    assert str(got["step"].dtype) == "int64"  # a column without NULLs stays numpy int64
