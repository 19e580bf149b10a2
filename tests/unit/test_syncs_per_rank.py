"""Host-sync evidence is decided rank by rank: an imported fleet where only rank 0 has a HIP API
trace checked rank 0's eager MLA layers only. Rank 1's host syncs are unknown ("not checked"),
never 0: not in the count's range, not a 0 in its layer rows, not counted by a "no sync" text,
in every view (terminal, JSON, Markdown, HTML, ``tui --once --rank 1``). The coverage's API line
names the ranks whose API trace it read. A fleet where every rank has (or lacks) the trace
reads as before. Each test failed with its rule broken."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from mlaprof.analysis.run_summary import RunSummary, build_summary
from mlaprof.analysis.syncs import sync_counts, trace_sync_text
from mlaprof.cli import main
from mlaprof.figures.html_report import render_html
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load
from tests.conformance.model import Marker
from tests.conformance.rocprof_csv import write_csv
from tests.conformance.shapes import eager, graph_replays

STEPS = 4  # eager(): one hipStreamSynchronize inside layer 1 of every step


def _fleet(tmp_path: Path, api: tuple[bool, bool], graph1: bool = False) -> Path:
    """Two eager ranks (GPU 2: rank 0, GPU 3: rank 1); ``api[r]``: rank r keeps its
    ``hip_api_trace.csv`` (rocprofv3 --hip-runtime-trace on that process only); ``graph1``:
    rank 1 replays FULL graphs instead."""
    out = tmp_path / "out" / "node0"
    for rank, (pid, agent) in enumerate(((100, 2), (300, 3))):
        tr = graph_replays(steps=STEPS) if graph1 and rank else eager(steps=STEPS)
        tr.pid, tr.agent = pid, agent
        for f in write_csv(tr, out):
            if f.name.endswith("hip_api_trace.csv") and not api[rank]:
                f.unlink()
    run, _ = import_rocprof(tmp_path / "out", tmp_path / "t", "fleet")
    return run


def _summary(run: Path) -> RunSummary:
    with load(run) as r:
        return build_summary(r)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_rank_without_an_api_trace_is_not_checked(tmp_path: Path) -> None:
    s = _summary(_fleet(tmp_path, (True, False)))
    assert s.trace is not None
    host = s.trace.syncs
    # rank 0's syncs found; rank 1 named as not checked, with why
    assert host.status == "found" and host.count == STEPS
    assert host.ranks_checked == [0] and host.ranks_not_checked == [1], host
    assert "rank 1 has no HIP/CUDA API" in host.evidence, host.evidence
    # the report's trace line (terminal, page) says it too
    line = trace_sync_text(host, s.ranks)
    assert line.startswith(f"rank 0: {STEPS} in MLA layers; rank 1: not checked ("), line
    c = s.sync_counts
    assert c.checked and c.total == STEPS
    assert [r.rank for r in c.per_rank or []] == [0]  # rank 1's 0 is no count
    assert c.ranks_not_checked == [1]
    assert c.watched_steps == STEPS  # rank 0's steps only
    assert "rank 1: not checked" in c.text, c.text
    assert "1: 0" not in c.text and "per rank" not in c.text, c.text
    # rank 1's layer rows: unknown, never 0; rank 0's read its rate
    by_rank = {r: {x.syncs for x in s.layers if x.rank == r} for r in (0, 1)}
    assert by_rank[1] == {None}, by_rank
    assert None not in by_rank[0] and 1.0 in by_rank[0], by_rank


def test_the_coverage_names_the_ranks_whose_api_trace_it_read(tmp_path: Path) -> None:
    s = _summary(_fleet(tmp_path, (True, False)))
    cov = s.trace.coverage if s.trace is not None else None
    assert cov is not None
    assert set(cov.api_calls_by_rank or {}) == {0}, cov.api_calls_by_rank
    assert cov.api_calls == cov.api_calls_by_rank[0]
    assert "sum over" not in cov.api, cov.api
    assert "(rank 0; rank 1 has no API trace)" in cov.api, cov.api


def test_every_view_reads_rank_1_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _fleet(tmp_path, (True, False))
    views: dict[str, str] = {}
    for name, args in (("terminal", []), ("json", ["--json"]), ("md", ["--format", "md"])):
        assert main(["report", str(run), "--no-cache", *args]) == 0
        views[name] = capsys.readouterr().out
    assert main(["tui", str(run), "--once", "--rank", "1"]) == 0
    views["tui"] = capsys.readouterr().out
    page = html.unescape(render_html(_summary(run)))
    views["html"] = re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", page,
                                                   flags=re.S))  # fmt: skip
    for name, text in views.items():
        flat = _flat(text)
        assert "rank 1: not checked" in flat, (name, flat[:3000])
        assert "ranks 0: 4, 1: 0" not in flat and "0-4 per rank" not in flat, name
        assert "API calls read (sum over 2 ranks)" not in flat, name
    doc = json.loads(views["json"])
    assert [r["rank"] for r in doc["sync_counts"]["per_rank"]] == [0]
    assert doc["sync_counts"]["ranks_not_checked"] == [1]
    rows = {(r["rank"], r["layer"]): r["syncs"] for r in doc["layers"]}
    assert {v for (rk, _), v in rows.items() if rk == 1} == {None}
    # the dashboard's rank 1 layer table: "not checked" in its syncs column (the report's
    # words for it), never 0
    table = views["tui"].split("LAYERS", 1)[1].splitlines()[2:6]
    assert table and all(" not checked " in line for line in table), table


@pytest.mark.parametrize("api", [(True, True), (False, False)])
def test_a_fleet_alike_on_every_rank_reads_as_before(
    tmp_path: Path, api: tuple[bool, bool]
) -> None:
    s = _summary(_fleet(tmp_path, api))
    assert s.trace is not None
    host, c = s.trace.syncs, s.sync_counts
    if all(api):
        assert not host.ranks_not_checked and not c.ranks_not_checked
        assert host.ranks_checked == [0, 1] and host.count == 2 * STEPS
        assert c.text.startswith(f"{STEPS} per rank (2 ranks) host syncs in MLA layers"), c.text
        assert "not checked" not in c.text
        cov = s.trace.coverage
        assert cov is not None and "(sum over 2 ranks)" in cov.api, cov.api
    else:
        assert host.status == "unknown" and not c.checked and not host.ranks_checked
        assert c.ranks_not_checked is None and c.per_rank is None and c.total is None
        assert host.evidence == "no HIP/CUDA API or memory-copy trace in the import"
        assert c.text.startswith("not checked (no step of this run was watched"), c.text


def test_a_probe_that_watched_one_rank_says_the_other_is_not_checked() -> None:
    """The probe's count: rank 1's layers recorded, none watched (its ``syncs`` empty): rank 1
    is not checked, not a 0 beside rank 0's count."""
    layers = pd.DataFrame({"rank": [0, 0, 1, 1], "step": [0, 1, 0, 1], "layer": [0, 0, 0, 0],
                           "syncs": [1, 0, None, None]})  # fmt: skip
    syncs = pd.DataFrame({"rank": [0], "step": [0], "layer": [0], "kind": ["sync"]})
    c = sync_counts(syncs, layers)
    assert [r.rank for r in c.per_rank or []] == [0] and c.ranks_not_checked == [1]
    assert c.text.startswith("rank 0: 1 on 1 layer (2 steps checked); rank 1: not checked")


@pytest.mark.parametrize("api1", [True, False])
def test_a_graph_rank_is_checked_by_its_own_api_trace(tmp_path: Path, api1: bool) -> None:
    """Rank 1 replays FULL graphs (its captured region holds no host sync): checked, 0, with
    an API trace of its own; without one, not checked, as a lone graph trace without an API
    trace reads (never checked on rank 0's API trace)."""
    s = _summary(_fleet(tmp_path, (True, api1), graph1=True))
    assert s.trace is not None
    host, c = s.trace.syncs, s.sync_counts
    assert host.count == STEPS and host.status == "found"
    if api1:
        assert host.ranks_checked == [0, 1] and not host.ranks_not_checked
        assert [(r.rank, r.total) for r in c.per_rank or []] == [(0, STEPS), (1, 0)]
        assert f"all {STEPS} MLA steps of rank 1 are graph replays" in host.evidence
    else:
        assert host.ranks_checked == [0] and host.ranks_not_checked == [1]
        assert [r.rank for r in c.per_rank or []] == [0] and "rank 1: not checked" in c.text


@pytest.mark.parametrize("own", [True, False])
def test_a_ranks_kernel_names_are_renamed_only_after_its_own_markers(
    tmp_path: Path, own: bool
) -> None:
    """Both ranks' dispatches carry the name "decode window" (no MLA kernel recognised). A
    rank's read as renamed after roctx ranges (rocprofv3 --kernel-rename) where its own marker
    trace holds that range; rank 0's marker of the same name says nothing of rank 1's."""
    out = tmp_path / "out" / "node0"
    for rank, (pid, agent) in enumerate(((100, 2), (300, 3))):
        tr = eager(steps=STEPS)
        tr.pid, tr.agent = pid, agent
        if rank == 0 or own:
            tr.markers.append(Marker("decode window", 10**6 + rank, tr.t0, tr.t0 + 10))
        for f in write_csv(tr, out):
            if f.name.endswith("kernel_trace.csv"):
                text = f.read_text()
                for k in {k.name for k in tr.kernels}:
                    text = text.replace(f'"{k}"', '"decode window"')
                f.write_text(text)
    run, _ = import_rocprof(tmp_path / "out", tmp_path / "t", "fleet")
    s = _summary(run)
    cov = s.trace.coverage if s.trace is not None else None
    assert cov is not None and cov.recognition.without_mla == [0, 1]
    renamed = [(x.name, x.ranks) for x in cov.renamed or []]
    assert renamed == [("decode window", [0, 1] if own else [0])], renamed
