"""The import's spill: columns parked in memory (narrowed) or a temporary Parquet file read back exactly (NULLs as
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
from mlaprof.store import spill
from mlaprof.store.spill import Spill
from tests.trace_io_helpers import fixture


def _spill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int | None = None
) -> tuple[Spill, list[list]]:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rng = np.random.default_rng(7)
    cols: list[list] = [[], []]
    sp = Spill(["a", "b"], budget)
    for size in (5, 1, 13, 7):  # batches of uneven sizes, as a CSV's blocks give
        a = rng.integers(-(2**62), 2**62, size).tolist()
        b = [None if x % 3 == 0 else int(x) for x in rng.integers(0, 100, size)]
        sp.append(pa.record_batch([pa.array(a, pa.int64()), pa.array(b, pa.int64())], ["a", "b"]))
        cols[0] += a
        cols[1] += b
    sp.close()
    return sp, cols


# in memory (the default budget), on disk from the start, and moved to disk after two batches
# (5 + 1 rows of int64 ``a`` and int8 ``b``: 54 bytes held, the third batch past 60)
BUDGETS = {"memory": None, "disk": 0, "moved": 60}


@pytest.mark.parametrize("where", list(BUDGETS))
def test_spill_reads_back_exactly(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sp, (a, b) = _spill(tmp_path, monkeypatch, BUDGETS[where])
    assert sp.n == len(a) == 26
    assert sp.column("a").tolist() == a
    assert sp.column("b").tolist() == [-1 if v is None else v for v in b]
    assert sp.masks()["b"].tolist() == [v is None for v in b] and "a" not in sp.masks()
    rows = np.array([0, 4, 5, 6, 18, 25])
    assert sp.take("a", rows).tolist() == [a[i] for i in rows]
    got = list(sp.batches(4))
    assert [t.num_rows for t in got] == [4] * 6 + [2]
    assert sum((t.column("b").to_pylist() for t in got), []) == b
    if where == "memory":  # no file written, nothing to read back from disk
        assert sp.path is None and not list(tmp_path.iterdir())
        sp.discard()
        return
    path = Path(sp.path)
    assert path.exists()
    sp.discard()
    assert not path.exists()


@pytest.mark.parametrize("file_rows", [1, 8, 10_000])
def test_a_spill_on_disk_writes_row_groups_of_file_rows(
    file_rows: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of a few rows are gathered into row groups of at least FILE_ROWS (the last one
    fewer), read back the same."""
    import pyarrow.parquet as pq

    monkeypatch.setattr(spill, "FILE_ROWS", file_rows)
    sp, (a, b) = _spill(tmp_path, monkeypatch, 0)  # batches of 5, 1, 13, 7 rows
    groups = [pq.ParquetFile(sp.path).metadata.row_group(i).num_rows
              for i in range(pq.ParquetFile(sp.path).metadata.num_row_groups)]  # fmt: skip
    assert groups == {1: [5, 1, 13, 7], 8: [19, 7], 10_000: [26]}[file_rows]
    assert sp.column("a").tolist() == a
    assert sp.column("b").tolist() == [-1 if v is None else v for v in b]
    sp.discard()


def test_held_columns_are_narrowed() -> None:
    """In memory a column takes the smallest integers that hold it (NULL as -1 included)."""
    sp = Spill(["small", "mid", "big"])
    sp.append(pa.record_batch([pa.array([1, None, 100], pa.int64()),
                               pa.array([-1, 30_000, 2], pa.int64()),
                               pa.array([0, 2**40, 5], pa.int64())], ["small", "mid", "big"]))  # fmt: skip
    sp.close()
    assert [sp._held[0][c].dtype for c in ("small", "mid", "big")] == [np.int8, np.int16, np.int64]
    assert sp.column("small").tolist() == [1, -1, 100] and sp.masks()["small"].tolist()[1]


def _left(tmp_path: Path) -> list[Path]:
    return list(tmp_path.glob("mlaprof-spill-*"))


def test_an_import_leaves_no_spill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spills = tmp_path / "tmp"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    monkeypatch.setattr(rocprof_csv, "BLOCK_BYTES", 700)  # many blocks, many spilled batches
    monkeypatch.setattr(spill, "MEMORY_BUDGET", 0)  # a file from the first batch
    monkeypatch.setattr(spill, "FILE_ROWS", 1)  # written batch by batch (the failure's too)
    seen: list[str] = []  # the spill files made (no reference to a spill: it must be freed)
    real = tempfile.mkstemp

    def spy(*a: object, **kw: object) -> tuple[int, str]:
        fd, path = real(*a, **kw)  # type: ignore[arg-type]
        seen.append(path)
        return fd, path

    monkeypatch.setattr(tempfile, "mkstemp", spy)
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


def test_the_spills_of_a_process_share_one_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet import holds several ranks at once: together they stay within the budget, the
    one past it goes to disk, and a discarded spill gives its share back."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(spill, "MEMORY_BUDGET", 1000)
    batch = pa.record_batch([pa.array(range(100), pa.int64())], ["a"])  # 100 bytes as int8

    def one() -> Spill:
        sp = Spill(["a"])
        for _ in range(6):
            sp.append(batch)
        sp.close()
        return sp

    first, second = one(), one()  # 600 bytes held, then 600 more would pass 1000
    assert first.path is None and second.path is not None
    assert second.column("a").tolist() == list(range(100)) * 6
    first.discard()
    third = one()
    assert third.path is None and third.column("a").tolist() == list(range(100)) * 6
    second.discard()
    third.discard()


def test_a_csv_import_gives_the_spill_row_groups_not_parsed_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parsed blocks (a few rows each here) are gathered to FILE_ROWS rows before the spill
    narrows them (its work is per column and append, not per row); the rows come back whole."""
    import sys

    from mlaprof.store import load

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from import_bench import generate

    generate(tmp_path / "kernel_trace.csv", 500)
    monkeypatch.setattr(rocprof_csv, "BLOCK_BYTES", 2000)  # ~10 rows a block
    monkeypatch.setattr(spill, "FILE_ROWS", 64)
    sizes: list[int] = []
    real = Spill.append

    def spy(self: Spill, batch: object) -> None:
        sizes.append(batch.num_rows)  # type: ignore[attr-defined]
        real(self, batch)

    monkeypatch.setattr(Spill, "append", spy)
    run, _ = import_rocprof(tmp_path / "kernel_trace.csv", tmp_path / "t", "g")
    assert sum(sizes) == 500 and len(sizes) < 10
    assert all(64 <= n < 64 + 20 for n in sizes[:-1]) and 0 < sizes[-1] < 64 + 20
    with load(run) as r:
        k = r.kernels
        assert k["grid_z"].tolist()[:4] == [1, 1, 16, 1]  # import_bench's grids, in order
        assert k["block_x"].tolist()[:4] == [512, 256, 64, 64]


@pytest.mark.parametrize("where", list(BUDGETS))
def test_a_pending_file_declares_not_null_only_columns_without_nulls(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column known to hold no NULL (no mask marks a row, the spill saw none) is declared NOT
    NULL in the kernel file (no definition levels to write); every column that holds one, or
    is given nowhere, stays nullable; every value reads back."""
    import pyarrow.parquet as pq

    from mlaprof.store import columnar

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    sp = Spill(["grid_x", "grid_y"], BUDGETS[where])
    gx: list[int] = []
    gy: list[int | None] = []
    for size in (5, 1, 13, 7):
        x = list(range(len(gx), len(gx) + size))
        y = [None if v % 3 == 0 else v for v in x]
        sp.append(pa.record_batch([pa.array(x, pa.int64()), pa.array(y, pa.int64())],
                                  ["grid_x", "grid_y"]))  # fmt: skip
        gx += x
        gy += y
    sp.close()
    n = sp.n
    layer_mask = np.zeros(n, bool)
    layer_mask[3] = True
    numbers = {
        "start_ns": (np.arange(n, dtype=np.int64), None),
        "end_ns": (np.arange(n, dtype=np.int64) + 5, np.zeros(n, bool)),  # a mask, no NULL
        "layer": (np.arange(n, dtype=np.int64), layer_mask),
    }
    idx = np.array([i % 2 if i < 4 else 0 for i in range(n)])
    pending = columnar.Pending("kernels", 0, n, numbers, {"name": (["x", None], idx)},
                               spill.SpillChain([sp]), ["grid_x", "grid_y"])  # fmt: skip
    side = columnar.write(tmp_path / "run", 0, "kernels", [pending])
    nullable = {f.name for f in pq.read_schema(side.path) if f.nullable}
    given_nowhere = set(columnar.columns("kernels")) - {"rank", "name", "grid_x", "grid_y"}
    given_nowhere -= set(numbers)
    assert nullable == {"layer", "name", "grid_y"} | given_nowhere
    tab = pq.read_table(side.path)
    assert tab.column("grid_x").to_pylist() == gx
    assert tab.column("grid_y").to_pylist() == gy
    assert tab.column("layer").to_pylist()[3] is None
    assert tab.column("name").to_pylist()[:4] == ["x", None, "x", None]
