"""A diff states whether the two runs ran the same workload; where they did not, no
workload-dependent change carries a better/worse verdict (the c16 bug run against the default
fix run printed "step time -92% better", "S deserved +350% better")."""

from __future__ import annotations

from mlaprof.analysis.diff import METRICS, Verdict, diff
from mlaprof.analysis.timing import MLA_LAYER_TIME
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
_summary = shipped_runs.summary
JUDGED = (Verdict.BETTER, Verdict.WORSE)
_DEPENDENT = {m.name for m in METRICS if m.workload}


def test_two_workloads_get_no_verdict_on_workload_dependent_changes() -> None:
    d = diff(_summary("demo-bug-padding-collapses-splits-c16"),
             _summary("demo-fix-native-kernel-full-graph"))  # fmt: skip
    assert d.workload.same is False
    differ = {f.name: (f.before, f.after) for f in d.workload.fields if f.differs}
    assert set(differ) == {"batch", "kv"} and differ["batch"] == ("13", "3")
    assert "different workloads" in d.workload.text
    dependent = {m.name for m in METRICS if m.workload}
    rows = {r.metric: r.verdict for r in d.table}
    for name in ("median step time", "S deserved by the real rows"):
        assert rows[name] is Verdict.OTHER_WORKLOAD
    assert all(v not in JUDGED for m, v in rows.items() if m in dependent)
    # what is a property of the code, not the load, is still judged; the critical findings'
    # count is not (an S collapse, one of them, follows the batch)
    assert rows["capture fails (failed or predicted)"] is Verdict.SAME
    assert rows["critical findings"] is Verdict.OTHER_WORKLOAD
    assert d.to_json()["workload"]["same"] is False


def test_the_same_workload_keeps_its_verdicts() -> None:
    d = diff(_summary("demo-bug-padding-collapses-splits-c16"),
             _summary("demo-fix-padding-active-rows-c16"))  # fmt: skip
    assert d.workload.same is True and not any(f.differs for f in d.workload.fields)
    rows = {r.metric: r.verdict for r in d.table}
    assert rows["median step time"] is Verdict.BETTER
    assert rows["KV splits S used (run's policy, worst step)"] is Verdict.BETTER


def test_a_workload_part_a_run_does_not_state_is_unknown_not_a_difference() -> None:
    d = diff(_summary("aiter-gluon_v0119_bug"), _summary("aiter-gluon_v0119_fix"))
    assert d.workload.same is None  # heads and device unstated: no difference claimed
    assert {f.name for f in d.workload.fields if f.before is None} >= {"device", "heads"}
    assert not any(r.verdict is Verdict.OTHER_WORKLOAD for r in d.table)
    # not known to be the same: no workload-dependent row is judged either
    assert all(r.verdict not in JUDGED for r in d.table if r.metric in _DEPENDENT)
    other_kind = diff(_summary("demo-bug-padding-collapses-splits-c16"),
                      _summary("aiter-gluon_v0119_fix"))  # fmt: skip
    assert other_kind.workload.same is False
    assert "kind" in {f.name for f in other_kind.workload.fields if f.differs}


def test_sync_sites_are_compared_only_where_a_probe_watched() -> None:
    """A run no probe watched has no sync-site count (its report says "not checked"), so the
    compare holds no "0 sites, same" and no "8 -> 0 better" against it."""
    bug, fix = (
        _summary("demo-bug-padding-collapses-splits-c16"),
        _summary("demo-fix-padding-active-rows-c16"),
    )
    assert not bug.sync_counts.checked and not fix.sync_counts.checked
    name = "sync / allocation sites in the region"
    assert name not in {r.metric for r in diff(bug, fix).table}
    flat = _summary("demo-bug-legacy-flat-syncs-break-capture")
    assert flat.sync_counts.checked
    (row,) = [r for r in diff(flat, fix).table if r.metric == name]
    assert row.a is not None and row.b is None and row.verdict is Verdict.NA


def test_a_change_reads_as_rounded_as_its_values() -> None:
    from mlaprof.analysis.diff import fmt_change

    assert fmt_change({"change_pct": None, "change": 7.142857142857142}) == "+7.14"
    assert fmt_change({"change_pct": None, "change": -250.4}) == "-250"
    assert fmt_change({"change_pct": None, "change": 0.0}) == "0"


def test_a_compare_of_several_ranks_says_its_medians_pool_them() -> None:
    """A multi-rank run's one step-time number in a compare is its ranks' steps pooled: the row
    says so (and that the ranks differ where they do), and a run of 8 ranks against one of 2 is
    another workload."""
    fleet, two = _summary("aiter-fleet_dp2_tp4"), _summary("aiter-two_ranks_one_lossy")
    d = diff(fleet, two)
    assert {f.name: (f.before, f.after) for f in d.workload.fields}["ranks"] == ("8", "2")
    assert d.workload.same is False
    timed = [r for r in d.table if r.metric in ("median step time", f"median {MLA_LAYER_TIME}")]
    assert timed, [r.metric for r in d.table]
    for r in timed:
        assert "A: the steps of 8 ranks pooled" in r.provenance, r.provenance
        assert "B: the steps of 2 ranks pooled" in r.provenance, r.provenance
    if not fleet.timing.ranks_agree:
        assert "their medians differ" in timed[0].provenance
    one = _summary("demo-fix-native-kernel-full-graph")
    assert (
        "pooled"
        not in next(r for r in diff(one, one).table if r.metric == "median step time").provenance
    )


def test_a_compare_row_says_where_each_sides_value_comes_from() -> None:
    """The S used, S deserved and capture memory rows carry the sources their reports give them
    (the headline's rule, analysis.headline.split_provenance): an S the device decides is the
    model's, a GPU run's own S is recorded, the memory measured on its device."""
    dev, c16 = (
        _summary("demo-fix-splits-decided-on-device-c1-long"),
        _summary("demo-bug-padding-collapses-splits-c16"),
    )
    rows = {r.metric: r for r in diff(dev, c16).table}
    used = rows["KV splits S used (run's policy, worst step)"].provenance
    assert used.startswith("A: model: ") and used.endswith(", B: recorded"), used
    assert rows["capture memory (driver free-memory delta)"].provenance.startswith("measured on")
    head = {h.label: h.provenance for h in c16.headline}
    assert any(v == "recorded" for k, v in head.items() if k.startswith("KV splits"))


def test_a_capture_nothing_tells_of_is_unknown_in_the_compare_not_a_capture_that_held() -> None:
    """A run whose capture is unknown (no capture attempted, no step watched for syncs) or was
    never asked for has no "capture fails" value: "1 -> 0 better" against it read as a fix."""
    import dataclasses

    from mlaprof.analysis.capture_status import CaptureStatus

    flat = _summary("demo-bug-legacy-flat-syncs-break-capture")
    assert flat.capture.status is CaptureStatus.FAILED
    name = "capture fails (failed or predicted)"
    for status in (CaptureStatus.UNKNOWN, CaptureStatus.NOT_ATTEMPTED):
        other = dataclasses.replace(flat, capture=dataclasses.replace(flat.capture, status=status))
        (row,) = [r for r in diff(flat, other).table if r.metric == name]
        assert row.a == 1.0 and row.b is None and row.verdict is Verdict.NA, status
    fixed = _summary("demo-fix-native-kernel-full-graph")
    (row,) = [r for r in diff(flat, fixed).table if r.metric == name]
    assert (row.a, row.b, row.verdict) == (1.0, 0.0, Verdict.BETTER)


def test_a_run_that_did_not_finish_is_said_in_every_compare_view() -> None:
    """``report A --compare B`` with B killed part-way said "same workload" and "+1% within
    spread" and nowhere that B was incomplete: the diff holds each run's status and the one
    compare block (terminal, Markdown, HTML, the TUI) says which run did not finish."""
    import dataclasses

    from mlaprof.reporters.diff_rows import diff_block
    from mlaprof.store.liveness import RunStatus

    a = _summary("demo-fix-padding-active-rows-c16")
    b = dataclasses.replace(a, state=dataclasses.replace(a.state, status=RunStatus.INCOMPLETE))
    d = diff(a, b)
    assert (d.state.before, d.state.after) == ("finished", "incomplete")
    assert d.to_json()["state"] == {"before": "finished", "after": "incomplete"}
    block = diff_block(d)
    said = {r.label: r.text for r in block.rows}
    assert said["run state"].startswith(f"B {a.run} is incomplete")
    (run_row,) = [r for r in block.tables[0].rows if r[0] == "run"]
    assert run_row[1:3] == ["finished", "incomplete"]
    assert "run state" not in {r.label for r in diff_block(diff(a, a)).rows}


def test_two_server_logs_compare_their_models_and_speculation() -> None:
    """Two vLLM logs whose starts state the model and the speculation (ngram x3: qlen 4; mtp x1:
    qlen 2) were "same workload where both runs say; not stated by both: model, ...", with
    verdicts; the starts' model and drafted tokens are the workload's."""
    a, b = _summary("log-tp2_two_starts"), _summary("log-legacy_prefixes_tp2")
    d = diff(a, b)
    assert d.workload.same is False
    got = {f.name: (f.before, f.after) for f in d.workload.fields}
    assert got["qlen"] == ("4", "2") and got["speculation"] == ("ngram x3", "mtp x1")
    assert got["model"][0] is not None and got["model"][0] == got["model"][1]
    # a scenario run states no speculation: the part is left out of its compares
    fix, bug = (
        _summary("demo-fix-padding-active-rows-c16"),
        _summary("demo-bug-padding-collapses-splits-c16"),
    )
    assert "speculation" not in {f.name for f in diff(bug, fix).workload.fields}


def test_a_fleets_trace_s_says_its_ranks_are_pooled_and_differ() -> None:
    """An 8-rank fleet whose ranks ran S 1 (ranks 0-3) and 8 (ranks 4-7) compared as "S 1 | 1"
    with nothing said: the row says whose grids it pools and that their S differ."""
    fleet, one = _summary("aiter-fleet_dp2_tp4"), _summary("aiter-gluon_v0119_bug")
    (row,) = [r for r in diff(fleet, one).table if r.metric.startswith("KV splits per MLA layer")]
    assert row.provenance == (
        "A: the kernel grids of 8 ranks pooled; its ranks' S differ (1-8), "
        "B: the trace's kernel grids"
    )
    (same,) = [r for r in diff(one, one).table if r.metric.startswith("KV splits per MLA layer")]
    assert same.provenance == "the trace's kernel grids"


def test_a_traces_sync_count_follows_its_workload() -> None:
    """A trace's sync count is over its own steps and layers: two workloads' traces (batch 32
    vs 8) read "8 -> 0 better"; now "other workload", as the other counts over steps."""
    d = diff(_summary("aiter-eager_syncs"), _summary("aiter-gluon_eager_short_kv"))
    assert d.workload.same is False
    (row,) = [r for r in d.table if r.metric == "syncs in the region (imported trace)"]
    assert (row.a, row.b, row.verdict) == (8.0, 0.0, Verdict.OTHER_WORKLOAD)


def test_the_compare_holds_the_s_a_full_graph_replays_beside_s_used() -> None:
    """A fix that raised S used (1 -> 16) but whose dummy-run capture still freezes S 1 read
    "S used +1500% better" alone; the graph's S row (measured over modelled) says 1 vs 1."""
    import dataclasses

    from mlaprof.analysis.sections import Source

    bug = _summary("demo-bug-padding-collapses-splits-c16")
    fix = _summary("demo-fix-padding-active-rows-c16")
    name = "S a FULL graph replays (measured, else modelled)"
    (row,) = [r for r in diff(bug, fix).table if r.metric == name]
    assert (row.a, row.b, row.verdict, row.provenance) == (
        1.0,
        4.0,
        Verdict.BETTER,
        "measured graph replays",
    )
    frozen = dataclasses.replace(
        fix,
        full_graph_splits=dataclasses.replace(
            fix.full_graph_splits,
            measured_min=None,
            measured_max=None,
            modelled=1,
            source=Source.MODELLED,
        ),
    )
    (row,) = [r for r in diff(bug, frozen).table if r.metric == name]
    assert (row.a, row.b, row.verdict) == (1.0, 1.0, Verdict.SAME)
    assert row.provenance == "A: measured graph replays, B: model (dummy-run capture)"
    flat = _summary("demo-bug-legacy-flat-syncs-break-capture")  # no graph: no row value
    (row,) = [r for r in diff(flat, fix).table if r.metric == name]
    assert row.a is None and row.verdict is Verdict.NA
