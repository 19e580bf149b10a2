"""Adapter for a live vLLM engine recorded by the plugin: the capture evidence is the graph mode
the engine ran each step with (measured), never a prediction; the mode asked for and a downgrade
are the plugin's record of vLLM's own cudagraph-mode resolution (as a log's say them)."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.capture_status import keeps_full_graphs, over_ranks
from mlaprof.analysis.claims import recorded_paths
from mlaprof.analysis.evidence.common import capture, load_tables, on_cards
from mlaprof.analysis.evidence.model import CaptureStatus, Evidence, Provenance, run_meta
from mlaprof.analysis.sections import RankCapture
from mlaprof.analysis.step_records import Acceptance, EngineStep
from mlaprof.integrations.vllm_names import (  # the plugin's names
    ACCEPT_EVENT,
    CG_MODE_EVENT,
    RANK_SOURCE_KEY,
    SCHEDULER_ROLE,
    STEP_EVENT,
)
from mlaprof.store.runkind import PLUGIN_DEVICE, RunKind

if TYPE_CHECKING:
    from mlaprof.analysis.sections import Capture
    from mlaprof.store.reader import Run

CPU_PATHS = ("cpu-mla",)  # the verify path of vLLM's CPU attention backends (claims)


def _records(events: pd.DataFrame, kind: str) -> list[dict[str, Any]]:
    if events.empty:
        return []
    ev = events[events["kind"] == kind].sort_values(["rank", "t_ns"])
    out = []
    for rank, data in zip(ev["rank"].tolist(), ev["data"].tolist(), strict=True):
        d = json.loads(data)
        d["rank"] = int(rank)
        out.append(d)
    return out


def engine_steps(events: pd.DataFrame) -> list[EngineStep]:
    """The plugin's per-step records (all ranks), in order."""
    return [EngineStep.of(d) for d in _records(events, STEP_EVENT)]


def acceptance(events: pd.DataFrame) -> list[Acceptance]:
    """vLLM's acceptance counters per scheduler step (the EngineCore's records)."""
    return [Acceptance.of(d) for d in _records(events, ACCEPT_EVENT)]


def scheduler_rules(run: Run) -> dict[int, str]:
    """The rule each EngineCore's database recorded naming its rank (``rank<N>.scheduler.db``'s
    meta, by N), where it recorded one."""
    out = {}
    for rank, role in run.databases:
        rule = run.rank_meta(rank, role).get(RANK_SOURCE_KEY) if role == SCHEDULER_ROLE else None
        if rule:
            out[rank] = str(rule)
    return out


def resolutions(events: pd.DataFrame) -> dict[int, tuple[str | None, str | None]]:
    """Per rank, the cudagraph mode its engine was asked for and the one vLLM resolved it to
    (the last resolution the rank recorded; vLLM's ``resolve_cudagraph_mode_and_sizes``)."""
    out: dict[int, tuple[str | None, str | None]] = {}
    for d in _records(events, CG_MODE_EVENT):
        asked, resolved = d.get("requested"), d.get("resolved")
        out[d["rank"]] = (None if asked is None else str(asked),
                          None if resolved is None else str(resolved))  # fmt: skip
    return out


def engine_capture(
    steps: pd.DataFrame,
    provenance: str,
    resolved: dict[int, tuple[str | None, str | None]] | None = None,
) -> Capture:
    """The capture evidence of an engine run: the mode most steps ran with, judged rank by rank
    where several ranks recorded steps (each rank's from its own steps, ``per_rank``; the run's
    status the ranks' own where they agree, else "per-rank": capture_status.over_ranks; its
    ``modes`` add the ranks'), never over their steps pooled. The mode asked for is the one the
    ``resolved`` records name (:func:`resolutions`), None where none was recorded; a rank whose
    engine vLLM resolved to another mode than asked is "downgraded", as its log would say."""
    resolved = resolved or {}
    modes = _modes(steps)
    if not modes:
        return capture(CaptureStatus.UNKNOWN, provenance, why="no engine step recorded")
    moded = steps[steps["graph_mode"].notna()]
    # a row without a rank is rank 0's (single-process producers)
    ranks = sorted({int(r) for r in moded["rank"].fillna(0)}) if "rank" in moded else []
    asked_by = {r: a for r, (a, _) in resolved.items() if a is not None}
    said = set(asked_by.values())
    asked = said.pop() if len(said) == 1 else None  # the ranks' one mode asked for
    if len(ranks) < 2:
        mode, status = _judged(modes, resolved.get(ranks[0] if ranks else 0))
        return capture(status, provenance, mode=asked, effective_mode=mode, modes=dict(modes))
    per = []
    for r in ranks:
        own = _modes(moded[moded["rank"].fillna(0) == r])
        mode, status = _judged(own, resolved.get(r))
        per.append(RankCapture(rank=r, status=status, effective_mode=mode, modes=dict(own)))
    status = over_ranks(p.status for p in per)
    ran = {p.effective_mode for p in per}
    one = ran.pop() if len(ran) == 1 else None  # the ranks' one mode, else each rank's own
    return capture(status, provenance, mode=asked, effective_mode=one, modes=dict(modes),
                   per_rank=per)  # fmt: skip


def _modes(steps: pd.DataFrame) -> Counter[str]:
    """Steps per graph mode, in the order the records first name them."""
    return Counter(str(m) for m in steps["graph_mode"].dropna()) if not steps.empty else Counter()


def _judged(
    modes: Counter[str], resolution: tuple[str | None, str | None] | None = None
) -> tuple[str, CaptureStatus]:
    """``(the mode most steps ran with, the status it means)`` of one rank's (or one run's)
    steps per graph mode; "downgraded" where its engine's mode was resolved to another than
    asked (``resolution``: asked, resolved)."""
    mode = max(modes, key=lambda m: modes[m])
    if resolution is not None and None not in resolution and resolution[0] != resolution[1]:
        return mode, CaptureStatus.DOWNGRADED
    if set(modes) == {"NONE"}:
        return mode, CaptureStatus.EAGER
    if keeps_full_graphs(mode):  # the one set of modes that replay FULL graphs
        return mode, CaptureStatus.REPLAYED
    return mode, CaptureStatus.PIECEWISE


def engine_device(recorded: Any, steps: list[EngineStep]) -> str:
    """The device an engine run's numbers were measured on: the one its run.json names, else
    "cpu" where every recorded attention backend is a CPU one (AMX_MLA, CPU_MLA); empty where
    neither says. The plugin's run.json writes "engine" in the device field
    (mlaprof/integrations/vllm_plugin.py, open_writer), which names no device."""
    device = str(recorded or "")
    if device and device != PLUGIN_DEVICE:
        return device
    names = {s.backend for s in steps if s.backend}
    if names and all(recorded_paths(n) == CPU_PATHS for n in names):
        return "cpu"
    return ""


def engine_evidence(run: Run) -> Evidence:
    t = load_tables(run)
    steps = engine_steps(t["events"])
    device = engine_device(run.meta.get("device"), steps)
    # the workers' GPUs, where the plugin kept them
    prov = Provenance("measured", on_cards(f"on {device}" if device else "by the engine", run))
    return Evidence(
        kind=RunKind.ENGINE,
        name=run.name,
        status=run.status,
        meta=run_meta(run.meta),
        ranks=run.ranks,
        tables=t,
        capture=engine_capture(
            t["steps"], "measured: graph mode per engine step", resolutions(t["events"])
        ),
        device=device or "unknown (the engine run did not record its device)",
        provenance=prov,
        engine_steps=steps,
        acceptance=acceptance(t["events"]),
        scheduler_rules=scheduler_rules(run),
        records_engine=True,
    )
