"""Answers that contradict each other or the evidence: each rule lives once in
``mlaprof.analysis`` and every view prints what it returns."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from mlaprof.analysis.capture import step_mode_evidence as capture_evidence
from mlaprof.analysis.evidence.model import run_meta
from mlaprof.analysis.headline import _replayed
from mlaprof.analysis.layers import layer_table
from mlaprof.analysis.live import LiveFold
from mlaprof.analysis.padding import padding_findings, padding_summary
from mlaprof.analysis.run_checks import RunChecks
from mlaprof.analysis.run_summary import build_summary
from mlaprof.analysis.sections import RankSyncs, ReplayedSplits, Scenario, SplitStep
from mlaprof.analysis.served import engine_findings
from mlaprof.analysis.share import share_text
from mlaprof.analysis.splits import frozen_rule, frozen_stands, split_findings, split_rows
from mlaprof.analysis.syncs import sync_counts
from mlaprof.analysis.trust import trust_by_rank, trust_summary
from mlaprof.store import load
from mlaprof.store.liveness import run_status
from mlaprof.store.schema import columns
from mlaprof.store.trace_checks import TraceChecks
from mlaprof.tui.fmt import fmt_pct
from tests import shipped_demo

DEMO = shipped_demo.folder()


def test_a_share_short_of_an_end_never_prints_as_that_end() -> None:
    assert share_text(0.9983) == "99.8%"
    assert share_text(0.002) == "0.2%"
    assert share_text(0.99996) == "99.996%"
    assert share_text(1.0) == "100%" and share_text(0.0) == "0%"
    assert share_text(0.5) == "50%" and share_text(0.123, 1) == "12.3%"
    assert share_text(None) == "-" and share_text(float("nan")) == "-"
    assert share_text(1 - 1e-9) == ">99.999%" and share_text(1e-9) == "<0.001%"
    assert fmt_pct(0.9983) == "99.8%"  # the TUI prints the same


def test_acceptance_of_99_83_percent_is_not_printed_as_100() -> None:
    from mlaprof.analysis.sections import EngineRankVerify, EngineSection

    eng = EngineSection(
        source="measured",
        accepted_tokens=5990,
        draft_tokens=6000,
        acceptance_rate=5990 / 6000,
        graph_modes={"FULL": 3},
        steps=3,
        kinds={"verify": 3},
        verify_steps=3,
        verify_rows=12,
        verify_rows_as_prefill=0,
        scheduler_steps=3,
        scheduler_matches_worker=True,
        scheduler_worker_text="agree on 3 steps both committed",
        drafter_builds=0,
        padded_steps=0,
        ranks=[0],
        per_rank=[EngineRankVerify(0, 3, 12, 0, 6000, 0)],
        backend="TRITON_MLA",
        builder="x",
        heads=16,
        spec_method="mtp",
        num_speculative_tokens=3,
        max_num_seqs=None,
    )
    text = " ".join(f.title + " " + f.evidence for f in engine_findings(eng, None))
    assert "(99.8%)" in text and "100%" not in text


def _padding(rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    """Padding records (step, real rows, padding rows) at capture size 16, qlen 4."""
    return pd.DataFrame(
        [
            {
                "rank": 0,
                "step": st,
                "capture_size": 16,
                "real_rows": real,
                "padding_rows": pad,
                "real_tokens": 4 * real,
                "padding_tokens": 4 * pad,
                "kv_bytes_real": 0,
                "kv_bytes_padding": 10 * pad,
            }
            for st, real, pad in rows
        ]
    )


def test_padding_is_the_runs_total_with_its_per_step_range_not_step_0() -> None:
    pad = _padding([(0, 3, 1), (1, 2, 2), (2, 4, 0)])
    s = padding_summary(pad)
    assert (s.steps, s.real_rows, s.padding_rows) == (3, 9, 3)
    assert s.padding_rows_per_step == [0, 2] and s.steps_padded == 2
    assert s.padding_fraction == 12 / 48 and s.kv_bytes_padding == 30
    assert s.text == (
        "9 real + 3 padding rows over 3 steps (padding rows per step 0-2, capture size 16)"
    )
    (f,) = padding_findings(pad)  # the finding says the same totals
    assert "adds 3 padding rows to 9 real requests over 3 steps" in f.title
    assert "padding rows per step 0-2" in f.title


def _layers(syncs: list[float | None]) -> pd.DataFrame:
    """Two layers per step on rank 0; ``syncs[i]`` is what the producer wrote for step i
    (``None``: the probe did not watch that step), as cpu_runner records it."""
    rows = [
        {"rank": 0, "step": st, "layer": ly, "syncs": n, "splits_used": 4, "splits_deserved": 4}
        for st, n in enumerate(syncs)
        for ly in (0, 1)
    ]
    return pd.DataFrame(rows, columns=list(dict.fromkeys([*columns("layers"), "rank"])))


def test_a_clean_checked_step_reads_checked_zero_and_no_check_reads_not_checked() -> None:
    no_syncs = pd.DataFrame(columns=list(dict.fromkeys([*columns("syncs"), "rank"])))
    checked = sync_counts(no_syncs, _layers([0, None]))  # step 0 watched, nothing found
    assert checked.checked and checked.watched_steps == 1 and checked.total == 0
    assert checked.text == "0 (1 step checked)"
    assert checked.per_rank == [RankSyncs(rank=0, total=0, layers=0, watched_steps=1)]
    assert [r.syncs for r in layer_table(_layers([0, None]), no_syncs)] == [0.0, 0.0]
    unwatched = sync_counts(no_syncs, _layers([None, None]))  # e.g. a vLLM plugin run
    assert not unwatched.checked and unwatched.watched_steps == 0
    assert unwatched.text.startswith("not checked")
    assert [r.syncs for r in layer_table(_layers([None, None]), no_syncs)] == [None, None]


def test_a_clean_rank_is_trusted_when_another_ranks_losses_make_the_fleet_unreliable() -> None:
    # per-rank checks as the rocprofv3 import stores them (importers/annotate.py store_kernels:
    # one ``summary.checks`` per rank, the rank's rows of the store's trace_checks table); the
    # fleet's verdict counts their sum
    clean = {"replays": {"replays": 4}, "launches": {"graph_launches": 4}}
    lossy = {"replays": {"replays": 4, "short_replays": 1, "missing_kernels": 3,
                         "expected_kernels": 32}, "launches": {"graph_launches": 4}}  # fmt: skip
    checks = RunChecks({0: TraceChecks(0, clean), 1: TraceChecks(1, lossy)})
    assert checks.group("replays")["expected_kernels"] == 32  # summed: 32 + nothing
    meta = run_meta({})
    steps = pd.DataFrame(
        {
            "rank": [0, 0, 0, 0, 1, 1, 1, 1],
            "step": [0, 1, 2, 3, 0, 1, 2, 3],
            "backend": ["aiter"] * 8,
            # rank 1 also ran one step without a graph: a capture finding, never trust's
            "graph_mode": ["graph"] * 4 + ["graph", "eager", "graph", "graph"],
        }
    )
    cap = capture_evidence(meta, steps, checks)
    assert trust_summary(meta, cap, checks).verdict == "unreliable"
    assert trust_by_rank(meta, steps, checks) == {0: "reliable", 1: "unreliable"}


@pytest.mark.parametrize(
    ("ranks", "status"),
    [
        (["finished", "interrupted"], "interrupted"),  # Ctrl-C on one rank: the TUI said finished
        (["running", "incomplete"], "incomplete"),
        (["finished", "failed", "interrupted"], "failed"),
        (["finished", "finished"], "finished"),
        (["waiting"], "waiting"),
    ],
)
def test_the_tui_and_the_reader_say_one_run_status(ranks: list[str], status: str) -> None:
    fold = LiveFold("r")  # what the dashboard's update worker says
    for rank, s in enumerate(ranks):
        if s != "waiting":
            fold.set_status((rank, ""), s)
    assert fold.status == status
    if "waiting" not in ranks:  # the reader's rule (Run.status) is the same function
        assert run_status(ranks) == status


def test_a_launchers_failed_verdict_is_the_runs_status_in_every_view(tmp_path) -> None:
    """`run --ranks 2` with rank 1 killed: the launcher wrote "failed" (rank 1 failed (killed by
    signal 9)) into run.json, but rank 0, stopped with SIGTERM, recorded "interrupted" and the
    killed rank nothing: report, runs and the TUI read "interrupted" whenever SIGTERM reached
    rank 0 before its next collective failed (a race, 3 of 5 loaded test runs). The launcher's
    verdict is now one more state (mlaprof.store.liveness.process_run_status)."""
    from mlaprof.store import create_run, runmeta

    why = "rank 1 failed (killed by signal 9)"
    fold = LiveFold("r")
    fold.set_status((0, ""), "interrupted", "terminated by signal 15")
    fold.set_status((1, ""), "incomplete")
    assert (fold.status, fold.reason) == ("interrupted", "terminated by signal 15")
    fold.meta = {**fold.meta, "status": "failed", "reason": why}
    assert (fold.status, fold.reason) == ("failed", why)
    fold.meta = {**fold.meta, "status": "interrupted", "reason": "Ctrl-C"}  # not a failure
    assert fold.status == "interrupted"
    # the reader: the same rule over a stored run
    for rank, status in ((0, "interrupted"), (1, "finished")):
        w = create_run(tmp_path, "tp", {"scenario": {}}, rank)
        w.finish(status, "terminated by signal 15" if rank == 0 else None)
    with load(tmp_path / "tp") as run:
        assert run.status == "interrupted"
    runmeta.update(tmp_path / "tp", status="failed", reason=why)
    with load(tmp_path / "tp") as run:
        assert (run.status, run.reason) == ("failed", why)


def test_a_measured_graph_replay_is_not_warned_of_the_modelled_frozen_s() -> None:
    """fix-padding-active-rows-c16: a GPU run whose captured graph replayed S = 4 (its layer
    records) carried "S = 1 would be frozen" from the dummy-run model; measured over modelled."""
    demo = DEMO / "fix-padding-active-rows-c16"
    with load(demo) as run:
        s = build_summary(run)
    assert s.replayed_splits is not None
    assert (s.replayed_splits.min, s.replayed_splits.max) == (4, 4)
    assert "split-frozen" not in [f.kind for f in s.findings]
    heads = {h.label: h.value for h in s.headline}
    assert heads["KV splits (aiter-gluon-v0.1.19, worst step)"] == (
        "S used 4, deserved 4; the FULL graph replayed S = 4 (measured)"
    )


def _split_step(**kw: object) -> SplitStep:
    """A worst-step splits row (analysis.splits.split_rows) with ``kw`` set, the rest unknown."""
    base = {f: None for f in SplitStep.__dataclass_fields__}
    return SplitStep(**{**base, "ranks": [0], "occupancy_source": "model", **kw})  # type: ignore[arg-type]


def test_a_policy_whose_kernel_gives_no_s_says_so_in_the_headline() -> None:
    """aiter's gluon kernel asserts gfx950: on the h200 preset its rule gives no S. The headline
    says so (it said "S used None, deserved None") and keeps the S the graph replayed."""
    from mlaprof.analysis.headline import split_rows

    sc = Scenario(policy="aiter-gluon-v0.1.19", graph_mode="FULL", target="h200")
    row = _split_step(policy="aiter-gluon-v0.1.19", source="aiter v0.1.19")
    replayed = ReplayedSplits(min=4, max=4, provenance="measured", steps=1)
    heads = {h.label: h.value for h in split_rows([row], sc, "cuda", replayed=replayed)}
    assert heads["KV splits (aiter-gluon-v0.1.19)"] == (
        "no S: the policy's kernel does not run in this configuration; "
        "the FULL graph replayed S = 4 (measured)"
    )


def test_a_modelled_full_run_says_beside_s_used_what_the_frozen_graph_would_replay() -> None:
    """A CPU run under --min-kv-mode active-rows: S used 16 per step, but the graph vLLM's dummy
    run captures would replay S = 1; the headline and the frozen warning now say the same, and
    neither says it where the splits rows hold no frozen S (no FULL graph serves the steps:
    mlaprof.analysis.splits.frozen_stands)."""
    own = "aiter-gluon-v0.1.19"
    row = _split_step(policy=own, used=16, deserved=17, frozen=1)
    assert _replayed(None, row) == (
        "; a FULL graph captured by vLLM's dummy run would replay S = 1 (modelled)"
    )
    assert _replayed(None, replace(row, frozen=16)) == ""  # nothing to add
    assert _replayed(None, replace(row, frozen=None)) == ""  # none stands in this run
    measured = ReplayedSplits(min=4, max=4, provenance="measured", steps=1)
    assert _replayed(measured, row) == "; the FULL graph replayed S = 4 (measured)"
    frame = pd.DataFrame(
        [
            {"step": 0, "capture_size": 16, "policy": own, "used": 16, "deserved": 17,
             "frozen": 1, "all_rows": 1, "active_rows": 16, "min_kv_used": 4,
             "min_kv_deserved": 1040, "occupancy_used": 0.7, "occupancy_deserved": 0.8,
             "target": "mi355x"}
        ]
    )  # fmt: skip
    kinds = lambda rep: [f.kind for f in split_findings(frame, own, "FULL", None, rep)]  # noqa: E731
    assert kinds(None) == ["split-frozen"] and kinds(measured) == []
    for mode, rep in (("PIECEWISE", None), ("FULL", measured)):  # the rows say what it says
        stands = frozen_rule(own, mode == "FULL", rep)
        assert split_rows(frame, stands=stands)[0].frozen is None
    assert split_rows(frame, stands=frozen_rule(own, True, None))[0].frozen == 1


def test_frozen_stands_only_where_a_full_graph_serves_and_no_replay_of_the_policy_was_measured():
    measured = ReplayedSplits(min=4, max=4, provenance="measured", steps=1)
    own, other = "aiter-gluon-v0.1.19", "vllm-triton"
    assert frozen_stands(own, own, True, None) and frozen_stands(other, own, True, measured)
    assert not frozen_stands(own, own, False, None)  # capture failed, PIECEWISE or eager
    assert not frozen_stands(other, own, False, None)
    assert not frozen_stands(own, own, True, measured)  # measured over modelled
    assert not frozen_stands(other, "", True, measured)  # no run policy: every row is the run's


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        # the legacy flat path's syncs broke the capture: no graph froze any S
        ("bug-legacy-flat-syncs-break-capture", set()),
        # a captured FULL graph whose replays were measured: the run's own policy shows what
        # was replayed (the headline), the other policies what the dummy run would freeze
        ("fix-native-kernel-full-graph", {"aiter-gluon-v0.1.19.post2", "vllm-triton"}),
    ],
)
def test_the_splits_table_and_figures_show_a_frozen_s_only_where_it_stands(
    name: str, kept: set[str]
) -> None:
    """A run whose FULL capture failed showed "frozen 1" on every policy in its splits table
    and figures, and a run whose graph replayed S = 16 (measured) showed "frozen 1" on its own
    policy beside the headline's replayed 16: the table, the figures' series, the headline and
    full_graph_splits now read one rule (mlaprof.analysis.splits.frozen_stands)."""
    with load(DEMO / name) as run:
        s = build_summary(run)
    frozen = {r.policy for r in s.splits if r.frozen is not None}
    assert kept <= frozen if kept else frozen == set()
    assert s.scenario.policy not in frozen
    assert s.series is not None
    series = {p.policy for r in s.series.ranks for p in r.splits if p.frozen is not None}
    assert series == frozen
    assert s.full_graph_splits.modelled is None


def test_splits_per_layer_of_a_trace_draws_no_empty_deserved_series_and_shows_s_1() -> None:
    """An imported trace has S used per layer (its grids) and no S deserved: the figure drew an
    "S deserved" legend with no bars, and its log axis started at 1, where an S = 1 bar has no
    height."""
    from mlaprof import figures as F

    layers = pd.DataFrame(
        [
            {"rank": 0, "step": st, "layer": ly, "splits_used": 1 if ly else 8,
             "splits_deserved": None}
            for st in range(2)
            for ly in range(3)
        ]
    )  # fmt: skip
    fig = F.splits_used_vs_deserved({"layers": layers}, by="layer")
    assert [t.name for t in fig.data] == ["S used"]
    assert list(fig.data[0].y) == [8.0, 1.0, 1.0]
    assert "S deserved: not recorded" in fig.layout.xaxis.title.text  # a note under the axis
    lo, hi = fig.layout.yaxis.range  # a log2 axis from 1/2: S = 1 has a height
    assert fig.layout.yaxis.type == "log" and lo < 0 and 10**hi >= 8
    assert list(fig.data[0].text) == ["8", "1", "1"]
