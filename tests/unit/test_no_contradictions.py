"""The second property test: over every kind of run the project produces, no two statements of
one report contradict each other (mlaprof.analysis.contradictions): every shipped run (a copy of
traces/demo), every committed trace and log under tests/data and the recorded vLLM engine runs
(tests/shipped_runs.py), and the runs mlaprof makes, made here in a temporary folder: ``mlaprof
run`` on the CPU (the default scenario, the legacy path's real syncs, ...), a rocpd round trip
and the synthetic runs (tests/made_runs.py; ``--ranks`` runs: tests/e2e/test_multirank.py). Each
rule fires on the pair it names, so the property can fail."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mlaprof.analysis.contradictions import contradictions
from mlaprof.analysis.findings import Finding
from tests import made_runs, shipped_runs

WORKER_GROUP = "shipped-runs"
_summary = shipped_runs.summary


@pytest.mark.parametrize("name", shipped_runs.NAMES)
def test_no_two_findings_of_a_shipped_run_contradict(name: str) -> None:
    assert contradictions(_summary(name)) == [], name


@pytest.mark.parametrize("name", made_runs.NAMES)
def test_no_two_findings_of_a_run_mlaprof_makes_contradict(name: str) -> None:
    assert contradictions(made_runs.summary(name)) == [], name


def test_the_corpus_holds_every_kind_of_run() -> None:
    kinds = {str(_summary(n).kind) for n in shipped_runs.NAMES}
    assert kinds == {"scenario", "trace", "log", "engine"}
    assert any(n.startswith("engine-") for n in shipped_runs.NAMES)
    assert any(n.startswith("rocprof-") for n in shipped_runs.NAMES)
    assert any(n.startswith("log-") for n in shipped_runs.NAMES)
    # the CPU runs a user makes first: the default (0 syncs) and the legacy path (real syncs)
    default, legacy = made_runs.summary("cpu-default"), made_runs.summary("cpu-legacy-flat")
    assert str(default.device) == "cpu" and str(default.backend) == "torch"
    assert default.sync_counts.checked and default.sync_counts.total == 0
    assert legacy.sync_counts.checked and legacy.sync_counts.total == 12  # 4 per layer, 3 layers
    assert {str(made_runs.summary(n).kind) for n in made_runs.NAMES} == {"scenario"}


def test_another_paths_syncs_never_read_as_this_runs() -> None:
    """The default CPU run measures 0 syncs in its region; its path check says what the flattened
    legacy path would do on the same metadata. That finding is a path check, said to be outside
    this run, never a sync finding of the run; a real sync finding beside "0 syncs" still is a
    contradiction, and the legacy run's own syncs are sync findings."""
    s = made_runs.summary("cpu-default")
    (check,) = [f for f in s.findings if f.data.get("legacy")]
    assert check.kind == "path-check" and check.data["path"] == "legacy-flat"
    assert check.title.startswith("path check, not this run's region: ")
    assert "would do 4 syncs per layer" in check.title
    assert not [f for f in s.findings if f.kind == "sync"]
    # each way of telling it as the run's fires
    as_sync = replace(s, findings=[replace(check, kind="sync")])
    assert "'0 syncs' + a sync finding" in contradictions(as_sync)
    assert any("a sync finding of path legacy-flat" in c for c in contradictions(as_sync))
    unsaid = replace(check, title=check.title.removeprefix("path check, not this run's region: "))
    assert any("not said to be outside" in c for c in contradictions(replace(s, findings=[unsaid])))
    real = replace(s, findings=[*s.findings, _finding("sync", "device->host sync in region")])
    assert "'0 syncs' + a sync finding" in contradictions(real)
    legacy = made_runs.summary("cpu-legacy-flat")
    assert any(f.kind == "sync" for f in legacy.findings)
    assert not [f for f in legacy.findings if f.kind == "path-check"]  # it ran that path


def _finding(kind: str, title: str = "t", fix: str = "f") -> Finding:
    return Finding(kind=kind, severity="warning", title=title, evidence="e", fix=fix)


def test_each_rule_fires_on_the_pair_it_names() -> None:
    failed = _summary("demo-bug-legacy-flat-syncs-break-capture")
    assert contradictions(failed) == []
    frozen = replace(failed, findings=[*failed.findings, _finding("split-frozen")])
    assert any("frozen" in c for c in contradictions(frozen))
    # an over-split said of the S a FULL graph froze, where the capture failed
    over = _finding("split-over", "KV splits over-split: S = 256 frozen into the FULL graph")
    assert any("frozen" in c for c in contradictions(replace(failed, findings=[over])))
    replay = _finding("split-over", "KV splits over-split: S = 64 replayed by the FULL graph")
    assert any("frozen" in c for c in contradictions(replace(failed, findings=[replay])))
    used = _finding("split-over", "KV splits over-split: S = 64 used, the real rows use 16")
    assert contradictions(replace(failed, findings=[*failed.findings, used])) == []
    fgs = replace(failed, full_graph_splits=replace(failed.full_graph_splits, modelled=1))
    assert any("full_graph_splits" in c for c in contradictions(fgs))
    # a frozen cell in the splits table where no FULL graph serves the steps
    cell = replace(failed, splits=[replace(failed.splits[0], frozen=1), *failed.splits[1:]])
    assert any("frozen S in the splits table" in c for c in contradictions(cell))
    # a frozen point in the figures' split series of that run
    assert failed.series is not None and failed.series.ranks[0].splits
    rk = failed.series.ranks[0]
    pts = (replace(rk.splits[0], frozen=1.0), *rk.splits[1:])
    ser = replace(failed.series, ranks=(replace(rk, splits=pts), *failed.series.ranks[1:]))
    assert any(
        "frozen S in the split series" in c for c in contradictions(replace(failed, series=ser))
    )
    # the run's own policy frozen beside its measured replays
    clean = _summary("demo-fix-native-kernel-full-graph")
    assert clean.replayed_splits is not None
    own = [replace(r, frozen=1) if r.policy == clean.scenario.policy else r for r in clean.splits]
    assert any("measured replays" in c for c in contradictions(replace(clean, splits=own)))
    trim = replace(failed, findings=[*failed.findings,
                                     _finding("memory", fix="capture fewer sizes")])  # fmt: skip
    assert any("trim" in c for c in contradictions(trim))
    no_mismatch = replace(failed, findings=[f for f in failed.findings if f.kind != "route"])
    assert any("no mismatch finding" in c for c in contradictions(no_mismatch))

    clean = _summary("demo-fix-native-kernel-full-graph")
    assert not clean.sync_counts.checked
    unchecked = replace(clean, findings=[*clean.findings, _finding("sync", "device->host sync")])
    assert any("not checked" in c for c in contradictions(unchecked))
    zero = replace(unchecked, sync_counts=replace(clean.sync_counts, checked=True, total=0))
    assert any("'0 syncs'" in c for c in contradictions(zero))
    # a capture verdict predicted from syncs nobody watched
    blind = replace(clean, capture=replace(clean.capture, status="predicted-ok"))
    assert any("predicted from syncs" in c for c in contradictions(blind))
    assert (
        contradictions(replace(blind, sync_counts=replace(clean.sync_counts, checked=True))) == []
    )

    trace = _summary("aiter-gluon_v0119_fix")
    assert trace.trace is not None and trace.trace.syncs.count == 0
    lost = replace(trace, sync_counts=replace(trace.sync_counts, checked=False))
    assert any("not checked" in c for c in contradictions(lost))

    engine = _summary("engine-engine_ngram_run")
    assert engine.route is not None
    verified = replace(engine, route=replace(engine.route, verified=True))
    assert any("verified" in c for c in contradictions(verified))
    recorded = replace(engine, route=replace(engine.route, version="as recorded"))
    assert any("as recorded" in c for c in contradictions(recorded))

    cpu = _summary("vllm_cpu_mla_profile")
    grid = replace(cpu, findings=[*cpu.findings, _finding("not-checked", fix="--patterns FILE")])
    assert any("--patterns" in c for c in contradictions(grid))


def test_an_unknown_never_reads_as_a_value() -> None:
    """A count the run does not hold is None, never a 0 beside "not checked"/"not recorded"; a
    scenario setting left at its "not set" default is absent; a replay the trace cannot call
    FULL (no graph-launch call) is no FULL step. Each rule fires on its pair."""
    trace = _summary("aiter-gluon_v0119_bug_rocm63")  # no API trace: nothing confirms FULL
    assert contradictions(trace) == []
    assert trace.trace is not None and not trace.trace.capture.graph_launches
    assert {t.capture for t in trace.trace.steps} == {"replayed in a graph"}
    assert not trace.sync_counts.checked and trace.sync_counts.total is None
    assert trace.padding.text == "not recorded" and trace.padding.padding_fraction is None

    cov = trace.trace.coverage
    assert cov is not None and cov.api_calls == 0 and cov.host_syncs is None
    read = replace(trace, trace=replace(trace.trace, coverage=replace(cov, host_syncs=0)))
    assert any("host syncs: 0" in c for c in contradictions(read))
    zero = replace(trace, sync_counts=replace(trace.sync_counts, total=0))
    assert any("sync total of 0" in c for c in contradictions(zero))
    pad = replace(trace, padding=replace(trace.padding, padding_fraction=0.0, steps=0))
    assert any("padding 'not recorded'" in c for c in contradictions(pad))
    steps = [replace(t, capture="FULL") for t in trace.trace.steps]
    full = replace(trace, trace=replace(trace.trace, steps=steps))
    assert any("read FULL" in c for c in contradictions(full))

    # the trace's host-sync check counted 1 per layer per step: the layer table says so too
    eager = _summary("aiter-eager_syncs")
    assert eager.sync_counts.checked and {r.syncs for r in eager.layers} == {1.0}
    unknown = [replace(r, syncs=None) for r in eager.layers]
    assert any("layer table None" in c for c in contradictions(replace(eager, layers=unknown)))

    # no deserved or modelled S on its layers: no collapse judged, the rank on neither side
    assert all(r.collapsed is None for r in eager.layers)
    assert eager.fleet.ranks_not_collapsed is None is eager.fleet.ranks_collapsed
    assert eager.fleet.ranks_not_judged == [0]
    zero = [replace(r, collapsed=0) for r in eager.layers]
    assert any("no S to judge" in c for c in contradictions(replace(eager, layers=zero)))
    fine = replace(eager, fleet=replace(eager.fleet, ranks_not_collapsed=[0]))
    assert any("none of their layers judged" in c for c in contradictions(fine))

    demo = _summary("demo-bug-legacy-flat-syncs-break-capture")  # kv_cache_tokens left unset
    assert demo.scenario.kv_cache_tokens is None and demo.scenario.aiter_version is None
    for name, unset in (("kv_cache_tokens", 0), ("max_num_batched_tokens", 0),
                        ("aiter_version", "")):  # fmt: skip
        shown = replace(demo, scenario=replace(demo.scenario, **{name: unset}))
        assert any(f"scenario {name}" in c for c in contradictions(shown)), name

    # the plugin's run.json names no device ("engine"); the CPU attention backend it recorded
    # (AMX_MLA) does: its numbers are measured on the CPU
    engine = _summary("engine-engine_ngram_run")
    assert engine.device == "cpu"
    assert any(h.provenance == "measured on cpu" for h in engine.headline)
    assert any("device 'engine'" in c for c in contradictions(replace(engine, device="engine")))


@pytest.mark.parametrize("name", shipped_runs.NAMES)
def test_a_list_of_ranks_never_reads_as_a_count(name: str) -> None:
    """``ranks not collapsed: 0`` beside ``ranks: 1, all agree`` read as "no rank": a list of
    rank ids is worded as how many and which, in every row and table cell."""
    import re

    from mlaprof.reporters.rows import summary_blocks

    bare = re.compile(r"[\d, ]+")  # "0" or "0, 1, 2": ids that read as counts
    for b in summary_blocks(_summary(name)):
        for r in b.rows:
            if r.key.rsplit(".", 1)[-1].startswith("ranks_"):
                assert not bare.fullmatch(r.text), (name, r.key, r.text)
        for t in b.tables:
            for col, head in enumerate(t.head):
                lists = head == "ranks" and t.key in ("dp_groups", "trace.paths", "paths")
                # (a replay layer's "ranks text" is the span beside its ranks column)
                if lists or (head.startswith("ranks ") and head != "ranks text"):
                    assert not any(bare.fullmatch(row[col]) for row in t.rows), (t.key, head)


def test_the_one_rank_of_a_run_reads_as_one_rank() -> None:
    from mlaprof.reporters.rows import summary_blocks

    s = _summary("demo-bug-legacy-flat-syncs-break-capture")
    assert s.fleet.ranks_not_collapsed == [0] and s.fleet.ranks_collapsed == []
    blocks = summary_blocks(s)
    rows = {r.key: r.text for b in blocks for r in b.rows}
    assert rows["fleet.ranks_not_collapsed"] == "1 (rank 0)"
    assert rows["fleet.ranks_collapsed"] == "none"
    dp = next(t for b in blocks for t in b.tables if t.key == "dp_groups")
    assert dp.rows[0][dp.head.index("ranks")] == "1 (rank 0)"


def test_a_mixed_capture_says_full_only_where_a_graph_launch_confirms_it() -> None:
    """The capture verdict of a trace whose steps mix replays and eager launches names the
    replays FULL only where the API trace holds the graph-launch calls (as its evidence and
    each step's capture do); the timing's share of replays is labelled as replays."""
    import pandas as pd

    from mlaprof.analysis.capture import step_mode_evidence
    from mlaprof.analysis.evidence.model import run_meta
    from mlaprof.analysis.run_checks import RunChecks
    from mlaprof.reporters.rows import summary_blocks
    from mlaprof.store.trace_checks import TraceChecks

    steps = pd.DataFrame({"backend": ["gluon"] * 3, "graph_mode": ["graph", "graph", "eager"],
                          "rank": [0] * 3, "step": [0, 1, 2]})  # fmt: skip

    def checks(launches: dict[str, int]) -> RunChecks:
        return RunChecks({0: TraceChecks(0, {"launches": launches})})

    # the label is the one table's; the evidence names FULL only where a launch confirms it
    no_api = step_mode_evidence(run_meta({}), steps, checks({}))
    assert no_api.label == "mixed: graph replays and eager steps"
    assert "FULL" not in no_api.evidence and no_api.graph_launches is None
    launches = {"graph_launches": 2, "mla_replays_with_launch": 2, "runtime_api_calls": 5}
    api = step_mode_evidence(run_meta({}), steps, checks(launches))
    assert api.label == no_api.label and "(FULL; 2 of 2 carry" in api.evidence

    rows = {r.key: r.label for b in summary_blocks(_summary("aiter-gluon_v0119_bug_rocm63"))
            for r in b.rows}  # fmt: skip
    assert rows["timing.full_share"] == "steps replayed in a graph"


@pytest.mark.parametrize("name", ["aiter-gluon_v0119_bug", "aiter-fleet_dp2_tp4",
                                  "demo-bug-padding-collapses-splits-c16"])  # fmt: skip
def test_the_tui_splits_panel_never_reads_no_records_beside_a_known_s(name: str) -> None:
    """An imported trace has no modelled policy step, but its S is known (read off its kernel
    grids, in its paths and the layer table): the TUI's KV-splits panel says where, never
    "(no records)"; a run with policy steps keeps its table."""
    import dataclasses

    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import render_text, splits_note

    s = _summary(name)
    view, _ = read_view(shipped_runs.run_dir(name))
    v = dataclasses.replace(view, summary=s)
    text = render_text(v, width=400)
    panel = text.split("KV SPLITS")[1].split("PADDING")[0]
    if s.trace is None:
        assert s.splits and splits_note(v) is None and "S used" in panel
        return
    assert not s.splits and s.trace.paths and "(no records)" not in panel
    assert "kernel grids show" in panel
    summary = text.split("SUMMARY")[1].split("LAYERS")[0]
    for p in s.trace.paths:  # the S the note points to, in the summary above it
        assert f"S {p.S} on {p.path}" in summary, (name, summary)


def test_one_ops_layer_times_each_say_how_they_were_taken() -> None:
    """A CPU profile's one MLA op has three layer times (the median of all its layer records,
    each layer's mean over its steps, each path's median of step medians): each is labelled
    with how it was taken, never three bare "layer" times."""
    from mlaprof.reporters.rows import summary_blocks

    s = _summary("vllm_cpu_mla_profile")
    blocks = summary_blocks(s)
    rows = {r.key: r.label for b in blocks for r in b.rows}
    # the quantity named as the compare names it (analysis.timing.MLA_LAYER_TIME)
    label = "median MLA attention time per layer (every layer record)"
    assert rows["timing.layer_median_us"] == label
    tables = {t.key: t for b in blocks for t in b.tables}
    layers = tables["layers"]
    assert "mean MLA attention time per layer" in layers.head and "time" not in layers.head
    (path,) = s.trace.paths if s.trace else []
    assert path.layer_median_us is not None
    assert any("layer: the median of its steps' median layer times" in n
               for n in tables["trace.paths"].notes)  # fmt: skip
