"""The second property test: over every shipped run (traces/demo, read as shipped), every
committed trace and log under tests/data and the recorded vLLM engine run, no two statements of
one report contradict each other (mlaprof.analysis.claims.contradictions); and each rule fires on
the pair it names, so the property can fail."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mlaprof.analysis.contradictions import contradictions
from mlaprof.analysis.findings import Finding
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
_summary = shipped_runs.summary


@pytest.mark.parametrize("name", shipped_runs.NAMES)
def test_no_two_findings_of_a_shipped_run_contradict(name: str) -> None:
    assert contradictions(_summary(name)) == [], name


def test_the_corpus_holds_every_kind_of_run() -> None:
    kinds = {str(_summary(n).kind) for n in shipped_runs.NAMES}
    assert kinds == {"scenario", "trace", "log", "engine"}
    assert any(n.startswith("engine-") for n in shipped_runs.NAMES)


def _finding(kind: str, title: str = "t", fix: str = "f") -> Finding:
    return Finding(kind=kind, severity="warning", title=title, evidence="e", fix=fix)


def test_each_rule_fires_on_the_pair_it_names() -> None:
    failed = _summary("demo-bug-legacy-flat-syncs-break-capture")
    assert contradictions(failed) == []
    frozen = replace(failed, findings=[*failed.findings, _finding("split-frozen")])
    assert any("frozen" in c for c in contradictions(frozen))
    fgs = replace(failed, full_graph_splits=replace(failed.full_graph_splits, modelled=1))
    assert any("full_graph_splits" in c for c in contradictions(fgs))
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
