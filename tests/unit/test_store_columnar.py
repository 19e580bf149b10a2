"""Columnar side tables: imported kernels in an Arrow file read exactly like SQLite rows."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.store import columnar, create_run, load
from mlaprof.store.rows import rows
from mlaprof.store.schema import TABLES, columns
from mlaprof.store.staging import staged_run

KFILE = columnar.file_name(0, "kernels")  # kernels/host=unknown/rank=0/part-0.parquet

KCOLS = [c for c, _ in TABLES["kernels"]]
NAMES = ["_fwd_grouped_kernel_stage1", "_fwd_kernel_stage2", None, 12345, "rms'norm\"<bf16>"]


def random_kernels(n: int, seed: int) -> tuple[dict, dict, list[dict]]:
    """Column arrays (with NULL masks) and the same kernels as row dicts."""
    rng = np.random.default_rng(seed)
    numbers: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for c in KCOLS:
        if c == "name":
            continue
        vals = rng.integers(-(2**62), 2**62, n, dtype=np.int64)
        mask = rng.random(n) < 0.2 if c in ("layer", "splits", "step") else None
        numbers[c] = (vals, mask)
    numbers["graph_id"] = (np.zeros(n, np.int64), np.ones(n, bool))  # all NULL
    idx = rng.integers(0, len(NAMES), n)
    dicts = []
    for i in range(n):
        d: dict = {"name": NAMES[idx[i]]}
        for c, (vals, mask) in numbers.items():
            d[c] = None if mask is not None and mask[i] else int(vals[i])
        dicts.append(d)
    return numbers, {"name": (NAMES, idx)}, dicts


def _text(v: object) -> str | None:
    return None if v is None else str(v)


def imported_run(traces: Path, name: str, numbers: dict, text: dict, n: int) -> Path:
    with staged_run(traces, name, {"source": "test"}) as (bulk, final):
        bulk.write_columnar("kernels", n, numbers, text)
    return final


def sqlite_run(traces: Path, name: str, dicts: list[dict]) -> Path:
    w = create_run(traces, name, {"source": "test"})
    w.add_many("kernels", dicts)
    w.finish()
    return w.run_dir


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path, list[dict], int]:
    seed = int.from_bytes(os.urandom(4), "little")
    n = 3000
    numbers, text, dicts = random_kernels(n, seed)
    a = imported_run(tmp_path, "arrow", numbers, text, n)
    b = sqlite_run(tmp_path, "sqlite", dicts)
    return a, b, dicts, seed


def _numeric(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for c in out.columns:
        if c != "name":
            out[c] = pd.to_numeric(out[c]).astype("float64")
    return out


def test_arrow_rows_read_like_sqlite_rows(pair) -> None:
    a, b, dicts, seed = pair
    assert (a / KFILE).is_file() and not (b / KFILE).exists()
    ra, rb = load(a), load(b)
    assert ra.count("kernels") == rb.count("kernels") == len(dicts), seed
    # exact values: 62-bit integers and NULLs survive, names as text (a number as its text)
    exp = [{"rank": 0, **d, "name": _text(d["name"])} for d in dicts]
    assert rows(ra, "kernels") == rows(rb, "kernels") == exp, seed
    fa, fb = ra.table("kernels"), rb.table("kernels")
    assert list(fa.columns) == list(columns("kernels"))
    pd.testing.assert_frame_equal(_numeric(fa), _numeric(fb), check_dtype=False)
    assert fa["start_ns"].dtype == np.int64 and fa["start_ns"].tolist() == [
        d["start_ns"] for d in dicts
    ]


def test_sql_over_arrow_rows(pair) -> None:
    a, b, dicts, seed = pair
    sql = "SELECT name, COUNT(*) AS n, SUM(layer IS NULL) AS nl FROM kernels GROUP BY name ORDER BY name"
    qa, qb = load(a).query(sql), load(b).query(sql)
    pd.testing.assert_frame_equal(qa, qb)
    assert int(qa["n"].sum()) == len(dicts), seed
    ra = load(a)
    ra.query("SELECT COUNT(*) AS n FROM kernels")
    assert len(ra.table("kernels")) == ra.count("kernels") == len(dicts)  # no double rows
    assert len(ra.query("SELECT * FROM kernels WHERE layer IS NULL")) == sum(
        d["layer"] is None for d in dicts
    )
    # DuckDB read the file in place: nothing was copied into SQLite
    assert ra._cons[(0, "")].execute("SELECT COUNT(*) FROM sqlite_temp_master").fetchone()[0] == 0
    # other tables are visible in the same SQL (a join with the database's rows)
    j = ra.query("SELECT COUNT(*) AS n FROM kernels k JOIN steps s ON s.step = k.step")
    assert j["n"].tolist() == [0]
    # parameters, and integer sums come back as int64 like SQLite's
    q = ra.query("SELECT SUM(start_ns > ?) AS n FROM kernels", (0,))
    assert q["n"].dtype == np.int64
    assert q["n"].tolist() == [sum(d["start_ns"] > 0 for d in dicts)], seed


def test_sql_needs_duckdb(pair, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    a, _b, dicts, _seed = pair
    monkeypatch.setitem(sys.modules, "duckdb", None)
    run = load(a)
    with pytest.raises(MlaprofError, match="pip install duckdb"):
        run.query("SELECT COUNT(*) AS n FROM kernels")
    assert len(run.table("kernels")) == len(dicts)  # whole tables read without it


def test_legacy_arrow_ipc_file_still_reads(pair) -> None:
    """Runs imported before Parquet keep an Arrow IPC file: read and queried alike."""
    import pyarrow as pa
    import pyarrow.ipc
    import pyarrow.parquet as pq

    a, _b, dicts, _seed = pair
    tab = pq.read_table(a / KFILE)
    path = str(a / "rank0.kernels.arrow")
    with pa.OSFile(path, "wb") as sink, pyarrow.ipc.new_file(sink, tab.schema) as w:
        w.write_table(tab)
    (a / KFILE).unlink()
    con = sqlite3.connect(a / "rank0.db")
    con.execute("UPDATE meta SET value = ? WHERE key = 'columnar:kernels'",
                (json.dumps({"file": "rank0.kernels.arrow", "rows": len(dicts)}),))  # fmt: skip
    con.commit()
    con.close()
    run = load(a)
    assert len(run.table("kernels")) == len(dicts)
    assert run.query("SELECT COUNT(*) AS n FROM kernels")["n"].tolist() == [len(dicts)]


def test_database_rows_come_first(tmp_path: Path) -> None:
    numbers, text, dicts = random_kernels(50, 7)
    with staged_run(tmp_path, "mixed", {"source": "test"}) as (bulk, final):
        bulk.insert_dicts("kernels", [{"name": "from-db", "start_ns": 1}])
        bulk.write_columnar("kernels", 50, numbers, text)
    run = load(final)
    names = run.table("kernels")["name"].tolist()
    assert names[0] == "from-db" and len(names) == 51
    assert run.count("kernels") == 51
    assert run.query("SELECT COUNT(*) AS n FROM kernels")["n"].tolist() == [51]
    first = dicts[0]["name"]
    assert [r["name"] for r in rows(run, "kernels")][:2] == ["from-db", _text(first)]


def test_failed_import_leaves_no_arrow_file(tmp_path: Path) -> None:
    numbers, text, _ = random_kernels(10, 1)
    with pytest.raises(RuntimeError), staged_run(tmp_path, "x", {}) as (bulk, _final):
        bulk.write_columnar("kernels", 10, numbers, text)
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_write_rejects_wrong_columns(tmp_path: Path) -> None:
    with pytest.raises(MlaprofError, match="no column"), staged_run(tmp_path, "x", {}) as (b, _):
        b.write_columnar("kernels", 1, {"colour": (np.zeros(1, np.int64), None)})


def test_parts_are_written_in_call_order(tmp_path: Path) -> None:
    """Several writes (files of a folder, restored and foreign kernels) make one file, in order,
    with one dictionary over all names."""
    with staged_run(tmp_path, "y", {}) as (b, final):
        for i, names in enumerate((["a", "b"], ["b", "c"], ["d"])):
            idx = np.arange(len(names))
            b.write_columnar("kernels", len(names), {"step": (idx + 10 * i, None)},
                             {"name": (names, idx)})  # fmt: skip
    got = [(r["step"], r["name"]) for r in rows(load(final), "kernels")]
    assert got == [(0, "a"), (1, "b"), (10, "b"), (11, "c"), (20, "d")]


def _damage(run: Path, how: str) -> None:
    f = run / KFILE
    if how == "missing":
        f.unlink()
    elif how == "garbage":
        f.write_bytes(b"ARROW1\0\0" + os.urandom(512))
    elif how == "truncated":
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    else:  # the database says another row count
        con = sqlite3.connect(run / "rank0.db")
        con.execute("UPDATE meta SET value = ? WHERE key = 'columnar:kernels'",
                    (json.dumps({"file": f.name, "rows": 5}),))  # fmt: skip
        con.commit()
        con.close()


@pytest.mark.parametrize("how", ["missing", "garbage", "truncated", "count"])
def test_damaged_side_file_is_one_clear_error(
    pair, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _b, _dicts, _seed = pair
    db_before = (a / "rank0.db").read_bytes()
    _damage(a, how)
    with pytest.raises(MlaprofError, match="kernels"):
        load(a).table("kernels")
    for cmd in (["export", str(a), "--format", "csv", "--out", str(a.parent / "o")],):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert (
            err.startswith("mlaprof: error: ") and err.count("\n") == 1 and "Traceback" not in err
        )
    if how != "count":
        assert (a / "rank0.db").read_bytes() == db_before  # nothing recorded was touched


def test_follower_counts_arrow_rows(pair) -> None:
    from mlaprof.tui.follower import RunFollower

    a, _b, dicts, _seed = pair
    f = RunFollower(a)
    f.catch_up()
    assert f.fold.rows["kernels"] == len(dicts)  # counted, never read into the fold


def test_version_1_runs_still_read(tmp_path: Path) -> None:
    run = sqlite_run(tmp_path, "old", [{"name": "k", "start_ns": 3}])
    con = sqlite3.connect(run / "rank0.db")
    con.execute("PRAGMA user_version=1")
    con.commit()
    con.close()
    meta = json.loads((run / "run.json").read_text())
    meta["schema_version"] = 1
    (run / "run.json").write_text(json.dumps(meta))
    assert load(run).table("kernels")["name"].tolist() == ["k"]


@pytest.mark.parametrize("name", ["../x.parquet", "/etc/hostname", "kernels/../../x.parquet",
                                  "kernels//rank=0/part-0.parquet"])  # fmt: skip
def test_a_recorded_file_outside_the_run_is_refused(pair, name: str) -> None:
    a, _b, dicts, _seed = pair
    con = sqlite3.connect(a / "rank0.db")
    con.execute("UPDATE meta SET value = ? WHERE key = 'columnar:kernels'",
                (json.dumps({"file": name, "rows": len(dicts)}),))  # fmt: skip
    con.commit()
    con.close()
    with pytest.raises(MlaprofError, match="is incomplete"):
        load(a)


def test_files_are_hive_partitioned_with_their_schema_version(pair) -> None:
    """Any engine reads the files in place: host and rank from the folders, the table and its
    schema version from the file's own metadata."""
    import duckdb
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from mlaprof.store.schema import SCHEMA_VERSION

    a, _b, dicts, _seed = pair
    md = pq.read_schema(a / KFILE).metadata
    assert md[b"mlaprof.table"] == b"kernels"
    assert md[b"mlaprof.schema_version"] == str(SCHEMA_VERSION).encode()
    assert md[b"mlaprof.layout_version"] == str(columnar.LAYOUT_VERSION).encode()
    glob = str(a.parent / "*" / "kernels" / "*" / "*" / "*.parquet")
    got = duckdb.sql(f"SELECT host, rank, COUNT(*) FROM read_parquet('{glob}', "
                     "hive_partitioning = true) GROUP BY ALL").fetchall()  # fmt: skip
    assert got == [("unknown", 0, len(dicts))]
    part = ds.partitioning(pa.schema([("host", pa.string()), ("rank", pa.int64())]), flavor="hive")
    tab = ds.dataset(a / "kernels", format="parquet", partitioning=part).to_table()
    assert tab.num_rows == len(dicts) and set(tab.column("host").to_pylist()) == {"unknown"}


@pytest.mark.parametrize("host, label", [("node0", "node0"), ("a/b c", "a_b_c"), (None, "unknown"),
                                         ("..", "unknown"), ("gpu-7.cluster", "gpu-7.cluster")])  # fmt: skip
def test_host_labels_are_safe_partition_values(host, label) -> None:  # noqa: ANN001
    assert columnar.host_label(host) == label
    assert "/" not in columnar.host_label(host) and ".." not in columnar.host_label(host)


@pytest.mark.parametrize("size", [1, 5, 300, 100_000])
def test_row_group_dictionaries_are_the_sorted_distinct_codes(size: int) -> None:
    """A row group's name dictionary, counted instead of sorted, is np.unique's: the distinct
    codes ascending and every row's place among them (few rows of many names sort instead)."""
    rng = np.random.default_rng(size)
    for n in (0, 1, 50, 2_000):
        for dtype in (np.int64, np.int32):  # int32: the CSV reader's name codes
            idx = rng.integers(0, size, n).astype(dtype)
            if n >= size and size < 1000:  # every code present (the batch's own dictionary)
                idx[:size] = np.arange(size)
            uniq, inv = columnar._distinct_codes(idx, size)
            want_u, want_i = np.unique(idx, return_inverse=True)
            assert uniq.tolist() == want_u.tolist() and inv.tolist() == want_i.tolist()
    # all codes present but one (in the middle, or the last): places shift after a gap only
    for gone in (1, 4):
        idx = np.array([c for c in range(5) if c != gone] * 10, np.int32)
        uniq, inv = columnar._distinct_codes(idx, 5)
        want_u, want_i = np.unique(idx, return_inverse=True)
        assert uniq.tolist() == want_u.tolist() and inv.tolist() == want_i.tolist()


def test_times_are_delta_encoded_the_other_integers_plain(pair) -> None:
    """Epoch nanoseconds grow by small steps: delta pages keep them ~14x smaller than plain
    ones; the small integers (steps, ids, grids) stay plain, which LZ4 shrinks as well at half
    the CPU of delta encoding. Every value reads back (the pair's rows, in any encoding)."""
    import pyarrow.parquet as pq

    a, _b, dicts, _seed = pair
    meta = pq.ParquetFile(a / KFILE).metadata
    rg = meta.row_group(0)
    enc = {rg.column(i).path_in_schema: set(rg.column(i).encodings) for i in range(rg.num_columns)}
    for c, got in enc.items():
        if c.endswith("_ns"):
            assert "DELTA_BINARY_PACKED" in got, c
        else:
            assert "DELTA_BINARY_PACKED" not in got, c
    assert {"start_ns", "end_ns"} <= set(enc)
    tab = pq.read_table(a / KFILE)
    assert tab.column("start_ns").to_pylist() == [d["start_ns"] for d in dicts]
    assert tab.column("grid_x").to_pylist() == [d["grid_x"] for d in dicts]
