"""Question 1: is the verify path graph-capturable? Which op, on which layer, at which line?"""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.sync_kinds import CAPTURE_ERROR, KINDS, SYNC

_FIX = {
    "aten._local_scalar_dense": (
        "compute this value in the metadata builder (on the host, outside the captured region) "
        "and pass it in"
    ),
    "aten.repeat_interleave.Tensor": (
        "precompute the expansion in the metadata builder, or pass output_size= from a host value"
    ),
    "Tensor.tolist": "keep a host copy in the builder instead of reading the tensor back",
    "aten.nonzero": "use a fixed-size formulation (masks, nonzero_static) or move it to the builder",
}
_ALLOC_FIX = (
    "size the buffer from a host value the builder knows, or preallocate a persistent buffer "
    "at the largest capture size"
)


def fix_for(op: str, kind: str) -> str:
    if kind == "alloc":
        return _ALLOC_FIX
    for key, fix in _FIX.items():
        if op.startswith(key):
            return fix
    return "move the data-dependent work into the metadata builder, outside the captured region"


def _int(v: object) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def sync_rows(syncs: pd.DataFrame, kind: str) -> list[dict]:
    """The recorded rows of one kind (:mod:`mlaprof.sync_kinds`), rank by rank."""
    if syncs.empty:
        return []
    return [
        {
            "rank": _int(r.rank),
            "layer": _int(r.layer),
            "step": _int(r.step),
            "op": r.op,
            "location": r.location,
            "function": r.function,
        }
        for r in syncs[syncs["kind"] == kind].itertuples()
    ]


def watched_steps(layers: pd.DataFrame, syncs: pd.DataFrame) -> pd.DataFrame:
    """``(rank, step)`` of every step the sync probe watched: a layer record whose ``syncs`` is
    set (0 included: checked, none found) or a step with a recorded row. A clean checked step
    leaves no sync row, so the rows alone cannot tell "checked: 0" from "not checked"."""
    parts = []
    if not layers.empty and "syncs" in layers:
        parts.append(layers.loc[layers["syncs"].notna(), ["rank", "step"]])
    if not syncs.empty:
        parts.append(syncs[["rank", "step"]])
    if not parts:
        return pd.DataFrame({"rank": [], "step": []}, dtype="int64")
    both = pd.concat(parts).dropna().astype("int64")
    return both.drop_duplicates().reset_index(drop=True)


def sync_counts(syncs: pd.DataFrame, layers: pd.DataFrame | None = None) -> dict:
    """The one sync count every view shows: rows of kind ``sync`` (device->host syncs), per layer
    per watched step and in total, rank by rank; the other kinds are counted apart
    (``by_kind``), never added in. ``checked`` is False when no step was watched (a total of 0
    then means nothing); ``text`` is the line every view prints."""
    by_kind = dict.fromkeys(KINDS, 0)
    watched = watched_steps(layers if layers is not None else pd.DataFrame(), syncs)
    if not syncs.empty:
        for k, n in syncs["kind"].value_counts().items():
            by_kind[str(k)] = int(n)
        blocking = syncs[syncs["kind"] == SYNC]
    else:
        blocking = syncs
    per_rank, per_layer = [], []
    for rank, w in watched.groupby("rank"):
        n_watched = int(w["step"].nunique())  # the steps the probe watched on this rank
        b = blocking[blocking["rank"] == rank] if not blocking.empty else blocking
        by_layer = b.groupby("layer").size() if not b.empty else pd.Series(dtype="int64")
        for layer, n in by_layer.items():
            per_layer.append({"rank": int(rank), "layer": int(layer), "syncs": n / n_watched})
        per_rank.append({"rank": int(rank), "total": int(len(b)), "layers": int(len(by_layer)),
                         "watched_steps": n_watched})  # fmt: skip
    total = int(len(blocking))
    n_layers = int(blocking["layer"].nunique()) if total else 0
    steps = int(watched["step"].nunique())
    checked = bool(len(watched))
    return {
        "checked": checked,
        "total": total,
        "layers": n_layers,
        "watched_steps": steps,
        "per_layer": per_layer,
        "by_kind": by_kind,
        "per_rank": per_rank,
        "text": f"{total} on {n_layers} layer(s) ({steps} step(s) checked)"
        if checked
        else "not checked (no step of this run was watched for syncs)",
    }


def sync_findings(syncs: pd.DataFrame, graph_mode: str) -> list[Finding]:
    """One finding per (kind, op, location), listing the layers it hits."""
    if syncs.empty:
        return []
    # the capture finding already names the first op that broke a real capture
    syncs = syncs[syncs["kind"] != CAPTURE_ERROR]
    out: list[Finding] = []
    for (kind, op, loc), g in syncs.groupby(["kind", "op", "location"], sort=False):
        layers = sorted({int(x) for x in g["layer"].dropna()})
        per_layer = len(g) / max(1, len(layers)) / max(1, g["step"].nunique())
        breaks = graph_mode == "FULL"
        what = {
            "sync": "device->host sync in the captured region",
            "alloc": "data-dependent allocation in the captured region",
            "h2d": "pageable host->device copy in the captured region",
            "capture-error": "first op to break graph capture",
        }.get(str(kind), str(kind))
        out.append(
            Finding(
                kind=kind if kind in ("sync", "alloc") else "sync",
                severity="critical" if breaks and kind != "alloc" else "warning",
                title=f"{what}: {op} at {loc}",
                evidence=(
                    f"{len(layers)} layer(s) ({_span(layers)}), {per_layer:g} per layer per step; "
                    f"{g['detail'].iloc[0]}"
                    + (
                        "; aborts CUDA/HIP graph capture, so the engine falls back to PIECEWISE"
                        if breaks and kind != "alloc"
                        else ""
                    )
                ),
                fix=fix_for(str(op), str(kind)),
                layer=layers[0] if layers else None,
                location=str(loc),
                data={"op": op, "layers": layers, "count": int(len(g))},
            )
        )
    return out


def _span(layers: list[int]) -> str:
    if not layers:
        return "-"
    if layers == list(range(layers[0], layers[-1] + 1)) and len(layers) > 2:
        return f"layers {layers[0]}-{layers[-1]}"
    return "layers " + ", ".join(map(str, layers[:8])) + ("..." if len(layers) > 8 else "")
