"""rocpd export: the public schema's layout (uuid-suffixed tables, unsuffixed views, metadata
tags, no foreign tables), the data views answer with mlaprof's kernels and per-layer ranges, and
export -> import gives back the same run, exact to the nanosecond."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from mlaprof.exporters.rocpd_export import export_rocpd
from mlaprof.formats import rocpd_schema
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import TABLES, load
from tests.trace_io_helpers import db_rows, fixture, make_run


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
        "SELECT name, start, end, duration, grid_x, grid_y, grid_z, workgroup_x, corr_id, "
        "agent_abs_index, category, region FROM kernels ORDER BY id"
    ).fetchall()
    assert len(ks) == len(stored) == 12
    for k, s in zip(ks, stored, strict=True):
        assert k[:3] == (s[3], s[4], s[5]) and k[3] == s[5] - s[4]
        assert k[4:8] == (s[9], s[10], s[11], s[12])
        assert k[8] == s[8] and k[9] == s[6]
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
