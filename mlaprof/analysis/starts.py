"""The server starts of an imported vLLM log (questions 4 and 8 read them): per start, which
cudagraph mode the engine ended with and why, what capture cost per rank, and vLLM's own estimate.

Reads the ``events`` the vLLM-log importer wrote (one per log record, with its start, rank and
process). Everything here is "imported from" the log: memory is never summed across starts; the
capture section's is the last start's ranks', each rank's own beside their labelled sum
(:func:`log_capture`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict
from typing import Any

import pandas as pd

from mlaprof.analysis.capture_status import CaptureStatus
from mlaprof.analysis.sections import (
    Capture,
    Downgrade,
    EngineStart,
    GraphCaptureLine,
    MemoryProfiling,
    ProfiledGraphs,
    RankCapture,
    SpecDecoding,
    SpecDecodingLine,
    StartMemory,
    StartSpeculative,
)
from mlaprof.rank_counts import plural

SOURCE = "vllm-log"
GIB = 1 << 30


def _records(events: pd.DataFrame) -> list[dict[str, Any]]:
    if events.empty or "source" not in events:
        return []
    rows = events[events["source"] == SOURCE]
    out = []
    for rank, kind, msg, data in zip(rows["rank"], rows["kind"], rows["message"], rows["data"],
                                     strict=True):  # fmt: skip
        try:
            d = json.loads(data) if isinstance(data, str) else {}
        except ValueError:
            continue
        out.append({**d, "rank": int(rank), "kind": kind, "message": msg})
    return out


def engine_starts(events: pd.DataFrame, source: str | None = None) -> list[EngineStart]:
    """One :class:`EngineStart` per server start: version, model, speculative config, requested and final
    cudagraph mode, downgrades (merged across the ranks that logged them), graphs captured,
    memory per rank. ``source`` names the log for the provenance of every number."""
    recs = _records(events)
    if not recs:
        return []
    prov = f"imported from {source}" if source else "imported from a vLLM log"
    starts: dict[int, dict[str, Any]] = {}
    for r in recs:
        if r["kind"] == "engine-start":
            starts[r["start"]] = _start(r, prov)
    for r in recs:
        st = starts.setdefault(r["start"], _start({"start": r["start"]}, prov))
        kind = r["kind"]
        if kind == "cudagraph-downgrade":
            _add_downgrade(st["downgrades"], r)
        elif kind == "capture-progress":
            st["graphs"].append(
                {k: r.get(k) for k in ("rank", "phase", "mode", "done", "total", "line")}
            )
        elif kind == "attention-backend":
            if r["backend"] not in st["attention_backends"]:
                st["attention_backends"].append(r["backend"])
        elif kind == "mla-prefill-backend":
            if r["backend"] not in st["prefill_backends"]:
                st["prefill_backends"].append(r["backend"])
        elif kind == "spec-decoding":
            st["spec_lines"].append(
                {
                    k: r.get(k)
                    for k in (
                        "line",
                        "time",
                        "accepted",
                        "drafted",
                        "mean_acceptance_length",
                        "per_position",
                        "avg_acceptance_pct",
                    )
                }  # fmt: skip
            )
        elif kind == "capture-skipped":
            st["capture_skipped"] = True
        elif kind in ("engine-idle", "server-shutdown"):
            st["marks"].append((int(r.get("line") or 0), kind))
        elif kind == "graph-memory-profile":
            st["profile"] = r.get("groups")
        elif kind in ("capture-finished", "estimated-graph-memory", "graph-memory-profiling"):
            m = _rank_memory(st, r)
            if kind == "capture-finished":
                m["measured_bytes"], m["capture_secs"] = r["bytes"], r["secs"]
            elif kind == "estimated-graph-memory":
                m["estimated_bytes"] = r["bytes"]
            else:
                m["profiling"] = {
                    k: r.get(k)
                    for k in ("enabled", "utilization", "equivalent_without", "suggested")
                }
    for st in starts.values():
        marks = st.pop("marks")
        st["spec_decoding"] = spec_totals(
            st["spec_lines"], st["provenance"], last_interval(st["spec_lines"], marks)
        )
        st["memory"].sort(key=lambda m: m["rank"])
        for m in st["memory"]:
            est, meas = m["estimated_bytes"], m["measured_bytes"]
            m["estimate_ratio"] = est / meas if est is not None and meas else None
        if st["final_mode"] is None:  # no config line kept it: the last downgrade says it
            st["final_mode"] = st["downgrades"][-1]["setting"] if st["downgrades"] else None
        st["ranks"] = sorted({m["rank"] for m in st["memory"]} | {
            rk for d in st["downgrades"] for rk in d["ranks"]})  # fmt: skip
    # the log's records are gathered above (merged across ranks as they come), and handed over
    # typed: every reader sees the section type the summary holds
    return [_typed_start(starts[k]) for k in sorted(starts)]


def _typed_start(st: dict[str, Any]) -> EngineStart:
    """One start's gathered records as its section (each part built as its own type)."""
    spec, profile = st["speculative"], st["profile"]
    return EngineStart(
        **{
            **st,
            "speculative": None if spec is None else StartSpeculative(**spec),
            "spec_lines": [SpecDecodingLine(**x) for x in st["spec_lines"]],
            "downgrades": [Downgrade(**d) for d in st["downgrades"]],
            "graphs": [GraphCaptureLine(**g) for g in st["graphs"]],
            "memory": [
                StartMemory(
                    **{
                        **m,
                        "profiling": None
                        if m["profiling"] is None
                        else MemoryProfiling(**m["profiling"]),
                    }
                )
                for m in st["memory"]
            ],
            "profile": None
            if profile is None
            else {str(k): ProfiledGraphs(**v) for k, v in profile.items()},
        }
    )


def _start(r: dict[str, Any], prov: str) -> dict[str, Any]:
    spec = None
    if r.get("spec_method") or r.get("num_spec_tokens"):
        spec = {"method": r.get("spec_method"), "num_spec_tokens": r.get("num_spec_tokens")}
    return {
        "start": r["start"],
        "version": r.get("version"),
        "model": r.get("model"),
        "line": r.get("line"),
        "time": r.get("time"),
        "speculative": spec,
        "requested_mode": r.get("requested_mode"),
        "final_mode": r.get("final_mode"),
        "capture_sizes": r.get("capture_sizes"),
        "device": r.get("device"),
        "tensor_parallel_size": r.get("tensor_parallel_size"),
        # workers of the engine: TP x PP x DP from the config line (None when not logged)
        "world_size": (
            r["tensor_parallel_size"]
            * (r.get("pipeline_parallel_size") or 1)
            * (r.get("data_parallel_size") or 1)
            if r.get("tensor_parallel_size")
            else None
        ),
        "attention_backends": [],
        "prefill_backends": [],
        "spec_lines": [],
        "spec_decoding": None,
        "downgrades": [],
        "graphs": [],
        "profile": None,
        "capture_skipped": False,
        "memory": [],
        "provenance": prov,
        "marks": [],  # (line, engine-idle | server-shutdown): where its traffic / server ended
    }


def last_interval(lines: list[dict[str, Any]], marks: list[tuple[int, str]]) -> tuple[bool, str]:
    """Whether a start's SpecDecoding lines hold every interval it drafted in, and why. vLLM
    prints one line per stats interval (every 10 s by default) from a periodic task; the interval
    in flight when the server stops is never printed (a SIGTERM ends the loop first), so the
    log's sum is a lower bound, unless the log shows the last interval closed: an idle stats line
    (no prompt or generation throughput, nothing running or waiting) after the last
    SpecDecoding line, which vLLM prints once when activity stops."""
    last = max((int(x.get("line") or 0) for x in lines), default=0)
    idle = [ln for ln, k in marks if k == "engine-idle" and ln > last]
    down = [ln for ln, k in marks if k == "server-shutdown" and ln > last]
    if idle:
        return True, (
            f"complete: an idle stats line (log line {min(idle)}) follows the last "
            "SpecDecoding line, so every drafting interval was logged"
        )
    return False, (
        "a lower bound: no idle stats line follows the last SpecDecoding line"
        + (f" before the server shut down (log line {min(down)})" if down else "")
        + ", so the interval in flight when the log ended (up to 10 s of drafts, vLLM's stats "
        "interval) may be missing; vLLM's /metrics counters hold the full totals"
    )


def spec_totals(
    lines: list[dict[str, Any]], prov: str, closed: tuple[bool, str] | None = None
) -> SpecDecoding | None:
    """Drafted and accepted tokens summed over ``SpecDecoding metrics`` lines (each line counts
    one stats interval: vLLM resets its counters after printing it), and the acceptance rate of
    the sum. Per-position rates stay per line: a line does not print how many drafts it covers,
    so they cannot be added up exactly. ``closed``: :func:`last_interval` (whether the sum is
    complete or a lower bound, and why)."""
    if not lines:
        return None
    drafted = sum(int(x["drafted"]) for x in lines)
    accepted = sum(int(x["accepted"]) for x in lines)
    complete, why = closed if closed is not None else (None, None)
    return SpecDecoding(
        lines=len(lines),
        drafted=drafted,
        accepted=accepted,
        acceptance_rate=accepted / drafted if drafted else None,
        per_position_last=lines[-1].get("per_position"),
        provenance=f"{prov}: the sum of {len(lines)} 'SpecDecoding metrics' "
        f"{plural('line(s)', len(lines))}",
        complete=complete if why else None,
        completeness=why or None,
    )


def _method(st: EngineStart) -> tuple[Any, Any]:
    spec = st.speculative
    return (spec.method, spec.num_spec_tokens) if spec else (None, None)


def log_spec_totals(starts: list[EngineStart]) -> SpecDecoding | None:
    """The same over every start of the log, only where every start that drafted ran the same
    speculative method and tokens: starts of different methods (ngram, then MTP) are separate
    engines whose acceptance is said per start, never summed (None then). Complete only where
    every start's sum is."""
    drafting = [st for st in starts if st.spec_lines]
    if not drafting or len({_method(st) for st in drafting}) > 1:
        return None
    lines = [asdict(x) for st in drafting for x in st.spec_lines]
    open_ = [
        st.start
        for st in drafting
        if st.spec_decoding is not None and st.spec_decoding.complete is False
    ]
    why = (
        "complete: every start's last drafting interval was logged"
        if not open_
        else f"a lower bound: the last interval of {plural('start(s)', len(open_))} "
        + ", ".join(map(str, open_))
        + " may be missing"
    )
    return spec_totals(lines, starts[0].provenance, (not open_, why))


def _add_downgrade(downs: list[dict[str, Any]], r: dict[str, Any]) -> None:
    """Every worker logs the same decision: keep one per distinct message, with its ranks."""
    for d in downs:
        if d["message"] == r["message"]:
            d["ranks"] = sorted({*d["ranks"], r["rank"]})
            return
    downs.append(
        {
            **{k: r.get(k) for k in ("requested", "backend", "support", "setting", "spec_decode")},
            "message": r["message"],
            "ranks": [r["rank"]],
            "line": r.get("line"),
            "time": r.get("time"),
        }
    )


def _rank_memory(st: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
    for m in st["memory"]:
        if m["rank"] == r["rank"]:
            return m
    m = {
        "rank": r["rank"],
        "process": r.get("process"),
        "measured_bytes": None,
        "capture_secs": None,
        "estimated_bytes": None,
        "profiling": None,
    }
    st["memory"].append(m)
    return m


def log_capture(starts: list[EngineStart], measure: str) -> Capture:
    """The report's capture line for a log: what the last start asked for and ended with, as the
    log says it (no capture verdict beyond that). A log of several ranks keeps each rank's own
    (``per_rank``: its status from its own records, its 'Graph capturing finished' memory, None
    where it logged none); ``memory_bytes`` adds the ranks that logged one (labelled a sum over
    them by every view, :func:`mlaprof.analysis.memory.memory_summed`), never a start's with
    another's. ``measure``: what that line measures (the memory module's one name for it)."""
    from mlaprof.analysis.evidence.common import capture

    st = starts[-1]
    captured = any(g.done for g in st.graphs) or any(
        m.measured_bytes is not None for m in st.memory
    )
    status = "downgraded" if st.downgrades else ("captured" if captured else "unknown")
    if status == "unknown" and st.final_mode == "NONE":
        status = "not-attempted"  # the config line asks for no graphs (NONE: eager steps)
    measured = [m.measured_bytes for m in st.memory if m.measured_bytes is not None]
    # the engine's verdict stays the log's over every rank (each worker logs the same config
    # decision); the rows say what each rank itself logged
    logged = {r for s in starts for r in _start_ranks(s)}
    per = _rank_captures(st, _start_ranks(st) or logged) if len(logged) > 1 else []
    cap = capture(
        CaptureStatus(status),
        st.provenance,
        why="the log shows no finished capture and no downgrade",
        mode=st.requested_mode or "unknown",
        effective_mode=st.final_mode or "unknown",
        memory_bytes=sum(measured) if measured else None,
        **({"memory_measure": measure} if measured else {}),
        start=st.start,
        **({"per_rank": per} if per else {}),
    )
    # which start the line is of, in the line every view prints (a log may hold several, and
    # an earlier one's findings sit beside it)
    return dataclasses.replace(
        cap, text=f"{cap.text} at start {st.start} of {len(starts)}, as the log says"
    )


def _start_ranks(st: EngineStart) -> set[int]:
    """The ranks a start's records name (memory, downgrades, capture progress)."""
    return {*st.ranks, *(int(g.rank) for g in st.graphs if g.rank is not None)}


def _rank_captures(st: EngineStart, ranks: set[int]) -> list[RankCapture]:
    """Each of ``ranks`` at start ``st`` by its own records: downgraded where a downgrade names
    it, captured where it logged a finished capture, else not attempted (NONE asked) or unknown;
    its capture memory the 'Graph capturing finished' amount it logged (None: it logged none).
    A log of several ranks keeps the rows even where the start shows one rank (or none: then
    the log's ranks, each unknown), so no value is labelled a sum over the log's ranks."""
    mem = {m.rank: m.measured_bytes for m in st.memory}
    down = {r for d in st.downgrades for r in d.ranks}
    done = {int(g.rank) for g in st.graphs if g.done and g.rank is not None}
    out = []
    for r in sorted(ranks):
        status = (
            CaptureStatus.DOWNGRADED
            if r in down
            else CaptureStatus.CAPTURED
            if mem.get(r) is not None or r in done
            else CaptureStatus.NOT_ATTEMPTED
            if st.final_mode == "NONE"
            else CaptureStatus.UNKNOWN
        )
        out.append(RankCapture(rank=r, status=status, memory_bytes=mem.get(r)))
    return out


def gib(n: int | None) -> str:
    """Bytes read from a "%.2f GiB" log field, shown at the log's own precision."""
    return "-" if n is None else f"{n / GIB:.2f} GiB"


def start_label(st: EngineStart) -> str:
    return f"start {st.start} (vLLM {st.version or '?'})"
