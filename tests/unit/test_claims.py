"""What a run can claim is decided once (mlaprof.analysis.claims) and every finding builder asks
it: no S frozen into a FULL graph or capture-memory advice where the capture failed, no route
verified unless the recorded route is that route, a backend that does not run its vLLM route is a
finding, a CPU op gets no grid advice, one sync rate in the summary and the finding, a drafter
pass without a duration reads unknown instead of failing the report."""

from __future__ import annotations

import pandas as pd
import pytest

from mlaprof.analysis.claims import Claims, mismatch_findings, recorded_paths
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
_summary = shipped_runs.summary
FAILED = "demo-bug-legacy-flat-syncs-break-capture"


def _claims(**kw) -> Claims:
    base = dict(graph_mode="FULL", capture_status="captured", device="cuda")
    return Claims(**{**base, **kw})


def test_a_failed_capture_claims_no_frozen_s_and_gets_no_capture_advice() -> None:
    s = _summary(FAILED)
    assert s.capture.status == "failed"
    kinds = [f.kind for f in s.findings]
    assert "split-frozen" not in kinds
    memory = [f for f in s.findings if f.kind == "memory"]
    assert memory and all("capture fewer sizes" not in f.fix for f in memory)
    assert all("would replay S" not in h.value for h in s.headline)
    # the same rule, where the capture succeeded, keeps the modelled frozen S
    assert not _claims(capture_status="failed").full_graph
    assert not _claims(capture_status="predicted-fail").full_graph
    assert _claims().full_graph and not _claims(graph_mode="PIECEWISE").full_graph


def test_a_run_whose_steps_ran_outside_full_graphs_claims_none() -> None:
    """An engine that ran eagerly or piecewise failed nothing (its status is not a failure),
    yet no FULL graph froze an S: the mode that ran decides, on every rank; a mode asked for
    that keeps FULL decode graphs (FULL_AND_PIECEWISE) serves them."""
    from mlaprof.analysis.sections import RankCapture

    assert not _claims(capture_status="eager", effective_mode="NONE").full_graph
    assert not _claims(capture_status="piecewise", effective_mode="PIECEWISE").full_graph
    assert _claims(graph_mode="FULL_AND_PIECEWISE", capture_status="replayed",
                   effective_mode="FULL").full_graph  # fmt: skip
    ranks = (RankCapture(rank=0, status="replayed", effective_mode="FULL", modes={}),
             RankCapture(rank=1, status="eager", effective_mode="NONE", modes={}))  # fmt: skip
    assert not _claims(capture_status="per-rank", per_rank=ranks).full_graph
    assert _claims(capture_status="per-rank", per_rank=ranks[:1]).full_graph


def test_a_backend_that_does_not_run_its_vllm_route_is_a_finding() -> None:
    s = _summary(FAILED)
    assert s.backend == "legacy-flat" and s.route is not None and s.route.path == "gluon-verify"
    found = [f for f in s.findings if f.kind == "route" and "does not run" in f.title]
    assert len(found) == 1 and "pre-51171" in found[0].fix
    # the native backends on that route, and legacy-flat on the pre-fix route, agree
    from dataclasses import replace

    from mlaprof.analysis.sections import Route

    route = Route(path="gluon-verify", version="0.32.0", kernel="k", source="src", reason="r",
                  verified=True)  # fmt: skip
    assert mismatch_findings(_claims(backend="torch"), route) == []
    flat = replace(route, path="legacy-flat", version="pre-51171")
    assert mismatch_findings(_claims(backend="legacy-flat"), flat) == []
    assert len(mismatch_findings(_claims(backend="torch"), flat)) == 1
    # runs without a backend of their own (engines, imports) have nothing to mismatch
    assert mismatch_findings(_claims(backend=None), route) == []


def test_a_modelled_route_is_never_verified_nor_as_recorded() -> None:
    """A CPU vllm serve (AMX_MLA) modelled on mi355x: the route is a model, not what ran."""
    s = _summary("engine-engine_ngram_run")
    assert s.engine is not None and s.engine.backend == "AMX_MLA"
    r = s.route
    assert r is not None and r.path == "gluon-verify"
    assert r.verified is False and r.version != "as recorded" and "recorded" not in r.version
    # what the engine ran instead is where the route comes from: its provenance, said once
    assert "not the route the engine took" in (r.provenance or "") and "AMX_MLA" in r.provenance
    # verified only where the recorded backend took exactly that path
    assert _claims(engine_backend="FLASH_ATTN_MLA").route_verified("flash-attn-mla")
    assert not _claims(engine_backend="FLASH_ATTN_MLA").route_verified("gluon-verify")
    assert not _claims(engine_backend="TRITON_MLA").route_verified("triton-mla")  # or 0.34's
    aiter = _claims(engine_backend="ROCM_AITER_MLA")
    assert not aiter.route_verified("gluon-verify")  # AITER picks among several paths
    assert recorded_paths("amx_mla") == ("cpu-mla",)


@pytest.mark.parametrize("name", ["vllm_cpu_mla_profile", "vllm_cpu_mtp_profile"])
def test_a_cpu_op_gets_no_grid_advice(name: str) -> None:
    s = _summary(name)
    assert any(f.kind == "cpu-attention" for f in s.findings)
    assert all("--patterns" not in f.fix for f in s.findings)
    assert not _claims(device="cpu").has_grid and not _claims(cpu_op=True).has_grid


def test_the_sync_rate_is_one_number_in_the_summary_and_the_finding() -> None:
    """2 syncs on layer 0 in 2 of 4 watched steps: 0.5 per layer per step in both."""
    from mlaprof.analysis.syncs import sync_counts, sync_findings

    syncs = pd.DataFrame(
        {"rank": [0, 0], "step": [1, 3], "layer": [0, 0], "kind": ["sync", "sync"],
         "op": ["aten._local_scalar_dense"] * 2, "location": ["b.py:1"] * 2,
         "function": ["f"] * 2, "detail": ["item()"] * 2}
    )  # fmt: skip
    layers = pd.DataFrame({"rank": [0] * 4, "step": [0, 1, 2, 3], "layer": [0] * 4,
                           "syncs": [0, 1, 0, 1]})  # fmt: skip
    counts = sync_counts(syncs, layers)
    assert counts.watched_steps == 4
    assert [p.syncs for p in counts.per_layer] == [0.5]
    (f,) = sync_findings(syncs, "FULL", layers)
    assert "0.5 per layer per step" in f.evidence
    assert f.title.startswith("device->host sync in the captured region")
    # a run of another graph mode captured no region: the op is where a FULL capture meets it
    for mode in ("NONE", "PIECEWISE"):
        (g,) = sync_findings(syncs, mode, layers)
        assert g.title.startswith("device->host sync in the region a FULL graph would capture")
        assert "captured region" not in g.title and g.severity == "warning"


def test_an_imported_trace_s_sync_check_is_the_one_count() -> None:
    """The trace's host-sync check and the summary's sync count say the same thing: a checked
    trace never reads "not checked" in one view and "0 in MLA layers" in another."""
    for name in ("aiter-eager_syncs", "aiter-gluon_v0119_fix", "aiter-persistent_eager_steps"):
        s = _summary(name)
        assert s.trace is not None and s.trace.syncs.status in ("none", "found")
        assert s.sync_counts.checked and s.sync_counts.count == s.trace.syncs.count
    eager = _summary("aiter-eager_syncs").sync_counts
    assert eager.total == 8 and eager.watched_steps == 2


def test_a_drafter_pass_without_a_duration_reads_unknown() -> None:
    from mlaprof.analysis.drafter import drafter_summary
    from mlaprof.analysis.sections import TraceDrafter

    steps = pd.DataFrame({"rank": [0], "step": [0], "backend": [None], "graph_mode": ["graph"],
                          "num_reqs": [None], "qlen": [None], "duration_ns": [None]})  # fmt: skip
    stats = pd.DataFrame({"rank": [0], "step": [0], "n_layers": [None], "S": [None],
                          "median_ns": [None]})  # fmt: skip
    d = drafter_summary(steps, stats, "imported")  # its section type, as the adapter takes it
    assert isinstance(d, TraceDrafter)
    assert d.step_median_us is None and d.rows is None and "median pass unknown" in d.text


def test_a_fleets_drafter_text_says_its_counts_and_median_pool_ranks() -> None:
    """Two ranks' drafter passes: the text's count and median are every rank's, said in the
    fields' own over-ranks words (a view labels ``steps`` and ``step_median_us`` so too)."""
    from mlaprof.analysis.drafter import drafter_summary

    steps = pd.DataFrame({"rank": [0, 0, 1], "step": [1, 3, 1], "backend": [None] * 3,
                          "graph_mode": ["graph"] * 3, "num_reqs": [None] * 3,
                          "qlen": [None] * 3, "duration_ns": [1000.0, 3000.0, 2000.0]})  # fmt: skip
    stats = pd.DataFrame({"rank": [0, 0, 1], "step": [1, 3, 1], "n_layers": [None] * 3,
                          "S": [None] * 3, "median_ns": [None] * 3})  # fmt: skip
    d = drafter_summary(steps, stats, "imported")
    assert d is not None and d.steps == 3
    assert "not verify steps): 3 (sum over 2 ranks) (3 graph" in d.text
    assert "median pass 2.0 us (median of the passes pooled over 2 ranks)" in d.text
    one = drafter_summary(steps[steps["rank"] == 0], stats, "imported")
    assert one is not None and "over" not in one.text.split("not verify steps)")[1]
