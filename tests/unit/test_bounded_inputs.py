"""Bounded memory on inputs: a gzip bomb is refused while it inflates, long before it is whole;
a vLLM log is parsed a line at a time (its memory is a chunk and a line, not the file twice); a
Kineto trace is decoded an event at a time (its memory is a chunk and the rows, not the file and
every event's dict). Peak memory is Python's own allocations (tracemalloc) during the import."""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.importers import inputs, vllm_log
from tests.trace_io_helpers import kineto_trace, write_kineto

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "data" / "vllm" / "cpu_mtp_serve.log"  # written by vLLM's own logger
MIB = 1 << 20


def _bomb(path: Path, inflated: int, head: bytes = b"", unit: bytes = b"0") -> Path:
    """``head`` then ``inflated`` bytes of ``unit`` repeated, gzip-compressed (about a
    thousandth the size)."""
    block = unit * (MIB // len(unit))
    with gzip.open(path, "wb", compresslevel=9) as z:
        z.write(head)
        for _ in range(inflated // len(block)):
            z.write(block)
    return path


def _peak(argv: list[str]) -> tuple[int, int]:
    tracemalloc.start()
    try:
        rc = main(argv)
        return rc, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("kind", "name"), [("kineto", "trace.pt.trace.json.gz"), ("vllm-log", "serve.log.gz")]
)
def test_a_gzip_bomb_is_refused_while_it_inflates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, name: str
) -> None:
    # a trace is parsed as it inflates, so its bomb is valid JSON as far as it goes (a run of
    # zeros would be refused at once as invalid JSON, before the limit)
    # (long events: few to decode before the limit)
    unit = b'{"ph": "M", "args": {"name": "' + b"x" * 1000 + b'"}}, '
    json_bomb = {"head": b'{"traceEvents": [', "unit": unit}
    bomb = _bomb(tmp_path / name, 160 * MIB, **(json_bomb if kind == "kineto" else {}))
    assert bomb.stat().st_size < MIB // 2
    rc, peak = _peak(["import", kind, str(bomb), "--traces", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert rc == 2 and "a decompression bomb?" in err, err
    assert f"inflates past {inputs.inflate_limit(bomb.stat().st_size):,} bytes" in err
    # refused at the limit (64-80 MiB), never inflated whole (160 MiB)
    assert peak < 100 * MIB, peak / MIB


def test_the_inflate_ratio_is_a_setting(tmp_path: Path, monkeypatch, capsys) -> None:
    log = tmp_path / "serve.log.gz"
    log.write_bytes(gzip.compress(LOG.read_bytes() * 40))  # a real log repeated: a high ratio
    ratio = (LOG.stat().st_size * 40) / log.stat().st_size
    assert main(["import", "vllm-log", str(log), "--traces", str(tmp_path / "t")]) == 0
    monkeypatch.setattr(inputs, "INFLATE_FLOOR", 0)
    monkeypatch.setenv("MLAPROF_INFLATE_RATIO", str(ratio / 2))
    assert main(["import", "vllm-log", str(log), "--traces", str(tmp_path / "t")]) == 2
    assert "MLAPROF_INFLATE_RATIO" in capsys.readouterr().err


def test_a_vllm_log_is_parsed_a_line_at_a_time(tmp_path: Path, capsys) -> None:
    big = tmp_path / "serve.log"
    src = LOG.read_bytes()
    big.write_bytes(src * (24 * MIB // len(src) + 1))
    rc, peak = _peak(["import", "vllm-log", str(big), "--traces", str(tmp_path / "t")])
    assert rc == 0, capsys.readouterr().err
    # whole, the file and its decoded text alone are twice its 24 MiB
    assert peak < 16 * MIB, peak / MIB
    assert "rows:" in capsys.readouterr().out


def test_a_kineto_trace_is_decoded_an_event_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # 800 events of ~24 KB each (a long argument the importer does not keep): whole, the text
    # and the decoded events are each the file's 18 MiB; streamed, a chunk and the rows
    trace, _ = kineto_trace(replays=100, layers=3)
    for ev in trace["traceEvents"]:
        ev.setdefault("args", {})["note"] = "x" * 24_000
    p = write_kineto(tmp_path / "big.pt.trace.json", trace)
    del trace
    size = p.stat().st_size
    assert size > 16 * MIB
    monkeypatch.setattr(inputs, "CHUNK", 64 << 10)
    rc, peak = _peak(["import", "kineto", str(p), "--traces", str(tmp_path / "t")])
    assert rc == 0, capsys.readouterr().err
    assert "rows:" in capsys.readouterr().out
    assert peak < size // 2, (peak / MIB, size / MIB)


def test_lines_split_where_the_file_splits_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(inputs, "CHUNK", 7)  # lines and UTF-8 characters cut across chunks
    p = tmp_path / "x.log"
    p.write_bytes("\ufeffé one\r\ntwo ✓\n\nlast".encode())
    assert list(inputs.text_lines(p, "log")) == ["é one\r", "two ✓", "", "last"]
    p.write_bytes(b"ok\n\xff\xfe bad\n")
    with pytest.raises(Exception, match=r"not UTF-8 text \(log\).*at byte 3"):
        list(inputs.text_lines(p, "log"))


def test_each_starts_final_mode_is_found_without_scanning_the_log_again() -> None:
    """A 1 GB log of 30k starts ran past 600 s: every start's cudagraph mode scanned every record
    of the log for its downgrades (starts x records). The records are scanned once for all."""
    text = (ROOT / "tests" / "data" / "vllm" / "tp2_two_starts.log").read_text()
    facts = vllm_log.parse_log(text * 40)  # 80 starts, each with its downgrade
    starts = range(1, len(facts.starts) + 1)
    want = []
    for s in starts:  # the definition: the start's last downgrade, else its config's mode
        downs = [r["setting"] for r in facts.records
                 if r["start"] == s and r["kind"] == "cudagraph-downgrade"]  # fmt: skip
        want.append(str(downs[-1]) if downs else facts.starts[s - 1].config.get("cudagraph_mode"))
    assert len(starts) == 80 and any(r["kind"] == "cudagraph-downgrade" for r in facts.records)

    class Counting(list):  # type: ignore[type-arg]
        scanned = 0

        def __iter__(self):  # noqa: ANN204
            for r in super().__iter__():
                Counting.scanned += 1
                yield r

    facts.records = Counting(facts.records)
    assert [facts.final_mode(s) for s in starts] == want
    assert Counting.scanned <= 2 * len(facts.records), (Counting.scanned, len(facts.records))
