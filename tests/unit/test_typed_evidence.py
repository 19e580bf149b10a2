"""The analysis reads typed evidence, never an importer: every module under mlaprof/analysis
imports no ``mlaprof.importers`` module (the vocabulary both share lives outside the importers:
mlaprof.kernel_table, mlaprof.kernel_names, mlaprof.step_sources)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mlaprof.analysis.typed_json import to_json

ANALYSIS = Path(__file__).resolve().parents[2] / "mlaprof" / "analysis"


def _imports(path: Path) -> list[str]:
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_analysis_imports_no_importer() -> None:
    bad = {
        str(p.relative_to(ANALYSIS)): m
        for p in sorted(ANALYSIS.rglob("*.py"))
        for m in _imports(p)
        if m == "mlaprof.importers" or m.startswith("mlaprof.importers.")
    }
    assert not bad, f"analysis modules importing importers: {bad}"


def test_the_trace_adapter_hands_trust_over_typed() -> None:
    """The trust check is a :class:`TraceTrust` from its analyzer to the summary: no dict on the
    way, and the summary holds the very object the evidence carried (no conversion step)."""
    import mlaprof
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.evidence.model import Evidence
    from mlaprof.analysis.run_summary import _build
    from mlaprof.analysis.sections import TraceTrust
    from mlaprof.analysis.trust import trust_findings
    from tests import shipped_runs

    assert Evidence.__annotations__["trust"] == "TraceTrust | None"
    with mlaprof.load(shipped_runs.run_dir("aiter-two_ranks_one_lossy")) as run:
        ev = collect(run)
        assert isinstance(ev.trust, TraceTrust) and ev.trust.verdict == "unreliable"
        s = _build(run, None)
    assert s.trace is not None and s.trace.trust.verdict == "unreliable"
    (f,) = trust_findings(ev.trust)
    assert f.data["short_replays"] == ev.trust.counts.short_replays


def test_no_evidence_field_is_a_dict_of_anything() -> None:
    """No Evidence field holds a ``dict[str, Any]`` (read off the source's annotations; docs/
    evidence.md, "Typed from evidence to summary"), and run.json's part, :class:`RunMeta`, is
    typed to its leaves (no Any, no bare container, walked as the summary's sections are)."""
    from mlaprof.analysis.evidence.model import Evidence, RunMeta
    from tests.unit.test_summary_types import untyped

    ann = Evidence.__annotations__
    assert not {name for name, tp in ann.items() if "dict[str, Any]" in str(tp) or tp == "dict"}
    assert ann["meta"] == "RunMeta"
    assert untyped(RunMeta, "RunMeta", set()) == []


@pytest.mark.parametrize(
    "name", ["demo-bug-legacy-flat-syncs-break-capture", "aiter-fleet_dp2_tp4",
             "log-tp2_two_starts", "engine-engine_ngram_run"],
)  # fmt: skip
def test_every_adapter_hands_run_json_over_typed(name: str) -> None:
    """Each kind's adapter reads run.json once into :class:`RunMeta`: the scenario, the
    recorded route and the ranks' sources are section objects; what analyzers read of it
    equals what run.json holds."""
    import mlaprof
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.evidence.model import RankSource, RunMeta
    from mlaprof.analysis.sections import Route, Scenario, TraceChecks
    from tests import shipped_runs

    with mlaprof.load(shipped_runs.run_dir(name)) as run:
        ev, raw = collect(run), dict(run.meta)
    m = ev.meta
    assert type(m) is RunMeta and type(m.scenario) is Scenario
    assert to_json(m.scenario) == {
        k: v for k, v in (raw.get("scenario") or {}).items() if v is not None
    }
    assert m.backend == raw.get("backend") and m.device == raw.get("device")
    assert (m.route is None) == (not raw.get("route")) and (
        m.route is None or type(m.route) is Route
    )
    assert [s.rank for s in m.rank_sources] == [r["rank"] for r in raw.get("rank_sources") or []]
    assert all(type(s) is RankSource for s in m.rank_sources)
    assert m.imported_from == raw.get("imported_from")
    # an imported trace's own checks ride along typed: the very object its section holds
    assert (m.trace_checks is not None) == (ev.trace is not None)
    if ev.trace is not None:
        assert type(m.trace_checks) is TraceChecks and m.trace_checks is ev.trace.checks


def test_an_unknown_scenario_key_is_one_clear_error() -> None:
    from mlaprof.analysis.evidence.model import run_meta
    from mlaprof.errors import MlaprofError

    with pytest.raises(MlaprofError, match="'no_such_key'"):
        run_meta({"name": "x", "scenario": {"model": "m", "no_such_key": 1}})


def test_a_logs_server_starts_are_typed_from_their_builder() -> None:
    """An imported log's starts are :class:`EngineStart` from ``engine_starts`` on: the findings
    read them, and the summary holds the very objects the evidence carried (no dict between)."""
    import mlaprof
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.evidence.model import Evidence
    from mlaprof.analysis.run_summary import _build
    from mlaprof.analysis.sections import Downgrade, EngineStart, StartMemory
    from mlaprof.analysis.server_starts import start_findings
    from tests import shipped_runs

    assert Evidence.__annotations__["starts"] == "list[EngineStart]"
    with mlaprof.load(shipped_runs.run_dir("log-tp2_two_starts")) as run:
        ev = collect(run)
        s = _build(run, None)
    assert len(ev.starts) == 2 and all(type(st) is EngineStart for st in ev.starts)
    assert all(type(d) is Downgrade for st in ev.starts for d in st.downgrades)
    assert all(type(m) is StartMemory for st in ev.starts for m in st.memory)
    assert s.engine_starts == ev.starts and all(type(st) is EngineStart for st in s.engine_starts)
    (down,) = [f for f in start_findings(ev.starts) if f.kind == "capture-downgrade"]
    assert down.data["start"] == 1 and down.data["ranks"] == ev.starts[0].downgrades[0].ranks


def test_an_engine_runs_records_are_typed_from_the_adapter() -> None:
    """A recorded engine's step and acceptance records are :class:`EngineStep` /
    :class:`Acceptance` from the adapter on (the plugin's JSON read once), and the served
    summary counts from them what the records hold."""
    import mlaprof
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.evidence.model import Evidence
    from mlaprof.analysis.served import served_summary
    from mlaprof.analysis.step_records import Acceptance, EngineStep
    from tests import shipped_runs

    assert Evidence.__annotations__["engine_steps"] == "list[EngineStep]"
    assert Evidence.__annotations__["acceptance"] == "list[Acceptance]"
    name = next(n for n in shipped_runs.NAMES if n.startswith("engine-"))
    with mlaprof.load(shipped_runs.run_dir(name)) as run:
        ev = collect(run)
    assert ev.engine_steps and all(type(s) is EngineStep for s in ev.engine_steps)
    assert all(type(a) is Acceptance for a in ev.acceptance)
    eng = served_summary(ev.engine_steps, ev.acceptance)
    assert eng is not None and eng.steps == len(ev.engine_steps)
    first = min(s.rank for s in ev.engine_steps)
    verify = [s for s in ev.engine_steps if s.kind == "verify" and s.rank == first]
    assert eng.verify_rows == sum(s.verify_rows for s in verify)


def test_an_engine_record_without_a_written_field_is_refused() -> None:
    """A record missing a field the plugin always writes is not the plugin's: one clear error,
    never a count read as 0."""
    import pytest

    from mlaprof.analysis.step_records import Acceptance
    from mlaprof.errors import MlaprofError

    with pytest.raises(MlaprofError, match="'accepted_tokens'"):
        Acceptance.of({"rank": 0, "verify_rows": 2, "draft_tokens": 6})


def test_a_trace_hands_its_own_analysis_over_typed() -> None:
    """An imported trace's section is a :class:`TraceSection` in the evidence, and the summary
    keeps that very object; its parts are the ones the evidence's own fields hold."""
    import mlaprof
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.evidence.model import Evidence
    from mlaprof.analysis.sections import TraceSection
    from tests import shipped_runs

    assert Evidence.__annotations__["trace"] == "TraceSection | None"
    with mlaprof.load(shipped_runs.run_dir("aiter-two_ranks_one_lossy")) as run:
        ev = collect(run)
    assert type(ev.trace) is TraceSection
    assert ev.trace.trust is ev.trust and ev.trace.coverage is ev.coverage
    assert ev.trace.paths is ev.kernel_paths and ev.trace.capture is ev.capture


def test_a_cpu_trace_hands_its_section_over_typed() -> None:
    """The CPU trace's section is a :class:`TraceCpu` from its analyzer to the summary."""
    import mlaprof
    from mlaprof.analysis.cpu_attention import cpu_findings
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.run_summary import _build
    from mlaprof.analysis.sections import CpuRank, TraceCpu
    from tests import shipped_runs

    with mlaprof.load(shipped_runs.run_dir("vllm_cpu_mla_profile")) as run:
        ev = collect(run)
        assert isinstance(ev.cpu, TraceCpu) and all(isinstance(r, CpuRank) for r in ev.cpu.ranks)
        s = _build(run, None)
    assert s.trace is not None and s.trace.cpu == ev.cpu
    (f,) = cpu_findings(ev.cpu)
    assert f.data["mla_ops"] == ev.cpu.ranks[0].mla_ops > 0


def test_a_trace_hands_its_coverage_and_engines_over_typed() -> None:
    """Coverage (what the import recognised) and the engines a trace's ranks show are section
    objects from their analyzers on: the summary holds the coverage the evidence carried."""
    import mlaprof
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.run_summary import _build
    from mlaprof.analysis.sections import EngineGroup, TraceCoverage
    from tests import shipped_runs

    with mlaprof.load(shipped_runs.run_dir("aiter-two_ranks_one_lossy")) as run:
        ev = collect(run)
        assert isinstance(ev.coverage, TraceCoverage)
        assert ev.engines and all(isinstance(e, EngineGroup) for e in ev.engines)
        s = _build(run, None)
    assert s.trace is not None and s.trace.coverage == ev.coverage
    assert [p.rank for p in ev.coverage.recognition.per_rank] == ev.ranks


def test_host_syncs_and_paths_are_typed_from_their_analyzers() -> None:
    """The host calls placed in MLA layers (TraceSyncs of TraceSync) and the paths a trace ran
    (TracePath) are section objects from their analyzers to the summary and its findings."""
    import mlaprof
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.run_summary import _build
    from mlaprof.analysis.sections import TracePath, TraceSync, TraceSyncs
    from mlaprof.analysis.syncs import host_sync_findings
    from tests import shipped_runs

    with mlaprof.load(shipped_runs.run_dir("aiter-eager_syncs")) as run:
        ev = collect(run)
        s = _build(run, None)
    hs = ev.host_syncs
    assert isinstance(hs, TraceSyncs) and hs.status == "found" and hs.count == len(hs.syncs) > 0
    assert all(isinstance(x, TraceSync) for x in hs.syncs)
    assert ev.kernel_paths and all(isinstance(p, TracePath) for p in ev.kernel_paths)
    assert s.trace is not None and s.trace.syncs == hs and s.trace.paths == ev.kernel_paths
    (f,) = host_sync_findings(hs)
    assert f.data["count"] == hs.count


def test_the_capture_verdict_is_one_typed_section_for_every_kind() -> None:
    """``evidence.common.capture`` builds a :class:`Capture` (no dict on the way): an optional key
    a producer wrote as None stays in the document as null, one it left out stays out, and a
    key the section does not declare is refused."""
    import pytest

    import mlaprof
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.evidence.common import capture
    from mlaprof.analysis.evidence.model import CaptureStatus
    from mlaprof.analysis.sections import Capture
    from mlaprof.analysis.typed_json import to_json
    from tests import shipped_runs

    c = capture(CaptureStatus.REPLAYED, "p", graph_launches=None, graph_steps=3)
    assert isinstance(c, Capture) and c.status is CaptureStatus.REPLAYED
    doc = to_json(c)
    assert doc["graph_launches"] is None and doc["graph_steps"] == 3 and "eager_steps" not in doc
    with pytest.raises(TypeError):
        capture(CaptureStatus.REPLAYED, "p", no_such_key=1)
    with mlaprof.load(shipped_runs.run_dir("aiter-persistent_eager_steps")) as run:
        ev = collect(run)
    assert isinstance(ev.capture, Capture) and ev.step_modes is ev.capture
    assert ev.capture.eager_steps


def test_an_engine_section_of_several_ranks_says_whose_records_each_count_holds() -> None:
    """Step and verify counts add every rank's records (each rank's verify counts in
    ``per_rank``), the acceptance pairs with the lowest rank's drafts: a section of two ranks
    says so (one rank's reads as before)."""
    from mlaprof.analysis.served import served_summary
    from mlaprof.analysis.step_records import EngineStep

    def step(rank: int, n: int) -> EngineStep:
        return EngineStep.of({"rank": rank, "step": n, "kind": "verify", "backend": "b",
                              "builder": "m", "heads": 16, "num_tokens": 4, "verify_rows": 2,
                              "verify_draft_tokens": 2, "verify_rows_as_prefill": 0,
                              "drafter_builds": 0})  # fmt: skip

    one = served_summary([step(0, 0), step(0, 1)], [])
    assert one is not None and one.source == "measured: recorded by the vLLM plugin"
    two = served_summary([step(1, 0), step(1, 1), step(2, 0), step(2, 1)], [])
    assert two is not None and (two.steps, two.verify_steps, two.ranks) == (4, 4, [1, 2])
    assert [(r.rank, r.verify_steps) for r in two.per_rank] == [(1, 2), (2, 2)]
    assert "verify counts add all 2 ranks' records" in str(two.source)
    assert "the acceptance rate is of rank 1's draft tokens" in str(two.source)
