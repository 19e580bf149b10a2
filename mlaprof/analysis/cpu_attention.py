"""What a CPU-only PyTorch-profiler trace of a vLLM run shows, per rank: its steps (vLLM's step
annotations) and the share of step time its MLA attention op took; and, said once, what such a
trace cannot show. Reads the steps and layers the Kineto importer wrote from the annotations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.analysis.sections import CpuRank, TraceCpu

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import RunMeta

# what a CPU trace cannot show, said once (not per finding)
CPU_LIMITS = (
    "a CPU trace cannot show: graph replays (a CPU run has no graphs: every step is eager), "
    "S from kernel grids (no device kernels), device kernel time, or device->host syncs; step "
    "and attention times are CPU wall time"
)


def cpu_trace_summary(meta: RunMeta, steps: pd.DataFrame, layers: pd.DataFrame) -> TraceCpu | None:
    """Per rank: steps, MLA ops, attention share of step time; None for a trace with a device."""
    cpu = meta.cpu_trace
    if cpu is None:
        return None
    src = meta.imported_from or "a trace"
    ranks = []
    for rank, c in sorted(cpu.items()):
        if not c.cpu_only:
            continue
        st = steps[steps["rank"] == rank] if "rank" in steps else steps.iloc[0:0]
        ly = layers[layers["rank"] == rank] if "rank" in layers else layers.iloc[0:0]
        step_ns = int(st["duration_ns"].sum()) if not st.empty else 0
        att_ns = int(ly["duration_ns"].sum()) if not ly.empty else 0
        ops = st["backend"].dropna().astype(str).str.partition(" ")[2].unique().tolist()
        per_step = ly.groupby("step").size() if not ly.empty else pd.Series(dtype=int)
        ranks.append(
            CpuRank(
                rank=rank,
                steps=int(len(st)),
                step_annotations=c.step_annotations,
                # execute_context_0(0)_generation_0(0): nothing scheduled, not a step
                empty_annotations=c.empty_annotations,
                mla_ops=c.mla_ops_in_steps,
                mla_ops_outside_steps=c.mla_ops - c.mla_ops_in_steps,
                backend_ops=dict(c.backend_ops),
                op=ops[0] if len(ops) == 1 else (", ".join(ops) or None),
                layers_per_step=sorted({int(v) for v in per_step.tolist()}),
                step_us=step_ns / 1e3,
                attention_us=att_ns / 1e3,
                attention_share=att_ns / step_ns if step_ns else None,
                vllm_version=c.vllm_version,
            )
        )
    return TraceCpu(
        device="cpu",
        ranks=ranks,
        limits=CPU_LIMITS,
        provenance=f"imported from {src}: vLLM's step annotations and its CPU MLA op, CPU wall time",
    )


def cpu_findings(cpu: TraceCpu | None) -> list[Finding]:
    """One info finding per rank: how much of its step time the CPU MLA op took."""
    if not cpu:
        return []
    out = []
    for r in cpu.ranks:
        if r.attention_share is None or not r.mla_ops:
            continue
        out.append(
            Finding(
                kind="cpu-attention",
                severity="info",
                title=f"rank {r.rank}: the CPU MLA op {r.op} took "
                f"{100 * r.attention_share:.0f}% of step time ({r.mla_ops} calls in "
                f"{r.steps} steps)",
                evidence=f"{r.attention_us / 1e3:.1f} ms of {r.step_us / 1e3:.1f} ms step wall "
                f"time; {cpu.provenance}",
                fix="a CPU run shows where CPU time goes, not how the GPU verify kernels split: "
                "profile on the GPU for S, graph replays and kernel time",
                data={k: getattr(r, k) for k in ("rank", "steps", "mla_ops", "attention_share")},
            )
        )
    return out
