"""One run tells one story: a number the analysis states in two places is computed once, in
the analysis, and every view follows it. Each rule here failed before its fix: the capture
section's sizes beside the memory finding's count, a trust finding that pooled a reliable rank
with an unreliable one, a fleet finding's steps summed over ranks beside sections that count
them per rank, a downgrade that keeps FULL decode graphs counted as a failed capture by the
compare, and the S-per-layer title a view chose for itself."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from mlaprof.analysis.contradictions import contradictions
from mlaprof.analysis.findings import Finding
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
_summary = shipped_runs.summary


# -- 2. one count of capture sizes ------------------------------------------------------------
def test_a_failed_captures_sizes_are_the_memory_findings_count() -> None:
    """The legacy flat demo's FULL capture failed at one capture size: the capture section
    said ``sizes: 0`` beside the memory finding's "over 1 capture size"."""
    s = _summary("demo-bug-legacy-flat-syncs-break-capture")
    assert s.capture.status == "failed"
    (mem,) = [f for f in s.findings if f.kind == "memory"]
    assert s.capture.sizes == 1, s.capture.sizes
    assert "over 1 capture size" in mem.title, mem.title
    # a captured run: the same count from the same rule
    ok = _summary("demo-fix-native-kernel-full-graph")
    (mem,) = [f for f in ok.findings if f.kind == "memory"]
    assert (
        f"over {ok.capture.sizes} capture size{'' if ok.capture.sizes == 1 else 's'}" in mem.title
    )
    # the property every shipped run is held to fires on two counts
    assert any("capture sizes" in c for c in contradictions(replace(s, capture=replace(
        s.capture, sizes=0))))  # fmt: skip


def test_capture_sizes_counts_attempts_where_no_graph_was_kept() -> None:
    from mlaprof.analysis.memory import capture_memory_findings, capture_sizes
    from mlaprof.recording import ATTEMPT

    def rows(*modes: tuple[int, str]) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {"rank": 0, "capture_size": size, "graph_mode": mode, "pool_bytes": None,
                 "allocator_bytes": None, "driver_bytes": None, "capture_ns": 1e6}
                for size, mode in modes
            ]
        )  # fmt: skip

    attempts = rows((8, "FULL" + ATTEMPT), (16, "FULL" + ATTEMPT))
    assert capture_sizes(attempts) == 2
    s = _summary("demo-bug-legacy-flat-syncs-break-capture").capture
    (f,) = capture_memory_findings(s, attempts)
    assert "over 2 capture sizes" in f.title
    # serving graphs beside an attempt: the graphs kept are the count
    assert capture_sizes(rows((8, "FULL"), (16, "FULL" + ATTEMPT))) == 1
    # no capture recorded: no count at all, never a 0 that reads as measured
    assert capture_sizes(rows()[0:0]) is None


# -- 3. the trust finding is per rank -----------------------------------------------------------
def test_the_unreliable_trace_finding_names_its_rank_and_pools_no_reliable_one() -> None:
    """Two ranks, rank 0 lost dispatches and rank 1 did not: the finding said "2 of 10 replays"
    (both ranks' replays pooled, 6% lost); it is rank 0's own "2 of 5" (12%), named, with rank 1
    said reliable; the trust section's reasons name the rank too."""
    s = _summary("aiter-two_ranks_one_lossy")
    assert s.trace is not None and s.trace.trust_by_rank == {0: "unreliable", 1: "reliable"}
    (f,) = [f for f in s.findings if f.kind == "trust"]
    assert f.data["ranks"] == [0] and f.data["replays"] == 5, f.data
    assert "2 of 5 replays miss kernels" in f.title and "[rank 0 of 2]" in f.title, f.title
    assert "2 of 10 " not in f.title + f.evidence
    assert "rank 1 reliable on its own checks" in f.evidence
    assert s.trace.trust.reasons and all(r.startswith("rank 0: ") for r in s.trace.trust.reasons)
    pooled = replace(f, data={k: v for k, v in f.data.items() if k != "ranks"})
    assert any("trust finding" in c for c in contradictions(replace(s, findings=[pooled])))


def test_only_the_unreliable_ranks_findings_are_marked() -> None:
    from mlaprof.analysis.trust import mark_unreliable

    s = _summary("aiter-two_ranks_one_lossy")
    assert s.trace is not None

    def f(**data: object) -> Finding:
        return Finding("split-collapse", "warning", "t", "e", "x", data=dict(data))

    per_rank = {0: replace(s.trace.trust, verdict="unreliable"),
                1: replace(s.trace.trust, verdict="reliable", reasons=[])}  # fmt: skip
    mine, theirs, both, pooled = f(rank=0), f(rank=1), f(ranks=[0, 1]), f()
    mark_unreliable([mine, theirs, both, pooled], s.trace.trust, per_rank)
    assert (mine.unreliable, theirs.unreliable, both.unreliable, pooled.unreliable) == (
        True, False, True, True)  # fmt: skip


# -- 4. a fleet's findings count per rank -----------------------------------------------------
def test_a_fleet_finding_counts_steps_per_rank_as_its_sections_do() -> None:
    """The fleet's collapse finding said "12 graph replay steps" (4 ranks x 3) beside the
    timing section's 3 steps per rank; it says 3 per rank, and a sum says it is one, in the
    sections' one wording (``over_ranks``)."""
    from mlaprof.analysis.typed_json import over_ranks_text

    s = _summary("aiter-fleet_dp2_tp4")
    assert {r.steps for r in s.timing.per_rank} == {3}
    (f,) = [f for f in s.findings if f.kind == "split-collapse"]
    assert f.evidence.startswith("3 graph replay steps per rank (4 ranks) of "), f.evidence
    assert "12 graph replay" not in f.evidence
    assert f.data["steps_per_rank"] == {"0": 3, "1": 3, "2": 3, "3": 3} and "steps" not in f.data
    # a count the trace's checks add over ranks says so, in the wording the sections' labels use
    said = f"no stage-2 kernel in 48 ({over_ranks_text('sum', 8)}) of its S = 1 layers"
    assert said in f.evidence
    assert s.capture.evidence is not None
    # the capture's evidence is each rank's (ranks that read the same said once), never a sum
    assert s.capture.evidence.startswith("Ranks 0-7 (each): 3 MLA steps replayed")
    assert "(FULL; 3 of 3 carry" in s.capture.evidence and "sum over" not in s.capture.evidence


def test_a_sum_over_ranks_is_said_in_the_sections_one_wording() -> None:
    """The rows layer's label of an ``over_ranks`` field and a finding's sum share one wording:
    the capture's step counts of a fleet, and a step-mode finding's counts."""
    from mlaprof.analysis.capture import step_mode_findings
    from mlaprof.analysis.typed_json import over_ranks_text
    from mlaprof.reporters.rows import summary_blocks

    s = _summary("aiter-fleet_dp2_tp4")
    labels = [r.label for b in summary_blocks(s) if b.key == "capture" for r in b.rows]
    assert f"graph steps ({over_ranks_text('sum', 8)})" in labels, labels
    # ranks 0-5 replay 3 steps each, ranks 6-7 run 3 eagerly: each count said per rank
    per = [replace(r, graph_steps=0, eager_steps=3) if r.rank >= 6 else r
           for r in s.capture.per_rank or []]  # fmt: skip
    mixed = replace(s.capture, status="mixed", eager_steps=6, graph_steps=18, per_rank=per)
    (f,) = step_mode_findings(mixed, 8)
    assert "eagerly in 3 steps per rank (2 ranks) on ranks 6-7 of 8" in f.title, f.title
    assert "beside 3 FULL graph replays per rank (6 ranks) on ranks 0-5 of 8" in f.title
    assert f.data["ranks"] == [6, 7]
    # an older import's sum over its ranks (no rank's own evidence) is said to be one
    (old,) = step_mode_findings(replace(mixed, per_rank=None), 8)
    assert f"eagerly in 6 steps ({over_ranks_text('sum', 8)})" in old.title, old.title
    (one,) = step_mode_findings(replace(mixed, per_rank=None), 1)
    assert "over" not in one.title.split(" beside ")[0]


# -- 5. one downgrade classification --------------------------------------------------------
@pytest.mark.parametrize(("setting", "fails"), [("FULL_AND_PIECEWISE", 0.0), ("PIECEWISE", 1.0)])
def test_a_downgrade_is_a_failure_in_the_compare_only_where_its_finding_says(
    setting: str, fails: float
) -> None:
    """vLLM downgraded FULL to FULL_AND_PIECEWISE: decode batches still replay FULL graphs, so
    the report calls it information, and the compare of two logs counted it as a failed
    capture (0 -> 1, "worse"). One rule decides both (capture_status.keeps_full_graphs)."""
    from mlaprof.analysis.capture_status import keeps_full_graphs
    from mlaprof.analysis.diff import diff
    from mlaprof.analysis.downgrades import start_downgrade_findings

    log = _summary("log-legacy_prefixes_tp2")
    assert log.capture.status == "downgraded"
    last = log.engine_starts[-1]
    (d,) = last.downgrades
    assert d.setting == "FULL_AND_PIECEWISE" and log.capture.effective_mode == d.setting
    start = replace(last, downgrades=[replace(d, setting=setting)], final_mode=setting)
    (f,) = start_downgrade_findings(start)
    s = replace(
        log,
        capture=replace(log.capture, effective_mode=setting),
        engine_starts=[*log.engine_starts[:-1], start],
        findings=[x for x in log.findings if x.kind != "capture-downgrade"] + [f],
    )
    assert keeps_full_graphs(setting) == (fails == 0.0)
    assert (f.severity == "info") == (fails == 0.0), f.severity
    assert s.capture.no_full_graph == bool(fails)
    other = _summary("log-tp2_two_starts")
    (row,) = [r for r in diff(other, s).table if r.metric.startswith("capture fails")]
    assert row.b == fails, row
    assert contradictions(s) == []
    # the property fires where the two disagree
    flipped = replace(f, severity="warning" if f.severity == "info" else "info")
    bad = replace(s, findings=[x for x in s.findings if x is not f] + [flipped])
    assert any("downgrade" in c for c in contradictions(bad))


# -- 6. the S-per-layer title is the analysis's ----------------------------------------------
def test_the_s_per_layer_title_is_decided_in_the_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The title "S per MLA layer (...)" was chosen in the rows layer (``s.trace is not
    None``), and the terminal's fallback table headed the same numbers "(from the trace)" on
    its own: both say what the analysis says (mlaprof.analysis.headline.layer_splits_scope)."""
    from mlaprof.analysis.headline import layer_splits_scope
    from mlaprof.reporters import rows
    from mlaprof.reporters.renderer import renderer

    trace = _summary("aiter-gluon_v0119_fix")
    recorded = _summary("demo-fix-padding-active-rows-c16")
    assert layer_splits_scope(trace.trace) == "from the trace's kernel grids"
    assert layer_splits_scope(recorded.trace) == "from the run's layer records"
    monkeypatch.setattr(rows, "layer_splits_scope", lambda t: "SCOPE-FROM-THE-ANALYSIS")
    titles = [b.title for b in rows.summary_blocks(trace)]
    assert "S per MLA layer (SCOPE-FROM-THE-ANALYSIS)" in titles, titles
    # the terminal's table of S per layer (a trace whose paths show no split metadata)
    bare = replace(trace, trace=replace(trace.trace, paths=[]))  # type: ignore[arg-type]
    text = renderer("text").render(bare)
    assert "S per MLA layer (SCOPE-FROM-THE-ANALYSIS)" in text
    assert "S per MLA layer (from the trace)" not in text
    # the terminal's splits table is titled as the sections are, with where its S come from
    monkeypatch.undo()
    text = " ".join(renderer("text").render(recorded).split())
    title = rows.splits_title(recorded)
    assert title.endswith("(worst step; modelled; the run's own policy as recorded on a GPU)")
    assert title in text and title in [b.title for b in rows.summary_blocks(recorded)]
    assert "KV splits per policy (worst step) " not in text


def test_every_finding_that_pools_ranks_says_so_as_the_sections_do() -> None:
    """A kernel-variant finding's steps and a timing finding's medians add every rank's: each
    says so in the label the sections give the same kind of value (``over_ranks``)."""
    from mlaprof.analysis.sections import TracePath
    from mlaprof.analysis.timing import timing_findings
    from mlaprof.analysis.typed_json import over_ranks_how, over_ranks_text
    from mlaprof.analysis.variants import variant_findings

    def path(variant: str, ranks: list[int]) -> TracePath:
        return TracePath(S="4", S_source="y", eager_steps=0, graph_steps=6, layer_median_us=None,
                         path="aiter-asm", piecewise_steps=0, provenance="p", qlen="4",
                         qlen_source="z", ranks=ranks, rows="8", rows_source="x", steps=6,
                         variant=variant)  # fmt: skip

    (f,) = variant_findings("o", [path("a", [0, 1]), path("b", [0])])
    assert f"a on 6 steps ({over_ranks_text('sum', 2)}) (batch rows" in f.evidence
    assert "b on 6 steps (batch rows" in f.evidence
    fleet = _summary("aiter-fleet_dp2_tp4").timing
    assert len(fleet.per_rank) == 8
    two = replace(fleet, by_mode={"graph": 100.0, "eager": 150.0})
    (t,) = timing_findings(two)
    how = over_ranks_how(type(fleet), "step_median_us")
    assert t.evidence.endswith(f"({over_ranks_text(how, 8)})"), t.evidence
    (one,) = timing_findings(replace(two, per_rank=two.per_rank[:1]))
    assert "ranks" not in one.evidence
