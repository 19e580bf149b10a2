"""A fact every view states is decided once, in the analysis, and each view renders those words:
the KV-splits title with where its S come from (the dashboard's panel left it out), whether the
run was imported (the HTML page chose by the run's kind, the terminal by its import), an
imported trace's capture and sync line (built in two views), and a count summed over ranks in
a table (a trace's checks, its paths' steps) that said no sum beside the trust counts' "(sum
over N ranks)", and an unknown labelled as a sum over ranks (no rank's value was summed). Each
test failed with its rule broken."""

from __future__ import annotations

import dataclasses
import io
import re
from typing import Any

import pytest
from rich.console import Console

from mlaprof.analysis.typed_json import over_ranks_text
from mlaprof.reporters import rows
from mlaprof.reporters.terminal import TerminalRenderer
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
GPU = "demo-fix-padding-active-rows-c16"  # its own policy's S as recorded on a GPU
FLEET = "aiter-fleet_dp2_tp4"  # 8 ranks
SYNCS = "aiter-eager_syncs"  # an imported trace whose own check found host syncs


def _flat(text: str) -> str:
    return " ".join(text.split())


def _terminal(s: Any) -> str:
    out = io.StringIO()
    Console(file=out, width=400, color_system=None).print(TerminalRenderer().render(s))
    return _flat(out.getvalue())


def _html(s: Any) -> str:
    import html

    from mlaprof.figures.html_report import render_html

    page = re.sub(r"<(script|style)\b.*?</\1>", " ", render_html(s), flags=re.S)
    return _flat(html.unescape(re.sub(r"<[^>]+>", " ", page)))


def _view(name: str, s: Any) -> Any:
    from mlaprof.tui.once import read_view

    view, _ = read_view(shipped_runs.run_dir(name))
    return dataclasses.replace(view, summary=s)


# -- 1. the splits title ---------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_the_dashboards_splits_title_is_the_reports(device: str) -> None:
    """The dashboard's KV-splits panel (and ``tui --once``) said "KV splits (worst step per rank
    and policy ...)" without "modelled; ... as recorded on a GPU" beside a report that says it."""
    from mlaprof.tui.text import heading, render_text, splits_border, splits_title

    s = dataclasses.replace(shipped_runs.summary(GPU), device=device)
    title = rows.splits_title(s)
    assert ("as recorded on a GPU" in title) == (device == "cuda"), title
    v = _view(GPU, s)
    assert splits_title(v) == title
    # the panel's border (widgets.splits): the title's name above, its scope below
    above, below = splits_border(v)
    assert f"{above.removesuffix(')')}; {below})" == title, (above, below)
    assert heading(title) in render_text(v, width=400)  # tui --once
    assert _flat(title) in _terminal(s)
    assert title in _html(s)
    # nothing analysed yet: no scope to say, and no other words for the same table
    assert splits_title(dataclasses.replace(v, summary=None)) == rows.splits_title(None)


# -- 2. imported or created ------------------------------------------------------------------
@pytest.mark.parametrize("name", [GPU, SYNCS, "log-cpu_mla_serve", "engine-engine_ngram_run"])
def test_the_pages_run_date_says_imported_where_the_report_says_imported_from(name: str) -> None:
    s = shipped_runs.summary(name)
    imported = s.imported is not None
    assert ("imported from" in _terminal(s).split(" capture")[0]) == imported
    page = _html(s)
    assert (" imported 20" in page) == imported and (" created 20" in page) == (not imported)


def test_a_round_tripped_export_reads_imported_though_its_kind_is_a_scenario() -> None:
    """An mlaprof rocpd export imported back keeps its scenario kind (importers.rocprof
    _restore_meta) and its run.json's versions: the page chose "created" by the kind, beside
    a report head saying "imported from"; its versions are the run's own, not the importer's."""
    from mlaprof.analysis.evidence.model import run_meta

    s = shipped_runs.summary(SYNCS)
    as_scenario = dataclasses.replace(s, kind="scenario")
    assert "imported from" in _terminal(as_scenario).split(" capture")[0]
    page = _html(as_scenario)
    assert " imported 20" in page and " created 20" not in page
    # the versions: the importer's for a trace, the run's own where an export carried them
    trace = run_meta({"imported_from": "t.csv", "source": "rocprof"})
    back = run_meta({"imported_from": "r.db", "exported_from": "bug", "kind": "scenario"})
    assert trace.imported and trace.importer_versions
    assert back.imported and not back.importer_versions
    assert not run_meta({"name": "r"}).imported


# -- 3. an imported trace's capture and sync line ----------------------------------------------
def _two_ranks_of_syncs(s: Any) -> Any:
    """``s`` (one rank) as two ranks that each found the same host syncs."""
    tr = s.trace
    other = [dataclasses.replace(x, rank=1) for x in tr.syncs.syncs]
    syncs = dataclasses.replace(
        tr.syncs, syncs=[*tr.syncs.syncs, *other], count=2 * (tr.syncs.count or 0)
    )
    return dataclasses.replace(s, ranks=[0, 1], trace=dataclasses.replace(tr, syncs=syncs))


def test_the_trace_sync_line_is_the_analysis_words_in_every_view() -> None:
    """The terminal and the page each built "N in MLA layers": on two ranks that each found 8,
    "16 in MLA layers" beside the sync probe's "8 per rank (2 ranks)"."""
    from mlaprof.analysis.capture import trace_capture_text
    from mlaprof.analysis.syncs import trace_sync_text

    one = shipped_runs.summary(SYNCS)
    n = one.trace.syncs.count
    assert n and trace_sync_text(one.trace.syncs, one.ranks).startswith(f"{n} in MLA layers (")
    two = _two_ranks_of_syncs(one)
    line = trace_sync_text(two.trace.syncs, two.ranks)
    assert line.startswith(f"{n} per rank (2 ranks) in MLA layers ("), line
    for view, text in (("terminal", _terminal(two)), ("html", _html(two))):
        assert _flat(line) in text, view
        assert f"{2 * n} in MLA layers" not in text, view
        assert _flat(trace_capture_text(two.trace.capture)) in text, view
    # an unknown verdict: "unknown" with why, in each view
    unknown = dataclasses.replace(
        one.trace.syncs, status="unknown", count=None, syncs=[], evidence="no API trace"
    )
    assert trace_sync_text(unknown, [0]) == "unknown (no API trace)"


# -- 4. sums over ranks in tables --------------------------------------------------------------
def _labels(s: Any) -> dict[str, str]:
    return {r.key: r.label for b in rows.summary_blocks(s) for r in b.rows}


def _tables(s: Any) -> dict[str, rows.Table]:
    return {t.key: t for b in rows.summary_blocks(s) for t in b.tables}


def test_a_traces_checks_say_their_sum_over_ranks_as_its_trust_counts_do() -> None:
    """The fleet's "checks · replays: 24" beside "trust · counts · replays (sum over 8 ranks):
    24": the same sum, one of them unlabelled."""
    s = shipped_runs.summary(FLEET)
    summed = f"({over_ranks_text('sum', 8)})"
    labels = _labels(s)
    for key in ("replays", "missing_kernels", "expected_kernels", "short_replays"):
        trust = labels[f"trace.trust.counts.{key}"]
        assert trust.endswith(summed), trust
        assert labels[f"trace.checks.replays.{key}"] == trust
    for key in ("trace.checks.launches.graph_launches", "trace.checks.qlen.from_stage2",
                "trace.checks.heads", "trace.syncs.count",
                "trace.replay_time.replays", "trace.coverage.kernels"):  # fmt: skip
        assert labels[key].endswith(summed), (key, labels[key])
    # the step checks are each rank's own (a row per rank): no sum to say
    assert labels["trace.checks.steps[0].gap_breaks"] == "gap breaks"
    assert _tables(s)["trace.checks.stage2"].title.endswith(summed)
    # one rank: no sum to say
    one = shipped_runs.summary("aiter-gluon_v0119_fix")
    assert not any("sum over" in x for x in _labels(one).values())
    assert not any("sum over" in t.title for t in _tables(one).values())


def test_a_paths_steps_say_the_ranks_they_add_up_in_every_view() -> None:
    """The trace's paths table: "24 (24/0)" steps of 8 ranks' (3 per rank) under a bare
    "steps (graph/eager)"; said in the header where every row holds as many ranks, in the cell
    of a row that adds several where they differ."""
    from mlaprof.tui.text import detail_lines

    s = shipped_runs.summary(FLEET)
    t = _tables(s)["trace.paths"]
    head = f"steps (graph/eager) ({over_ranks_text('sum', 8)})"
    assert head in t.head, t.head
    assert any(head in x for x in detail_lines(_view(FLEET, s)))  # the dashboard's front
    assert head in _terminal(s) and head in _html(s)
    (p,) = s.trace.paths
    mixed = [p, dataclasses.replace(p, ranks=[3], steps=3, graph_steps=3, path="other")]
    s2 = dataclasses.replace(s, trace=dataclasses.replace(s.trace, paths=mixed))
    t2 = _tables(s2)["trace.paths"]
    col = t2.head.index("steps (graph/eager)")
    assert [r[col] for r in t2.rows] == [f"24 (24/0) ({over_ranks_text('sum', 8)})", "3 (3/0)"]
    # a layer of the replay time pools its row's ranks (0-3, 4-7): 4 each
    layers = _tables(s)["trace.replay_time.layers"]
    assert f"steps ({over_ranks_text('sum', 4)})" in layers.head, layers.head


# -- the sweep: where an import came from -------------------------------------------------------
@pytest.mark.parametrize("name", [FLEET, "kineto_graph_replay", "log-tp2_two_starts"])
def test_the_dashboard_says_where_an_import_came_from_as_the_report(name: str) -> None:
    """The dashboard's header read "imported from rocprof" (the importer) beside the report's
    "imported from tests/data/aiter/... (csv)" (the file, the analysis' imported section)."""
    from mlaprof.tui.text import header_lines

    s = shipped_runs.summary(name)
    said = f"imported from {s.imported.text}"
    assert said in _terminal(s)
    head = _flat(" ".join(header_lines(_view(name, s))))
    assert said in head, head


def test_the_dashboards_padding_says_its_sum_over_ranks_in_the_sections_words() -> None:
    """The dashboard's padding panel said "6 (Σ2)" for the steps (and nothing for the rows and
    tokens beside them, also sums) where the sections say "(sum over 2 ranks)"."""
    from mlaprof.tui.text import padding_panel, render_text

    s = shipped_runs.summary(GPU)
    per = [*s.padding.per_rank, dataclasses.replace(s.padding.per_rank[0], rank=1)]
    two = dataclasses.replace(
        s, ranks=[0, 1], padding=dataclasses.replace(s.padding, ranks=2, per_rank=per)
    )
    v = dataclasses.replace(_view(GPU, two), padding=two.padding)
    summed = f"({over_ranks_text('sum', 2)})"
    assert _labels(two)["padding.steps"].endswith(summed)
    title, (head, body) = padding_panel(v)
    assert title.endswith(summed) and body[0][0] == str(s.padding.steps), (title, body)
    text = render_text(v, width=400)
    assert "Σ" not in text and f"PADDING (every recorded step) {summed}" in text
    one, _ = padding_panel(_view(GPU, s))
    assert "sum over" not in one


def test_an_imports_sync_count_is_labelled_as_in_every_other_view() -> None:
    """The terminal labelled an imported trace's sync count "sync probe" (no probe ran: the
    trace's own check counted) where the page, the Markdown and the dashboard say "syncs in
    region"."""
    from mlaprof.reporters.markdown import render_markdown
    from mlaprof.tui.text import render_text

    s = shipped_runs.summary(SYNCS)
    text = _flat(s.sync_counts.text)
    assert f"syncs in region: {text}" in _terminal(s)
    assert f"syncs in region {text}" in _html(s)
    assert f"**syncs in region**: {text}" in _flat(render_markdown(s))
    assert f"syncs in region: {text}" in _flat(render_text(_view(SYNCS, s), width=400))


@pytest.mark.parametrize("name", ["log-legacy_prefixes_tp2", "log-tp2_two_starts", FLEET])
def test_an_unknown_never_reads_as_a_sum_over_ranks(name: str) -> None:
    # an unknown is no rank's value: "padding rows (sum over 2 ranks): unknown" claimed a sum
    # of nothing (a vLLM log records no batch rows); a known one keeps its label
    text = _terminal(shipped_runs.summary(name))
    assert not re.search(r"\(sum over \d+ ranks\): unknown", text), name
    assert re.search(r"\(sum over \d+ ranks\): \d", text), name
