"""A section's title says where its numbers come from as the analysis does: the splits table of
a CPU run is modelled (it read "as recorded on a GPU" on every CPU run, beside a headline saying
"(model)"), and only a trace's S per layer is "from the trace"."""

from __future__ import annotations

import dataclasses

from mlaprof.reporters.rows import summary_blocks
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"


def _titles(s: object) -> list[str]:
    return [b.title for b in summary_blocks(s)]  # type: ignore[arg-type]


def test_the_splits_title_says_recorded_only_where_the_headline_does() -> None:
    gpu = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    assert gpu.device == "cuda"
    assert (
        "KV splits per policy (worst step; modelled; the run's own policy as recorded on a GPU)"
        in _titles(gpu)
    )
    assert any(r.provenance == "recorded" for r in gpu.headline if r.label.startswith("KV splits"))
    cpu = dataclasses.replace(gpu, device="cpu")
    assert "KV splits per policy (worst step; modelled)" in _titles(cpu)
    assert not any("recorded on a GPU" in t for t in _titles(cpu))


def test_s_per_layer_is_from_the_trace_only_for_a_trace() -> None:
    recorded = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    assert "S per MLA layer (from the run's layer records)" in _titles(recorded)
    trace = shipped_runs.summary("aiter-gluon_v0119_fix")
    assert trace.trace is not None
    assert "S per MLA layer (from the trace's kernel grids)" in _titles(trace)


def test_a_run_that_asked_for_no_full_graph_has_no_captured_region() -> None:
    """A NONE- or PIECEWISE-mode run's syncs sit where a FULL capture would meet them: its
    sections (and findings) never say "in the captured region"."""
    flat = shipped_runs.summary("demo-bug-legacy-flat-syncs-break-capture")
    assert flat.syncs and flat.capture.mode == "FULL"
    assert "syncs in the captured region" in _titles(flat)
    none = dataclasses.replace(flat, capture=dataclasses.replace(flat.capture, mode="NONE"))
    assert "syncs in the region a FULL graph would capture" in _titles(none)
    assert not any("captured region" in t for t in _titles(none))


def test_no_captured_graph_s_where_no_graph_serves_the_steps() -> None:
    """A failed capture replays no S: "S a captured graph replays" is absent ("not in this
    run"), never the policy's S used under that title."""
    flat = shipped_runs.summary("demo-bug-legacy-flat-syncs-break-capture")
    assert flat.capture.status == "failed" and flat.full_graph_splits.source is None
    assert flat.full_graph_splits.used is None
    assert "S a captured graph replays (measured or modelled)" not in _titles(flat)
    fix = shipped_runs.summary("demo-fix-native-kernel-full-graph")
    assert fix.full_graph_splits.source is not None and fix.full_graph_splits.used is not None
    assert "S a captured graph replays (measured or modelled)" in _titles(fix)


def test_a_value_made_of_every_ranks_says_so_where_the_run_has_several() -> None:
    """The padding and timing sections hold sums over ranks (and a median of the pooled steps):
    "padding rows: 12" beside "6 padding rows over 6 steps per rank (2 ranks)" read as one
    rank's. Their labels say the sum where the run has several ranks, and only there."""
    from mlaprof.reporters.rows import summary_blocks

    one = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    # the same records on a second rank (a sum's label names the ranks whose values it adds)
    pad, tim = one.padding, one.timing
    two = dataclasses.replace(
        one,
        ranks=[0, 1],
        padding=dataclasses.replace(pad, ranks=2, per_rank=[*pad.per_rank, dataclasses.replace(pad.per_rank[0], rank=1)]),
        timing=dataclasses.replace(tim, per_rank=[*tim.per_rank, dataclasses.replace(tim.per_rank[0], rank=1)]),
    )  # fmt: skip

    def labels(s: object) -> dict[str, str]:
        return {r.key: r.label for b in summary_blocks(s) for r in b.rows}  # type: ignore[arg-type]

    l1, l2 = labels(one), labels(two)
    assert l1["padding.padding_rows"] == "padding rows"
    assert l2["padding.padding_rows"] == "padding rows (sum over 2 ranks)"
    assert l2["padding.steps"] == "steps (sum over 2 ranks)"
    assert l2["timing.steps"] == "steps (sum over 2 ranks)"
    assert l2["timing.step_median_us"].endswith("(median of the steps pooled over 2 ranks)")
    assert l2["padding.capture_size"] == l1["padding.capture_size"]  # not a sum: unlabelled


def test_a_policy_the_device_decides_is_never_frozen_in_the_sections_as_in_the_table() -> None:
    """The front splits table says "never" for a device-decided policy's frozen S; the sections'
    table said "-" (its legend: no FULL graph serves the steps) beside "FULL -> predicted-ok"."""
    from mlaprof.reporters.rows import split_cells, summary_blocks

    s = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    row = s.splits[0]
    dev = dataclasses.replace(row, on_device=True, frozen=None)
    s2 = dataclasses.replace(s, splits=[dev, *s.splits[1:]])
    (table,) = [t for b in summary_blocks(s2) if b.key == "splits" for t in b.tables]
    frozen = table.head.index("frozen")
    assert table.rows[0][frozen] == split_cells(dev).frozen == "never"
    assert [r[frozen] for r in table.rows[1:]] == [split_cells(r).frozen for r in s.splits[1:]][
        : len(table.rows) - 1
    ]


def test_a_logs_ranks_are_not_described_in_rocprofv3s_words_nor_said_to_agree_on_nothing() -> None:
    """A vLLM log's ranks read "the folder of the rank's files ...; agent: rocprofv3's Agent_Id"
    and "ranks: 2, all agree" with no layer record on any rank."""
    log = shipped_runs.summary("log-tp2_two_starts")
    assert "rocprofv3" not in log.fleet.hosts_source
    assert log.fleet.text == "ranks: 2, nothing to compare (no rank holds layer records)"
    fleet = shipped_runs.summary("aiter-fleet_dp2_tp4")
    assert "rocprofv3's Agent_Id" in fleet.fleet.hosts_source
    assert fleet.fleet.text.startswith("ranks: 8, DISAGREE")
