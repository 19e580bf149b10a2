"""The sync count of each layer of each step where an imported trace's host-sync check is the
run's count (:func:`mlaprof.analysis.syncs.sync_counts` takes it where no probe watched a step),
and the one verdict a layer's syncs read as.

The probe's counts are filled into ``layers.syncs`` by
:func:`mlaprof.analysis.syncs.fill_layer_syncs`; the host check's calls
(:func:`mlaprof.analysis.syncs.sync_evidence`) are filled here on the steps it checked, so the
timeline and one step's layer rows read the count the sync-count section states, never "not
checked" beside it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from mlaprof.analysis.syncs import host_checked
from mlaprof.sync_kinds import SYNC

if TYPE_CHECKING:
    from mlaprof.analysis.sections import LayerRow, TraceSyncs


def _found(host: TraceSyncs) -> pd.DataFrame:
    return pd.DataFrame(
        [(x.rank, x.step, x.layer) for x in host.syncs], columns=["rank", "step", "layer"]
    ).astype("int64")


def host_watched_steps(host: TraceSyncs, steps: pd.DataFrame) -> pd.DataFrame:
    """``(rank, step)`` the host check watched (:func:`mlaprof.analysis.syncs.host_checked`'s
    steps) and every step a host sync was placed in."""
    st, found, _, _ = host_checked(host, steps)
    pairs = [found[["rank", "step"]].astype("int64")]
    if not st.empty:
        pairs.append(st[["rank", "step"]].dropna().astype("int64"))
    return pd.concat(pairs, ignore_index=True).drop_duplicates().reset_index(drop=True)


def fill_host_syncs(
    layers: pd.DataFrame, host: TraceSyncs | None, steps: pd.DataFrame
) -> pd.DataFrame:
    """``layers`` with ``syncs`` set on the steps the host check watched (the host syncs it
    placed in that rank's step and layer, 0 where none); ``None`` stays where it did not.
    ``host``: :func:`counted_by_host`'s (None: ``layers`` as they are)."""
    if host is None or layers.empty or not layers["syncs"].isna().any():
        return layers
    keys = ["rank", "step", "layer"]
    watched = host_watched_steps(host, steps).assign(_w=True)
    n = _found(host).groupby(keys).size().rename("_n").reset_index()
    key = {k: pd.to_numeric(layers[k]).astype("int64").to_numpy() for k in keys}
    at = pd.DataFrame(key).merge(watched, on=["rank", "step"], how="left")
    at = at.merge(n, on=keys, how="left")
    fill = (layers["syncs"].isna().to_numpy()) & at["_w"].eq(True).to_numpy()
    if not fill.any():
        return layers
    out = layers.copy()
    col = pd.to_numeric(out["syncs"]).astype("float64").to_numpy(copy=True)
    col[fill] = at["_n"].fillna(0).to_numpy()[fill]
    out["syncs"] = col
    return out


def host_sync_rows(host: TraceSyncs | None) -> pd.DataFrame:
    """The host check's syncs as sync rows (rank, step, layer, kind ``sync``): with
    :func:`fill_host_syncs`' layers, :func:`mlaprof.analysis.layers.layer_table` counts them
    per layer and watched step by its own rule."""
    if host is None:
        return pd.DataFrame({"rank": [], "step": [], "layer": [], "kind": []})
    return _found(host).assign(kind=SYNC)


# a layer's sync verdict: its level, which every view styles (found, clean, not checked)
FOUND, CLEAN, NOT_CHECKED = "found", "clean", "not checked"
LAYER_NOT_CHECKED = "syncs not checked (no step of this layer was watched for syncs)"


@dataclass(frozen=True)
class LayerVerdict:
    level: str  # FOUND, CLEAN or NOT_CHECKED
    text: str


def layer_verdict(row: LayerRow | None, sites: int, host: TraceSyncs | None) -> LayerVerdict:
    """What a layer's syncs read as: found (its recorded sites, or where only a count exists,
    "sites unknown" and what counted them), clean only where checked with none, else "not
    checked". ``row``: the layer's row (its ``syncs``: None not checked, else per checked
    step); ``sites``: the sync / allocation sites recorded in it; ``host``: the imported
    trace's host-sync check where it is the run's count (:func:`counted_by_host`)."""
    if sites:
        return LayerVerdict(FOUND, f"{sites} distinct sync/alloc sites in this layer")
    if row is None or row.syncs is None:
        return LayerVerdict(NOT_CHECKED, LAYER_NOT_CHECKED)
    if row.syncs > 0:
        how = f"counted {host.evidence}" if host is not None else "not recorded"
        return LayerVerdict(FOUND, f"syncs found in this layer; sites unknown: {how}")
    if host is not None:
        return LayerVerdict(CLEAN, f"checked: no host syncs in this layer ({host.evidence})")
    return LayerVerdict(CLEAN, "checked: no syncs or allocations recorded in this layer")
