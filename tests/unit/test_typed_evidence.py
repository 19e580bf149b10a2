"""The analysis reads typed evidence, never an importer: every module under mlaprof/analysis
imports no ``mlaprof.importers`` module (the vocabulary both share lives outside the importers:
mlaprof.kernel_table, mlaprof.kernel_names, mlaprof.step_sources)."""

from __future__ import annotations

import ast
from pathlib import Path

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
