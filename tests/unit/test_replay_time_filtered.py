"""A trace whose graph replays hold only MLA kernels (a graph of attention alone, or a trace
filtered to them with rocprofv3 --kernel-include-regex) says what its attention shares are of in
every view: the kernels the trace holds, not a whole decoder layer's. A trace with the layer's
other kernels says nothing of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.importers.rocprof import import_rocprof
from tests.conformance import render
from tests.conformance.shapes import STAGE1, STAGE2, graph_replays


def _run(tmp_path: Path, filtered: bool) -> Path:
    tr = graph_replays(6, 8)
    if filtered:  # rocprofv3 --kernel-include-regex '_fwd_': only the MLA kernels are traced
        tr.kernels = [k for k in tr.kernels if k.name in (STAGE1, STAGE2)]
    src, _ = render(tr, "csv-7", tmp_path / f"in{filtered}")
    run, _ = import_rocprof(src, tmp_path / "t", f"f{filtered}")
    return run


def _replay_time(run: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["report", str(run), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["trace"]["replay_time"]


def test_replays_of_mla_kernels_only_say_what_their_share_is_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path, True)
    rt = _replay_time(run, capsys)
    assert rt["replays"] == 6 and rt["attention_share"] == 1.0
    assert "--kernel-include-regex" in rt["attention_only"]
    assert "graph of attention alone" in rt["attention_only"]
    for view in (["report", str(run)], ["report", str(run), "--format", "md"],
                 ["tui", str(run), "--once"]):  # fmt: skip
        assert main(view) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "not of a whole decoder layer's" in out, view


def test_a_whole_trace_says_nothing_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = _replay_time(_run(tmp_path, False), capsys)
    assert 0 < rt["attention_share"] < 1 and "attention_only" not in rt
