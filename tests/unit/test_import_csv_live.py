"""A kernel CSV another process still has open for writing (a profiler still writing it): the
import reads it as it stands when nothing moves, and refuses it as changing, never "malformed",
where a row is still half written or the file grows or shrinks under the parse
(mlaprof.importers.mapped: no lease is granted while a writer has the file open). The files are
rocprofv3's own layout: the rocprofiler-sdk docs' kernel trace (tests/data/rocprof/SOURCES.md:
projects/rocprofiler-sdk/source/docs/data/kernel_trace.csv, ROCm 7.0 columns, strings quoted,
numbers bare), its rows repeated."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlaprof.errors import MlaprofError
from mlaprof.importers import mapped, rocprof_csv
from mlaprof.live_inputs import FileChanged

REAL = Path(__file__).parent.parent / "data" / "rocprof" / "rocprofiler-sdk-docs__kernel_trace.csv"
HEADER, *ROWS = REAL.read_bytes().splitlines(keepends=True)
# the first row of the file, cut inside its quoted kernel name: a row still half written
HALF_ROW = ROWS[0][: ROWS[0].index(b"<float>")]


def _rows(n: int) -> bytes:
    """``n`` rows of the real file, its rows repeated in order."""
    return b"".join(ROWS[i % len(ROWS)] for i in range(n))


def _write(path: Path, n: int) -> Path:
    path.write_bytes(HEADER + _rows(n))
    return path


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rocprof_csv, "BLOCK_BYTES", 1024)


def test_a_file_open_for_writing_that_holds_still_is_read(tmp_path: Path) -> None:
    p = _write(tmp_path / "k.csv", 300)
    alone = rocprof_csv.read_kernel_file(p)
    with open(p, "ab"):  # a writer holds it, writes nothing
        held = rocprof_csv.read_kernel_file(p)
    assert held.n == alone.n == 300 and held.names == alone.names


def test_a_half_written_last_row_is_still_being_written_not_malformed(tmp_path: Path) -> None:
    p = _write(tmp_path / "k.csv", 300)
    with open(p, "ab") as writer:
        writer.write(HALF_ROW)
        writer.flush()
        with pytest.raises(FileChanged) as held:
            rocprof_csv.read_kernel_file(p)
    # the file held still: the data shows a writer, not a change, and what the parse found
    assert "is still open for writing by another process" in str(held.value), held.value
    assert "changed while it was read" not in str(held.value)
    assert "as it stands: " in str(held.value)
    # the same bytes with no writer: a file that ends mid-row is malformed, as before
    with pytest.raises(MlaprofError, match="malformed kernel trace"):
        rocprof_csv.read_kernel_file(p)


def test_rows_appended_while_the_file_is_parsed_refuse_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer appends whole rows between two reads of the parse: every row parses, and the
    import still refuses, since what it read is no state the file settles in."""
    p = _write(tmp_path / "k.csv", 300)
    extra = _rows(20)
    real = mapped.MappedRange.read
    with open(p, "ab") as writer:

        def read(self: mapped.MappedRange, size: int | None = -1) -> bytes | memoryview:
            got = real(self, size)
            if not getattr(self, "_appended", False):  # once, after the first read
                self._appended = True  # type: ignore[attr-defined]
                writer.write(extra)
                writer.flush()
            return got

        monkeypatch.setattr(mapped.MappedRange, "read", read)
        with pytest.raises(FileChanged, match="changed while it was read"):
            rocprof_csv.read_kernel_file(p)


def _import(kind: str, path: Path, traces: Path, capsys: pytest.CaptureFixture[str]) -> str:
    from mlaprof.cli import main

    rc = main(["import", kind, str(path), "--traces", str(traces)])
    err = capsys.readouterr().err
    assert rc == 2, err
    return err


def test_every_importer_refuses_a_trace_still_being_written_as_changing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The importers' boundary (mlaprof.store.validate.decoding), for every format: a Kineto
    trace cut off mid-document reads "not valid JSON" when nothing holds it; while a writer
    still holds it open (the profiler has not finished writing) it is refused as still written,
    with what it holds as it stands, and as changed once it moves during the import."""
    import gzip

    data = gzip.decompress(
        (Path(__file__).parent.parent / "data" / "kineto_graph_replay.json.gz").read_bytes()
    )
    p = tmp_path / "trace.json"
    p.write_bytes(data[: len(data) // 2])
    assert "not valid JSON" in _import("kineto", p, tmp_path / "a", capsys)
    with open(p, "ab"):
        err = _import("kineto", p, tmp_path / "b", capsys)
    assert f"{p} is still open for writing by another process (a profiler still" in err, err
    assert "as it stands: " in err and "changed while it was read" not in err, err


def test_a_worker_trace_still_being_written_in_a_profiler_folder_is_changing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM's profiler folder, one worker's trace cut off (gzip ends early) while its writer
    still holds it: the folder's import is refused as changing, naming that file."""
    import shutil

    folder = tmp_path / "profile"
    shutil.copytree(Path(__file__).parent.parent / "data" / "vllm" / "cpu_mla_profile", folder)
    worker = next(folder.glob("dp0_*rank0*.pt.trace.json.gz"))
    data = worker.read_bytes()
    worker.write_bytes(data[: len(data) // 2])
    plain = _import("kineto", folder, tmp_path / "a", capsys)
    assert "changed while it was read" not in plain
    with open(worker, "ab"):
        err = _import("kineto", folder, tmp_path / "b", capsys)
    assert f"{worker} is still open for writing by another process" in err, err


def test_the_boundary_says_changed_only_where_the_file_moved(tmp_path: Path) -> None:
    """``decoding`` with a writer holding the input: a failure after the file grew reads
    "changed while it was read" with its sizes; one where it held still reads "still open for
    writing" with the decoder's words; with no writer, the decoder's words alone."""
    from mlaprof.store.validate import decoding

    p = tmp_path / "trace.json"
    p.write_bytes(b'{"traceEvents": [')
    with open(p, "ab") as writer:
        grown = r"changed while it was read \(17 -> 20 bytes"
        with pytest.raises(FileChanged, match=grown), decoding(p):
            writer.write(b"{}]")
            writer.flush()
            raise ValueError("cut off")
        with pytest.raises(FileChanged) as held, decoding(p):
            raise ValueError("cut off")
    assert str(held.value).startswith(f"{p} is still open for writing by another process")
    assert str(held.value).endswith("as it stands: ValueError: cut off"), held.value
    with pytest.raises(MlaprofError) as plain, decoding(p):
        raise ValueError("cut off")
    assert not isinstance(plain.value, FileChanged)
    assert str(plain.value) == f"{p}: cannot be imported (ValueError: cut off)"
