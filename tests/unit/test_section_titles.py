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
