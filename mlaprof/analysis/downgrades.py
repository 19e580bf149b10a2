"""Which cudagraph mode each server start of an engine ended with, and why: vLLM's downgrades
(an attention backend whose cudagraph support is below the mode asked for), captures that stopped
mid-way, and starts that ended in different modes. From the log's server starts only."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from mlaprof.analysis.capture_status import keeps_full_graphs
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.memory import capture_memory_change
from mlaprof.analysis.starts import start_label
from mlaprof.rank_counts import rank_list

if TYPE_CHECKING:
    from mlaprof.analysis.sections import Downgrade, EngineStart


def start_downgrade_findings(st: EngineStart) -> list[Finding]:
    """Each downgrade vLLM logged in this start (merged across the ranks that logged it)."""
    return [_downgrade_finding(st, d) for d in st.downgrades]


def mode_change_findings(starts: list[EngineStart]) -> list[Finding]:
    """Server starts of one log that ended in different cudagraph modes."""
    out: list[Finding] = []
    modes = {st.start: st.final_mode for st in starts if st.final_mode}
    if len(set(modes.values())) > 1:
        out.append(
            Finding(
                kind="capture",
                severity="info",
                title="the server starts ended in different cudagraph modes: "
                + ", ".join(f"start {k} {v}" for k, v in modes.items()),
                evidence="each start's engine config line and cudagraph-mode warnings"
                + capture_memory_change(starts)
                + "; "
                + starts[0].provenance,
                fix="compare throughput and inter-token latency between the starts; under "
                "speculative decoding the verify step needs FULL decode graphs",
                data={"modes": modes},
            )
        )
    return out


def _downgrade_finding(st: EngineStart, d: Downgrade) -> Finding:
    backend, support, setting = d.backend, d.support, d.setting
    if d.spec_decode:
        k = st.speculative.num_spec_tokens if st.speculative else None
        qlen = f" (verify batches of {1 + k} tokens per request)" if k else ""
        title = (
            f"{start_label(st)}: the attention backend {backend} reports cudagraph support {support} "
            f"under speculative decoding{qlen}; the engine takes the minimum over all (backend, "
            f"KV-cache group) pairs, so the whole engine ran {setting} instead of {d.requested}"
        )
        fix = (
            f"{backend}'s metadata builder must report AttentionCGSupport.UNIFORM_BATCH when its "
            "verify batches are uniform (every request 1 + num_speculative_tokens tokens), as the "
            "merged fix of vLLM PR #51171 did for the AITER and Triton MLA builders: run a vLLM "
            "that contains it (vllm 0.32.0 does), or set the class attribute in a plugin"
        )
        # the one rule the capture verdict reads too (capture_status.keeps_full_graphs)
        severity = "warning" if keeps_full_graphs(setting) else "critical"
    else:
        title = (
            f"{start_label(st)}: {d.requested} is not supported with {backend} (support {support}); "
            f"vLLM set cudagraph_mode={setting}"
        )
        if keeps_full_graphs(setting):  # the rule "capture fails" in a compare reads too
            fix = (
                f"decode batches still run FULL graphs; mixed prefill-decode batches need a "
                f"backend with support ALWAYS for FULL graphs ({backend} reports {support})"
            )
            severity = "info"
        else:
            fix = f"{backend} captures no FULL graph; choose a backend that supports FULL decode"
            severity = "warning"
    return Finding(
        kind="capture-downgrade",
        severity=severity,
        title=title,
        evidence=f'vLLM on {rank_list(d.ranks)} (log line {d.line}): "{d.message}"; '
        + st.provenance,
        fix=fix,
        data={"start": st.start, **asdict(d)},
    )


def progress_findings(st: EngineStart) -> list[Finding]:
    out = []
    for g in st.graphs:
        if g.done is None or g.total is None or g.done >= g.total:
            continue
        out.append(
            Finding(
                kind="capture",
                severity="warning",
                title=f"{start_label(st)}: capturing CUDA graphs ({g.label}) stopped "
                f"at {g.done}/{g.total}",
                evidence=f"the last progress-bar refresh on rank {g.rank} (log line "
                f"{g.line}); the log does not say why: look for an error after it; "
                + st.provenance,
                fix="read the engine's traceback after that line; a capture that breaks "
                "mid-way usually names the failing op there",
                data={"start": st.start, **asdict(g)},
            )
        )
    return out
