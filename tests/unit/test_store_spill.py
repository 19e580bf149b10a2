"""The import's spill: columns parked in a temporary Parquet file read back exactly (NULLs as
-1 with their masks, at given rows, in batches of an exact size), and the file gone after an
import, whether it succeeded or failed."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from mlaprof.errors import MlaprofError
from mlaprof.importers import rocprof_csv
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store.spill import Spill
from tests.trace_io_helpers import fixture


def _spill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Spill, list[list]]:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rng = np.random.default_rng(7)
    cols: list[list] = [[], []]
    sp = Spill(["a", "b"])
    for size in (5, 1, 13, 7):  # batches of uneven sizes, as a CSV's blocks give
        a = rng.integers(-(2**62), 2**62, size).tolist()
        b = [None if x % 3 == 0 else int(x) for x in rng.integers(0, 100, size)]
        sp.append(pa.record_batch([pa.array(a, pa.int64()), pa.array(b, pa.int64())], ["a", "b"]))
        cols[0] += a
        cols[1] += b
    sp.close()
    return sp, cols


def test_spill_reads_back_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sp, (a, b) = _spill(tmp_path, monkeypatch)
    assert sp.n == len(a) == 26
    assert sp.column("a").tolist() == a
    assert sp.column("b").tolist() == [-1 if v is None else v for v in b]
    assert sp.masks()["b"].tolist() == [v is None for v in b] and "a" not in sp.masks()
    rows = np.array([0, 4, 5, 6, 18, 25])
    assert sp.take("a", rows).tolist() == [a[i] for i in rows]
    got = list(sp.batches(4))
    assert [t.num_rows for t in got] == [4] * 6 + [2]
    assert sum((t.column("b").to_pylist() for t in got), []) == b
    path = Path(sp.path)
    assert path.exists()
    sp.discard()
    assert not path.exists()


def _left(tmp_path: Path) -> list[Path]:
    return list(tmp_path.glob("mlaprof-spill-*"))


def test_an_import_leaves_no_spill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spills = tmp_path / "tmp"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    monkeypatch.setattr(rocprof_csv, "BLOCK_BYTES", 700)  # many blocks, many spilled batches
    seen: list[str] = []
    real = Spill.__init__

    def spy(self: Spill, columns: list[str]) -> None:
        real(self, columns)
        seen.append(self.path)

    monkeypatch.setattr(Spill, "__init__", spy)
    import_rocprof(fixture("rocprofiler-sdk-docs__kernel_trace.csv"), tmp_path / "t", "ok")
    assert seen and not _left(spills)
    bad = tmp_path / "bad.csv"
    text = fixture("rocprofiler-sdk-docs__kernel_trace.csv").read_text().splitlines()
    bad.write_text("\n".join(text[:3] + [text[3].replace(",", ",x", 1)] + text[4:]) + "\n")
    with pytest.raises(MlaprofError):
        import_rocprof(bad, tmp_path / "t", "bad")
    assert len(seen) == 2 and not _left(spills)


def test_the_kernel_file_is_built_a_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CSV import's kernels reach Parquet one batch of BATCH_ROWS rows at a time (each built
    from the held columns and the spill), never as one table of every kernel."""
    import sys

    from mlaprof.store import columnar, load

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from import_bench import generate

    generate(tmp_path / "kernel_trace.csv", 2_000)
    monkeypatch.setattr(columnar, "BATCH_ROWS", 300)
    built: list[tuple[str, int]] = []
    real = columnar.build

    def spy(table: str, rank: int, n: int, *args: object, **kw: object) -> object:
        built.append((table, n))
        return real(table, rank, n, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(columnar, "build", spy)
    run, _ = import_rocprof(tmp_path / "kernel_trace.csv", tmp_path / "t", "b")
    sizes = [n for table, n in built if table == "kernels"]
    assert sizes == [300] * 6 + [200]
    with load(run) as r:
        assert r.count("kernels") == 2_000
        assert r.kernels["grid_x"].notna().all()  # spilled columns written back
