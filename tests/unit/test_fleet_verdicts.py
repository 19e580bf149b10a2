"""The fleet and "where the run stands" say per rank what was judged and what was not: a rank no
layer of which could be judged for a collapse is "not judged", never on the "none collapsed"
side; the S the ranks disagree on is named in the fleet's line; a host nobody recorded is
unknown, never "none"; a fleet's committed steps are each rank's, never the fewest rank's
count shown as the run's; the host column's source is said for the kind of run it is."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from mlaprof.analysis.evidence.model import RankSource
from mlaprof.analysis.ranks import dp_group_rows, fleet_summary
from mlaprof.analysis.run_state import run_state
from mlaprof.analysis.run_summary import build_summary
from mlaprof.analysis.sections import REFERENCE_TEXT, EngineGroup, LayerRow
from mlaprof.recording import event_row
from mlaprof.reporters.rows import summary_blocks
from mlaprof.store import create_run, load

UNKNOWN_REF = REFERENCE_TEXT["unknown"]


def _rows(S: dict[int, int], layers: int = 3, collapsed: dict[int, int] | None = None) -> list:
    """``layers`` layer rows per rank, rank r running S[r]; ``collapsed``: rank -> collapsed
    steps per layer where a reference S judged it (other ranks: not judged)."""
    out = []
    for rank, s in S.items():
        judged = collapsed is not None and rank in collapsed
        for layer in range(layers):
            out.append(
                LayerRow(
                    S_min=s,
                    S_reference=8 if judged else None,
                    S_used=s,
                    S_steps=4,
                    collapsed=collapsed[rank] if judged else None,
                    layer=layer,
                    rank=rank,
                    reference=REFERENCE_TEXT["deserved"] if judged else UNKNOWN_REF,
                    steps=4,
                    syncs=None,
                    time_us=10.0,
                )
            )
    return out


def _texts(s) -> dict[str, str]:
    return {r.key: r.text for b in summary_blocks(s) for r in b.rows}


def test_no_rank_judged_reads_not_judged_and_the_S_disagreement_is_named() -> None:
    """Rank 2 runs S = 4 where the others run 16, no layer has a reference S: the line read
    "DISAGREE: collapsed on none, not on none" and "ranks collapsed: none"."""
    f = fleet_summary([0, 1, 2, 3], _rows({0: 16, 1: 16, 2: 4, 3: 16}))
    assert f.ranks_collapsed is None and f.ranks_not_collapsed is None
    assert f.ranks_not_judged == [0, 1, 2, 3]
    assert not f.agree
    assert "none" not in f.text
    assert f.text.startswith("ranks: 4, DISAGREE: S differs: 4 on rank 2, 16 on ranks 0-1, 3")
    assert "(3 of 3 layers)" in f.text
    assert "collapse not judged on ranks 0-3" in f.text
    (g,) = dp_group_rows(f.per_rank)
    assert g.ranks_collapsed is None and g.hosts is None  # nothing judged, no host recorded
    # the sections' own words where nothing was judged, never "none"
    assert f.none_reads("ranks_collapsed") is None  # (the field's declared words)
    from mlaprof.analysis.sections import NOT_JUDGED, DpGroup, Fleet

    for cls in (Fleet, DpGroup):
        md = cls.__dataclass_fields__["ranks_collapsed"].metadata
        assert NOT_JUDGED.split(":")[0] in md["reads_when_none"], cls


def test_a_partly_judged_fleet_names_every_side() -> None:
    """Rank 1 collapsed, rank 0 did not, rank 2 was not judged: each named; a DP group of the
    three says which of its ranks were not judged."""
    rows = _rows({0: 8, 1: 8, 2: 8}, collapsed={0: 0, 1: 2})
    f = fleet_summary([0, 1, 2], rows)
    assert (f.ranks_collapsed, f.ranks_not_collapsed, f.ranks_not_judged) == ([1], [0], [2])
    assert f.text == (
        "ranks: 3, DISAGREE: collapsed on 1 (rank 1), not on 1 (rank 0); collapse not judged "
        "on rank 2 (no layer has an S reference to judge a collapse by)"
    )
    (g,) = dp_group_rows(f.per_rank)
    assert (g.ranks_collapsed, g.ranks_not_judged) == ([1], [2])
    # every rank judged: no rank left out of the verdict, the key left out
    whole = fleet_summary([0, 1], _rows({0: 8, 1: 8}, collapsed={0: 0, 1: 0}))
    assert whole.ranks_not_judged is None and whole.text == "ranks: 2, all agree"
    assert whole.ranks_collapsed == [] and whole.ranks_not_collapsed == [0, 1]


def test_agreeing_S_without_a_collapse_verdict_says_only_what_was_compared() -> None:
    f = fleet_summary([0, 1], _rows({0: 8, 1: 8}))
    assert f.agree and f.text.startswith("ranks: 2, all agree on S per layer; collapse not judged")
    # layer records without any S: nothing to set side by side
    no_s = [replace(r, S_min=None, S_used=None) for r in _rows({0: 8})]
    assert "nothing to compare" in fleet_summary([0, 1], no_s).text


def test_a_run_without_layer_records_has_no_layer_count_of_zero() -> None:
    """A run whose ranks hold no layer record (an engine run, a log) reads "not recorded",
    never "layers 0"; a rank short of layers beside ranks that hold them keeps its 0."""
    f = fleet_summary([0, 1], [])
    assert [r.layers for r in f.per_rank] == [None, None]
    assert f.per_layer is None  # no layer record on any rank: not an empty "none"
    g = fleet_summary([0, 1], _rows({0: 8}))
    assert [r.layers for r in g.per_rank] == [3, 0]


def test_engines_compare_S_in_the_one_line_and_name_unknown_hosts() -> None:
    """Two engines: engine 1's ranks differ in S; the fleet's one line said "all agree" (it
    compared no layer), and an engine without recorded hosts or pids read "none"."""
    engines = [
        EngineGroup(engine=0, ranks=[0, 1], heads=16, qlen=[4], paths=["aiter"],
                    hosts=["node0"], pids=[1, 2]),
        EngineGroup(engine=1, ranks=[2, 3], heads=32, qlen=[4], paths=["aiter"], hosts=[],
                    pids=[]),
    ]  # fmt: skip
    f = fleet_summary([0, 1, 2, 3], _rows({0: 8, 1: 8, 2: 4, 3: 16}), engines=engines)
    assert f.engines is not None
    e0, e1 = f.engines
    assert e0.agree and not e1.agree
    assert "S differs: 4 on rank 2, 16 on rank 3" in e1.text
    assert "S differs: 4 on rank 2, 16 on rank 3" in f.text  # the one line every view prints
    assert e1.hosts is None and e1.pids is None and e1.ranks_collapsed is None
    assert e0.hosts == ["node0"] and e0.pids == [1, 2]


def test_the_hosts_source_is_the_runs_own() -> None:
    """A recorded run (no launcher) read "the folder of the rank's files in the import; agent:
    rocprofv3's Agent_Id": it was not imported."""
    rows = _rows({0: 8, 1: 8})
    recorded = fleet_summary([0, 1], rows, imported=False).hosts_source
    assert recorded.startswith("unknown") and "import" not in recorded
    assert "rocprofv3" not in recorded
    kineto = fleet_summary([0, 1], rows, source_format="kineto", imported=True).hosts_source
    assert "rocprofv3" not in kineto and "kineto" in kineto
    csv = fleet_summary([0, 1], rows, source_format="csv", imported=True).hosts_source
    assert "rocprofv3's Agent_Id" in csv
    placed = [RankSource(rank=r, host="h", pid=r, dp_group=0, placed_by="x") for r in (0, 1)]
    assert "launcher" in fleet_summary([0, 1], rows, placed, imported=False).hosts_source


def _steps(counts: dict[int, int]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"rank": r, "step": i} for r, n in counts.items() for i in range(n)],
        columns=["rank", "step"],
    )


def test_a_fleets_committed_steps_are_each_ranks() -> None:
    """Ranks 0-2 committed 10 steps, rank 3 five: "steps committed: 5, last step: 4" read as the
    run's for a finished run."""
    st = run_state("finished", None, _steps({0: 10, 1: 10, 2: 10, 3: 5}))
    assert st.steps_committed is None and st.last_step is None
    assert [(r.rank, r.steps_committed, r.last_step) for r in st.per_rank] == [
        (0, 10, 9), (1, 10, 9), (2, 10, 9), (3, 5, 4)
    ]  # fmt: skip
    assert st.committed == (
        "5-10 steps per rank (ranks 0: 10, 1: 10, 2: 10, 3: 5) committed, last committed step "
        "4-9 per rank (ranks 0: 9, 1: 9, 2: 9, 3: 4)"
    )
    assert st.none_reads("steps_committed") == st.none_reads("last_step")
    assert "differs per rank" in str(st.none_reads("steps_committed"))
    # a run that did not finish says each rank's last step, never the lowest as the run's
    live = run_state("running", None, _steps({0: 3, 1: 2}))
    assert "last committed step 1-2 per rank (ranks 0: 2, 1: 1)" in live.text
    # ranks that agree keep one number
    same = run_state("finished", None, _steps({0: 3, 1: 3}))
    assert (same.steps_committed, same.last_step) == (3, 2)
    assert same.committed == "3 steps per rank (2 ranks) committed, last committed step 2"
    # a rank of the run with no step committed is 0, never left out
    short = run_state("incomplete", None, _steps({0: 3}), ranks=[0, 1])
    assert short.steps_committed is None
    assert [(r.rank, r.steps_committed, r.last_step) for r in short.per_rank] == [
        (0, 3, 2), (1, 0, None)
    ]  # fmt: skip
    assert "rank 1: no step committed" in short.committed
    none = run_state("finished", None, _steps({}))
    assert (none.steps_committed, none.last_step, none.committed) == (0, None, "no step committed")
    assert none.none_reads("last_step") == "no step committed"


def test_a_recorded_engine_fleet_reads_unknown_where_nothing_was_recorded(tmp_path: Path) -> None:
    """A 2-rank vLLM-plugin engine run, rank 0 six steps and rank 1 three: every view printed
    "steps committed: 3", "hosts none", "ranks collapsed none" and an import's host words."""
    meta = {"kind": "engine", "source": "vllm plugin", "scenario": {"name": "vllm-engine"}}
    for rank, n in ((0, 6), (1, 3)):
        w = create_run(tmp_path, "e", meta, rank=rank)
        for i in range(n):
            step = {"step": i, "kind": "verify", "backend": "TRITON_MLA", "builder": "b",
                    "heads": 16, "graph_mode": "FULL", "num_tokens": 8, "padded_tokens": 8,
                    "verify_rows": 2 + 2 * rank, "verify_draft_tokens": 6,
                    "verify_rows_as_prefill": 0, "drafter_builds": 0, "spec_method": "mtp",
                    "num_speculative_tokens": 3}  # fmt: skip
            w.add("events", **event_row("vllm", "engine-step", "s", step))
            w.add("steps", step=i, t_start_ns=i * 10000, duration_ns=500, num_reqs=2 + 2 * rank,
                  num_real_reqs=2, qlen=4, real_tokens=8, padded_tokens=8, graph_mode="FULL",
                  backend="TRITON_MLA", timing="dispatch-interval")  # fmt: skip
        w.finish()
    with load(tmp_path / "e") as run:
        s = build_summary(run, series=False)
    assert s.state.steps_committed is None
    assert [(r.rank, r.steps_committed) for r in s.state.per_rank] == [(0, 6), (1, 3)]
    assert "import" not in s.fleet.hosts_source and s.fleet.hosts_source.startswith("unknown")
    assert all(g.hosts is None and g.ranks_collapsed is None for g in s.dp_groups)
    assert [r.layers for r in s.fleet.per_rank] == [None, None]
    said = _texts(s)
    assert said["state.steps_committed"].startswith("differs per rank")
    # the committed words are said once, in the state line that holds them
    assert "state.committed" not in said
    assert "3-6 steps per rank (ranks 0: 6, 1: 3) committed" in said["state.text"]
    assert said["fleet.ranks_collapsed"].startswith("not judged")
    dp = next(t for b in summary_blocks(s) for t in b.tables if t.key == "dp_groups")
    for row in dp.rows:
        assert row[dp.head.index("hosts")] == "unknown"
        assert row[dp.head.index("ranks collapsed")] == "not judged"
