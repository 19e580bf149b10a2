"""Kernel annotation, vectorised: find MLA kernels by name, infer S from grids, group graph replays,
number layers per replay, and derive the ``steps`` / ``layers`` tables of an imported trace (one
step per replay that holds MLA kernels).

Works on column arrays before anything is stored, so a million-dispatch trace costs a few numpy
passes; names are matched once per distinct name. Missing values are ``-1`` in the derived
integer columns (replay, layer, splits, step) and become NULL when stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mlaprof.trace_io.common import ImportSummary
from mlaprof.trace_io.kernels import MAIN, KernelMatcher

NULL = -1


@dataclass
class KernelColumns:
    """The kernels of one import as columns. ``names``: distinct names; ``name_idx``: per row.
    Integer columns are int64 arrays; ``masks`` marks NULLs of the columns that have any."""

    names: list[str | None]
    name_idx: np.ndarray
    ints: dict[str, np.ndarray]
    masks: dict[str, np.ndarray]

    @property
    def n(self) -> int:
        return len(self.name_idx)

    def col(self, c: str) -> tuple[np.ndarray, np.ndarray | None]:
        return self.ints[c], self.masks.get(c)

    @classmethod
    def from_rows(cls, cols: tuple[str, ...], flat: list[Any]) -> KernelColumns:
        """From a flat row-major list (small imports: JSON, Kineto, the csv-module route)."""
        k = len(cols)
        n = len(flat) // k
        names_col = flat[cols.index("name") :: k] if n else []
        uniq: dict[Any, int] = {}
        idx = np.fromiter((uniq.setdefault(v, len(uniq)) for v in names_col), np.int64, n)
        ints: dict[str, np.ndarray] = {}
        masks: dict[str, np.ndarray] = {}
        for j, c in enumerate(cols):
            if c == "name":
                continue
            vals = flat[j::k]
            mask = np.fromiter((v is None for v in vals), bool, n)
            if mask.any():
                ints[c] = np.array([NULL if v is None else v for v in vals], dtype=np.int64)
                masks[c] = mask
            else:
                ints[c] = np.array(vals, dtype=np.int64) if n else np.zeros(0, np.int64)
        return cls(list(uniq), idx, ints, masks)


def _valid(kc: KernelColumns, c: str) -> np.ndarray:
    m = kc.masks.get(c)
    return np.ones(kc.n, bool) if m is None else ~m


def replays_by_correlation(kc: KernelColumns) -> np.ndarray:
    """rocprofv3 correlates every kernel of a graph launch to the launch call: a correlation id
    shared by several kernels is one replay, numbered by its first kernel's start."""
    replay = np.full(kc.n, NULL, np.int64)
    if "correlation" not in kc.ints or kc.n == 0:
        return replay
    valid = _valid(kc, "correlation")
    corr = kc.ints["correlation"][valid]
    start = kc.ints["start_ns"][valid]
    uniq, inv, counts = np.unique(corr, return_inverse=True, return_counts=True)
    gmin = np.full(len(uniq), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(gmin, inv, start)
    groups = np.nonzero(counts > 1)[0]
    rank = np.full(len(uniq), NULL, np.int64)
    rank[groups[np.lexsort((uniq[groups], gmin[groups]))]] = np.arange(len(groups))
    replay[valid] = rank[inv]
    return replay


def annotate(
    kc: KernelColumns,
    matcher: KernelMatcher,
    summary: ImportSummary,
    grid_in_workitems: bool,
    replay: np.ndarray | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Derived kernel columns (replay, layer, splits, step) and the steps and layers tables."""
    n = kc.n
    pats = [matcher.match(nm) for nm in kc.names]
    role_lut = np.array([0 if p is None else 1 if p.role == MAIN else 2 for p in pats] or [0])
    axis_lut = np.array(
        [-1 if p is None or p.split_axis is None else "xyz".index(p.split_axis) for p in pats]
        or [-1]
    )
    role = role_lut[kc.name_idx] if n else np.zeros(0, np.int64)
    axis = axis_lut[kc.name_idx] if n else np.zeros(0, np.int64)
    mla = role > 0
    if replay is None:
        replay = replays_by_correlation(kc) if mla.any() else np.full(n, NULL, np.int64)
    # layers: the running count of main kernels within the replay, in start order
    layer = np.full(n, NULL, np.int64)
    sel = np.nonzero(mla & (replay >= 0))[0]
    if len(sel):
        order = sel[np.lexsort((sel, kc.ints["start_ns"][sel], replay[sel]))]
        mains = (role[order] == 1).astype(np.int64)
        cs = np.cumsum(mains)
        rep_o = replay[order]
        first = np.r_[0, np.nonzero(np.diff(rep_o))[0] + 1]
        base = np.repeat(cs[first] - mains[first], np.diff(np.r_[first, len(order)]))
        lay = cs - base - 1
        layer[order] = np.where(lay >= 0, lay, NULL)
    # S from the grid axis of split-KV main kernels
    splits = np.full(n, NULL, np.int64)
    cand = np.nonzero((role == 1) & (axis >= 0))[0]
    if len(cand):
        grids = [kc.col(f"grid_{a}") for a in "xyz"]
        blocks = [kc.col(f"block_{a}") for a in "xyz"]
        for a in range(3):
            rows = cand[axis[cand] == a]
            if not len(rows):
                continue
            g = grids[a][0][rows]
            ok = g > 0
            if grids[a][1] is not None:
                ok &= ~grids[a][1][rows]
            if grid_in_workitems:
                b = blocks[a][0][rows].copy()
                if blocks[a][1] is not None:
                    b[blocks[a][1][rows]] = 1
                b[b <= 0] = 1
                ok &= g % b == 0
                g = g // b
            splits[rows[ok]] = g[ok]
    step = np.full(n, NULL, np.int64)
    mla_replays = np.unique(replay[mla & (replay >= 0)])
    in_step = np.isin(replay, mla_replays) & (replay >= 0)
    step[in_step] = replay[in_step]
    summary.mla_kernels = int((role == 1).sum())
    steps, layers = _derived(kc, step, layer, splits, mla)
    summary.replays = len(steps.get("step", ()))
    summary.layers = len(layers.get("step", ()))
    return {"replay": replay, "layer": layer, "splits": splits, "step": step}, steps, layers


def _groups(
    keys: np.ndarray, start: np.ndarray, end: np.ndarray, splits: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Per distinct key: (key, min start, max end, max splits), keys ascending."""
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    first = np.r_[0, np.flatnonzero(np.diff(k)) + 1]
    t0 = np.minimum.reduceat(start[order], first)
    t1 = np.maximum.reduceat(end[order], first)
    sp = None if splits is None else np.maximum.reduceat(splits[order], first)
    return k[first], t0, t1, sp


def _derived(
    kc: KernelColumns, step: np.ndarray, layer: np.ndarray, splits: np.ndarray, mla: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The steps and layers tables as columns (a layer spans its main kernel to the end of its
    last reduce kernel; its S is the main kernel's)."""
    start, end = kc.ints["start_ns"], kc.ints["end_ns"]
    s = step >= 0
    if not s.any():
        return {}, {}
    st, t0, t1, _ = _groups(step[s], start[s], end[s])
    steps = {"step": st, "t_start_ns": t0, "duration_ns": t1 - t0}
    m = s & mla & (layer >= 0)
    if not m.any():
        return steps, {}
    width = int(layer[m].max()) + 1
    key, l0, l1, sp = _groups(step[m] * width + layer[m], start[m], end[m], splits[m])
    layers = {
        "step": key // width,
        "layer": key % width,
        "t_start_ns": l0,
        "duration_ns": l1 - l0,
        "splits_used": sp,
    }
    return steps, layers


def concat(parts: list[KernelColumns]) -> KernelColumns | None:
    """One KernelColumns from several files' (names re-indexed, missing columns NULL)."""
    parts = [p for p in parts if p.n]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    names: dict[Any, int] = {}
    idx = []
    for p in parts:
        lut = np.array([names.setdefault(nm, len(names)) for nm in p.names] or [0], np.int64)
        idx.append(lut[p.name_idx])
    cols = {c for p in parts for c in p.ints}
    ints: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}
    for c in cols:
        vals, ms = [], []
        for p in parts:
            if c in p.ints:
                vals.append(p.ints[c])
                ms.append(p.masks.get(c, np.zeros(p.n, bool)))
            else:
                vals.append(np.full(p.n, NULL, np.int64))
                ms.append(np.ones(p.n, bool))
        ints[c] = np.concatenate(vals)
        m = np.concatenate(ms)
        if m.any():
            masks[c] = m
    return KernelColumns(list(names), np.concatenate(idx), ints, masks)


def store_kernels(
    bulk: Any,
    kc: KernelColumns,
    matcher: KernelMatcher,
    summary: ImportSummary,
    grid_in_workitems: bool,
    replay: np.ndarray | None = None,
) -> None:
    """Annotate and store the kernels, then the derived steps and layers."""
    derived, steps, layers = annotate(kc, matcher, summary, grid_in_workitems, replay)
    ints = {**kc.ints, **derived}
    masks = {c: m for c, m in kc.masks.items() if c not in derived}
    masks.update({c: m for c, arr in derived.items() if (m := arr == NULL).any()})
    write_kernels(bulk, KernelColumns(kc.names, kc.name_idx, ints, masks), summary)
    store_derived(bulk, steps, layers, summary)


def write_kernels(bulk: Any, kc: KernelColumns, summary: ImportSummary) -> None:
    """Store kernels as given; imported kernels are written once, so they go to the run's Arrow
    side file (mlaprof.store.columnar), not row by row into SQLite."""
    numbers = {c: (arr, kc.masks.get(c)) for c, arr in kc.ints.items()}
    text = {"name": (kc.names, kc.name_idx)}
    summary.add("kernels", bulk.write_columnar("kernels", kc.n, numbers, text))


def store_derived(
    bulk: Any, steps: dict[str, np.ndarray], layers: dict[str, np.ndarray], summary: ImportSummary
) -> None:
    if steps:
        n = len(steps["step"])
        cols = {c: (a, None) for c, a in steps.items()}
        # graph_mode / timing: constants written as text
        summary.add(
            "steps",
            bulk.insert_columns("steps", cols, n, {"graph_mode": "FULL", "timing": "trace-replay"}),
        )
    if layers:
        n = len(layers["step"])
        cols = {c: (a, a == NULL) for c, a in layers.items()}
        summary.add("layers", bulk.insert_columns("layers", cols, n))
