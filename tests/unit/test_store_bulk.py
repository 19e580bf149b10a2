"""Multi-row inserts (mlaprof.store.bulk): every row lands once, literals and NULLs included."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from mlaprof.errors import MlaprofError
from mlaprof.store import create_run
from mlaprof.store.bulk import insert_columns, insert_flat


@pytest.fixture
def con(tmp_path):
    w = create_run(tmp_path, "b", {})
    w.finish()
    c = sqlite3.connect(w.db_path)
    yield c
    c.close()


@pytest.mark.parametrize("n", [1, 3, 1023, 1024, 70_001])
def test_insert_columns_rows_in_order(con, n: int) -> None:
    rng = np.random.default_rng(n)
    step = rng.integers(-(2**62), 2**62, n)
    mask = rng.random(n) < 0.3
    insert_columns(con, "layers", 4, {"step": (step, mask), "layer": (np.full(n, 7), None),
                   "syncs": (np.zeros(n, np.int64), np.ones(n, bool))}, n)  # fmt: skip
    got = con.execute("SELECT rank, step, layer, syncs FROM layers ORDER BY rowid").fetchall()
    exp = [(4, None if m else int(s), 7, None) for s, m in zip(step, mask, strict=True)]
    assert got == exp


def test_all_literal_rows(con) -> None:
    """Every column constant: no value to bind, still one row per input row."""
    insert_columns(con, "steps", 0, {"step": (np.full(5, 2), None)}, 5, {"graph_mode": "FULL"})
    assert con.execute("SELECT step, graph_mode FROM steps").fetchall() == [(2, "FULL")] * 5


def test_insert_flat_and_errors(con) -> None:
    cols = ("domain", "function", "pid")
    flat = [v for i in range(2000) for v in ("HIP", f"f{i}", i)]
    assert insert_flat(con, "api", 1, cols, flat) == 2000
    assert con.execute("SELECT COUNT(*), MAX(pid) FROM api WHERE rank = 1").fetchone() == (
        2000,
        1999,
    )
    with pytest.raises(MlaprofError, match="no column"):
        insert_flat(con, "api", 0, ("colour",), [1])
    with pytest.raises(MlaprofError, match="do not fill"):
        insert_flat(con, "api", 0, cols, [1, 2])
    with pytest.raises(MlaprofError, match="cannot store a api record"):
        insert_flat(con, "api", 0, cols, ["HIP", "f", object()])
