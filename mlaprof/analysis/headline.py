"""The run's key numbers as label/value lines, built once from :func:`mlaprof.analysis.summary`
so that the terminal report, the HTML report and the TUI print the same words and numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlaprof.analysis.capture import CAPTURE_MEMORY_MEASURE, human_bytes
from mlaprof.analysis.memory import memory_per_rank, memory_unknown_why, memory_unmeasured
from mlaprof.analysis.padding import UNRECORDED_SHARE, amounts, scope_text
from mlaprof.analysis.sections import HeadlineRow
from mlaprof.analysis.share import share_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mlaprof.analysis.evidence import Evidence
    from mlaprof.analysis.sections import (
        EngineStart,
        Fleet,
        FleetEngine,
        Padding,
        ReplayedSplits,
        Scenario,
        SplitStep,
        Timing,
        TraceSection,
    )


def _ratio(r: SplitStep) -> float:
    if r.used is None or not r.deserved:
        return float("inf")
    return r.used / r.deserved


def own_split(splits: Sequence[SplitStep], policy: str | None) -> SplitStep | None:
    """The worst-step splits row of the run's own ``policy`` (the first policy when it names
    none), on the rank where it is worst."""
    own = policy or (splits[0].policy if splits else None)
    mine = [r for r in splits if r.policy == own]
    return min(mine, key=_ratio) if mine else None


def _pct(x: float | None) -> str:
    return share_text(x)


def _replayed(measured: ReplayedSplits | None, r: SplitStep) -> str:
    """What a FULL graph replays beside the S used per step: measured where the run replayed
    one, else the S the capture-time dummy run would freeze (modelled) when it differs, where
    it stands in this run (the row's ``frozen``: mlaprof.analysis.splits.frozen_stands), on
    the row's what-if condition where vLLM does not run its policy (``frozen_what_if``)."""
    # a grid's cap (S decided on the device per replay) is no S the graph replayed
    if measured is not None and measured.min is not None and measured.max is not None:
        lo, hi = measured.min, measured.max
        return f"; the FULL graph replayed S = {lo if lo == hi else f'{lo}-{hi}'} (measured)"
    if r.frozen is not None and r.frozen != r.used:
        cond = f", {r.frozen_if}: this run does not say" if r.frozen_if else ""
        # a policy vLLM does not run here: the graph S is a what-if, said on its condition (once,
        # where the row's value leads with it: SplitStep.on_condition)
        what_if = f" {r.frozen_what_if}," if r.frozen_what_if and not r.what_if else ""
        return (
            f";{what_if} a FULL graph captured by vLLM's dummy run would replay S = {r.frozen} "
            f"(modelled{cond})"
        )
    return ""


def split_recorded(r: Any, device: str) -> bool:
    """The run's own policy's S is its record (the steps' recorded metadata on a GPU), not the
    policy's model: the one rule :func:`split_provenance` and :func:`splits_scope` say (``r``:
    a splits row, or a figure's split point)."""
    return not r.on_device and r.used is not None and not device.startswith("cpu")


def split_provenance(r: SplitStep, device: str) -> str:
    """Where the run's own policy's S comes from, said wherever it is (the headline, the
    compare): the policy's model for an S the device decides or a kernel that does not run
    here; the steps' recorded metadata on a GPU; the model on the CPU."""
    if r.on_device:
        return f"model: {r.source}"
    if r.used is None:
        return f"model: {r.source or r.policy}"
    return "recorded" if split_recorded(r, device) else "model"


def splits_scope(splits: Sequence[Any], policy: str | None, device: str) -> str:
    """Where the splits table's S come from, said in its title and the split figures' (``splits``:
    its rows, or a rank's split points): every policy's S is modelled from the steps' metadata;
    the run's own policy's is its record where it ran on a GPU (:func:`split_recorded`), else
    modelled too (a CPU run, a policy the device decides)."""
    own = own_split(splits, policy)
    if own is not None and split_recorded(own, device):
        return "modelled; the run's own policy as recorded on a GPU"
    return "modelled"


def layer_splits_scope(trace: TraceSection | None) -> str:
    """Where the S per MLA layer come from, said in that section's title in every view: a run
    that holds an imported trace's section read them off its stage-1 kernels' grids; every
    other run's are its own layer records (the analysis says it, never a view)."""
    if trace is not None:
        return "from the trace's kernel grids"
    return "from the run's layer records"


def split_rows(
    splits: list[SplitStep],
    sc: Scenario,
    device: str,
    replayed: ReplayedSplits | None = None,
    ranks: int = 1,
) -> list[HeadlineRow]:
    """The headline's S and occupancy rows for the run's own policy (none without one);
    ``ranks``: how many ranks the run has (the worst step names its rank where several). A
    policy vLLM does not run here says every row on its condition (SplitStep.on_condition)."""
    if (r := own_split(splits, sc.policy)) is None:
        return []
    where = f" on rank {r.rank}" if ranks > 1 else ""
    said = split_provenance(r, device)
    if r.on_device:
        rows = [(f"KV splits ({r.policy})",
                 "decided on the device at every replay (no host S; never frozen)", said)]  # fmt: skip
    elif r.used is None:  # the policy's kernel does not take this config
        rows = [(f"KV splits ({r.policy})", "no S: the policy's kernel does not run in this "
                 "configuration" + _replayed(replayed, r), said)]  # fmt: skip
    else:
        rows = [
            (f"KV splits ({r.policy}, worst step{where})",
             f"S used {r.used}, deserved {r.deserved}" + _replayed(replayed, r), said),
            ("occupancy (model)",
             f"{_pct(r.occupancy)} with S used, {_pct(r.occupancy_deserved)} deserved",
             f"model: {r.policy} on the {sc.target or 'unknown'} preset"),
        ]  # fmt: skip
    return [
        HeadlineRow(label=label, value=value, provenance=prov)
        for (label, value), prov in ((r.on_condition(lb, v), prov) for lb, v, prov in rows)
    ]


def _start_said(src: str, start: int, starts: Sequence[EngineStart]) -> str:
    """A log's capture memory is its last start's ranks': which start, as the capture line says."""
    return f"{src}, start {start} of {len(starts)}, as the log says"


def headline(
    ev: Evidence,
    *,
    splits: list[SplitStep],
    scenario: Scenario,
    replayed: ReplayedSplits | None,
    padding: Padding,
    timing: Timing,
    fleet: Fleet,
    engine_starts: list[EngineStart],
) -> list[HeadlineRow]:
    """Capture, capture memory, S, occupancy, padding and timing, from the typed sections the
    analyzers returned (label, value, provenance per row)."""
    src = str(ev.provenance)
    cap = ev.capture
    mem = cap.memory_bytes
    # per GPU: several ranks' said per rank, never summed; unknown with the analysis' reason
    each = memory_per_rank(cap)
    out = [
        HeadlineRow(label="capture", value=cap.text, provenance=str(cap.provenance)),
        HeadlineRow(
            label=f"capture memory ({CAPTURE_MEMORY_MEASURE})",
            value="unknown" if mem is None else each or human_bytes(mem) + memory_unmeasured(cap),
            provenance=(src if cap.start is None else _start_said(src, cap.start, engine_starts))
            if mem is not None
            else "per rank and start (see the server starts)"
            if engine_starts
            else memory_unknown_why(ev.tables["memory"]) or "not recorded",
        ),
    ]
    # an imported trace's paths, typed from their analyzer (Evidence.kernel_paths: trace.paths)
    paths = [p for p in ev.kernel_paths if p.S is not None]
    if paths and fleet.engines:  # several engines: S per engine, never one range over them
        out.append(
            HeadlineRow(
                label="KV splits (from the trace, per engine)",
                value="; ".join(_engine_s(e) for e in fleet.engines),
                provenance=src,
            )
        )
    elif paths:  # an imported trace: S as its kernels' grids give it, per path and variant
        out.append(
            HeadlineRow(
                label="KV splits (from the trace)",
                value="; ".join(f"S {p.S} on {p.path} ({p.variant})" for p in paths),
                provenance=src,
            )
        )
    out += split_rows(splits, scenario, ev.meta.device or "", replayed, len(ev.ranks))
    if padding.real_rows or padding.steps_padded:
        out.append(
            HeadlineRow(
                label="padding waste",
                value=f"{share_text(padding.padding_fraction, 1, none=UNRECORDED_SHARE)} of "
                f"verify tokens {amounts(padding)[2]} ({scope_text(padding)})",
                provenance=src,
            )
        )
    if timing.step_median_us is not None:
        out.append(
            HeadlineRow(
                label="median step",
                value=str(timing.step_median_text),
                # the timing section's label: where a GPU run's times were measured included
                provenance=timing.timing_label,
            )
        )
    return out


def _engine_s(e: FleetEngine) -> str:
    """``engine 0 (ranks 0-3, 16 heads): S 4 on vllm-triton``."""
    from mlaprof.rank_counts import rank_list

    lo, hi = e.S_min, e.S_max
    s = "unknown" if lo is None else str(lo) if lo == hi else f"{lo}-{hi}"
    heads = f", {e.heads} heads" if e.heads is not None else ""
    return f"engine {e.engine} ({rank_list(e.ranks)}{heads}): S {s} on " + (
        ", ".join(e.paths or []) or "no MLA path"
    )
