"""Question 1: is the verify path graph-capturable? Which op, on which layer, at which line?"""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.findings import Finding

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


def sync_findings(syncs: pd.DataFrame, graph_mode: str) -> list[Finding]:
    """One finding per (kind, op, location), listing the layers it hits."""
    if syncs.empty:
        return []
    # the capture finding already names the first op that broke a real capture
    syncs = syncs[syncs["kind"] != "capture-error"]
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
