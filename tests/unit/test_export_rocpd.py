"""rocpd export: the public schema's layout (uuid-suffixed tables, unsuffixed views, metadata
tags, no foreign tables), the data views answer with mlaprof's kernels and per-layer ranges, and
export -> import gives back the same run, exact to the nanosecond."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from mlaprof.exporters.rocpd_export import export_rocpd
from mlaprof.formats import rocpd_schema
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import TABLES, load
from tests.conformance.rocpd import write_rocpd
from tests.conformance.shapes import SHAPES
from tests.trace_io_helpers import db_rows, fixture, kernel_dicts, make_run


@pytest.fixture()
def exported(tmp_path: Path) -> tuple[Path, Path]:
    run_dir = make_run(tmp_path / "t")
    db = tmp_path / "run.rocpd.db"
    with load(run_dir) as run:
        export_rocpd(run, db)
    return run_dir, db


def test_schema_layout(exported: tuple[Path, Path]) -> None:
    _, db = exported
    con = sqlite3.connect(db)
    tags = dict(con.execute("SELECT tag, value FROM rocpd_metadata"))
    assert tags["schema_version"] == rocpd_schema.SCHEMA_VERSION
    assert re.fullmatch(r"_[0-9a-f]{8}_[0-9a-f]{4}_7[0-9a-f]{3}_[89ab][0-9a-f]{3}_[0-9a-f]{12}",
                        tags["uuid"])  # fmt: skip
    assert tags["guid"] == tags["uuid"][1:].replace("_", "-")
    objs = dict(con.execute("SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
    tables = {n for n, t in objs.items() if t == "table"}
    expected = {f"rocpd_{n}{tags['uuid']}" for n in [*rocpd_schema.TABLES, "metadata"]}
    assert tables == expected  # nothing but the schema's own tables
    for n in [*rocpd_schema.TABLES, "metadata"]:
        assert objs[f"rocpd_{n}"] == "view"
    for v in ("kernels", "regions", "top_kernels", "memory_copies", "memory_allocations"):
        assert objs[v] == "view"
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    # every row carries the database's guid
    assert {g for (g,) in con.execute("SELECT DISTINCT guid FROM rocpd_kernel_dispatch")} == {
        tags["guid"]
    }


def test_views_answer(exported: tuple[Path, Path]) -> None:
    run_dir, db = exported
    con = sqlite3.connect(db)
    stored = db_rows(run_dir, "kernels")
    ks = con.execute(
        "SELECT name, start, end, duration, grid_x, grid_y, grid_z, workgroup_x, stack_id, "
        "agent_abs_index, category, region, corr_id FROM kernels ORDER BY id"
    ).fetchall()
    assert len(ks) == len(stored) == 12
    for k, s in zip(ks, stored, strict=True):
        assert k[:3] == (s[3], s[4], s[5]) and k[3] == s[5] - s[4]
        assert k[4:8] == (s[9], s[10], s[11], s[12])
        # the launch correlation in stack_id; the external id 0, as rocprofv3 writes it
        assert k[8] == s[8] and k[9] == s[6] and k[12] == 0
        assert k[10] == "KERNEL_DISPATCH" and k[11] == s[3]
    regions = con.execute(
        "SELECT category, name, start, end, pid, tid FROM regions ORDER BY id"
    ).fetchall()
    layers = [r for r in regions if r[0] == "MLAPROF_LAYER"]
    stored_layers = db_rows(run_dir, "layers")
    assert [(r[1], r[2], r[3]) for r in layers] == [
        (f"layer {lay[1]}", lay[2], lay[2] + lay[3]) for lay in stored_layers
    ]
    api = [r for r in regions if r[0] != "MLAPROF_LAYER"]
    assert [(r[1], r[2], r[4], r[5]) for r in api] == [
        (a[1], a[5], a[2], a[3]) for a in db_rows(run_dir, "api")
    ]
    top = {r[0]: r[1:] for r in con.execute("SELECT * FROM top_kernels")}
    for name in ("mla_verify_stage1", "mla_verify_stage2"):
        mine = [s for s in stored if s[3] == name]
        calls, total_us = top[name][0], top[name][1]
        assert calls == len(mine)
        assert total_us == pytest.approx(sum(s[5] - s[4] for s in mine) / 1000.0)
    assert sum(r[3] for r in top.values()) == pytest.approx(100.0)
    copies = con.execute("SELECT name, size, src_device, dst_device FROM memory_copies").fetchall()
    assert copies == [("MEMORY_COPY_HOST_TO_DEVICE", 4096, "Agent 0", "Agent 2")]


def test_round_trip_exact(exported: tuple[Path, Path], tmp_path: Path) -> None:
    run_dir, db = exported
    back, _ = import_rocprof(db, tmp_path / "t", "back")
    for table in TABLES:
        assert db_rows(back, table) == db_rows(run_dir, table), table
    meta = load(back).meta
    assert meta["backend"] == "triton" and meta["scenario"] == {"name": "unit"}


def test_round_trip_of_imported_fixture(tmp_path: Path) -> None:
    src = fixture("rocprof-unified-viewer__decode_kernel_trace.csv")
    run, _ = import_rocprof(src, tmp_path / "t", "a")
    db = tmp_path / "a.db"
    with load(run) as r:
        counts = export_rocpd(r, db)
    assert counts["kernel_dispatch"] == 144
    back, _ = import_rocprof(db, tmp_path / "t", "b")
    assert db_rows(back, "kernels") == db_rows(run, "kernels")


def test_refuses_overwrite(exported: tuple[Path, Path]) -> None:
    run_dir, db = exported
    from mlaprof.errors import MlaprofError

    with load(run_dir) as run, pytest.raises(MlaprofError, match="already exists"):
        export_rocpd(run, db)


def _strip(db: Path) -> None:
    """Drop mlaprof's keys from every extdata: what is left must read as a rocprofv3 database."""
    con = sqlite3.connect(db)
    for (t,) in con.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_%\\_%' ESCAPE '\\'"
    ).fetchall():
        if "extdata" not in [c[1] for c in con.execute(f'PRAGMA table_info("{t}")')]:
            continue
        for rid, ext in con.execute(f'SELECT id, extdata FROM "{t}"').fetchall():
            doc = json.loads(ext or "{}")
            keep = {k: v for k, v in doc.items() if not k.startswith("mlaprof")}
            if keep != doc:
                con.execute(f'UPDATE "{t}" SET extdata = ? WHERE id = ?', (json.dumps(keep), rid))
    con.commit()
    con.close()


# the queries rocpd's converters run on the data views (rocprofiler-sdk rocpd/csv.py:
# write_kernel_csv, write_region_csv; samples: data_views.sql)
VIEW_QUERIES = {
    "kernels": "SELECT name, start, end, stack_id, grid_x, grid_y, grid_z FROM kernels "
    "ORDER BY start, end DESC",
    "regions": "SELECT category, name, pid, tid, stack_id, start, end, "
    "json_extract(extdata, '$.message') FROM regions WHERE category != 'MLAPROF_LAYER' "
    "ORDER BY start, end DESC",
    "samples": "SELECT category, name, pid, tid, stack_id, timestamp, "
    "json_extract(extdata, '$.message') FROM samples ORDER BY timestamp",
}


@pytest.mark.parametrize("shape", ["roctx_steps", "eager"])
def test_export_reads_as_rocprofv3_writes(
    tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trace as rocprofv3 writes it (tests/conformance), imported and exported: the export
    answers rocpd's data-view queries as the original does (launch correlations in stack_id,
    roctx messages in extdata, marks as samples), and reads back -- with mlaprof's extdata, with
    it stripped, row by row or columnar -- as the same run."""
    from mlaprof.importers import rocpd_sqlite

    trace = SHAPES[shape]()
    src = write_rocpd(trace, tmp_path / "src" / "1_results.db", "3.0.1")
    run, _ = import_rocprof(src, tmp_path / "t", "a")
    db = tmp_path / "export.db"
    with load(run) as r:
        export_rocpd(r, db)
    orig, mine = sqlite3.connect(src), sqlite3.connect(db)
    for view, q in VIEW_QUERIES.items():
        want = orig.execute(q).fetchall()
        assert mine.execute(q).fetchall() == want, view
        assert want or view == "samples" and shape == "eager"
    orig.close()
    mine.close()
    _strip(db)
    back = {"stripped": import_rocprof(db, tmp_path / "t", "b")[0]}
    monkeypatch.setattr(rocpd_sqlite, "read_dispatches", lambda *_a: None)
    back["row by row"] = import_rocprof(db, tmp_path / "t", "c")[0]
    cols = ("name", "start_ns", "end_ns", "device", "correlation", "replay", "layer", "step")
    for how, b in back.items():
        for t in ("steps", "api"):
            assert db_rows(b, t) == db_rows(run, t), (how, t)
        got = [tuple(k[c] for c in cols) for k in kernel_dicts(b)]
        assert got == [tuple(k[c] for c in cols) for k in kernel_dicts(run)], how


def test_export_tables_have_rocprofv3s_columns(exported: tuple[Path, Path]) -> None:
    """Every table of the export has the columns rocprofv3's schema 3.0.1 gives it, in order
    (strict rocpd validators reject other columns), as the conformance writer lays them out
    from rocpd_tables.sql."""
    from tests.conformance.rocpd import ddl

    _, db = exported
    ref = sqlite3.connect(":memory:")
    for stmt in ddl("3.0.1", "_u", "g"):
        ref.execute(stmt)
    con = sqlite3.connect(db)
    (uuid,) = con.execute("SELECT value FROM rocpd_metadata WHERE tag = 'uuid'").fetchone()
    for name in [*rocpd_schema.TABLES, "metadata"]:
        want = [c[1] for c in ref.execute(f'PRAGMA table_info("rocpd_{name}_u")')]
        got = [c[1] for c in con.execute(f'PRAGMA table_info("rocpd_{name}{uuid}")')]
        assert got == want, name


@pytest.mark.parametrize("untyped", [False, True])
def test_kernel_extdata_is_json_dumps_of_the_row(
    tmp_path: Path, monkeypatch, untyped: bool
) -> None:
    """Each dispatch's extdata is ``json.dumps({"mlaprof": row})`` of its stored row, whether
    built column by column from Arrow batches (across batch boundaries) or, for a database
    holding text in an integer column, a row at a time."""
    from mlaprof.store import columnar, create_run
    from mlaprof.store.rows import iter_rows

    monkeypatch.setattr(columnar, "ROW_BATCH", 3)
    w = create_run(tmp_path / "t", "odd", {"source": "test"})
    names = ['say "hi"', "ünïcode ⚡", None, "back\\slash", "tab\there", "k"]
    for i, name in enumerate(names * 2):
        w.add("kernels", name=name, start_ns=100 * i, end_ns=100 * i + 50, step=i // 4,
              layer=None if i % 3 else i, device="cuda:0" if untyped and i == 5 else 0,
              stream=7, correlation=i, grid_x=4, grid_z=None, splits=2)  # fmt: skip
    w.finish()
    out = tmp_path / "x.db"
    with load(tmp_path / "t" / "odd") as run:
        export_rocpd(run, out)
        want = [json.dumps({"mlaprof": {c: k[c] for c in k if c != "rank"}})
                for k in iter_rows(run, "kernels")]  # fmt: skip
    con = sqlite3.connect(out)
    table = next(t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                 if t.startswith("rocpd_kernel_dispatch"))  # fmt: skip
    got = [e for (e,) in con.execute(f'SELECT extdata FROM "{table}" ORDER BY id')]
    con.close()
    assert got == want and len(got) == 12
