"""The Kineto importer reads a trace a chunk at a time (``importers.json_stream``): the same rows
as ``json.loads`` of the whole file, on the shipped traces and generated ones, gzip included,
with chunk boundaries falling everywhere."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest

from mlaprof.errors import MlaprofError
from mlaprof.importers import inputs, kineto
from mlaprof.importers.common import read_text
from mlaprof.importers.json_stream import RESET, StreamedDocument
from mlaprof.importers.kineto_steps import cpu_activity
from tests.trace_io_helpers import kineto_trace, write_kineto

DATA = Path(__file__).resolve().parents[1] / "data"
SHIPPED = [
    DATA / "kineto_graph_replay.json.gz",
    *sorted((DATA / "vllm").glob("*/*.pt.trace.json.gz")),
]


def _whole(path: Path) -> kineto.Scanned:
    """What the importer read before streaming: json.loads of the whole text."""
    doc = kineto.parse(path, read_text(path, "Kineto JSON trace"))
    base = kineto._base(doc)
    top = {k: v for k, v in doc.items() if k != "traceEvents"}
    return kineto.Scanned(top, kineto.load_events(path, doc), cpu_activity(doc, base, str(path)))


def _same(path: Path) -> None:
    got, want = kineto.scan(path), _whole(path)
    assert got.rows == want.rows
    assert got.cpu == want.cpu
    got_top = {k: v for k, v in got.doc.items() if k != "traceEvents"}
    assert got_top == want.doc


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name[:40])
def test_shipped_traces_row_for_row(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert path.exists()
    _same(path)
    monkeypatch.setattr(inputs, "CHUNK", 4093)  # boundaries inside names, numbers, escapes
    _same(path)


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_generated_traces_row_for_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, chunk: int
) -> None:
    trace, exp = kineto_trace(replays=4, layers=3)
    base = 1_700_000_000_000_000_000
    trace["baseTimeNanoseconds"] = base  # after the events: the streamed reader learns it last
    trace["traceEvents"][1]["name"] = 'cuda\\"Graph\u00e9Launch\n\U0001f600'
    trace["distributedInfo"] = {"rank": 3, "world_size": 4}
    trace["cpu_annotations"] = [
        {"ph": "X", "cat": "user_annotation", "name": "execute_context_0(0)_generation_1(3)",
         "ts": 1.5, "dur": 2.25, "pid": 1}
    ]  # fmt: skip
    trace["traceEvents"] += trace.pop("cpu_annotations")
    path = write_kineto(tmp_path / f"t{suffix}", trace)
    monkeypatch.setattr(inputs, "CHUNK", chunk)
    _same(path)
    got = kineto.scan(path)
    assert got.doc["distributedInfo"]["rank"] == 3
    assert [(r[0], r[1], r[2]) for r in got.rows[0]] == [
        (e["name"], e["start_ns"] + base, e["end_ns"] + base) for e in exp
    ]
    assert got.cpu.steps[0][:2] == (base + 1500, base + 3750)


def _stream(text: str, size: int) -> tuple[dict, list]:
    doc = StreamedDocument(
        (text[i : i + size] for i in range(0, len(text), size)), "traceEvents", "t",
        parse_float=Decimal,
    )  # fmt: skip
    events: list = []
    for ev in doc.elements():
        events = [] if ev is RESET else [*events, ev]
    return doc.top, events


DOCS = [
    '{"traceEvents": [1, -2.5e-3, "x\\u00e9y", true, null, [[]], {"a": {"b": [1e10]}}]}',
    ' \n{ "a" : 12345678901234567890 , "traceEvents" : [ ] , "b" : 0.000001 }\n ',
    '[{"ph": "X"}, {"ph": "M"}]',
    '{"traceEvents": [1], "traceEvents": [2, 3]}',  # json.loads keeps the last
    '{"traceEvents": [1], "x": "\\"]}\\\\", "traceEvents": 7}',
    "{}",
    '"just a string"',
    '{"baseTimeNanoseconds": 1700000000000000000, "traceEvents": [{"ts": 123.456}]}',
]


@pytest.mark.parametrize("text", DOCS)
def test_stream_matches_json_loads(text: str) -> None:
    want = json.loads(text, parse_float=Decimal)
    for size in range(1, len(text) + 1):
        top, events = _stream(text, size)
        if isinstance(want, list):
            assert events == want and top["traceEvents"] is StreamedDocument.STREAMED
        elif isinstance(want, dict):
            assert {k: v for k, v in top.items() if k != "traceEvents"} == {
                k: v for k, v in want.items() if k != "traceEvents"
            }
            if isinstance(want.get("traceEvents"), list):
                assert top["traceEvents"] is StreamedDocument.STREAMED
                assert events == want["traceEvents"]
            else:
                assert top.get("traceEvents") == want.get("traceEvents")
        else:
            assert top == {} and events == []


@pytest.mark.parametrize(
    "text",
    [
        '{"traceEvents": [1, 2',
        '{"traceEvents": [1,, 2]}',
        '{"traceEvents": [1]} x',
        '{"a": 1\n,\n"traceEvents": [\n{"x": tru}]}',
        '{"traceEvents": [{"name": "unterminated]}',
        "",
        '{"a" 1}',
    ],
)
def test_invalid_json_is_one_error_with_the_line(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as want:
        json.loads(text)
    for size in (1, 3, len(text) or 1):
        with pytest.raises(MlaprofError, match="not valid JSON") as got:
            _stream(text, size)
        assert f"line {want.value.lineno})" in str(got.value)


def test_events_are_handed_out_before_the_file_is_read(tmp_path: Path) -> None:
    """The memory bound: an event is decoded while most of the file is still unread."""
    read = 0

    def pieces():
        nonlocal read
        text = json.dumps({"traceEvents": [{"ph": "X", "i": i} for i in range(20000)]})
        for i in range(0, len(text), 4096):
            read += 4096
            yield text[i : i + 4096]

    first_at = None
    total = 0
    for _ev in StreamedDocument(pieces(), "traceEvents", "t").elements():
        total += 1
        first_at = first_at if first_at is not None else read
    assert total == 20000
    assert first_at is not None and first_at <= 2 * 4096 < read // 50


def test_bad_event_is_raised_after_the_json_is_known_valid(tmp_path: Path) -> None:
    """json.loads read the whole file before judging an event: a syntax error later in the file
    wins over a bad event earlier, as before."""
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k"}, oops]}')
    with pytest.raises(MlaprofError, match="not valid JSON"):
        kineto.scan(p)
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k"}]}')
    with pytest.raises(MlaprofError, match="has no 'ts'"):
        kineto.scan(p)


def test_gzip_stream_keeps_the_inflate_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "bomb.json.gz"
    body = b'{"traceEvents": [' + b'{"ph": "M"},' * 400_000 + b'{"ph": "M"}]}'
    p.write_bytes(gzip.compress(body))
    monkeypatch.setenv("MLAPROF_INFLATE_RATIO", "1")
    monkeypatch.setattr(inputs, "INFLATE_FLOOR", 1 << 20)
    with pytest.raises(MlaprofError, match="decompression bomb"):
        kineto.scan(p)
