"""A big kernel file is parsed as several byte ranges at once (one per free core): the ranges cut
at line ends, and what they give joined is what one reader of the whole file gives: names coded
in the file's order of first appearance, every column and NULL in row order, the parked columns
read back through the chain of the ranges' spills, and a bad row reported as one reader does."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from mlaprof.errors import MlaprofError
from mlaprof.exporters.csv_export import KERNEL_HEADER
from mlaprof.importers import rocprof, rocprof_csv
from mlaprof.store import spill

if TYPE_CHECKING:
    from mlaprof.importers.annotate import KernelColumns

REAL = Path(__file__).parent.parent / "data" / "rocprof"


def _rows(n: int, late_names: int = 0) -> list[dict[str, str]]:
    """Kernel rows: names with commas, quotes and a neutralized formula; an empty Agent_Id here
    and there (a NULL device); ``late_names`` rows at the end bring names no earlier row has."""
    names = ['void k<c10::BFloat16, 128>(int, "q")', "'=SUM(A1)", "plain", "x,y"]
    out = []
    for i in range(n):
        name = names[i % len(names)] if i < n - late_names else f"late_{i % 3}"
        out.append({
            "Kind": "KERNEL_DISPATCH", "Agent_Id": "" if i % 17 == 5 else f"Agent {2 + i % 3}",
            "Queue_Id": "1", "Stream_Id": str(i % 2), "Thread_Id": "7",
            "Dispatch_Id": str(i + 1), "Kernel_Id": "4", "Kernel_Name": name,
            "Correlation_Id": str(1000 + i // 3), "Start_Timestamp": str(10**18 + 97 * i),
            "End_Timestamp": str(10**18 + 97 * i + 50), "LDS_Block_Size": "0",
            "Scratch_Size": "0", "VGPR_Count": "8", "Accum_VGPR_Count": "0", "SGPR_Count": "16",
            "Workgroup_Size_X": "64", "Workgroup_Size_Y": "1", "Workgroup_Size_Z": "1",
            "Grid_Size_X": str(64 * (1 + i % 4)), "Grid_Size_Y": "1", "Grid_Size_Z": "1",
        })  # fmt: skip
    return out


def _write(
    path: Path,
    rows: list[dict[str, str]],
    newline: str = "\n",
    blank: bool = False,
    quoting: int = csv.QUOTE_NONNUMERIC,
) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(KERNEL_HEADER), quoting=quoting, lineterminator=newline)
        w.writeheader()
        for i, r in enumerate(rows):
            w.writerow(r)
            if blank and i % 50 == 7:
                f.write(newline)  # an empty line: no row
    return path


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    # ranges of ~1.5 KB parsed in 1 KB blocks: a few hundred rows make a dozen ranges
    monkeypatch.setattr(rocprof_csv, "SPAN_BYTES", 1500)
    monkeypatch.setattr(rocprof_csv, "BLOCK_BYTES", 1024)


def _read(path: Path, ways: int) -> KernelColumns:
    return rocprof_csv.read_kernel_file(path, ways)


def _same(a: KernelColumns, b: KernelColumns) -> None:
    assert a.n == b.n
    assert a.names == b.names  # the order of first appearance, not the ranges' finishing order
    assert a.name_idx.dtype == b.name_idx.dtype and a.name_idx.tolist() == b.name_idx.tolist()
    # parked columns read at a few rows (before anything reads them in full)
    rows = np.array(sorted({0, 1, a.n // 3, a.n // 2, a.n - 2, a.n - 1}))
    for c in ("grid_x", "stream", "correlation"):
        got = b.take(c, rows)[0].tolist()
        assert got == a.take(c, rows)[0].tolist() and -1 not in got, c
    assert list(a.ints) == list(b.ints)
    for c in a.ints:
        assert a.ints[c].tolist() == b.ints[c].tolist(), c
    assert sorted(a.masks) == sorted(b.masks)
    for c in a.masks:
        assert a.masks[c].tolist() == b.masks[c].tolist(), c


def _batches(kc: KernelColumns, size: int) -> list[Any]:
    sp = kc.ints.spill  # type: ignore[attr-defined]
    return [t.to_pydict() for t in sp.batches(size)]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("where", ["memory", "disk"])
def test_ranges_read_as_one_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, newline: str, where: str
) -> None:
    if where == "disk":  # every range's parked columns in its own temporary file
        monkeypatch.setattr(spill, "MEMORY_BUDGET", 0)
        monkeypatch.setattr(spill, "FILE_ROWS", 16)
    src = _write(tmp_path / "k.csv", _rows(700, late_names=40), newline, blank=True)
    assert len(rocprof_csv._spans(src, 64)) > 8
    one = _read(src, 1)
    many = _read(src, 64)
    assert one.ints.spill.__class__.__name__ == "Spill"  # type: ignore[attr-defined]
    assert many.ints.spill.__class__.__name__ == "SpillChain"  # type: ignore[attr-defined]
    _same(one, many)
    assert "device" in one.masks and one.masks["device"].sum() == sum(
        i % 17 == 5 for i in range(700)
    )
    assert one.names[-3:] == ["late_0", "late_1", "late_2"] and "=SUM(A1)" in one.names
    # the store writes the parked columns in batches of exactly this many rows
    assert _batches(one, 64) == _batches(many, 64)


@pytest.mark.parametrize(
    "name",
    ["rocprofiler-sdk-docs__kernel_trace.csv", "rocprof-unified-viewer__decode_kernel_trace.csv"],
)
def test_real_rocprofv3_traces_read_in_ranges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """rocprofv3's own layouts (tests/data/rocprof/SOURCES.md), repeated to a few KB so they cut
    into ranges, read in ranges as in one piece."""
    text = (REAL / name).read_bytes()
    head, _, body = text.partition(b"\n")
    src = tmp_path / name
    src.write_bytes(head + b"\n" + body * max(1, 6000 // len(body) + 1))
    assert len(rocprof_csv._spans(src, 8)) > 1
    _same(_read(src, 1), _read(src, 8))


def test_spans_end_at_line_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = _write(tmp_path / "k.csv", _rows(300))
    data = src.read_bytes()
    spans = rocprof_csv._spans(src, 5)
    assert len(spans) == 5
    assert spans[0][0] == data.index(b"\n") + 1 and spans[-1][1] == len(data)
    assert all(b0 == a1 for (_, b0), (a1, _) in zip(spans, spans[1:], strict=False))
    assert all(data[b - 1 : b] == b"\n" for _, b in spans)
    # a small file, or one way, is one piece: the whole file, its header line included
    assert rocprof_csv._spans(src, 1) == [(0, len(data))]
    monkeypatch.setattr(rocprof_csv, "SPAN_BYTES", len(data))
    assert rocprof_csv._spans(src, 8) == [(0, len(data))]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('"KERNEL_DISPATCH","Agent 2",1\n', "malformed kernel trace"),  # a cut record
        (None, "empty start_ns field"),  # an empty required field
    ],
)
def test_a_bad_row_in_a_later_range_fails_as_in_one_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str | None, message: str
) -> None:
    rows = _rows(400)
    if bad is None:
        rows[350]["Start_Timestamp"] = ""
    # bare fields: an empty one is a NULL, not a quoted empty string
    src = _write(tmp_path / "k.csv", rows, quoting=csv.QUOTE_MINIMAL)
    if bad is not None:
        lines = src.read_text().splitlines(keepends=True)
        lines.insert(351, bad)
        src.write_text("".join(lines))
    errors = []
    for ways in (1, 6):
        with pytest.raises(MlaprofError, match=message) as e:
            _read(src, ways)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_one_rank_parses_on_every_core_a_fleet_one_file_a_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads ahead of a fleet already keep the cores busy: its files are not split."""
    seen: list[int] = []
    real = rocprof_csv.read_kernel_file

    def spy(path: Path, ways: int = 1) -> KernelColumns:
        seen.append(ways)
        return real(path, ways)

    monkeypatch.setattr(rocprof_csv, "read_kernel_file", spy)
    monkeypatch.setattr(rocprof_csv, "free_cores", lambda: 4)
    one = (
        _write(tmp_path / "one" / "k.csv", _rows(50))
        if (tmp_path / "one").mkdir() is None
        else None
    )
    assert one is not None
    rocprof.import_rocprof(one, tmp_path / "traces", name="one")
    assert seen == [4]
    seen.clear()
    fleet = tmp_path / "fleet"
    for r in range(3):
        (fleet / f"rank{r}").mkdir(parents=True)
        _write(fleet / f"rank{r}" / f"{100 + r}_kernel_trace.csv", _rows(50))
    rocprof.import_rocprof(fleet, tmp_path / "traces", name="fleet")
    assert seen == [4 // rocprof.AHEAD] * 3


def test_of_two_bad_rows_in_two_ranges_the_first_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every range is parsed before one error is raised: the earliest range's, which a reader of
    the whole file meets first (the later one would name another row); the ranges that parsed
    leave no spill file behind, even while the error (and its frames) is held."""
    import tempfile

    spills = tmp_path / "spills"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    monkeypatch.setattr(spill, "MEMORY_BUDGET", 0)  # every range's parked columns on disk
    src = _write(tmp_path / "k.csv", _rows(400), quoting=csv.QUOTE_MINIMAL)
    lines = src.read_text().splitlines(keepends=True)
    lines.insert(351, '"KERNEL_DISPATCH","Agent 2",1,late\n')
    lines.insert(41, '"KERNEL_DISPATCH","Agent 2",1,early\n')
    src.write_text("".join(lines))
    spans = rocprof_csv._spans(src, 6)
    data = src.read_bytes()
    early, late = data.index(b"early"), data.index(b"late")
    assert next(i for i, (a, b) in enumerate(spans) if a <= early < b) < next(
        i for i, (a, b) in enumerate(spans) if a <= late < b
    )
    errors = []
    for ways in (1, 6):
        with pytest.raises(MlaprofError, match="malformed kernel trace") as e:
            _read(src, ways)
        errors.append(str(e.value))
        assert not list(spills.iterdir())
    assert errors[0] == errors[1] and "early" in errors[1]


@pytest.mark.parametrize("ways", [1, 3])
def test_pages_are_handed_back_two_blocks_behind_the_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ways: int
) -> None:
    """Each range's parse tells its map how far it is done, two blocks behind the batches it
    has taken (pyarrow reads ahead): never past its range, never backwards; the rows the same
    as a parse that hands nothing back."""
    from mlaprof.importers import mapped

    path = _write(tmp_path / "k.csv", _rows(400))
    whole = _read(path, 1)
    told: dict[int, list[int]] = {}
    batches: dict[int, int] = {}
    real_parsed = mapped.MappedRange.parsed

    alive: list[mapped.MappedRange] = []  # an id is one range's only while the range lives

    def parsed(self: mapped.MappedRange, nbytes: int) -> None:
        alive.append(self)
        told.setdefault(id(self), []).append(nbytes)
        batches[id(self)] = batches.get(id(self), 0) + 1
        real_parsed(self, nbytes)

    monkeypatch.setattr(mapped.MappedRange, "parsed", parsed)
    monkeypatch.setattr(mapped, "RELEASE_STEP", 4096)  # pages really handed back
    _same(_read(path, ways), whole)
    assert told and any(max(v) > 0 for v in told.values())
    block = rocprof_csv.BLOCK_BYTES
    for key, got in told.items():
        assert got == [(k - 2) * block for k in range(1, batches[key] + 1)]


@pytest.mark.parametrize("rows", ["uniform", "shorter later"])
def test_the_first_range_holds_the_whole_column_where_its_room_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: str
) -> None:
    """The first range's columns are sized for the whole file from its own rows per byte; the
    later ranges' rows are laid in after its own (no joined copy of every column). Where the
    later rows are shorter than its own, its room falls short and the columns are joined into a
    new array: the same values either way."""
    roomy: dict[str, bool] = {}
    join = rocprof_csv._join

    def seen(parts: list[Any], col: str, luts: Any = None) -> np.ndarray:
        total = sum(p.n for p in parts)
        room = parts[0].room.get(col)
        got = join(parts, col, luts)
        if len(parts) == 1:  # one range: nothing to join
            return got
        roomy[col] = room is not None and len(room) >= total
        if roomy[col]:  # laid into the first range's own array: a view of it
            assert np.shares_memory(got, room), col
        return got

    monkeypatch.setattr(rocprof_csv, "_join", seen)
    data = _rows(600)
    if rows == "shorter later":  # the rows after the first third much shorter than those
        for r in data[200:]:
            r["Kernel_Name"], r["Start_Timestamp"], r["End_Timestamp"] = "k", "7", "9"
    src = _write(tmp_path / "k.csv", data)
    one = _read(src, 1)
    assert not roomy
    many = _read(src, 64)
    _same(one, many)
    for c in ("start_ns", "end_ns", "correlation", "device"):
        assert many.ints[c].tolist() == one.ints[c].tolist(), c
    assert set(roomy) == {"name", "start_ns", "end_ns", "device", "correlation"}
    assert all(roomy.values()) if rows == "uniform" else not any(roomy.values())
