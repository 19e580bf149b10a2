"""Imported traces (rocprofv3, Kineto): which path and kernel variant ran, its S and batch rows
from the grid, split collapse against the path's formula, variant switches, and the capture and
sync verdicts the trace's own evidence supports (and "unknown" where it has none).

Every number carries where it came from: "imported from <file>" (read off the trace), or
"modelled with <policy>" (a formula from mlaprof.splits.policies applied to imported inputs).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from mlaprof.analysis.cpu_trace import cpu_findings, cpu_trace_summary
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.ranks import rank_span
from mlaprof.analysis.share import share_text
from mlaprof.analysis.splits import is_collapsed
from mlaprof.analysis.step_stats import by_step, for_steps
from mlaprof.importers.step_model import SOURCE_GAPS, SOURCE_TEXT
from mlaprof.splits.policies import POLICIES, SplitInput

# paths whose stage-1 S is chosen on the host from grid-visible inputs (rows, qlen): a collapse
# can be judged from the trace alone; policy per path (the one vLLM's verify route calls)
COLLAPSE_POLICIES = {"aiter-gluon": ("aiter-gluon-v0.1.19", "aiter-gluon-v0.1.20")}
HUGE_KV = 1 << 30  # "KV long enough not to bound S": the formula's cap for these rows
SYNC_CALLS = (
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventSynchronize",
    "hipMemcpy",
    "hipMemcpyDtoH",
    "hipMemcpyWithStream",
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
)
D2H_OPS = ("DEVICE_TO_HOST", "DtoH", "Device -> Pageable", "Device -> Pinned")


def _origin(meta: dict[str, Any]) -> str:
    return f"imported from {meta.get('imported_from', '?')}"


def _patterns(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Stage-1 table rows by path (the import recorded the ones that matched)."""
    pats = meta.get("kernel_patterns") or []
    return {p["path"]: p for p in pats if isinstance(p, dict) and p.get("role") == "stage1"}


def _split_backend(steps: pd.DataFrame) -> pd.DataFrame:
    st = steps.copy()
    parts = st["backend"].fillna("").astype(str).str.partition(" ")  # "<path> <kernel variant>"
    st["path"], st["variant"] = parts[0], parts[2]
    return st


def step_checks_by_rank(meta: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each rank's step-model checks (the import records them per rank; one rank: the run's)."""
    by_rank = meta.get("trace_checks_by_rank") or {}
    out = {
        int(r): c.get("steps") or {}
        for r, c in by_rank.items()
        if isinstance(c, dict) and str(r).isdigit()
    }
    if not out:
        out[0] = (meta.get("trace_checks") or {}).get("steps") or {}
    return out


def value_range(v: pd.Series) -> str | None:
    """``lo`` or ``lo-hi`` of the known values (None when none is known)."""
    v = v.dropna()
    if v.empty:
        return None
    lo, hi = int(v.min()), int(v.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def trace_paths(meta: dict[str, Any], steps: pd.DataFrame, stats: pd.DataFrame) -> list[dict]:
    """Per (path, kernel variant): steps, how they ran, S, batch rows and qlen with provenance
    (``stats``: :mod:`mlaprof.analysis.step_stats`)."""
    if steps.empty or "backend" not in steps:
        return []
    st = _split_backend(steps[steps["backend"].notna()])
    st["S"] = for_steps(st, stats, "S")
    st["layer_median_ns"] = for_steps(st, stats, "median_ns")
    pats = _patterns(meta)
    out = []
    for (path, variant), g in st.groupby(["path", "variant"], sort=False):
        p = pats.get(path, {})
        axis = p.get("split_axis")
        if axis == "device":
            s_val = "decided on the device"
            s_src = (
                "decided on the device (persistent work split, get_mla_metadata_v1); not on "
                "the grid"
            )
        elif axis:
            s_val = value_range(g["S"]) or "unknown"
            s_src = f"from grid axis {axis} of {variant} ({_origin(meta)})"
        else:
            s_val, s_src = "unknown", f"no grid axis holds S for {variant}"
        med = g["layer_median_ns"].median()
        out.append(
            {
                "path": path,
                "variant": variant,
                "steps": int(len(g)),
                "graph_steps": int((g["graph_mode"] == "graph").sum()),
                "piecewise_steps": int((g["graph_mode"] == "piecewise").sum()),
                "eager_steps": int((g["graph_mode"] == "eager").sum()),
                "S": s_val,
                "S_source": s_src,
                "rows": value_range(g["num_reqs"]),
                "rows_source": (
                    f"grid axis {p['rows_axis']} of {variant} (padding rows included)"
                    if p.get("rows_axis")
                    else "not on the grid"
                ),
                "qlen": value_range(g["qlen"]),
                "qlen_source": _qlen_source(meta, path, variant, p),
                "layer_median_us": None if pd.isna(med) else float(med) / 1e3,
                "ranks": sorted(int(r) for r in g["rank"].unique()),
                "provenance": _origin(meta),
            }
        )
    return out


def _qlen_source(meta: dict[str, Any], path: str, variant: str, p: dict[str, Any]) -> str:
    """Where qlen comes from: the stage-2 grid (exact) where a layer has one, else stage 1's."""
    if not p.get("qlen_axis"):
        return "not on the grid"
    q = (meta.get("trace_checks") or {}).get("qlen") or {}
    s1 = f"grid axis {p['qlen_axis']} of {variant}"
    if path != "aiter-gluon":
        return s1
    n2, n1 = int(q.get("from_stage2", 0)), int(q.get("from_stage1", 0))
    parts = []
    if n2:
        parts.append(f"stage 2's grid axis z ((B, H, qlen), exact) on {n2} layer(s)")
    if n1 or not n2:
        parts.append(
            f"{s1} on {n1} layer(s) without stage 2 (qlen below 16 heads, as vLLM routes "
            "verify; ceil(H/16)*qlen from aiter v0.1.20 on with more heads: ambiguous there)"
        )
    if q.get("stage1_disagrees"):
        parts.append(
            f"stage 1's z differs on {q['stage1_disagrees']} layer(s): ceil(H/16)*qlen with "
            "more than 16 heads (aiter v0.1.20+)"
        )
    return "; ".join(parts)


# a step's capture mode from how its MLA kernels ran: inside a graph launch (FULL: vLLM's
# PIECEWISE graphs leave attention out), eager between graph pieces (PIECEWISE), eager; a trace
# without correlation ids cannot tell (unknown)
CAPTURE_OF_MODE = {"graph": "FULL", "piecewise": "PIECEWISE", "eager": "eager"}


def step_capture(graph_mode: Any) -> str:
    return CAPTURE_OF_MODE.get(graph_mode, "unknown") if isinstance(graph_mode, str) else "unknown"


def trace_steps(steps: pd.DataFrame, stats: pd.DataFrame) -> list[dict[str, Any]]:
    """Per step: how it ran (its capture mode), the path and kernel variant, batch rows, qlen,
    S and layers."""
    if steps.empty:
        return []
    st = _split_backend(steps[steps["backend"].notna()]).sort_values(["rank", "step"])
    st["S"] = for_steps(st, stats, "S")
    st["n_layers"] = for_steps(st, stats, "n_layers")

    def num(v: Any) -> int | None:
        return None if v is None or pd.isna(v) else int(v)

    return [
        {
            "rank": int(r.rank),
            "step": int(r.step),
            "graph_mode": r.graph_mode if isinstance(r.graph_mode, str) else None,
            "capture": step_capture(r.graph_mode),
            "path": r.path,
            "variant": r.variant,
            "rows": num(r.num_reqs),
            "qlen": num(r.qlen),
            "S": num(r.S),
            "layers": num(r.n_layers),
            "duration_us": float(r.duration_ns) / 1e3,
        }
        for r in st.itertuples()
    ]


def _rank_list(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:16])) + (", ..." if len(ranks) > 16 else "")


def trace_heads(meta: dict[str, Any], path: str) -> tuple[int, str]:
    """The head count a path ran with, and where it came from: stage 2's grid where the trace
    shows one value; else 16 (one head group: vLLM sends gluon verify fewer than 16 heads)."""
    seen = ((meta.get("trace_checks") or {}).get("heads") or {}).get(path) or {}
    if len(seen) == 1:
        (h,) = seen
        return int(h), f"{h} heads from stage 2's grid axis y"
    if len(seen) > 1:
        h = max(seen, key=lambda k: seen[k])
        return int(
            h
        ), f"{h} heads (the most common of {', '.join(sorted(seen))} on stage 2's grids)"
    return 16, "heads not on the trace (no stage 2): one head group assumed, as vLLM routes verify"


def _cap(policy: str, rows: int, qlen: int, heads: int = 16) -> int:
    """The policy's S for these rows when KV length does not bound it."""
    x = SplitInput(
        num_reqs=rows, qlen=qlen, heads=heads, min_kv_seq_len=HUGE_KV, max_seq_len=HUGE_KV,
        total_kv=HUGE_KV * rows, units=256,
    )  # fmt: skip
    return POLICIES[policy].splits(x)


def _judged_steps(meta: dict[str, Any], steps: pd.DataFrame, stats: pd.DataFrame) -> pd.DataFrame:
    """Steps of a path whose S is chosen on the host from grid-visible inputs, with S, rows,
    qlen, how they ran and the S the newer rule gives for the same rows (``fix``), per rank."""
    cols = ["rank", "step", "path", "variant", "num_reqs", "qlen", "graph_mode", "S", "fix"]
    if steps.empty or stats.empty:
        return pd.DataFrame(columns=cols)
    st = _split_backend(steps[steps["backend"].notna()])
    st["S"] = for_steps(st, stats, "S")
    st = st[st["path"].isin(COLLAPSE_POLICIES) & st["S"].notna() & st["num_reqs"].notna()
            & st["qlen"].notna()].copy()  # fmt: skip
    caps: dict[tuple[str, int, int], int] = {}
    for key in set(
        zip(st["path"], st["num_reqs"].astype(int), st["qlen"].astype(int), strict=True)
    ):
        heads = trace_heads(meta, key[0])[0]
        caps[key] = _cap(COLLAPSE_POLICIES[key[0]][1], key[1], key[2], heads)
    st["fix"] = [
        caps[(p, int(r), int(q))]
        for p, r, q in zip(st["path"], st["num_reqs"], st["qlen"], strict=True)
    ]
    st["graph_mode"] = st["graph_mode"].fillna("unknown")
    return st[cols]


# What a small S on a host-chosen path can come from, with the evidence a trace gives for it.
# A graph replay replays the grid of its capture: S was chosen when the graph was captured, from
# the capture-time dummy run's metadata (KV = qlen) or padding rows pinned to qlen; vLLM pads
# only graph batches, so an eager step has no padding row and its small S comes from a short
# real KV under the version's KV-bounded rule (v0.1.19: ceil(min_kv_seq_len / 64)).
CAUSE_CAPTURE = "capture-or-padding"
CAUSE_SHORT_KV = "short-kv"
CAUSE_UNKNOWN = "unknown"


def small_s_cause(graph_mode: str) -> str:
    """The cause a step's small S can be attributed to from how it ran (PIECEWISE attention
    runs eagerly, without padding rows: vLLM 0.32 pads attention only under FULL graphs)."""
    return {"graph": CAUSE_CAPTURE, "eager": CAUSE_SHORT_KV, "piecewise": CAUSE_SHORT_KV}.get(
        graph_mode, CAUSE_UNKNOWN
    )


def layer_reference(meta: dict[str, Any], steps: pd.DataFrame, stats: pd.DataFrame) -> pd.DataFrame:
    """``rank, step, fix``: the S each judged step is compared with (the collapse rule's
    reference for a trace, whose grids count padding rows so the deserved S is unknown). Only
    steps where padding rows or the capture can be the cause: an eager step's small S is its
    short KV, not a collapse."""
    st = _judged_steps(meta, steps, stats)
    st = st[st["graph_mode"].map(small_s_cause) != CAUSE_SHORT_KV]
    return st[["rank", "step", "fix"]]


def collapse_findings(
    meta: dict[str, Any], steps: pd.DataFrame, stats: pd.DataFrame
) -> list[Finding]:
    """S at most half what the newer rule gives these rows; one finding per (variant, rows,
    qlen, S, cause) naming the ranks it holds on and the cause the trace can show."""
    st = _judged_steps(meta, steps, stats)
    if st.empty:
        return []
    checks = (meta.get("trace_checks") or {}).get("stage2", {})
    n_ranks = int(steps["rank"].nunique())
    st["cause"] = st["graph_mode"].map(small_s_cause)
    out = []
    for path, (old, new) in COLLAPSE_POLICIES.items():
        g = st[st["path"] == path]
        for (variant, rows, qlen, s, cause), gg in g.groupby(
            ["variant", "num_reqs", "qlen", "S", "cause"]
        ):
            rows, qlen, s = int(rows), int(qlen), int(s)
            cap = int(gg["fix"].iloc[0])
            if not is_collapsed(s, cap):  # the one collapse rule (analysis.splits)
                continue
            ranks = sorted(int(r) for r in gg["rank"].unique())
            on_ranks = (
                f" on {len(ranks)} of {n_ranks} ranks ({_rank_list(ranks)})" if n_ranks > 1 else ""
            )
            c = checks.get(path, {})
            stage2 = (
                f"; no stage-2 kernel in {c.get('s1_without_stage2', 0)} of its S = 1 layers "
                "(consistent: stage 2 is not launched when S == 1)"
                if s == 1 and c
                else ""
            )
            heads, heads_src = trace_heads(meta, path)
            where = (
                f"{len(gg)} {'graph replay' if cause == CAUSE_CAPTURE else 'eager'} step(s) of "
                f"{variant} ({_origin(meta)}: S from grid axis y, rows from grid axis x, qlen "
                f"{'pinned by stage 2' if (meta.get('trace_checks') or {}).get('qlen', {}).get('from_stage2') else 'from grid axis z'}; "
                f"{heads_src}{stage2})"
            )
            rule = (
                f"Modelled with {old} ({POLICIES[old].source}): S = max(1, min(256 // "
                f"({rows}*{qlen}), ceil(min_kv_seq_len/64))), so S = {s} means min_kv_seq_len <= "
                f"{64 * s}; {new} gives {cap} for any KV length ({heads} heads)"
            )
            data = {
                "path": path, "variant": variant, "used": s, "fix_gives": cap,
                "without_padding": None, "rows": rows, "qlen": qlen, "heads": heads,
                "steps": int(len(gg)), "ranks": ranks, "policy": old, "policy_fixed": new,
                "cause": cause, "provenance": _origin(meta), "s_source": f"grid axis y of {variant}",
                "model": f"modelled with {old} and {new}",
            }  # fmt: skip
            if cause == CAUSE_SHORT_KV:
                out.append(_short_kv_finding(path, on_ranks, s, rows, qlen, cap, new, where, rule,
                                             data))  # fmt: skip
                continue
            kv_needed = 64 * (cap - 1) + 1
            why = (
                "a graph replay replays the grid of its capture: S was chosen when the graph was "
                f"captured, from the capture-time dummy run (KV = qlen = {qlen} tokens) or from "
                "padding rows pinned to qlen feeding the minimum"
                if cause == CAUSE_CAPTURE
                else "the trace does not say whether these steps were graph replays"
            )
            out.append(
                Finding(
                    kind="split-collapse",
                    severity="critical" if s == 1 else "warning",
                    title=(
                        f"KV splits collapsed on the {path} path{on_ranks}: used S = {s} on "
                        f"{rows} rows x qlen {qlen}; the fix gives {cap}; without padding rows: "
                        "unknown"
                    ),
                    evidence=(
                        f"{where}. {rule}. Cause: {why}. With min_kv_seq_len over active rows "
                        f"S = {cap} once real rows hold >= {kv_needed} KV tokens. The grid counts "
                        "padding rows, so the padding-free S is not in the trace"
                    ),
                    fix=(
                        "compute min_kv_seq_len in the metadata builder over active rows "
                        "(qo_len > 0) only (vLLM #51171) and capture with representative KV "
                        "lengths, or run aiter >= v0.1.20 (S no longer depends on the KV)"
                    ),
                    data=data,
                )
            )
    return out


def _short_kv_finding(
    path: str, on_ranks: str, s: int, rows: int, qlen: int, cap: int, new: str, where: str,
    rule: str, data: dict[str, Any],
) -> Finding:  # fmt: skip
    """A small S from a short real KV: no padding row and no capture is involved, so it is not
    a collapse; the #51171 fix gives the same S and only the newer rule gives more."""
    return Finding(
        kind="split-short-kv",
        severity="info",
        title=(
            f"S = {s} on the {path} path{on_ranks} from a short KV, not padding: {rows} rows x "
            f"qlen {qlen} ran eagerly (no padding rows); {new} would give {cap}"
        ),
        evidence=(
            f"{where}. {rule}. Eager steps carry no padding rows and no captured grid, so the "
            "minimum over the real rows' KV bounded S; min_kv_seq_len over active rows (vLLM "
            "#51171) gives the same S here"
        ),
        fix=f"upgrade AITER to {new.replace('aiter-gluon-', '')} (S no longer bounded by the KV); "
        "otherwise nothing to fix: the KV is short",
        data=data,
    )


def variant_findings(meta: dict[str, Any], paths: list[dict]) -> list[Finding]:
    """More than one kernel variant of one attention path family in one trace (e.g. the
    persistent ASM kernel for small batches, the non-persistent one past 32 rows)."""
    fam: dict[str, list[dict]] = {}
    for p in paths:
        fam.setdefault(p["path"].split("-persistent")[0], []).append(p)
    out = []
    for family, ps in fam.items():
        if len(ps) < 2:
            continue
        parts = [
            f"{p['variant']} on {p['steps']} step(s) (batch rows {p['rows'] or 'not on its grid'}"
            + (f", median layer {p['layer_median_us']:.1f} us" if p["layer_median_us"] else "")
            + ")"
            for p in ps
        ]
        persistent = any(p["path"].endswith("-persistent") for p in ps)
        out.append(
            Finding(
                kind="variant",
                severity="info",
                title=f"{family}: the kernel variant switches across batch sizes ({len(ps)} variants)",
                evidence="; ".join(parts)
                + f" ({_origin(meta)})"
                + (
                    ". AITER takes the persistent kernel below AITER_MLA_DECODE_PERSISTENT_MAX_"
                    "BATCH rows (default 32) and the non-persistent one at or above it"
                    if persistent
                    else ""
                ),
                fix=(
                    "compare the variants' layer times at your batch sizes; pin one with "
                    "AITER_MLA_DECODE_PERSISTENT_MAX_BATCH if the switch costs time"
                    if persistent
                    else "check why batch sizes select different kernels"
                ),
                data={"family": family, "variants": [p["variant"] for p in ps]},
            )
        )
    return out


def capture_evidence(meta: dict[str, Any], steps: pd.DataFrame) -> dict[str, Any]:
    """The capture verdict the trace supports, from each step's mode: FULL (its MLA layers in a
    graph replay), PIECEWISE (eager attention between graph pieces), eager, or a mix; "unknown"
    where the kernels carry no correlation id (a replay and an eager launch look alike)."""
    checks = meta.get("trace_checks") or {}
    launches = checks.get("launches", {})
    origin = _origin(meta)
    st = steps[steps["backend"].notna()] if not steps.empty else steps
    mode = st["graph_mode"] if not st.empty else pd.Series(dtype=object)
    n_graph = int((mode == "graph").sum())
    n_piece = int((mode == "piecewise").sum())
    n_eager = int((mode == "eager").sum())
    n_launch = int(launches.get("graph_launches", 0))
    with_launch = launches.get("mla_replays_with_launch")
    if st.empty:
        status, ev = "unknown", "no MLA kernels recognised, so no step to judge"
    elif meta.get("device") == "cpu":
        status = "eager"
        ev = (
            f"{len(st)} step(s) of a CPU run with its MLA op: a CPU run has no graphs (vLLM's CPU "
            "attention backends support cudagraph NEVER), every op runs one by one"
        )
    elif n_graph + n_piece + n_eager == 0:
        status, ev = (
            "unknown",
            (
                f"{len(st)} MLA step(s) whose kernels carry no correlation id: graph replays and "
                "eager launches cannot be told apart"
                + (
                    f" ({n_launch} graph launch(es) in the API trace: FULL or PIECEWISE, the "
                    "trace cannot tell)"
                    if n_launch
                    else ""
                )
            ),
        )
    else:
        how = (
            (
                f"{with_launch} of {n_graph}"
                if (with_launch or 0) <= n_graph
                else f"{with_launch} MLA replays (drafter passes included)"
            )
            + " carry the correlation id of a graph-launch call in the API trace"
            if n_launch
            else "their kernels share one correlation id (no graph-launch call in the trace to "
            "confirm)"
        )
        parts = []
        if n_graph:
            # FULL is said where a graph-launch call confirms the replays
            parts.append(
                f"{n_graph} MLA step(s) replayed in a graph that holds their attention "
                + (f"(FULL; {how})" if n_launch else f"({how})")
            )
        if n_piece:
            parts.append(
                f"{n_piece} PIECEWISE step(s): attention launched eagerly between graph pieces "
                "that hold no MLA kernel"
            )
        if n_eager:
            parts.append(
                f"{n_eager} eager step(s): MLA kernels launched one by one, no graph launch "
                "inside the step"
            )
        kinds = sum(1 for n in (n_graph, n_piece, n_eager) if n)
        status = (
            "mixed" if kinds > 1 else "replayed" if n_graph else "piecewise" if n_piece else "eager"
        )
        ev = "; ".join(parts)
        if status == "eager" and n_launch:
            ev += f"; {n_launch} graph launch(es) elsewhere hold no MLA kernel"
    step_src = (checks.get("steps") or {}).get("source")
    if step_src:
        ev += f". Steps told apart by {SOURCE_TEXT.get(step_src, step_src)}"
    label = {
        "replayed": "replayed in a graph",
        "piecewise": "piecewise graphs (attention outside them)",
        "eager": "eager (attention not in a graph)",
        "mixed": "mixed: "
        + ", ".join(
            t
            for n, t in (
                (n_graph, "FULL replays"),
                (n_piece, "PIECEWISE steps"),
                (n_eager, "eager steps"),
            )
            if n
        ),  # fmt: skip
        "unknown": "unknown",
    }[status]
    return {
        "mode": None,
        "status": status,
        "label": label,
        "effective_mode": None,
        "memory_bytes": None,
        "evidence": ev,
        "graph_steps": n_graph,
        "piecewise_steps": n_piece,
        "eager_steps": n_eager,
        "graph_launches": n_launch,
        "launches_without_kernels": launches.get("launches_without_kernels"),
        "step_source": step_src,
        "provenance": origin,
        "cpu": meta.get("device") == "cpu",  # no graphs to capture: no capture finding
    }


def sync_evidence(
    meta: dict[str, Any],
    steps: pd.DataFrame,
    layers: pd.DataFrame,
    api: pd.DataFrame,
    copies: pd.DataFrame,
) -> dict[str, Any]:
    """Host syncs and device-to-host copies inside the window of an EAGER step's layer (from the
    end of the layer before to the end of this one; layer 0 looks back one median inter-layer
    gap). Layers of graph replays hold none: the host runs outside a replay, and a sync in the
    captured region would have failed the capture. Without an API or copy trace: "unknown"."""
    launches = (meta.get("trace_checks") or {}).get("launches", {})
    origin = _origin(meta)
    has_api = int(launches.get("runtime_api_calls", 0)) > 0 or not api.empty
    events = []
    if not api.empty:
        events.append(
            pd.DataFrame(
                {
                    "rank": api["rank"],
                    "op": api["function"],
                    "t_ns": api["start_ns"],
                    "end_ns": api["end_ns"],
                }
            )  # fmt: skip
        )
    if not copies.empty:
        events.append(
            pd.DataFrame(
                {
                    "rank": copies["rank"],
                    "op": "memory copy " + copies["operation"].astype(str),
                    "t_ns": copies["start_ns"],
                    "end_ns": copies["end_ns"],
                }
            )
        )
    if not has_api and not events:
        return {"status": "unknown", "count": None, "syncs": [], "evidence": (
            "no HIP/CUDA API or memory-copy trace in the import"), "provenance": origin}  # fmt: skip
    mode = (
        steps.set_index(["rank", "step"])["graph_mode"]
        if not steps.empty
        else pd.Series(dtype=object)
    )
    mode = mode[~mode.index.duplicated(keep="last")]
    # PIECEWISE attention runs eagerly too: a sync in its layers is seen the same way
    eager = (
        layers[by_step(layers, mode).isin(["eager", "piecewise"])] if not layers.empty else layers
    )
    if not eager.empty:
        t_step = steps.set_index(["rank", "step"])["t_start_ns"]
        t_step = t_step[~t_step.index.duplicated(keep="last")]
        eager = eager.assign(step_t0=by_step(eager, t_step).to_numpy())
    if eager.empty:
        if (mode == "graph").any() and (mode == "graph").all():
            ev_txt = (
                f"all {len(mode)} MLA steps are graph replays: the captured region holds no host "
                "sync (it would have failed the capture); host calls run outside the replays"
            )
            return {"status": "none", "count": 0, "syncs": [], "evidence": ev_txt,
                    "provenance": origin}  # fmt: skip
        return {"status": "unknown", "count": None, "syncs": [], "evidence": (
            "no eager MLA layers to place host calls in"), "provenance": origin}  # fmt: skip
    ev = pd.concat(events, ignore_index=True) if events else pd.DataFrame()
    found: list[dict[str, Any]] = []
    sources = step_checks_by_rank(meta)
    for rank, lay in eager.groupby("rank"):  # host calls are placed in their own rank's layers
        mine = ev[ev["rank"] == rank] if not ev.empty else ev
        # a step bounded by idle gaps spans its MLA kernels only: its start is no bound
        src = sources.get(int(rank), {}).get("source")
        if src in (None, SOURCE_GAPS) and "step_t0" in lay:
            lay = lay.drop(columns="step_t0")
        found += _place_calls(int(rank), lay, mine)
    what = "API trace" if has_api else "memory-copy trace"
    return {
        "status": "found" if found else "none",
        "count": len(found),
        "syncs": found,
        "evidence": f"from the {what}, {len(eager)} eager MLA layer windows",
        "provenance": origin,
    }


def _place_calls(rank: int, lay: pd.DataFrame, ev: pd.DataFrame) -> list[dict[str, Any]]:
    """Host calls of one rank inside the window of one of its eager layers. A step's first
    layer looks back one median inter-layer gap, never before its step began (the previous
    step's end-of-step sync is not in it)."""
    lay = lay.sort_values("t_start_ns").reset_index(drop=True)
    t0 = lay["t_start_ns"].to_numpy(np.int64)
    t1 = t0 + lay["duration_ns"].to_numpy(np.int64)
    same = np.r_[False, lay["step"].to_numpy()[1:] == lay["step"].to_numpy()[:-1]]
    gaps = (t0[1:] - t1[:-1])[same[1:]]
    look = int(np.median(gaps[gaps > 0])) if (gaps > 0).any() else 0
    first = t0 - look
    if "step_t0" in lay:
        st0 = lay["step_t0"].to_numpy(float)
        first = np.where(
            np.isnan(st0), first, np.maximum(first, np.nan_to_num(st0)).astype(np.int64)
        )
    ws = np.where(same, np.r_[0, t1[:-1]], first)
    found = []
    if ev.empty:
        return found
    t = ev["t_ns"].to_numpy(np.int64)
    i = np.searchsorted(ws, t, side="right") - 1
    ok = (i >= 0) & (t <= t1[np.clip(i, 0, None)])
    for k in np.flatnonzero(ok):
        r = lay.iloc[i[k]]
        found.append(
            {
                "rank": rank,
                "op": str(ev["op"].iloc[k]),
                "step": int(r["step"]),
                "layer": int(r["layer"]),
                "t_ns": int(t[k]),
                "duration_ns": int(ev["end_ns"].iloc[k] - t[k]),
            }
        )
    return found


def sync_findings(ev: dict[str, Any]) -> list[Finding]:
    if ev["status"] != "found":
        return []
    out = []
    df = pd.DataFrame(ev["syncs"])
    for op, g in df.groupby("op", sort=False):
        layers = sorted(set(zip(g["rank"], g["step"], g["layer"], strict=True)))
        first = g.iloc[0]
        out.append(
            Finding(
                kind="sync",
                severity="critical",
                title=f"host sync inside MLA layers: {op} in {len(layers)} layer(s)",
                evidence=(
                    f"first at rank {first['rank']} step {first['step']} layer {first['layer']}, "
                    f"t = {first['t_ns']} "
                    f"ns ({first['duration_ns'] / 1e3:.1f} us host call); {ev['provenance']}. "
                    "A sync inside a layer aborts CUDA/HIP graph capture: this path cannot run "
                    "under FULL graphs"
                ),
                fix=(
                    "move the device->host reads into the metadata builder, outside the layers "
                    "(vLLM #51171)"
                ),
                layer=int(first["layer"]),
                data={"op": op, "count": int(len(g)), "layers": [list(x) for x in layers]},
            )
        )
    return out


def capture_findings(cap: dict[str, Any]) -> list[Finding]:
    """Attention outside graphs in some or all steps (eager or PIECEWISE), with the count of
    each; FULL replays alone give none."""
    n_eager, n_piece = cap["eager_steps"], cap.get("piecewise_steps", 0)
    if cap["status"] not in ("eager", "mixed", "piecewise") or not (n_eager or n_piece):
        return []
    if cap.get("cpu"):
        return []
    ran = " and ".join(
        t
        for n, t in ((n_piece, f"between graph pieces (PIECEWISE) in {n_piece} step(s)"),
                     (n_eager, f"eagerly in {n_eager} step(s)"))
        if n
    )  # fmt: skip
    return [
        Finding(
            kind="capture",
            severity="warning",
            title=(
                f"attention ran {ran}"
                + (f" beside {cap['graph_steps']} FULL graph replays" if cap["graph_steps"] else "")
            ),
            evidence=f"{cap['evidence']} ({cap['provenance']})",
            fix=(
                "capture a FULL graph for these batch sizes (cudagraph capture sizes; steps too "
                "big for any capture size, such as chunked prefill mixed into decode, run "
                "PIECEWISE or eager by design) or make the attention path capturable"
            ),
            data={
                k: cap.get(k, 0)
                for k in ("graph_steps", "piecewise_steps", "eager_steps", "graph_launches")
            },  # fmt: skip
        )
    ]


ROCM_72_LOSS = "ROCm 7.2.0-7.2.1 lost 26-65% of graph-replay dispatches (fixed in 7.2.2)"


def trust_summary(meta: dict[str, Any], cap: dict[str, Any]) -> dict[str, Any]:
    """Can this trace be trusted: replays missing kernels against the complete replays of
    their own graph, graph launches with no kernel, split layers without their reduction.
    Partial steps at the window's edges are left out and said, never a loss; steps that ran
    without a FULL graph are a capture finding, not a fault of the trace. Counts from the
    import's checks; "unknown" for imports that predate them."""
    checks = meta.get("trace_checks") or {}
    if not checks:
        return {"verdict": "unknown", "reliable": None, "reasons": [], "counts": {}}
    rc, lc = checks.get("replays", {}), checks.get("launches", {})
    sc = checks.get("steps") or {}
    split_no_s2 = sum(v.get("split_without_stage2", 0) for v in checks.get("stage2", {}).values())
    counts = {
        "replays": rc.get("replays", 0),
        "short_replays": rc.get("short_replays", 0),
        "missing_kernels": rc.get("missing_kernels", 0),
        "expected_kernels": rc.get("expected_kernels", 0),
        "steps_missing_layers": rc.get("steps_missing_layers", 0),
        "launches_without_kernels": lc.get("launches_without_kernels") or 0,
        "eager_steps_between_replays": cap["eager_steps"] if cap["graph_steps"] else 0,
        "split_layers_without_stage2": split_no_s2,
        "edge_partial_steps": rc.get("edge_partial_steps", 0),
    }
    reasons = []
    if counts["short_replays"]:
        pct = share_text(counts["missing_kernels"] / max(1, counts["expected_kernels"]))
        reasons.append(
            f"{counts['short_replays']} of {counts['replays']} graph replays miss kernels "
            f"against their own graph's complete replays ({counts['missing_kernels']} of "
            f"{counts['expected_kernels']} dispatches, {pct}; "
            f"{counts['steps_missing_layers']} step(s) short of layers); {ROCM_72_LOSS}"
        )
    if counts["launches_without_kernels"]:
        reasons.append(
            f"{counts['launches_without_kernels']} graph launch(es) in the API trace with no "
            "kernel in the kernel trace"
        )
    if split_no_s2:
        reasons.append(f"{split_no_s2} layer(s) with S > 1 but no stage-2 / reduce kernel")
    notes = []
    if counts["edge_partial_steps"]:
        notes.append(
            f"{counts['edge_partial_steps']} partial step(s) at the window edges, not analysed "
            "(the collection window cut them: not counted as a loss)"
        )
    if sc.get("source") == SOURCE_GAPS:
        notes.append(f"steps told apart by {SOURCE_TEXT[SOURCE_GAPS]}")
    return {
        "verdict": "unreliable" if reasons else "reliable",
        "reliable": not reasons,
        "reasons": reasons,
        "notes": notes,
        "counts": counts,
        "provenance": _origin(meta),
    }


def trust_by_rank(meta: dict[str, Any], steps: pd.DataFrame) -> dict[int, str]:
    """Each rank's trust verdict from that rank's evidence only: its own import checks and its
    own steps' capture evidence (the fleet's eager steps are not this rank's)."""
    out = {}
    for r, checks in (meta.get("trace_checks_by_rank") or {}).items():
        if not isinstance(checks, dict):
            continue
        own = {**meta, "trace_checks": checks}
        mine = steps[steps["rank"] == int(r)] if not steps.empty else steps
        out[int(r)] = trust_summary(own, capture_evidence(own, mine))["verdict"]
    return out


def _short(c: dict[str, int]) -> list[str]:
    parts = [
        (c["short_replays"], f"{c['short_replays']} of {c['replays']} replays miss kernels"),
        (c["launches_without_kernels"], f"{c['launches_without_kernels']} launch(es) without kernels"),
        (c["split_layers_without_stage2"], f"{c['split_layers_without_stage2']} split layer(s) without stage 2"),
    ]  # fmt: skip
    return [text for n, text in parts if n]


def trust_findings(trust: dict[str, Any]) -> list[Finding]:
    if trust["verdict"] != "unreliable":
        return []
    return [
        Finding(
            kind="trust",
            severity="warning",
            title="this trace is unreliable: " + ", ".join(_short(trust["counts"])),
            evidence="; ".join(trust["reasons"]) + f" ({trust['provenance']})",
            fix=(
                "re-trace with a rocprofv3 that keeps every replay dispatch (ROCm >= 7.2.2) and "
                "capture every batch size you serve; findings below are marked unreliable"
            ),
            data=trust["counts"],
        )
    ]


# Where the time goes inside graph replays, as one DuckDB query over the kernels' Parquet files
# (every rank at once, grouped by rank in the database): each kept kernel takes the layer whose
# window holds its end (the layer of the same rank and step with the smallest end at or after it:
# an ASOF join on the rank's time line, whose steps follow each other, so a match in a later step
# means none in its own), then per (rank, step, layer) sums, per layer medians (per group of ranks
# that ran the same S: ``rg``, rank -> group; ranks that disagree are never merged), per name
# totals. ``jl`` is the analysis' own layer table (a drafter's layers already left out).
REPLAY_SQL = """
WITH ly AS (
    SELECT rank, step, layer, t_start_ns + duration_ns AS lend FROM jl
),
k AS NOT MATERIALIZED (
    SELECT k.rank, k.step, k.replay, k.name, k.end_ns,
           CAST(k.end_ns - k.start_ns AS DOUBLE) AS dur, k.layer IS NOT NULL AS mla
    FROM kernels k SEMI JOIN (SELECT DISTINCT rank, step FROM ly) s
         ON k.rank = s.rank AND k.step = s.step
    WHERE k.replay IS NOT NULL
),
per AS MATERIALIZED (
    SELECT k.rank, k.step, CASE WHEN ly.step = k.step THEN ly.layer END AS win,
           SUM(k.dur) AS total, SUM(CASE WHEN k.mla THEN k.dur ELSE 0 END) AS att
    FROM k ASOF LEFT JOIN ly ON k.rank = ly.rank AND k.end_ns <= ly.lend
    GROUP BY ALL
)
SELECT 'layer' AS part, CAST(win AS VARCHAR) || ':' || CAST(rg.grp AS VARCHAR) AS key,
       COUNT(*) AS n, MEDIAN(total) AS a, MEDIAN(att) AS b, NULL AS c, NULL AS flag
FROM per JOIN rg ON per.rank = rg.rank WHERE win IS NOT NULL GROUP BY win, rg.grp
UNION ALL
SELECT 'tail', NULL, COUNT(*), SUM(total), NULL, NULL, NULL FROM per WHERE win IS NULL
UNION ALL
SELECT 'name', name, COUNT(*), SUM(dur), MEDIAN(dur), NULL, BOOL_OR(mla) FROM k GROUP BY name
UNION ALL
SELECT 'all', NULL, (SELECT COUNT(*) FROM (SELECT DISTINCT rank, step FROM per)),
       SUM(total), SUM(att), (SELECT COUNT(*) FROM (SELECT DISTINCT rank, replay FROM k)), NULL
FROM per
"""


def _mode_s(layers: pd.DataFrame, keys: list[str]) -> dict[Any, int | None]:
    """The S most layer records of each ``keys`` group ran (None where the trace has none)."""
    ly = layers if "rank" in layers else layers.assign(rank=0)
    agg = ly.groupby(keys)["splits_used"].agg(
        lambda v: None if v.dropna().empty else int(v.dropna().mode().iloc[0])
    )
    return {(int(k[0]), int(k[1])): v for k, v in agg.items()}


def s_groups(s_by: dict[tuple[int, int], int | None]) -> list[list[int]]:
    """Ranks that ran the same S on every layer, one list per group, in order of first rank."""
    sig: dict[int, list[tuple[int, Any]]] = {}
    for (rank, layer), v in sorted(s_by.items()):
        sig.setdefault(rank, []).append((layer, v))
    seen: dict[tuple[Any, ...], list[int]] = {}
    for rank in sorted(sig):
        seen.setdefault(tuple(sig[rank]), []).append(rank)
    return list(seen.values()) or [[0]]


def replay_time(meta: dict[str, Any], run: Any, layers: pd.DataFrame) -> dict:
    """Where the time goes inside graph replays: GPU kernel time per layer (a layer's window runs
    from the end of the MLA kernels of the layer before to the end of its own) and per kernel
    name, with the attention (MLA) share and the layer's S. Kernel time is summed busy time.
    One SQL query over every rank's kernels (:data:`REPLAY_SQL`); steps and replays are counted
    per rank."""
    empty = {"replays": 0, "layers": [], "kernels": [], "attention_share": None,
             "provenance": _origin(meta)}  # fmt: skip
    if layers.empty:
        return empty
    jl = layers.dropna(subset=["t_start_ns", "duration_ns"])
    jl = pd.DataFrame({
        "rank": (jl["rank"] if "rank" in jl else pd.Series(0, index=jl.index)).astype(np.int64),
        "step": jl["step"].astype(np.int64),
        "layer": jl["layer"].astype(np.int64),
        "t_start_ns": jl["t_start_ns"].astype(np.int64),
        "duration_ns": jl["duration_ns"].astype(np.int64),
    })  # fmt: skip
    if jl.empty:
        return empty
    s_by = _mode_s(layers, ["rank", "layer"])
    groups = s_groups(s_by)
    rg = pd.DataFrame(
        [(r, g) for g, ranks in enumerate(groups) for r in ranks], columns=["rank", "grp"]
    ).astype(np.int64)
    res = run.sql(REPLAY_SQL, frames={"jl": jl, "rg": rg})
    parts = {p: g for p, g in res.groupby("part")}
    whole = parts["all"].iloc[0]
    if pd.isna(whole["a"]) or not whole["n"]:
        return empty
    out_layers = []
    lay_rows = parts.get("layer", res.iloc[:0])
    keyed = [(tuple(int(x) for x in str(r.key).split(":")), r) for r in lay_rows.itertuples()]
    for (lay, grp), r in sorted(keyed, key=lambda kr: (kr[0][1], kr[0][0])):
        tot, att = float(r.a), float(r.b)
        ranks = groups[grp]
        s_used = s_by.get((ranks[0], lay))
        out_layers.append(
            {
                "layer": lay,
                "ranks": ranks,
                "ranks_text": rank_span(ranks),
                "steps": int(r.n),
                "median_us": tot / 1e3,
                "attention_median_us": att / 1e3,
                "attention_share": att / tot if tot else None,
                "S": None if s_used is None or pd.isna(s_used) else int(s_used),
            }
        )
    total, att_total = float(whole["a"]), float(whole["b"])
    names = parts.get("name", res.iloc[:0]).sort_values(["a", "key"], ascending=[False, True])
    out_kernels = [
        {
            "name": str(r.key),
            "launches": int(r.n),
            "total_us": float(r.a) / 1e3,
            "median_us": float(r.b) / 1e3,
            "share": float(r.a) / total if total else None,
            "attention": bool(r.flag),
        }
        for r in names.itertuples()
    ]
    tail = parts.get("tail")
    tail_ns = 0.0 if tail is None or pd.isna(tail["a"].iloc[0]) else float(tail["a"].iloc[0])
    return {
        "replays": int(whole["c"]),
        # groups of ranks that ran the same S on every layer: the layer rows are per group
        "rank_groups": [rank_span(g) for g in groups],
        "layers": out_layers,
        "kernels": out_kernels,
        "attention_share": att_total / total if total else None,
        "outside_layers_us": tail_ns / 1e3 / max(1, int(whole["n"])),
        "provenance": f"{_origin(meta)}; GPU kernel time inside graph replays, summed busy time",
    }


def imported_summary(
    run: Any, steps: pd.DataFrame, layers: pd.DataFrame, stats: pd.DataFrame
) -> dict[str, Any]:
    """Everything the views show about an imported trace (computed once here); ``stats``: the
    per-step aggregates of the layers (:func:`mlaprof.analysis.step_stats.step_stats_sql`)."""
    meta = run.meta
    api = run.query(
        "SELECT rank, function, start_ns, end_ns FROM api WHERE function IN ("
        + ", ".join("?" * len(SYNC_CALLS))
        + ")",
        SYNC_CALLS,
    )
    like = " OR ".join("operation LIKE ?" for _ in D2H_OPS)
    copies = run.query(
        f"SELECT rank, operation, start_ns, end_ns FROM transfers WHERE kind LIKE 'MEMORY_COPY%' "
        f"AND ({like})",
        tuple(f"%{o}%" for o in D2H_OPS),
    )
    paths = trace_paths(meta, steps, stats)
    cap = capture_evidence(meta, steps)
    return {
        "source": meta.get("imported_from"),
        "format": meta.get("format") or meta.get("source"),
        "paths": paths,
        "steps": trace_steps(steps, stats),
        "capture": cap,
        "trust": trust_summary(meta, cap),
        # each rank judged on its own dispatches (a fleet import records them per rank)
        "trust_by_rank": trust_by_rank(meta, steps),
        # one query over the kernels' files (a fleet import holds 10M kernels)
        "replay_time": replay_time(meta, run, layers),
        "syncs": sync_evidence(meta, steps, layers, api, copies),
        "checks": meta.get("trace_checks") or {},
        "layer_reference": layer_reference(meta, steps, stats),
        # a CPU-only trace: steps from vLLM's annotations, attention from its CPU MLA op
        "cpu": cpu_trace_summary(meta, steps, layers),
    }


def imported_findings(
    meta: dict[str, Any], t: dict[str, Any], s: dict[str, Any], stats: pd.DataFrame
) -> list[Finding]:
    return (
        trust_findings(s["trust"])
        + collapse_findings(meta, t["steps"], stats)
        + variant_findings(meta, s["paths"])
        + capture_findings(s["capture"])
        + cpu_findings(s.get("cpu"))
        + sync_findings(s["syncs"])
    )


def mark_unreliable(findings: list[Finding], s: dict[str, Any]) -> None:
    """Every finding drawn from an unreliable trace says so (the trust finding names why)."""
    if s["trust"]["verdict"] == "unreliable":
        for f in findings:
            f.unreliable = f.kind != "trust"


__all__ = ["imported_findings", "imported_summary"]
