"""The replay time's per-rank sums, computed once at import from the kernels in memory: what
:data:`mlaprof.analysis.replay_time.RANK_SQL` and the names' histogram compute from a rank's
kernel file at each report (a fleet report spent most of its time re-joining 10M kernels to their
layers). The store keeps them per rank (:mod:`mlaprof.store.aggregates`); the report uses them
only where the layers it analyses are the ones they were computed from (the ``key``), else it
runs the SQL. NumPy only: the import command loads no pandas.

Same rules as the SQL, row for row: a kept kernel has a replay and a (step) with timed layers; it
takes the layer with the smallest end at or after its own end (an ASOF match on the rank's time
line), whose layer number is its window if that layer is of its own step, else -1; durations
are ``end - start`` summed per (step, window), the MLA kernels' (``layer`` set) apart. A rank
whose layer ends tie (the SQL's match would be either row) gets no sums: its report runs the
SQL."""

from __future__ import annotations

from typing import Any

import numpy as np

NULL = -1
STEPS = "replay_steps"  # (step, win, total, att) per rank, with the key
HIST = "replay_hist"  # (name, d, c, mla): kept kernels per name and duration
NAMES = "kernel_names"  # (name, sum_ns, count): every kernel per name (the figures' kernel bars)


def layer_key(step: np.ndarray, layer: np.ndarray, lend: np.ndarray) -> dict[str, int]:
    """What the sums were computed from: the rank's timed layers (count and wrapping sums of
    their steps, layers and ends, int64)."""
    with np.errstate(over="ignore"):
        return {
            "layers": len(lend),
            "steps": int(np.sum(step, dtype=np.int64)),
            "layer": int(np.sum(layer, dtype=np.int64)),
            "lend": int(np.sum(lend, dtype=np.int64)),
        }


def rank_sums(
    names: list[str | None],
    name_idx: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    k_step: np.ndarray,
    k_replay: np.ndarray,
    k_layer: np.ndarray,
    layers: dict[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]] | None:
    """One rank's (steps table, names histogram, key), or None where ends tie. Kernel columns
    are int64 with NULL as -1 (``k_*``: the derived step, replay and MLA layer); ``layers``:
    the rank's layer table as the import stores it."""
    if not layers or "t_start_ns" not in layers or "duration_ns" not in layers:
        return None
    t, d = layers["t_start_ns"], layers["duration_ns"]
    timed = (t != NULL) & (d != NULL)
    ls, ll = layers["step"][timed].astype(np.int64), layers["layer"][timed].astype(np.int64)
    lend = t[timed].astype(np.int64) + d[timed].astype(np.int64)
    key = layer_key(ls, ll, lend)
    order = np.argsort(lend, kind="stable")
    sl = lend[order]
    if len(sl) > 1 and bool((sl[1:] == sl[:-1]).any()):
        return None
    steps_with = np.unique(ls[ls != NULL])
    kept = (k_replay != NULL) & (k_step != NULL) & np.isin(k_step, steps_with)
    rows: Any = slice(None) if kept.all() else np.flatnonzero(kept)  # a view where all are kept
    ks, ke = k_step[rows].astype(np.int64, copy=False), end[rows].astype(np.int64, copy=False)
    di = ke - start[rows]
    dur = di.astype(np.float64)
    mla = k_layer[rows] != NULL
    if len(sl):
        pos = np.searchsorted(sl, ke, side="left")
        hit = pos < len(sl)
        m = order[np.minimum(pos, len(sl) - 1)]
        win = np.where(hit & (ls[m] == ks), ll[m], NULL)
    else:
        win = np.full(len(ks), NULL, np.int64)
    steps = _step_sums(ks, win, dur, mla)
    hist = _histogram(names, name_idx[rows], di, mla)
    rep = k_replay[rows]
    runs = rep[np.r_[True, rep[1:] != rep[:-1]]] if len(rep) else rep
    key["replays"] = len(np.unique(runs))
    key["kernels"] = len(end)
    return steps, hist, key


def _step_sums(
    step: np.ndarray, win: np.ndarray, dur: np.ndarray, mla: np.ndarray
) -> dict[str, np.ndarray]:
    """Durations summed per (step, window): runs of equal keys first (kernels come in time
    order, so a run is a layer's kernels), then the runs' keys. Integer-valued doubles below
    2**53 sum exactly in any order, as the SQL's SUM does."""
    if not len(step):
        z = np.zeros(0, np.int64)
        return {"step": z, "win": z, "total": z.astype(np.float64), "att": z.astype(np.float64)}
    width = int(win.max()) + 2
    key = step * width + (win + 1)
    starts = np.r_[0, np.flatnonzero(key[1:] != key[:-1]) + 1]
    tot = np.add.reduceat(dur, starts)
    att = np.add.reduceat(np.where(mla, dur, 0.0), starts)
    u, inv = np.unique(key[starts], return_inverse=True)
    return {
        "step": u // width,
        "win": u % width - 1,
        "total": np.bincount(inv, weights=tot, minlength=len(u)),
        "att": np.bincount(inv, weights=att, minlength=len(u)),
    }


def _histogram(
    names: list[str | None], idx: np.ndarray, dur: np.ndarray, mla: np.ndarray
) -> dict[str, Any]:
    """Kept kernels counted per (name, duration), with whether any of them is an MLA kernel."""
    if not len(idx):
        z = np.zeros(0, np.int64)
        return {"name": [], "d": z, "c": z, "mla": z.astype(bool)}
    lo, hi = int(dur.min()), int(dur.max())
    span = hi - lo + 1
    i64 = idx.astype(np.int64)
    cells = (int(i64.max()) + 1) * span
    if cells <= 4 * len(idx) + (1 << 16):  # a dense count: no sort, no hash
        key = i64 * span + (dur - lo)
        c = np.bincount(key, minlength=cells)
        m = np.bincount(key, weights=mla, minlength=cells)
        u = np.flatnonzero(c)
        ui, ud, c, any_mla = u // span, u % span + lo, c[u], m[u] > 0
    else:  # durations spread wide (a real trace's): Arrow's hash aggregate
        import pyarrow as pa

        tab = pa.table({"i": i64, "d": dur, "m": mla})
        g = tab.group_by(["i", "d"], use_threads=False).aggregate([("m", "any"), ("m", "count")])
        g = g.sort_by([("i", "ascending"), ("d", "ascending")])
        ui, ud = g["i"].to_numpy(), g["d"].to_numpy()
        c, any_mla = g["m_count"].to_numpy(), g["m_any"].to_numpy(zero_copy_only=False)
    return {"name": [names[i] for i in ui.tolist()], "d": ud, "c": c, "mla": any_mla}


def name_totals(
    names: list[str | None], name_idx: np.ndarray, start: np.ndarray, end: np.ndarray
) -> dict[str, Any]:
    """Every kernel's GPU time (ns, exact integers) and launches per name: what the figures'
    per-rank kernel query sums (:func:`mlaprof.analysis.series._kernels_per_rank`)."""
    dur = (end.astype(np.int64, copy=False) - start).astype(np.float64)
    idx = name_idx.astype(np.int64, copy=False)
    c = np.bincount(idx, minlength=len(names))
    t = np.bincount(idx, weights=dur, minlength=len(names))
    got: dict[str | None, list[int]] = {}
    for i in np.flatnonzero(c).tolist():
        cell = got.setdefault(names[i], [0, 0])  # a name listed twice counts once
        cell[0] += int(t[i])
        cell[1] += int(c[i])
    return {
        "name": list(got),
        "sum_ns": np.array([v[0] for v in got.values()], np.int64),
        "count": np.array([v[1] for v in got.values()], np.int64),
    }
