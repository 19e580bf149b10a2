"""Streamed exports: the rocpd export writes what the writer before streaming wrote (its
digests below, taken with mlaprof at main ac93ad5 on the shipped traces and a fixture import),
and the exporters hold a batch of rows, never a table (a generator's rows watched while alive)."""

from __future__ import annotations

import shutil
import uuid
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlaprof.exporters import csv_export, perfetto, rocpd_export
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load
from mlaprof.store import rows as store_rows
from tests.rocpd_norm import digest
from tests.trace_io_helpers import fixture

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "traces" / "demo"
FIXED = uuid.UUID("01234567-89ab-7def-8123-456789abcdef")
FIXTURE_FILES = {
    "1_kernel_trace.csv": "rocprof-unified-viewer__decode_kernel_trace.csv",
    "1_hip_api_trace.csv": "rocprof-unified-viewer__decode_hip_api_trace.csv",
    "1_memory_copy_trace.csv": "rocprofiler-sdk-docs__memory_copy_trace.csv",
    "1_memory_allocation_trace.csv": "rocprofiler-sdk-docs__memory_allocation_trace.csv",
    "1_marker_api_trace.csv": "rocprofiler-sdk-docs__marker_api_trace.csv",
}
# tests/rocpd_norm.digest of the export made by the writer before streaming (main ac93ad5),
# uuid and host fixed as below
BEFORE = {
    "bug-legacy-flat-syncs-break-capture": "530d4806829cd76329d0aa0bbd8f929569d5b1910ac791ebb4b2073fe71b407a",
    "bug-padding-collapses-splits-c16": "4c70b720b9a106a6317f1f9ff8a35ca48aa51e49e825b45db394431b7c05dd0e",
    "bug-prefix-legacy-flat-all-rows": "069aac40b1c0f119615580922fefa95d2645a4afbb770af1affff6fdd3f08188",
    "fix-native-kernel-full-graph": "41e35074521c098ac75c8db6c2d711afb3e524c237bc2cced1b85e2399fbcc51",
    "fix-padding-active-rows-c16": "d51447e673bd6f6fc2990d0cd6e86c7d30e61d5882b347335884ecb2b014d791",
    "fix-splits-decided-on-device-c1-long": "5198a39d07fccc6a3cef28121ef91150a1df8c167e0ef536d12b613f66cda1cc",
    "fixture-import": "085cf79f0f8869d5425145e7e42ec197f059821ce9e0847469a496087d114952",
}


def _fixture_run(tmp_path: Path) -> Path:
    src = tmp_path / "fx"
    src.mkdir()
    for dst, name in FIXTURE_FILES.items():
        shutil.copy(fixture(name), src / dst)
    run, _ = import_rocprof(src, tmp_path / "t", "fx")
    return run


def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rocpd_export, "uuid7", lambda: FIXED)
    monkeypatch.setattr(rocpd_export.platform, "node", lambda: "host")


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_rocpd_export_writes_what_it_wrote_before(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fixed(monkeypatch)
    path = _fixture_run(tmp_path) if name == "fixture-import" else DEMO / name
    db = tmp_path / "out.db"
    with load(path) as run:
        rocpd_export.export_rocpd(run, db)
    assert digest(db) == BEFORE[name]


class _Row(dict):  # a dict that a weak reference can watch
    pass


class Watched:
    """``iter_rows`` whose rows are watched: asking for the next row while more than ``limit``
    rows it gave are still alive (held in a list, say) raises."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.alive: list[weakref.ref[_Row]] = []
        self.given = 0

    def __call__(self, run: Any, table: str, rank: int | None = None) -> Iterator[dict[str, Any]]:
        for r in store_rows.iter_rows(run, table, rank):
            self.alive = [w for w in self.alive if w() is not None]
            if len(self.alive) > self.limit:
                raise RuntimeError(f"{len(self.alive)} {table} rows held at once")
            row = _Row(r)
            self.alive.append(weakref.ref(row))
            self.given += 1
            yield row


@pytest.fixture(scope="module")
def many_kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An import of 2,000 dispatches in rocprofv3's layout (MLA replays: kernels, layers, steps)."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from import_bench import generate

    tmp = tmp_path_factory.mktemp("many")
    generate(tmp / "kernel_trace.csv", 2_000)
    run, _ = import_rocprof(tmp / "kernel_trace.csv", tmp / "t", "many")
    return run


@pytest.mark.parametrize("fmt", ["rocpd", "perfetto", "csv"])
def test_exporters_hold_a_batch_not_a_table(
    fmt: str, many_kernels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = Watched(limit=50)
    mod = {"rocpd": rocpd_export, "perfetto": perfetto, "csv": csv_export}[fmt]
    monkeypatch.setattr(mod, "iter_rows", watch)
    monkeypatch.setattr(rocpd_export, "BATCH_ROWS", 20)
    monkeypatch.setattr(perfetto, "HOLD_ROWS", 20)  # small tables are held and sorted by design
    with load(many_kernels) as run:
        if fmt == "rocpd":
            rocpd_export.export_rocpd(run, tmp_path / "out.db")
        elif fmt == "perfetto":
            perfetto.export_perfetto(run, tmp_path / "out.json")
        else:
            csv_export.export_csv(run, tmp_path / "out")
    assert watch.given >= 2_000  # every kernel went through the watched iterator


def test_watched_iterator_catches_a_list() -> None:
    """The watch itself: rows kept in a list trip it."""
    watch = Watched(limit=5)
    fake = [{"a": i} for i in range(20)]
    orig = store_rows.iter_rows
    store_rows.iter_rows = lambda run, table, rank=None: iter(fake)  # type: ignore[assignment]
    try:
        with pytest.raises(RuntimeError, match="rows held at once"):
            list(watch(None, "kernels"))
    finally:
        store_rows.iter_rows = orig
