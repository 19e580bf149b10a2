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


# kernels per piece: the sums' temporaries stay a few MB whatever the rank's size (an import's
# peak is its columns, not this)
CHUNK = 1 << 18


def rank_sums(
    name_idx: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    k_step: np.ndarray,
    k_replay: np.ndarray,
    k_layer: np.ndarray,
    layers: dict[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]] | None:
    """One rank's (steps table, histogram by name index, key), or None where ends tie. Kernel
    columns are integers with NULL as -1 (``k_*``: the derived step, replay and MLA layer); ``layers``:
    the rank's layer table as the import stores it. Computed :data:`CHUNK` kernels at a time."""
    if not layers or "t_start_ns" not in layers or "duration_ns" not in layers:
        return None
    t, d = layers["t_start_ns"], layers["duration_ns"]
    timed = (t != NULL) & (d != NULL)
    ls, ll = layers["step"][timed].astype(np.int64), layers["layer"][timed].astype(np.int64)
    lend = t[timed].astype(np.int64) + d[timed].astype(np.int64)
    key = layer_key(ls, ll, lend)
    order = np.argsort(lend, kind="stable")
    sl, s_step, s_layer = lend[order], ls[order], ll[order]
    if len(sl) > 1 and bool((sl[1:] == sl[:-1]).any()):
        return None
    steps_with = np.unique(ls[ls != NULL])
    width = max(int(ll.max()) if len(ll) else 0, 0) + 2  # windows -1 .. the largest layer
    # per layer position, one past the last: its step (NULL: no layer) and window + 1
    at_step, at_win1 = np.append(s_step, NULL), np.append(s_layer + 1, 0)
    keys, tots, atts, hists, reps = [], [], [], [], []
    for a in range(0, len(end), CHUNK):
        part = slice(a, a + CHUNK)
        kst, krep = k_step[part], k_replay[part]
        kept = _kept(kst, krep, steps_with)
        n_kept = int(np.count_nonzero(kept))
        if not n_kept:
            continue
        rows = _rows(kept, n_kept)
        ks = kst[rows]
        ke = end[part][rows].astype(np.int64, copy=False)
        di = ke - start[part][rows]
        mla = k_layer[part][rows] != NULL
        # runs of kernels of one step at one layer position: each run is one (step, window)
        first, counts = _layer_runs(sl, ke)
        cut = np.empty(len(ks), bool)
        cut[0] = True
        np.not_equal(ks[1:], ks[:-1], out=cut[1:])
        if counts is None:  # ends out of order: a position per kernel
            cut[1:] |= first[1:] != first[:-1]
            runs = np.flatnonzero(cut)
            pos = first[runs]
        else:
            bounds = np.cumsum(counts[:-1])  # the kernel each next position starts at
            cut[bounds[bounds < len(ks)]] = True
            runs = np.flatnonzero(cut)
            pos = first + np.searchsorted(bounds, runs, side="right")
        r_step = ks[runs].astype(np.int64)
        keys.append(r_step * width + np.where(at_step[pos] == r_step, at_win1[pos], 0))
        # integer sums, exact, as doubles: the SQL's SUM of the same integers below 2**53
        tots.append(np.add.reduceat(di, runs).astype(np.float64))
        atts.append(np.add.reduceat(np.where(mla, di, 0), runs).astype(np.float64))
        del cut
        hists.append(_hist_part(name_idx[part][rows], di, mla))
        rep = krep[rows]
        reps.append(np.unique(rep[np.r_[True, rep[1:] != rep[:-1]]]))
    steps = _step_sums(keys, tots, atts, width)
    key["replays"] = len(np.unique(np.concatenate(reps))) if reps else 0
    key["kernels"] = len(end)
    return steps, _merge_hist(hists), key


def _kept(kst: np.ndarray, krep: np.ndarray, steps_with: np.ndarray) -> np.ndarray:
    """Kernels of a replay and of a step with timed layers (steps_with: sorted, no NULL); a
    lookup table over the steps' range (a few thousand) rather than a search per kernel."""
    if not len(steps_with):
        return np.zeros(len(kst), bool)
    lo, hi = int(steps_with[0]), int(steps_with[-1])
    table = np.zeros(hi - lo + 2, bool)  # the last cell: outside the range
    table[steps_with - lo] = True
    off = kst.astype(np.int64) - lo
    off[(off < 0) | (off > hi - lo)] = hi - lo + 1
    kept = table[off]
    kept &= krep != NULL
    return kept & (kst != NULL)


def _rows(kept: np.ndarray, n_kept: int) -> Any:
    """The kept kernels as a slice where they are one block (views, no copies: a trace's
    kernels outside steps are mostly before the first and after the last), else the mask."""
    lo = int(np.argmax(kept))  # the first True: argmax of a bool array stops there
    hi = len(kept) - int(np.argmax(kept[::-1]))
    return slice(lo, hi) if hi - lo == n_kept else kept


def _layer_runs(sl: np.ndarray, ke: np.ndarray) -> tuple[Any, np.ndarray | None]:
    """Where each kernel end falls among the sorted layer ends ``sl``: the position of the
    first end at or after it (``len(sl)``: none). Kernels in time order (ends not decreasing)
    fall in runs: returns (first position, kernels per position from it), one binary search
    per layer in their span; otherwise (positions, None), one search per kernel."""
    if len(ke) > 1 and bool((ke[1:] < ke[:-1]).any()):
        return np.searchsorted(sl, ke, side="left"), None
    p0 = int(np.searchsorted(sl, ke[0], side="left"))
    p1 = int(np.searchsorted(sl, ke[-1], side="left"))
    # kernels at or before each layer end of the span; the rest fall at p1
    upto = np.searchsorted(ke, sl[p0:p1], side="right")
    return p0, np.diff(upto, prepend=0, append=len(ke))


def _step_sums(
    keys: list[np.ndarray], tots: list[np.ndarray], atts: list[np.ndarray], width: int
) -> dict[str, np.ndarray]:
    """Durations summed per (step, window) from the pieces' runs (kernels come in time order,
    so a run is most of a layer's kernels). Integer-valued doubles below 2**53 sum exactly in
    any order, as the SQL's SUM does."""
    if not keys:
        z = np.zeros(0, np.int64)
        return {"step": z, "win": z, "total": z.astype(np.float64), "att": z.astype(np.float64)}
    u, inv = np.unique(np.concatenate(keys), return_inverse=True)
    return {
        "step": u // width,
        "win": u % width - 1,
        "total": np.bincount(inv, weights=np.concatenate(tots), minlength=len(u)),
        "att": np.bincount(inv, weights=np.concatenate(atts), minlength=len(u)),
    }


def _hist_part(idx: np.ndarray, dur: np.ndarray, mla: np.ndarray) -> tuple[np.ndarray, ...]:
    """(name index, duration, count, any MLA) per distinct pair of one piece."""
    lo, hi = int(dur.min()), int(dur.max())
    span = hi - lo + 1
    cells = (int(idx.max()) + 1) * span
    if cells <= 4 * len(idx) + (1 << 16):  # a dense count: no sort, no hash
        k = np.multiply(idx, span, dtype=np.int64)
        k += dur
        k -= lo
        c = np.bincount(k, minlength=cells)
        m = np.zeros(cells, bool)
        m[k[mla]] = True  # the MLA kernels are a few of the piece's
        u = np.flatnonzero(c)
        return u // span, u % span + lo, c[u], m[u]
    # durations spread wide (a real trace's): sorted runs of equal (name, duration); Arrow's
    # hash aggregate would load pyarrow.dataset, and with it pandas, into an import
    i64 = idx.astype(np.int64)
    order = np.lexsort((dur, i64))
    si, sd = i64[order], dur[order]
    starts = np.concatenate(([0], np.flatnonzero((np.diff(si) != 0) | (np.diff(sd) != 0)) + 1))
    counts = np.diff(np.append(starts, len(si)))
    m_any = np.maximum.reduceat(np.asarray(mla, np.uint8)[order], starts) > 0
    return si[starts], sd[starts], counts, m_any


def _merge_hist(parts: list[tuple[np.ndarray, ...]]) -> dict[str, Any]:
    """The pieces' pairs summed, in (name index, duration) order; ``name_idx``: the name's
    index in ``names``."""
    if not parts:
        z = np.zeros(0, np.int64)
        return {"name_idx": z, "d": z, "c": z, "mla": z.astype(bool)}
    i, d, c, m = (np.concatenate([p[j] for p in parts]) for j in range(4))
    order = np.lexsort((d, i))
    i, d, c, m = i[order], d[order], c[order], m[order].astype(np.int64)
    first = np.r_[0, np.flatnonzero((i[1:] != i[:-1]) | (d[1:] != d[:-1])) + 1]
    return {
        "name_idx": i[first],
        "d": d[first],
        "c": np.add.reduceat(c, first),
        "mla": np.add.reduceat(m, first) > 0,
    }


def name_totals(
    names: list[str | None], name_idx: np.ndarray, start: np.ndarray, end: np.ndarray
) -> dict[str, Any]:
    """Every kernel's GPU time (ns, exact integers) and launches per name: what the figures'
    per-rank kernel query sums (:func:`mlaprof.analysis.series._kernels_per_rank`)."""
    c = np.zeros(len(names), np.int64)
    t = np.zeros(len(names), np.float64)
    for a in range(0, len(end), CHUNK):
        part = slice(a, a + CHUNK)
        idx = name_idx[part]
        dur = (end[part].astype(np.int64, copy=False) - start[part]).astype(np.float64)
        c += np.bincount(idx, minlength=len(names))
        t += np.bincount(idx, weights=dur, minlength=len(names))
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


HEADS = "layer_heads"  # (heads, n): the head counts the rank's layered stage-2 / reduce grids show


def layer_head_votes(
    take: Any, name_idx: np.ndarray, layer: np.ndarray, axis_by_name: np.ndarray, items: bool
) -> dict[str, np.ndarray]:
    """What :func:`mlaprof.analysis.engines.rank_heads` counts from a rank's kernel file, from
    its kernels in memory: per head count, how many kernels in a layer show it on the heads axis
    of their stage-2 / reduce grid (``axis_by_name``: that axis per name index, 0-2, or -1 for a
    name that is no such kernel). Same rules as its query, row for row: a grid value missing or
    not positive counts nothing; in work-items (``items``) it is divided by the workgroup size
    on that axis, and a block missing, not positive or not dividing it counts nothing.
    ``take(column, rows)``: the column's values and NULL mask at ``rows``, None where the trace
    has no such column."""
    rows = np.flatnonzero(layer != NULL)
    ax = axis_by_name[name_idx[rows]] if len(rows) else np.zeros(0, np.int64)
    keep = ax >= 0
    rows, ax = rows[keep], ax[keep]
    from mlaprof.kernel_table import AXES

    found: list[np.ndarray] = []
    for a in np.unique(ax).tolist():
        at = rows[ax == a]
        name = AXES[a]
        got = take(f"grid_{name}", at)
        if got is None:
            continue
        g, gm = got
        ok = g > 0 if gm is None else ~gm & (g > 0)
        if items:
            blk = take(f"block_{name}", at)
            if blk is None:
                continue
            b, bm = blk
            ok &= b > 0 if bm is None else ~bm & (b > 0)
            safe = np.where(ok, b, 1)
            ok &= g % safe == 0
            g = g // safe
        found.append(g[ok].astype(np.int64))
    h = np.concatenate(found) if found else np.zeros(0, np.int64)
    heads, n = np.unique(h, return_counts=True)
    return {"heads": heads.astype(np.int64), "n": n.astype(np.int64)}
