"""A diff states whether the two runs ran the same workload; where they did not, no
workload-dependent change carries a better/worse verdict (the c16 bug run against the default
fix run printed "step time -92% better", "S deserved +350% better")."""

from __future__ import annotations

from mlaprof.analysis.diff import METRICS, Verdict, diff
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
_summary = shipped_runs.summary
JUDGED = (Verdict.BETTER, Verdict.WORSE)


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
    # what is a property of the code, not the load, is still judged
    assert rows["critical findings"] is Verdict.BETTER
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
    assert d.workload.same is None  # model and heads unstated: no difference claimed
    assert {f.name for f in d.workload.fields if f.before is None} >= {"model", "heads"}
    assert not any(r.verdict is Verdict.OTHER_WORKLOAD for r in d.table)
    other_kind = diff(_summary("demo-bug-padding-collapses-splits-c16"),
                      _summary("aiter-gluon_v0119_fix"))  # fmt: skip
    assert other_kind.workload.same is False
    assert "kind" in {f.name for f in other_kind.workload.fields if f.differs}
