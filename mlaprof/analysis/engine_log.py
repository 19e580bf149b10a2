"""Questions 4 and 8 from an imported vLLM log: per server start, which cudagraph mode the engine
ended with and why, what capture cost per rank, and how far vLLM's own estimate was from it.

Reads the ``events`` the vLLM-log importer wrote (one per log record, with its start, rank and
process). Everything here is "imported from" the log: no capture or sync verdict is derived from a
log, memory is never summed across starts or ranks.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from mlaprof.analysis.findings import Finding

SOURCE = "vllm-log"
GIB = 1 << 30
# vLLM's estimate is called "far" from the measured capture memory beyond this factor either way
# (vLLM#53013 logged 118.65 GiB estimated for a capture of a few GiB)
ESTIMATE_FACTOR = 2.0


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


def engine_starts(events: pd.DataFrame, source: str | None = None) -> list[dict[str, Any]]:
    """One dict per server start: version, model, speculative config, requested and final
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
        st["spec_decoding"] = spec_totals(st["spec_lines"], st["provenance"])
        st["memory"].sort(key=lambda m: m["rank"])
        for m in st["memory"]:
            est, meas = m["estimated_bytes"], m["measured_bytes"]
            m["estimate_ratio"] = est / meas if est is not None and meas else None
        if st["final_mode"] is None:  # no config line kept it: the last downgrade says it
            st["final_mode"] = st["downgrades"][-1]["setting"] if st["downgrades"] else None
        st["ranks"] = sorted({m["rank"] for m in st["memory"]} | {
            rk for d in st["downgrades"] for rk in d["ranks"]})  # fmt: skip
    return [starts[k] for k in sorted(starts)]


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
    }


def spec_totals(lines: list[dict[str, Any]], prov: str) -> dict[str, Any] | None:
    """Drafted and accepted tokens summed over ``SpecDecoding metrics`` lines (each line counts
    one stats interval: vLLM resets its counters after printing it), and the acceptance rate of
    the sum. Per-position rates stay per line: a line does not print how many drafts it covers,
    so they cannot be added up exactly."""
    if not lines:
        return None
    drafted = sum(int(x["drafted"]) for x in lines)
    accepted = sum(int(x["accepted"]) for x in lines)
    return {
        "lines": len(lines),
        "drafted": drafted,
        "accepted": accepted,
        "acceptance_rate": accepted / drafted if drafted else None,
        "per_position_last": lines[-1].get("per_position"),
        "provenance": f"{prov}: the sum of {len(lines)} 'SpecDecoding metrics' line(s)",
    }


def log_spec_totals(starts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The same over every start of the log (starts are separate engines: also kept apart)."""
    lines = [x for st in starts for x in st["spec_lines"]]
    return spec_totals(lines, starts[0]["provenance"]) if lines else None


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


def log_capture(starts: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's capture line for a log: what the last start asked for and ended with, as the
    log says it (no capture verdict beyond that; memory is per rank, see ``engine_starts``)."""
    st = starts[-1]
    captured = any(g["done"] for g in st["graphs"]) or any(
        m["measured_bytes"] is not None for m in st["memory"]
    )
    status = "downgraded" if st["downgrades"] else ("captured" if captured else "unknown")
    if status == "unknown" and st["final_mode"] == "NONE":
        status = "not-attempted"  # the config line asks for no graphs (NONE: eager steps)
    return {
        "mode": st["requested_mode"] or "unknown",
        "status": status,
        "effective_mode": st["final_mode"] or "unknown",
        "memory_bytes": None,
        "start": st["start"],
        "provenance": st["provenance"],
    }


def gib(n: int | None) -> str:
    """Bytes read from a "%.2f GiB" log field, shown at the log's own precision."""
    return "-" if n is None else f"{n / GIB:.2f} GiB"


# -- findings --------------------------------------------------------------------------------------
def _label(st: dict[str, Any]) -> str:
    return f"start {st['start']} (vLLM {st['version'] or '?'})"


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def engine_log_findings(starts: list[dict[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    for st in starts:
        out += [_downgrade_finding(st, d) for d in st["downgrades"]]
        out += _memory_findings(st)
        out += _progress_findings(st)
        out += _spec_findings(st)
    modes = {st["start"]: st["final_mode"] for st in starts if st["final_mode"]}
    if len(set(modes.values())) > 1:
        out.append(
            Finding(
                kind="capture",
                severity="info",
                title="the server starts ended in different cudagraph modes: "
                + ", ".join(f"start {k} {v}" for k, v in modes.items()),
                evidence="each start's engine config line and cudagraph-mode warnings"
                + _memory_change(starts)
                + "; "
                + starts[0]["provenance"],
                fix="compare throughput and inter-token latency between the starts; under "
                "speculative decoding the verify step needs FULL decode graphs",
                data={"modes": modes},
            )
        )
    return out


def _memory_change(starts: list[dict[str, Any]]) -> str:
    """Capture memory per rank from the first to the last start that logged it (rank by rank)."""
    measured = [st for st in starts if any(m["measured_bytes"] is not None for m in st["memory"])]
    if len(measured) < 2:
        return ""
    a, b = measured[0], measured[-1]
    before = {
        m["rank"]: m["measured_bytes"] for m in a["memory"] if m["measured_bytes"] is not None
    }
    pairs = [
        f"rank {m['rank']} {gib(before[m['rank']])} -> {gib(m['measured_bytes'])}"
        for m in b["memory"]
        if m["measured_bytes"] is not None and m["rank"] in before
    ]
    if not pairs:
        return ""
    return f"; capture memory from start {a['start']} to start {b['start']}: " + ", ".join(pairs)


def _downgrade_finding(st: dict[str, Any], d: dict[str, Any]) -> Finding:
    backend, support, setting = d["backend"], d["support"], d["setting"]
    spec = st["speculative"] or {}
    if d["spec_decode"]:
        k = spec.get("num_spec_tokens")
        qlen = f" (verify batches of {1 + k} tokens per request)" if k else ""
        title = (
            f"{_label(st)}: the attention backend {backend} reports cudagraph support {support} "
            f"under speculative decoding{qlen}; the engine takes the minimum over all (backend, "
            f"KV-cache group) pairs, so the whole engine ran {setting} instead of {d['requested']}"
        )
        fix = (
            f"{backend}'s metadata builder must report AttentionCGSupport.UNIFORM_BATCH when its "
            "verify batches are uniform (every request 1 + num_speculative_tokens tokens), as the "
            "merged fix of vLLM PR #51171 did for the AITER and Triton MLA builders: run a vLLM "
            "that contains it (vllm 0.32.0 does), or set the class attribute in a plugin"
        )
        severity = "critical" if setting in ("PIECEWISE", "NONE") else "warning"
    else:
        title = (
            f"{_label(st)}: {d['requested']} is not supported with {backend} (support {support}); "
            f"vLLM set cudagraph_mode={setting}"
        )
        if setting in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"):
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
        evidence=f'vLLM on {_ranks(d["ranks"])} (log line {d["line"]}): "{d["message"]}"; '
        + st["provenance"],
        fix=fix,
        data={"start": st["start"], **d},
    )


def _memory_findings(st: dict[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    rows = [m for m in st["memory"] if m["measured_bytes"] is not None]
    silent = sorted(set(st["ranks"]) - {m["rank"] for m in rows})
    world = st["world_size"]
    missing = ""
    if rows and silent:
        missing = f"; no 'Graph capturing finished' line from {_ranks(silent)}"
    elif rows and world and len(rows) < world:
        missing = f"; only {len(rows)} of the engine's {world} worker ranks logged one"
    if missing:
        missing += " (the log was cut short, or that rank stopped before capture finished)"
    if rows:
        per = "; ".join(
            f"rank {m['rank']}: {gib(m['measured_bytes'])} in {m['capture_secs']:.0f} s"
            + (
                f" (vLLM estimated {gib(m['estimated_bytes'])})"
                if m["estimated_bytes"] is not None
                else ""
            )
            for m in rows
        )
        out.append(
            Finding(
                kind="memory",
                severity="info",
                title=f"{_label(st)}, {st['final_mode'] or 'mode not logged'}: graph capture "
                f"memory per rank: {per}",
                evidence="vLLM's 'Graph capturing finished' line per rank (driver free-memory "
                f"delta over all capture sizes of that rank){missing}; {st['provenance']}",
                fix="capture fewer sizes (cudagraph_capture_sizes) if KV-cache memory is tight",
                data={"start": st["start"], "memory": rows},
            )
        )
    for m in st["memory"]:
        ratio = m["estimate_ratio"]
        if ratio is None or 1 / ESTIMATE_FACTOR <= ratio <= ESTIMATE_FACTOR:
            continue
        out.append(
            Finding(
                kind="memory",
                severity="warning",
                title=f"{_label(st)}, rank {m['rank']}: vLLM estimated "
                f"{gib(m['estimated_bytes'])} of CUDA graph memory but capture took "
                f"{gib(m['measured_bytes'])} ({ratio:.2f}x)",
                evidence="'Estimated CUDA graph memory' vs 'Graph capturing finished' of the same "
                f"rank and start (far: beyond {ESTIMATE_FACTOR:g}x either way; vLLM#53013 class); "
                + st["provenance"],
                fix="the KV cache was sized with the estimate: too high wastes KV-cache memory, "
                "too low risks OOM; set --kv-cache-memory or VLLM_MEMORY_PROFILER_ESTIMATE_"
                "CUDAGRAPHS=0 with a --gpu-memory-utilization that leaves the measured amount free",
                data={"start": st["start"], **m},
            )
        )
    return out


def _spec_findings(st: dict[str, Any]) -> list[Finding]:
    """Speculation that drafted tokens the target never accepted: every verify step paid for
    ``num_spec_tokens`` extra query rows for nothing."""
    sd = st.get("spec_decoding")
    if not sd or not sd["drafted"] or sd["accepted"]:
        return []
    spec = st["speculative"] or {}
    return [
        Finding(
            kind="spec-decode",
            severity="warning",
            title=f"{_label(st)}: none of {sd['drafted']} drafted tokens was accepted "
            f"({spec.get('method') or 'speculative'} x{spec.get('num_spec_tokens') or '?'})",
            evidence=f"'SpecDecoding metrics' lines: Accepted 0 of Drafted {sd['drafted']}; "
            + sd["provenance"],
            fix="the drafter does not match the target (random or mismatched MTP weights, a "
            "prompt with no n-gram repeats): fix the draft model, or turn speculation off",
            data={"start": st["start"], "drafted": sd["drafted"], "accepted": 0},
        )
    ]


def bar_label(g: dict[str, Any]) -> str:
    """ "decode, FULL" for a capture progress bar; the phase alone where the bar names no mode."""
    return g["phase"] + (f", {g['mode']}" if g["mode"] else "")


def _progress_findings(st: dict[str, Any]) -> list[Finding]:
    out = []
    for g in st["graphs"]:
        if g["done"] is None or g["total"] is None or g["done"] >= g["total"]:
            continue
        out.append(
            Finding(
                kind="capture",
                severity="warning",
                title=f"{_label(st)}: capturing CUDA graphs ({bar_label(g)}) stopped "
                f"at {g['done']}/{g['total']}",
                evidence=f"the last progress-bar refresh on rank {g['rank']} (log line "
                f"{g['line']}); the log does not say why: look for an error after it; "
                + st["provenance"],
                fix="read the engine's traceback after that line; a capture that breaks "
                "mid-way usually names the failing op there",
                data={"start": st["start"], **g},
            )
        )
    return out
