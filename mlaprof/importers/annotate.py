"""Kernel annotation, vectorised: find MLA kernels by name, infer S from grids, group graph replays,
number layers per replay, and derive the ``steps`` / ``layers`` tables of an imported trace (one
step per replay that holds MLA kernels).

Works on column arrays before anything is stored, so a million-dispatch trace costs a few numpy
passes; names are matched once per distinct name. Missing values are ``-1`` in the derived
integer columns (replay, layer, splits, step) and become NULL when stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mlaprof.formats.arrow_numpy import run_heads
from mlaprof.importers import step_model
from mlaprof.importers.common import MIXED_IDS, NODE_IDS
from mlaprof.importers.step_model import (
    EAGER_STEP_GAP,
    GRAPH_LAUNCH_SQL,
    RUNTIME_API_SQL,
    Graphs,
    HostTrace,
    Plan,
)
from mlaprof.kernel_table import (
    AXES,
    METADATA,
    REDUCE,
    STAGE1,
    STAGE2,
    KernelMatcher,
    KernelPattern,
)
from mlaprof.step_sources import SOURCE_RANGES, SOURCE_TEXT, rle

if TYPE_CHECKING:
    from mlaprof.importers.common import ImportSummary
    from mlaprof.store.spill import Spill, SpillChain

NULL = -1


class LazyInts(MutableMapping[str, np.ndarray]):
    """Integer columns, some still as the parser's Arrow arrays (int64, no NULLs): made a NumPy
    array when first read. The annotation reads a few columns in full (times, correlation ids)
    and the rest (grids, streams) only at the MLA kernels' rows (:meth:`KernelColumns.take`),
    and the store writes unread ones straight from Arrow: a million-row column is neither
    joined into one buffer nor copied when nothing reads all of it."""

    def __init__(
        self,
        ready: dict[str, np.ndarray],
        arrow: dict[str, Any],
        spill: Spill | SpillChain | None = None,
    ) -> None:
        self._ready = dict(ready)
        self._arrow = dict(arrow)  # column -> pyarrow (Chunked)Array, int64 without NULLs
        # columns parked on disk (:mod:`mlaprof.store.spill`): read in full only if asked
        self.spill = spill
        self._spilled = [c for c in (spill.columns if spill else []) if c not in ready]
        self._order = [*ready, *(c for c in [*arrow, *self._spilled] if c not in ready)]

    def __getitem__(self, c: str) -> np.ndarray:
        if c not in self._ready and c in self._spilled and self.spill is not None:
            self._ready[c] = self.spill.column(c)
            self._spilled.remove(c)
        if c not in self._ready:
            if c not in self._arrow:
                raise KeyError(c)
            from mlaprof.formats import arrow_numpy

            col = self._arrow.pop(c)
            col = col.combine_chunks() if hasattr(col, "combine_chunks") else col
            self._ready[c] = arrow_numpy.numbers(col).astype(np.int64, copy=False)
        return self._ready[c]

    def __setitem__(self, c: str, v: np.ndarray) -> None:
        self._arrow.pop(c, None)
        if c in self._spilled:
            self._spilled.remove(c)
        if c not in self._ready:
            self._order.append(c)
        self._ready[c] = v

    def __delitem__(self, c: str) -> None:
        if c not in self:
            raise KeyError(c)
        self._ready.pop(c, None)
        self._arrow.pop(c, None)
        if c in self._spilled:
            self._spilled.remove(c)
        self._order.remove(c)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, c: object) -> bool:
        return c in self._ready or c in self._arrow or c in self._spilled

    def unread(self, c: str) -> Any | None:
        """The column's Arrow array while nothing has read it in full, else None."""
        return self._arrow.get(c)

    def spilled(self) -> list[str]:
        """The columns still on disk only (the store writes them from there)."""
        return list(self._spilled)


@dataclass
class KernelColumns:
    """The kernels of one import as columns. ``names``: distinct names; ``name_idx``: per row.
    Integer columns are int64 arrays (a :class:`LazyInts` may hold some as Arrow until read);
    ``masks`` marks NULLs of the columns that have any."""

    names: list[str | None]
    name_idx: np.ndarray
    ints: MutableMapping[str, np.ndarray]
    masks: dict[str, np.ndarray]
    # how the ``device`` column numbers agents (mlaprof.importers.common.agent_ids_of): a node
    # id as rocprofv3 writes by default, or a GPU's index among the node's GPUs (type-relative)
    agent_ids: str = NODE_IDS

    @property
    def n(self) -> int:
        return len(self.name_idx)

    def col(self, c: str) -> tuple[np.ndarray, np.ndarray | None]:
        return self.ints[c], self.masks.get(c)

    def take(self, c: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Column ``c`` at ``rows`` only (values, NULL mask or None), reading no more of it."""
        m = self.masks.get(c)
        lazy = self.ints if isinstance(self.ints, LazyInts) else None
        if lazy is not None and lazy.spill is not None and c in lazy.spilled():
            return lazy.spill.take(c, rows), None if m is None else m[rows]
        raw = lazy.unread(c) if lazy is not None else None
        if raw is None:
            return self.ints[c][rows], None if m is None else m[rows]
        from mlaprof.formats import arrow_numpy

        got = arrow_numpy.take(raw, rows).astype(np.int64, copy=False)
        return got, None if m is None else m[rows]

    def storable(self, c: str) -> tuple[Any, np.ndarray | None]:
        """Column ``c`` as the store takes it: a NumPy array, or the parser's Arrow array where
        nothing read it (values, NULL mask or None)."""
        raw = self.ints.unread(c) if isinstance(self.ints, LazyInts) else None
        return (self.ints[c] if raw is None else raw), self.masks.get(c)

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


def _zeros(n: int) -> np.ndarray:
    """``n`` int64 zeros that take no memory (a read-only view of one zero)."""
    return np.broadcast_to(np.zeros(1, np.int64), (n,))


def _device_codes(kc: KernelColumns) -> tuple[np.ndarray, int]:
    """A small integer per kernel for its device (0 everywhere when the trace has none)."""
    if "device" not in kc.ints:
        return _zeros(kc.n), 1
    dev = kc.ints["device"]
    m = kc.masks.get("device")
    if m is not None:
        dev = np.where(m, NULL, dev)
    if kc.n and (dev == dev[0]).all():  # one device (a rank's trace): no sort needed
        return _zeros(kc.n), 1
    uniq, codes = np.unique(dev, return_inverse=True)
    return codes.astype(np.int64), len(uniq)


def replays_by_correlation(
    kc: KernelColumns, codes: np.ndarray, ndev: int, graph_corr: np.ndarray | None = None
) -> np.ndarray:
    """rocprofv3 correlates every kernel of a graph launch to the launch call: a correlation id
    shared by several kernels, or the id of a graph-launch call in the API trace (``graph_corr``,
    sorted: a one-kernel graph piece), is one replay, numbered by its first kernel's start.
    ``codes``, ``ndev``: the kernels' devices (:func:`_device_codes`)."""
    if "correlation" not in kc.ints or kc.n == 0:
        return np.full(kc.n, NULL, np.int64)
    mask = kc.masks.get("correlation")
    valid = None if mask is None else ~mask  # None: every kernel has an id (no copies)
    corr, start = kc.ints["correlation"], kc.ints["start_ns"]
    if valid is not None:
        corr, start = corr[valid], start[valid]
    # every process numbers its own correlation ids: the ranks of a multi-GPU trace (one GPU
    # each) reuse them, so a replay is a (device, correlation id) pair
    if ndev > 1:
        corr = corr * ndev + (codes if valid is None else codes[valid])
    # the usual trace order: runs of ids, found in the one pass that sees they ascend
    first = step_model.ascending_runs(corr) if len(corr) else None
    in_order = first is not None
    if in_order:  # no sort needed
        counts = np.diff(np.r_[first, len(corr)])
        uniq, gmin = corr[first], np.minimum.reduceat(start, first)
    else:
        uniq, inv, counts = np.unique(corr, return_inverse=True, return_counts=True)
        gmin = np.full(len(uniq), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(gmin, inv, start)
    is_graph = counts > 1
    if graph_corr is not None and len(graph_corr):
        is_graph |= np.isin(uniq // ndev if ndev > 1 else uniq, graph_corr)
    groups = np.nonzero(is_graph)[0]
    rank = np.full(len(uniq), NULL, np.int32)  # replay numbers: fewer than 2**31
    rank[groups[np.lexsort((uniq[groups], gmin[groups]))]] = np.arange(len(groups))
    got = np.repeat(rank, counts) if in_order else rank[inv]
    if valid is None:
        return got
    replay = np.full(kc.n, NULL, np.int32)
    replay[valid] = got
    return replay


_ROLE_CODE = {STAGE1: 1, STAGE2: 2, REDUCE: 3, METADATA: 4}
MAX_STEP_RUNS = 4096  # per-step graph runs kept in a rank's trace checks


def _lut(values: list[int]) -> np.ndarray:
    return np.array(values or [NULL], np.int64)


class _Grids:
    """Launch grids in blocks per axis, for the kernels that read S, rows, qlen or heads from
    them (stage 1 and stage 2: a small share of a trace, so the rest is never divided)."""

    def __init__(
        self,
        kc: KernelColumns,
        grid_in_workitems: bool,
        rows: np.ndarray,
        need: list[np.ndarray] | None = None,
    ) -> None:
        """``need``: per axis, per distinct name, whether a pattern reads that axis of its
        grid (the blocks are then found only at those kernels' rows, NULL at the others,
        which :meth:`at` never reads); None: every axis at every row."""
        self.rows = rows  # ascending: a kernel's place in it is found by bisection
        self.blocks: list[np.ndarray] = []  # per axis, NULL where missing or not divisible
        subs: list[np.ndarray | None] = [None] * len(AXES)
        if need is not None and len(rows):
            names = kc.name_idx[rows]
            subs = [need[i][names] for i in range(len(AXES))]
            del names
        for i, a in enumerate(AXES if len(rows) else ()):
            sub, subs[i] = subs[i], None
            if sub is None or sub.all():
                self.blocks.append(self._axis(kc, grid_in_workitems, a, rows))
                continue
            at = np.flatnonzero(sub)  # indices: a mask of interleaved kernels costs more
            del sub
            vals = self._axis(kc, grid_in_workitems, a, rows[at]) if len(at) else None
            got = np.full(len(rows), NULL, np.int64 if vals is None else vals.dtype)
            if vals is not None:
                got[at] = vals
            del at, vals
            self.blocks.append(got)

    @staticmethod
    def _axis(kc: KernelColumns, grid_in_workitems: bool, a: str, rows: np.ndarray) -> np.ndarray:
        """Axis ``a`` of the grids at ``rows`` in blocks (NULL: missing or not divisible)."""
        g, gm = kc.take(f"grid_{a}", rows)
        bad = g <= 0 if gm is None else gm | (g <= 0)
        if grid_in_workitems and f"block_{a}" in kc.ints:
            b, bm = kc.take(f"block_{a}", rows)
            if bm is not None:
                b[bm] = 1
            b[b <= 0] = 1
            q = g // b  # one division: g % b != 0 exactly where q * b != g (b >= 1)
            b *= q
            bad |= b != g
            g = q
        g[bad] = NULL
        # int32 where every value fits (blocks per axis are below 2**31): half the memory
        if len(g) and int(g.max()) < 2**31:
            return g.astype(np.int32)
        return g

    def subset(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows where ``keep`` (one boolean per row given at construction) holds, and
        their places among those rows (what :meth:`at` takes; no bisection)."""
        pos = np.flatnonzero(keep)
        return self.rows[pos], pos

    def at(
        self,
        lut: np.ndarray,
        idx: np.ndarray,
        rows: np.ndarray,
        pos: np.ndarray | None = None,
        names: np.ndarray | None = None,
    ) -> np.ndarray:
        """Per kernel in ``rows`` (a subset of the rows given at construction; ``pos``: their
        places among them, bisected when not given): the blocks on the axis its name's pattern
        gives (``lut[name index]``: 0-2, or NULL: none). ``names``: ``idx[rows]``, where the
        caller has it."""
        if not len(rows):
            return np.full(0, NULL, np.int64)
        axis = lut[idx[rows] if names is None else names]
        if pos is None:
            pos = np.searchsorted(self.rows, rows)
        a0 = int(axis[0])
        if (axis == a0).all():  # every kernel's pattern reads the same axis (or none)
            if 0 <= a0 < 3:
                return self.blocks[a0][pos]
            return np.full(len(rows), NULL, np.int64)
        out = np.full(len(rows), NULL, np.int64)
        for a in range(3):
            sel = axis == a
            out[sel] = self.blocks[a][pos[sel]]
        return out


def _eager_segments(
    start: np.ndarray,
    s1: np.ndarray,
    barriers: np.ndarray,
    seg: np.ndarray | None = None,
    gap_ok: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Segment id of each eager stage-1 kernel (``s1``: indices sorted by start), and how many
    segments an idle gap began: a new segment (step) starts where the step model's segment
    changes (``seg``, per kernel of ``s1``), after a barrier (a graph replay, a persistent
    metadata kernel), or, where the model found nothing better (``seg`` None, or ``gap_ok``:
    kernels no closing evidence bounds), after an idle gap longer than EAGER_STEP_GAP x the
    median pitch."""
    t = start[s1]
    brk = np.zeros(len(s1), bool)
    by_gap = 0
    if len(s1) > 1:
        if seg is not None:
            brk[1:] |= seg[1:] != seg[:-1]
        if seg is None or (gap_ok is not None and gap_ok.any()):
            pitch = np.diff(t)
            med = float(np.median(pitch))
            gap = pitch > EAGER_STEP_GAP * max(med, 1.0)
            if seg is not None and gap_ok is not None:
                gap &= gap_ok[1:] & gap_ok[:-1] & ~brk[1:]
            by_gap = int(gap.sum())
            brk[1:] |= gap
        if len(barriers):
            seen = np.searchsorted(np.sort(barriers), t, side="right")
            brk[1:] |= np.diff(seen) > 0
    return np.cumsum(brk), by_gap


def annotate(
    kc: KernelColumns,
    matcher: KernelMatcher,
    summary: ImportSummary,
    grid_in_workitems: bool,
    replay: np.ndarray | None = None,
    kernels_final: Callable[[dict[str, np.ndarray]], None] | None = None,
    host: HostTrace | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Derived kernel columns (replay, layer, splits, step) and the steps and layers tables.
    ``kernels_final`` is called with the derived columns as soon as they are final, before the
    trace checks and the tables (an import starts writing its kernel file there). ``host``: what
    the process's API trace says (graph launches, syncs, roctx ranges).

    A step is a graph replay holding MLA stage-1 kernels, or a run of eager ones bounded as
    :mod:`mlaprof.importers.step_model` finds them; its layers are its stage-1 kernels in start
    order (stage 2 / reduce join the stage-1 kernel before them). Partial steps at the window's
    edges are left out and counted apart. S, batch rows and qlen come from the grid axes the
    kernel table names."""
    n = kc.n
    pats = [matcher.match(nm) for nm in kc.names]
    summary.patterns = _used_patterns(pats, kc)
    # int8: a role per kernel is a tenth of a 10M-kernel import's columns as int64
    code = _lut([0 if p is None else _ROLE_CODE[p.role] for p in pats]).astype(np.int8)

    def axis_lut(attr: str) -> np.ndarray:
        return _lut(
            [AXES.index(getattr(p, attr)) if p and getattr(p, attr) in AXES else NULL for p in pats]
        )

    idx = kc.name_idx
    role = code[idx] if n else np.zeros(0, np.int8)
    in_layer = (role >= 1) & (role <= 3)
    s1_all = np.nonzero(role == 1)[0]

    luts = {a: axis_lut(a) for a in ("split_axis", "rows_axis", "qlen_axis", "heads_axis")}
    # per axis, the names whose pattern reads it: the grids are divided only at their kernels
    need = [np.logical_or.reduce([lut == i for lut in luts.values()]) for i in range(len(AXES))]

    def from_grids() -> tuple[_Grids, np.ndarray, np.ndarray, np.ndarray]:
        grids = _Grids(kc, grid_in_workitems, np.nonzero((role == 1) | (role == 2))[0], need)
        # int32 (a grid axis in blocks is below 2**31): three per-kernel columns of a
        # 10M-dispatch trace take half the memory int64 would
        splits = np.full(n, NULL, np.int32)
        rows = np.full(n, NULL, np.int32)
        qlen = np.full(n, NULL, np.int32)
        if len(s1_all):
            _, pos1 = grids.subset(role[grids.rows] == 1)  # s1_all among the grids' rows
            names1 = idx[s1_all]
            for arr, attr in ((splits, "split_axis"), (rows, "rows_axis"), (qlen, "qlen_axis")):
                arr[s1_all] = grids.at(luts[attr], idx, s1_all, pos1, names1)
        return grids, splits, rows, qlen

    # S, rows and qlen are read from the grids in a second thread while replays, layers and
    # steps are numbered here (NumPy releases the GIL in both)
    with ThreadPoolExecutor(1) as pool:
        grid_job = pool.submit(from_grids)
        codes, ndev = _device_codes(kc)
        if replay is None:
            launches = None if host is None else host.graph_launches
            replay = (
                replays_by_correlation(kc, codes, ndev, launches)
                if in_layer.any()
                else np.full(n, NULL, np.int64)
            )
        plan = step_model.plan_steps(kc, role, replay, in_layer, host, codes, ndev)
        top = int(replay.max()) if n else NULL  # replays are numbered 0 .. top
        nrep = top + 1 if top >= 0 else 0
        graphs = step_model.graph_identity(kc, replay, role, nrep, s1_all)
        group, layer, step, edges, aligned = _number_steps(
            kc, role, replay, in_layer, plan, graphs, (codes, ndev), s1_all
        )
        grids, splits, rows, qlen = grid_job.result()
    derived = {"replay": replay, "layer": layer, "splits": splits, "step": step}
    if kernels_final is not None:
        kernels_final(derived)
    summary.checks["qlen"] = _pin_qlen_from_stage2(
        role, group, layer, qlen, grids, luts["qlen_axis"], idx, s1_all
    )
    summary.checks["heads"] = _stage2_heads(pats, role, idx, grids, luts["heads_axis"])
    summary.mla_kernels = len(s1_all)
    summary.checks["replays"] = _replay_checks(replay, step, graphs, edges, aligned, s1_all)
    steps, layers = _derived(
        kc, summary, pats, step, layer, splits, rows, qlen, role, replay, plan, s1_all, in_layer,
        codes,
    )  # fmt: skip
    summary.checks["steps"] = _step_checks(steps, replay, step, role, plan, graphs, edges, s1_all)
    summary.replays = int((steps.get("graph_mode", np.zeros(0)) == "graph").sum())
    summary.eager_steps = int(
        np.isin(steps.get("graph_mode", np.zeros(0)), ["eager", "piecewise"]).sum()
    )
    summary.layers = len(layers.get("step", ()))
    return derived, steps, layers


def _number_steps(
    kc: KernelColumns,
    role: np.ndarray,
    replay: np.ndarray,
    in_layer: np.ndarray,
    plan: Plan,
    graphs: Graphs,
    devices: tuple[np.ndarray, int],
    s1: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int], dict[str, int]]:
    """Per kernel: its group (an MLA graph replay or a run of eager kernels), its layer in the
    group (stage-1 kernels in start order; a replay or eager step short of layers by
    :func:`_align_short_replays` / :func:`_align_short_eager`) and its step (groups ordered by their first kernel's start);
    -1 where none. And the partial steps left out at the window's edges, and how the short
    steps' layers were numbered. ``devices``: :func:`_device_codes`; ``s1``: the stage-1
    kernels' indices."""
    n = kc.n
    start = kc.ints["start_ns"]
    # groups: MLA graph replays, then eager segments, numbered into steps by start time
    base = len(graphs.count)  # the replays (graph_identity's per-replay arrays)
    # int32 where every group id fits (replays, then at most one eager segment per kernel)
    group = np.full(n, NULL, np.int32 if base + n < 2**31 else np.int64)
    rep_ok = in_layer & (replay >= 0)
    np.copyto(group, replay, where=rep_ok)
    n_rep = base  # group ids below this are replays
    codes, ndev = devices
    seg_all = plan.seg
    eager_all = in_layer & (replay < 0)  # MLA kernels launched on their own
    for d in range(ndev if eager_all.any() else 0):  # each GPU runs its own steps
        on = codes == d if ndev > 1 else None
        eager = np.flatnonzero(eager_all if on is None else eager_all & on)
        if seg_all is not None:  # kernels outside every step the model found belong to none
            eager = eager[seg_all[eager] >= 0]
        if not len(eager):
            continue
        eager = eager[np.lexsort((eager, start[eager]))]
        e1 = eager[role[eager] == 1]
        if not len(e1):
            continue
        barriers = (
            np.zeros(0, np.int64)
            if plan.source == SOURCE_RANGES  # ranges say where steps end; nothing else does
            else np.r_[
                start[rep_ok if on is None else rep_ok & on],
                start[(role == 4) if on is None else (role == 4) & on],
            ]  # fmt: skip
        )
        seg, by_gap = _eager_segments(
            start,
            e1,
            barriers,
            None if seg_all is None else seg_all[e1],
            None if plan.gap_ok is None else plan.gap_ok[e1],
        )
        plan.gap_breaks += by_gap
        seg = seg + base
        base = int(seg.max()) + 1 if len(seg) else base
        # stage 2 / reduce: the segment of the last eager stage-1 kernel started before them
        pos = np.searchsorted(start[e1], start[eager], side="right") - 1
        ok = pos >= 0
        if seg_all is not None:  # ... and in the same step of the model
            ok &= seg_all[eager] == seg_all[e1[np.clip(pos, 0, None)]]
        group[eager[ok]] = seg[pos[ok]]
    layer = _layers_in_groups(group, start, role)
    edges = _trim_edges(kc, group, layer, role, n_rep, plan, graphs, codes, s1)
    # step numbers: groups ordered by their first kernel's start (int32: fewer than 2**31)
    gsel = np.flatnonzero((group >= 0) & (layer >= 0))
    live = np.zeros(n_rep, bool)  # per replay: a step (the window's edges are none)
    if not len(gsel):
        step = np.full(n, NULL, np.int32)
    else:
        gids, g0, runs, inv = _key_groups(group[gsel], start[gsel])
        rank = np.empty(len(gids), np.int64)
        rank[np.lexsort((gids, g0))] = np.arange(len(gids))
        # every kernel of an MLA replay belongs to its step; eager ones only when MLA
        rep_step = np.full(n_rep + 1, NULL, np.int32)
        is_rep = gids < n_rep
        rep_step[gids[is_rep]] = rank[is_rep]
        live = rep_step[:n_rep] >= 0
        rep_gather = int(replay.min()) >= NULL
        if rep_gather:  # replay -1 takes the last slot (NULL): one gather
            step = rep_step[replay]
        else:
            step = np.full(n, NULL, np.int32)
            has = replay >= 0
            step[has] = rep_step[replay[has]]
        # a replay's kernels have their step already (their group is their replay): only
        # eager groups' kernels are numbered here
        if int(gids.max()) >= n_rep or not rep_gather:
            step[gsel] = (
                rank[inv] if runs is None else np.repeat(rank, np.diff(np.r_[runs, len(gsel)]))
            )
        # the persistent metadata kernel runs in the builder just before its step
        meta_k = np.nonzero(role == 4)[0]
        if len(meta_k):
            t_step = np.sort(g0)
            nxt = np.searchsorted(t_step, start[meta_k], side="left")
            ok = nxt < len(t_step)
            step[meta_k[ok]] = nxt[ok]
    # after the steps: a replay whose layers are unknown is still a step (its time is known)
    aligned = _align_short_replays(kc, role, replay, layer, graphs, live)
    # ... and an eager step short of layers, by the same alignment (the edges are left out)
    eager = _align_short_eager(kc, role, group, layer, n_rep, codes, s1)
    if eager:
        aligned["layers_unknown"] = aligned.get("layers_unknown", 0) + eager.pop("layers_unknown")
        aligned.update(eager)
    return group, layer, step, edges, aligned


def _key_groups(
    keys: np.ndarray, start: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Per distinct key of ``keys`` (group ids, 0 or more): the keys ascending and the least
    ``start`` of each; then, where the keys never decrease (groups listed one after another),
    where each key's run of rows begins (no sort), else each row's key's place among them:
    one of the two, the other None."""
    runs = step_model.ascending_runs(keys)
    if runs is not None:
        return keys[runs], np.minimum.reduceat(start, runs), runs, None
    # group ids are 0 .. max: their distinct values and ranks without a sort
    present = np.zeros(int(keys.max()) + 1, bool)
    present[keys] = True
    gids = np.flatnonzero(present)
    inv = (np.cumsum(present) - 1)[keys]
    del present
    g0 = np.full(len(gids), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(g0, inv, start)
    return gids, g0, None, inv


def _layers_in_groups(group: np.ndarray, start: np.ndarray, role: np.ndarray) -> np.ndarray:
    """Per kernel of a group: its layer, the stage-1 kernels of the group in start order."""
    layer = np.full(len(group), NULL, np.int32)  # layer numbers are small
    sel = np.flatnonzero(group >= 0)
    if len(sel):
        # int32 counts and each temporary freed when done: on a 10M-kernel trace every one
        # of them is 40-80 MB
        order, _, first = step_model.replay_runs(sel, group, start)  # a trace in order: no sort
        del sel
        mains = role[order] == 1
        # stage-1 kernels so far within the group: a running count that restarts at each
        # group's first kernel (the group before's count taken off there), less one
        per = np.add.reduceat(mains, first, dtype=np.int32)
        cs = mains.astype(np.int32)
        del mains
        cs[first[1:]] -= per[:-1]
        np.cumsum(cs, out=cs)
        cs -= 1  # -1 (NULL) before the group's first stage-1 kernel
        layer[order] = cs
    return layer


def _align_short_replays(
    kc: KernelColumns,
    role: np.ndarray,
    replay: np.ndarray,
    layer: np.ndarray,
    graphs: Graphs,
    live: np.ndarray,
) -> dict[str, int]:
    """Renumber (in place) the layers of the replays in a step (``live``, per replay) that
    hold fewer stage-1 kernels than their graph's complete replays: counting from 0 over what
    is left would call the last layer missing and shift every other one. Each such replay's
    kernels are placed in a complete replay of its graph by kernel name (:func:`_place_in_refs`,
    the rule eager steps follow too). Counts per step: numbered by the alignment, or not all
    (none where no replay in a step is short of layers: the usual trace's checks stay as they
    were), and the stage-1 kernels left without a layer; a replay of a graph with no complete
    replay is not all."""
    out = {"steps_layers_aligned": 0, "steps_layers_unknown": 0, "layers_unknown": 0}
    nrep = len(graphs.count)
    if not nrep or len(live) != nrep:
        return {}
    want = _graph_layers(graphs)
    short = np.flatnonzero(live & (graphs.s1 > 0) & (graphs.s1 < want))
    if not len(short):  # the usual trace: per-replay tests, no kernel read
        return {}
    # a reference per graph: a complete replay (every kernel and every layer its graph shows)
    whole = (graphs.count == graphs.usual) & (graphs.s1 == want)
    refs: dict[int, int] = {}
    for r in np.flatnonzero(whole).tolist():
        refs.setdefault(int(graphs.canon[r]), r)
    mark = np.zeros(nrep + 1, bool)  # replay -1 reads the last slot: False
    mark[short] = True
    mark[list(refs.values())] = True
    sel = np.flatnonzero(mark[replay])
    order, r_o, first = step_model.replay_runs(sel, replay, kc.ints["start_ns"])
    del sel
    bounds = np.r_[first, len(order)]
    names = kc.name_idx[order]
    reps = r_o[first]
    at = {int(r): i for i, r in enumerate(reps.tolist())}  # replay -> its run
    gids = sorted(refs)
    ref_seqs = []
    for g in gids:
        i = at[refs[g]]
        a, b = int(bounds[i]), int(bounds[i + 1])
        ref_seqs.append((names[a:b], role[order[a:b]] == 1))
    graph_no = {g: j for j, g in enumerate(gids)}
    sub = [at[int(r)] for r in short.tolist() if int(graphs.canon[r]) in graph_no]
    if sub:
        which = np.array([graph_no[int(graphs.canon[reps[i]])] for i in sub], np.int64)
        lens = (bounds[1:] - bounds[:-1])[sub]
        rows = np.concatenate([order[bounds[i] : bounds[i + 1]] for i in sub])
        got = _place_in_refs(kc, role, layer, ref_seqs, rows, lens, which, None)
        out["steps_layers_aligned"], out["steps_layers_unknown"], out["layers_unknown"] = got
    # replays of a graph with no complete replay: nothing to place them in
    left = np.setdiff1d(short, reps[sub] if sub else short[:0])
    if len(left):
        gone = np.zeros(nrep + 1, bool)
        gone[left] = True
        layer[gone[replay]] = NULL
        out["steps_layers_unknown"] += len(left)
        out["layers_unknown"] += int(graphs.s1[left].sum())
    return out


def _place_in_refs(
    kc: KernelColumns,
    role: np.ndarray,
    layer: np.ndarray,
    refs: list[tuple[np.ndarray, np.ndarray]],
    rows: np.ndarray,
    lens: np.ndarray,
    which: np.ndarray,
    own: np.ndarray | None,
) -> tuple[int, int, int]:
    """Renumber (in place) the layers of steps short of layers by :func:`align_layers`, one rule
    for graph replays and eager steps: ``rows`` are the steps' kernels (each step's run in start
    order, ``lens`` long, placed in ``refs[which[i]]``), ``own`` per row whether it is one of the
    step's own MLA kernels (None: all are; an eager step's run also holds kernels of no step). A
    stage-1 kernel takes the layer every placement gives it, stage 2 / reduce the layer of the
    stage-1 kernel before them where their own placement agrees; the rest (which layer went is
    unknown) keep no layer, so the per-layer figures leave them out. Returns the steps numbered
    by the alignment, those not all (a layer is missing, which one unknown), and the stage-1
    kernels left without a layer."""
    heads = np.r_[0, np.cumsum(lens)[:-1]]
    seq = kc.name_idx[rows]
    got = align_layers(refs, seq, np.r_[heads, len(rows)], which, len(kc.names))
    rl = role[rows]
    mla = (rl >= 1) & (rl <= 3)
    if own is not None:
        mla &= own
    is1 = (rl == 1) & mla
    # stage 2 / reduce: the layer of the stage-1 kernel before them in their step, where their
    # own placement gives that layer too (an orphan whose stage 1 was lost joins none)
    last1 = np.maximum.accumulate(np.where(is1, np.arange(len(rows)), NULL))
    rep_of = np.repeat(np.arange(len(lens)), lens)
    ok = (last1 >= 0) & (rep_of[np.clip(last1, 0, None)] == rep_of)
    prev = np.where(ok, got[np.clip(last1, 0, None)], NULL)
    layer[rows[mla]] = np.where(is1 | (prev == got), got, NULL)[mla]
    lost1 = is1 & (got < 0)
    bad = np.logical_or.reduceat(lost1, heads)
    return int((~bad).sum()), int(bad.sum()), int(lost1.sum())


# complete eager steps tried per short one (closest first): bounds the alignment's work where a
# trace's eager steps run many kernel sequences (batch-dependent GEMMs)
MAX_EAGER_REFS = 8


def _align_short_eager(
    kc: KernelColumns,
    role: np.ndarray,
    group: np.ndarray,
    layer: np.ndarray,
    n_rep: int,
    codes: np.ndarray,
    s1: np.ndarray,
) -> dict[str, int]:
    """Renumber (in place) the layers of the eager steps (groups from ``n_rep``, the window's
    edges already left out) short of layers, as :func:`_align_short_replays` does a replay's.
    An eager step has no graph to say which steps run the same kernels, so its kernel sequence
    (its device's kernels after the step before it, up to its last MLA kernel) tells: a step is
    short where an eager step with more stage-1 kernels (but fewer than twice its own) runs a
    sequence seen more often than its own, or its own is seen once (the rule graph replays
    without a graph id follow, :mod:`mlaprof.importers.step_model`; a drafter's passes, as many
    as the target's steps or more, of a layer or a few, are steps of their own). It is placed
    in the closest such step whose sequence admits it (a tracer loses kernels, never adds or
    reorders them) that is not short itself, by :func:`_place_in_refs`; where none admits it,
    its layers are unknown. Counts as the replays' (none where no eager step is short: the
    usual eager trace reads no kernel here)."""
    e1 = s1[(group[s1] >= n_rep) & (layer[s1] >= 0)]
    if not len(e1):
        return {}
    gids, n1 = np.unique(group[e1], return_counts=True)
    if int(n1.min()) == int(n1.max()):  # the usual eager trace: every step as many layers
        return {}
    start = kc.ints["start_ns"]
    # each eager step's run of kernels: its device's, up to its last MLA kernel ...
    order, g_o, first = step_model.replay_runs(np.flatnonzero(group >= n_rep), group, start)
    ends = np.r_[first[1:], len(order)]
    steps_g = g_o[first]
    cnt = np.zeros(len(steps_g), np.int64)
    at = np.searchsorted(gids, steps_g)
    has = (at < len(gids)) & (gids[np.clip(at, 0, len(gids) - 1)] == steps_g)
    cnt[has] = n1[at[has]]
    dorder, _, dfirst = step_model.replay_runs(np.arange(kc.n), codes, start)
    pos = np.empty(kc.n, np.int64)
    pos[dorder] = np.arange(kc.n)
    p0, p1 = pos[order[first]], pos[order[ends - 1]]
    del pos, order
    # ... back to just after the MLA kernel of the step before it on its device: the kernels
    # before its first layer (a lost first stage-1 kernel's stage 2, which joins no step) place
    # that layer
    last_g = np.maximum.accumulate(np.where(group[dorder] >= 0, np.arange(kc.n), NULL))
    dev0 = dfirst[np.searchsorted(dfirst, p0, side="right") - 1]
    p0 = np.maximum(np.where(p0 > 0, last_g[np.maximum(p0 - 1, 0)], NULL) + 1, dev0)
    del last_g
    lens = p1 - p0 + 1
    heads = np.r_[0, np.cumsum(lens)[:-1]]
    rows = dorder[np.arange(int(lens.sum())) - np.repeat(heads - p0, lens)]
    del dorder
    bounds = np.r_[heads, len(rows)]
    sigs, k_of = step_model.replay_sequences(kc.name_idx[rows], bounds)
    seen = np.bincount(k_of, minlength=len(sigs))
    s1n = np.zeros(len(sigs), np.int64)
    np.maximum.at(s1n, k_of, cnt)
    size = np.array([len(x) for x in sigs], np.int64)
    step_of = np.full(len(sigs), NULL, np.int64)  # a step running each sequence (its first)
    step_of[k_of[::-1]] = np.arange(len(k_of))[::-1]
    # per sequence with fewer layers: the sequences it may be a lossy copy of, closest first
    peers: dict[int, list[int]] = {}
    for i in np.flatnonzero(s1n < s1n.max()).tolist():
        ok = (s1n > s1n[i]) & (s1n < 2 * s1n[i]) & ((seen > seen[i]) | (seen[i] == 1))
        js = np.flatnonzero(ok)
        if len(js):
            peers[i] = js[np.lexsort((js, -seen[js], size[js]))][:MAX_EAGER_REFS].tolist()
    if not peers:
        return {}
    # which of them admit it: every pair placed at once (a fit places every kernel)
    ref_ids = sorted({j for js in peers.values() for j in js})
    ref_no = {j: k for k, j in enumerate(ref_ids)}
    refs = []
    for j in ref_ids:  # a reference: its names, and where its own stage-1 kernels are
        k = int(step_of[j])
        mine = rows[bounds[k] : bounds[k + 1]]
        refs.append((sigs[j], (role[mine] == 1) & (group[mine] == steps_g[k])))
    pairs = [(i, j) for i, js in peers.items() for j in js]
    pair_seq = np.concatenate([sigs[i] for i, _ in pairs])
    pair_len = np.array([size[i] for i, _ in pairs], np.int64)
    fits = np.zeros(len(pairs), bool)
    align_layers(refs, pair_seq, np.r_[0, np.cumsum(pair_len)],
                 np.array([ref_no[j] for _, j in pairs], np.int64), len(kc.names), fits)  # fmt: skip
    admits = {p for p, f in zip(pairs, fits.tolist(), strict=True) if f}
    root = np.arange(len(sigs))
    for i in sorted(peers, key=lambda i: (-size[i], i)):  # longer first: a peer is settled
        root[i] = next((j for j in peers[i] if (i, j) in admits and root[j] == j), NULL)
    # the short steps: aligned to their sequence's root, or unknown where none admits them
    short = np.flatnonzero(np.isin(k_of, list(peers)))
    out = {"eager_steps_missing_layers": len(short), "eager_steps_layers_aligned": 0,
           "eager_steps_layers_unknown": 0, "layers_unknown": 0}  # fmt: skip
    r_of = root[k_of[short]]
    placed, lost = short[r_of >= 0], short[r_of < 0]
    if len(placed):
        sel = np.concatenate([rows[bounds[k] : bounds[k + 1]] for k in placed.tolist()])
        own = group[sel] == np.repeat(steps_g[placed], lens[placed])
        got = _place_in_refs(kc, role, layer, refs, sel, lens[placed],
                             np.array([ref_no[int(j)] for j in r_of[r_of >= 0]], np.int64), own)  # fmt: skip
        out["eager_steps_layers_aligned"], out["eager_steps_layers_unknown"] = got[:2]
        out["layers_unknown"] = got[2]
    if len(lost):
        gone = np.isin(group, steps_g[lost]) & (role >= 1) & (role <= 3)
        layer[gone] = NULL
        out["eager_steps_layers_unknown"] += len(lost)
        out["layers_unknown"] += int(cnt[lost].sum())
    return out


def align_layers(
    refs: list[tuple[np.ndarray, np.ndarray]],
    names: np.ndarray,
    bounds: np.ndarray,
    which: np.ndarray,
    n_names: int,
    whole_out: np.ndarray | None = None,
) -> np.ndarray:
    """Per kernel of the replays ``names[bounds[i]:bounds[i + 1]]`` (name codes below
    ``n_names``, start order), replay i one of graph ``which[i]``: the layer of ``refs[which[i]]``
    (a complete replay's name codes, and where its stage-1 kernels are) that every placement of
    the replay's kernels in it as a subsequence gives the kernel (a tracer loses kernels, never
    adds or reorders them); NULL where placements disagree, or where none exists. A kernel's
    places over all placements span the leftmost greedy placement's to the rightmost's, both
    possible, and the layer never falls with the place: it is decided where the two agree.
    The greedy walks go a kernel place at a time over every replay at once. ``whole_out`` (one per
    replay): set to whether the replay is a subsequence of its graph's at all."""
    n = len(names)
    out = np.full(n, NULL, np.int64)
    if not n:
        return out
    # per graph: the next (previous) place of each of its names from each place, flattened
    nxt, prv, la, lut = [], [], [], np.full((len(refs), n_names), NULL, np.int64)
    nb, lb, width, size = [], [], [], []
    o_t = o_l = 0
    for j, (seq, is1) in enumerate(refs):
        uniq, code = np.unique(seq, return_inverse=True)
        m, k = len(seq), max(len(uniq), 1)
        lut[j, uniq] = np.arange(len(uniq))
        t = np.full((m + 2, k), m, np.int64)  # row p: the first place >= p (m: none)
        t[np.arange(m), code] = np.arange(m)
        nxt.append(np.minimum.accumulate(t[::-1], axis=0)[::-1].ravel())
        t = np.full((m + 2, k), NULL, np.int64)  # row p: the last place < p (-1: none)
        t[np.arange(m) + 1, code] = np.arange(m)
        prv.append(np.maximum.accumulate(t, axis=0).ravel())
        la.append(np.cumsum(is1, dtype=np.int64) - 1)  # the layer at each place
        nb.append(o_t)
        lb.append(o_l)
        width.append(k)
        size.append(m)
        o_t += (m + 2) * k
        o_l += m
    nxt_f, prv_f = np.concatenate(nxt), np.concatenate(prv)
    la_f = np.concatenate(la) if o_l else np.zeros(1, np.int64)
    starts, lens = bounds[:-1], np.diff(bounds)
    rep_of = np.repeat(np.arange(len(lens)), lens)
    code = lut[which[rep_of], names]
    foreign = code < 0  # a name the graph's complete replay never runs: no placement
    code[foreign] = 0
    base, wide, m_r = (np.array(v, np.int64)[which] for v in (nb, width, size))
    by_len = np.argsort(-lens, kind="stable")  # the replays still walking are a prefix
    s_o, l_o, b_o, w_o = starts[by_len], lens[by_len], base[by_len], wide[by_len]
    act = np.searchsorted(-l_o, -np.arange(int(l_o[0]) if len(l_o) else 0))  # lens > i
    left, right = np.empty(n, np.int64), np.empty(n, np.int64)
    cur = np.full(len(lens), NULL, np.int64)
    for i, a in enumerate(act.tolist()):  # leftmost: the first place after the last one
        at = s_o[:a] + i
        cur[:a] = nxt_f[b_o[:a] + (cur[:a] + 1) * w_o[:a] + code[at]]
        left[at] = cur[:a]
    cur = m_r[by_len].copy()
    for i, a in enumerate(act.tolist()):  # rightmost: the last place before the next one
        at = s_o[:a] + l_o[:a] - 1 - i
        cur[:a] = prv_f[b_o[:a] + np.maximum(cur[:a], 0) * w_o[:a] + code[at]]
        right[at] = cur[:a]
    m_k = m_r[rep_of]
    fits = (left < m_k) & (right >= 0) & ~foreign
    whole = np.zeros(len(lens), bool)  # the replay fits its graph: every kernel placed
    some = lens > 0
    whole[some] = np.logical_and.reduceat(fits, starts[some])
    if whole_out is not None:
        whole_out[:] = whole
    lb_k = np.array(lb, np.int64)[which[rep_of]]
    got = la_f[lb_k + np.clip(left, 0, m_k - 1)]
    agree = got == la_f[lb_k + np.clip(right, 0, m_k - 1)]
    keep = whole[rep_of] & agree & (got >= 0)
    out[keep] = got[keep]
    return out


def _trim_edges(
    kc: KernelColumns,
    group: np.ndarray,
    layer: np.ndarray,
    role: np.ndarray,
    n_rep: int,
    plan: Plan,
    graphs: Graphs,
    codes: np.ndarray,
    s1: np.ndarray,
) -> dict[str, int]:
    """Leave out (group and layer NULL, in place) the first and last step of each device where
    the collection window cut it: a replay with fewer kernels than its graph's complete replays,
    or an eager step open on that side (nothing closes it there) with fewer layers than the
    device's fullest eager step. A cut is where tracing started or stopped, never a loss."""
    out = {"first": 0, "last": 0}
    if plan.source == SOURCE_RANGES:  # MLA kernels launched outside the first / last range
        out["first"] = int(plan.outside_ranges.get("before", 0) > 0)
        out["last"] = int(plan.outside_ranges.get("after", 0) > 0)
    g1 = group[s1]  # s1: the stage-1 kernels' indices
    keep = (g1 >= 0) & (layer[s1] >= 0)
    sel, g1 = s1[keep], g1[keep]
    del keep
    if not len(sel):
        return out
    gids, g0, runs, inv = _key_groups(g1, kc.ints["start_ns"][sel])
    if runs is not None:  # groups one after another (a trace in order): their runs
        ends = np.r_[runs[1:], len(sel)]
        nlay = ends - runs
        dev = codes[sel[ends - 1]].astype(np.int64)  # the last kernel's (as assigned below)
    else:
        nlay = np.bincount(inv, minlength=len(gids))
        dev = np.zeros(len(gids), np.int64)
        dev[inv] = codes[sel]
    del g1
    count = graphs.count  # kernels per replay (graph_identity counted them)
    drop: list[int] = []
    for d in np.unique(dev).tolist():
        mine = np.flatnonzero(dev == d)
        mine = mine[np.argsort(g0[mine], kind="stable")]
        eager = mine[gids[mine] >= n_rep]
        fullest = int(nlay[eager].max()) if len(eager) else 0
        for side, i in (("first", mine[0]), ("last", mine[-1])):
            g = int(gids[i])
            if g < n_rep:
                cut = bool(count[g] < graphs.usual[g])
            else:
                is_open = (plan.open_first if side == "first" else plan.open_last).get(d, True)
                is_open = is_open and plan.source != SOURCE_RANGES
                cut = is_open and int(nlay[i]) < fullest
            if cut and g not in drop:
                drop.append(g)
                out[side] += 1
    if drop:  # at most two steps per device: compared (a lookup per kernel costs more)
        gone = group == drop[0]
        for g in drop[1:]:
            gone |= group == g
        group[gone] = NULL
        layer[gone] = NULL
    return out


def _pin_qlen_from_stage2(
    role: np.ndarray,
    group: np.ndarray,
    layer: np.ndarray,
    qlen: np.ndarray,
    grids: _Grids,
    qlut: np.ndarray,
    idx: np.ndarray,
    s1_all: np.ndarray,
) -> dict[str, int]:
    """qlen of each stage-1 kernel from the stage-2 kernel of its layer, where that kernel's
    grid holds it. AITER gluon's stage 1 from v0.1.20 on launches (B, S, ceil(H/16)*qlen), so
    its z is qlen only up to 16 heads; its stage 2 launches (B, H, qlen) in every release
    (``mla_gluon.py``). A layer without stage 2 (S == 1) keeps stage 1's z: counted as
    ``from_stage1`` (exact for the < 16 heads vLLM sends to gluon, ceil(H/16)*qlen above)."""
    out = {"from_stage2": 0, "from_stage1": 0, "stage1_disagrees": 0}
    # among the stage-1 kernels only (a few of the trace's)
    s1 = s1_all[(layer[s1_all] >= 0) & (group[s1_all] >= 0) & (qlen[s1_all] > 0)]
    if not len(s1):
        return out
    g = grids.rows  # every stage-2 kernel among them
    s2, pos2 = grids.subset((role[g] == 2) & (layer[g] >= 0) & (group[g] >= 0))
    q2 = grids.at(qlut, idx, s2, pos2)  # NULL where the name's pattern gives no qlen axis
    s2, q2 = s2[q2 > 0], q2[q2 > 0]
    span = int(layer.max()) + 1
    k1 = group[s1].astype(np.int64) * span + layer[s1]
    if len(s2):
        k2 = group[s2].astype(np.int64) * span + layer[s2]
        order = np.argsort(k2, kind="stable")
        k2, q2 = k2[order], q2[order]
        pos = np.clip(np.searchsorted(k2, k1), 0, len(k2) - 1)
        hit = k2[pos] == k1
        pinned = q2[pos[hit]]
        out["stage1_disagrees"] = int((qlen[s1[hit]] != pinned).sum())
        qlen[s1[hit]] = pinned
        out["from_stage2"] = int(hit.sum())
        out["from_stage1"] = int((~hit).sum())
    else:
        out["from_stage1"] = len(s1)
    return out


def _stage2_heads(
    pats: list[KernelPattern | None],
    role: np.ndarray,
    idx: np.ndarray,
    grids: _Grids,
    hlut: np.ndarray,
) -> dict[str, dict[str, int]]:
    """Per path: the head counts its stage-2 grids show (gluon (B, H, qlen)), with how many
    kernels show each; empty where no stage 2 ran (S == 1 everywhere) or holds no head axis."""
    g = grids.rows  # every stage-2 kernel among them
    # stage 2 with a head axis, per distinct name: one lookup per kernel (role is the name's)
    want = np.array([p is not None and p.role == STAGE2 for p in pats] or [False]) & (hlut >= 0)
    names_g = idx[g]
    s2, pos2 = grids.subset(want[names_g])
    if not len(s2):
        return {}
    names2 = names_g[pos2]
    del names_g
    h = grids.at(hlut, idx, s2, pos2, names2)
    out: dict[str, dict[str, int]] = {}
    # paths as small codes per kernel (an object array of a path per stage-2 kernel and a
    # string comparison per path cost more than the grids), in order of first appearance
    path_names = list(dict.fromkeys(p.path if p else "" for p in pats))
    lut = np.array([path_names.index(p.path if p else "") for p in pats], np.int64)
    pc = lut[names2]
    codes = np.flatnonzero(np.bincount(pc, minlength=len(path_names)))  # a few paths: counted
    # in order of their first kernel
    codes = codes[np.argsort([int(np.argmax(pc == c)) for c in codes.tolist()])]
    for c in codes.tolist():
        vals, counts = _value_counts(h[(pc == c) & (h > 0)])
        if len(vals):
            out[path_names[c]] = {str(int(v)): int(c2) for v, c2 in zip(vals, counts, strict=True)}
    return out


def _value_counts(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(v, return_counts=True)`` for non-negative integers, counted instead of
    sorted where they are small (head counts)."""
    if not len(v) or int(v.min()) < 0 or int(v.max()) > 4 * len(v) + 1024:
        return np.unique(v, return_counts=True)
    bc = np.bincount(v)
    vals = np.flatnonzero(bc)
    return vals.astype(v.dtype), bc[vals]


def _replay_checks(
    replay: np.ndarray,
    step: np.ndarray,
    graphs: Graphs,
    edges: dict[str, int],
    aligned: dict[str, int],
    s1_all: np.ndarray,
) -> dict[str, int]:
    """Replays against the complete replays of their own graph (:func:`step_model.graph_identity`:
    the graph id where the trace has it, else the kernel sequence): a tracer loses dispatches but
    never adds any, so a graph's usual count is the most any of its replays shows. A drafter's
    graph is judged against the drafter's replays, never against the target's. Replays left out
    at the window's edges are counted apart (``edge_partial_steps``), never as losses. The steps
    short of layers are counted by how their layers were numbered (``aligned``:
    :func:`_align_short_replays`; eager steps apart, ``eager_steps_*``:
    :func:`_align_short_eager`)."""
    out = {"replays": 0, "short_replays": 0, "missing_kernels": 0, "expected_kernels": 0,
           "replays_without_mla": 0, "steps_missing_layers": 0,
           "edge_partial_steps": int(edges["first"] + edges["last"]), **aligned}  # fmt: skip
    nrep = len(graphs.count)
    if not nrep or not graphs.count.any():
        return out
    # kernels and stage-1 kernels per replay: graph_identity counted them
    count = graphs.count
    seen = count > 0
    has_mla = graphs.s1 > 0
    # a replay is analysed when its MLA kernels belong to a step (edge replays do not; a short
    # replay whose layers are unknown does)
    r1 = replay[s1_all]
    ms = (step[s1_all] >= 0) & (r1 >= 0)
    per = np.bincount(r1[ms], minlength=nrep)  # stage-1 kernels in a step, per replay
    del r1
    in_step = per > 0
    edge = has_mla & ~in_step
    exp = graphs.usual
    judged = seen & has_mla & ~edge
    out.update(
        replays=int((seen & ~edge).sum()),
        short_replays=int(((count < exp) & judged).sum()),
        missing_kernels=int((exp - count)[judged].sum()),
        expected_kernels=int(exp[judged].sum()),
        replays_without_mla=int((seen & ~has_mla).sum()),
    )
    # MLA steps (graph replays) with fewer layers than their graph's complete replays
    if ms.any():
        want = _graph_layers(graphs)
        out["steps_missing_layers"] = int(((per < want) & judged).sum())
    return out


def _graph_layers(graphs: Graphs) -> np.ndarray:
    """Per replay: the MLA layers of its graph's complete replays (0 where it has none)."""
    if not graphs.layers:
        return np.zeros(len(graphs.canon), np.int64)
    keys = np.array(sorted(graphs.layers), np.int64)
    vals = np.array([graphs.layers[k] for k in keys.tolist()], np.int64)
    at = np.clip(np.searchsorted(keys, graphs.canon), 0, len(keys) - 1)
    return np.where(keys[at] == graphs.canon, vals[at], 0)


def _step_checks(
    steps: dict[str, np.ndarray],
    replay: np.ndarray,
    step: np.ndarray,
    role: np.ndarray,
    plan: Plan,
    graphs: Graphs,
    edges: dict[str, int],
    s1_all: np.ndarray,
) -> dict[str, Any]:
    """How the steps were found, each step's graph (by identity) and the graphs' kinds: the
    analysis reads these (views never re-derive them). Per-step values are run-length coded."""
    kinds = step_model.graph_kinds(graphs.layers)
    graph_of: list[int | None] = []
    if steps:
        lead = np.full(len(steps["step"]), NULL, np.int64)
        s1 = s1_all[step[s1_all] >= 0]
        lead[step[s1][::-1]] = s1[::-1]  # a kernel of each step (any: they share the replay)
        g = np.full(len(lead), NULL, np.int64)
        has = lead >= 0
        g[has] = replay[lead[has]]
        has = g >= 0
        canon = np.zeros(len(lead), np.int64)
        canon[has] = graphs.canon[g[has]]
        graph_of = [c if h else None for c, h in zip(canon.tolist(), has.tolist(), strict=True)]
    mla_graphs = [
        {"graph": g, "kind": kinds[g], "mla_layers": n, "kernels": int(graphs.usual[graphs.canon == g].max()),
         "replays": graphs.replays[g]}
        for g, n in sorted(graphs.layers.items()) if n
    ]  # fmt: skip
    return {
        "source": plan.source,
        "source_text": SOURCE_TEXT[plan.source],
        "graph_identity": graphs.identity,
        "graphs": mla_graphs,
        "other_graphs": sum(1 for n in graphs.layers.values() if not n),
        # bounded: run.json is read by every view (past the cap, graph kinds fall back to the
        # layer rule of mlaprof.analysis.drafter, and the checks say so)
        "graph_by_step": runs if len(runs := rle(graph_of)) <= MAX_STEP_RUNS else None,
        "graph_by_step_runs": len(runs),
        "edge_partial": dict(edges),
        # step bounds idle gaps decided where nothing else bounds the steps (gaps mode: all)
        "gap_breaks": plan.gap_breaks,
    }


def _used_patterns(pats: list[KernelPattern | None], kc: KernelColumns) -> list[dict[str, Any]]:
    """The table rows that matched, with the distinct names each matched (for provenance)."""
    seen: dict[int, dict[str, Any]] = {}
    for nm, p in zip(kc.names, pats, strict=True):
        if p is None:
            continue
        d = seen.setdefault(id(p), {**p.to_dict(), "s_source": p.s_source(), "names": []})
        if len(d["names"]) < 20:
            d["names"].append(nm)
    return list(seen.values())


def _groups(
    keys: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    splits: np.ndarray | None = None,
    flag: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Per distinct key: (key, min start, max end, max splits, how many rows ``flag`` holds
    at), keys ascending."""
    first = step_model.ascending_runs(keys)  # kernels in trace order usually are: no copies
    if first is None:
        order = np.argsort(keys, kind="stable")
        keys, start, end = keys[order], start[order], end[order]
        splits = None if splits is None else splits[order]
        flag = None if flag is None else flag[order]
        first = run_heads(keys)
    lens = np.diff(np.r_[first, len(keys)])
    if len(first) and int(lens.max()) <= SHORT_GROUP:
        t0, t1, sp, flagged = _short_groups(first, lens, start, end, splits, flag)
        return keys[first], t0, t1, sp, flagged
    t0 = np.minimum.reduceat(start, first)
    t1 = np.maximum.reduceat(end, first)
    sp = None if splits is None else np.maximum.reduceat(splits, first)
    flagged = None if flag is None else np.add.reduceat(flag, first, dtype=np.int64)
    return keys[first], t0, t1, sp, flagged


SHORT_GROUP = 4  # rows per group up to which :func:`_short_groups` reduces the groups


def _short_groups(
    first: np.ndarray,
    lens: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    splits: np.ndarray | None,
    flag: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:func:`_groups`'s reductions for groups of a few rows (a layer: its stage-1 kernel and
    its stage 2 / reduce), as whole-array steps over the groups' j-th rows (a group shorter
    than j repeats its last row, which changes no min or max and is not counted), not one
    reduceat call per group."""
    t0, t1 = start[first], end[first]
    sp = None if splits is None else splits[first]
    flagged = None if flag is None else flag[first].astype(np.int64)
    # int32 places (rows < 2**31): the per-row temporaries a quarter of a layer table's size
    small = len(start) < 2**31
    first = first.astype(np.int32) if small else first
    lens = lens.astype(np.int32) if small else lens
    last = first + lens - 1
    for j in range(1, int(lens.max())):
        at = first + j
        np.minimum(at, last, out=at)
        np.minimum(t0, start[at], out=t0)
        np.maximum(t1, end[at], out=t1)
        if sp is not None:
            np.maximum(sp, splits[at], out=sp)  # type: ignore[index]
        if flagged is not None:
            flagged += flag[at] & (lens > j)  # type: ignore[index]
    return t0, t1, sp, flagged


def _runs_of_keys(
    keys: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, None, None] | None:
    """:func:`_groups` of the rows whose key is not negative, found without copying them out:
    the runs of equal keys among all rows, the negative ones left out, where each remaining key
    is one run and they ascend (a trace in order: steps one after another, kernels outside
    any step between them); None where they do not (the caller groups the rows it keeps)."""
    first = run_heads(keys)
    k = keys[first]
    keep = k >= 0
    kk = k[keep]
    if not len(kk) or not (kk[1:] > kk[:-1]).all():
        return None
    t0 = np.minimum.reduceat(start, first)[keep]
    t1 = np.maximum.reduceat(end, first)[keep]
    return kk, t0, t1, None, None


def _stage2_checks(
    summary: ImportSummary,
    steps: dict[str, np.ndarray],
    lstep: np.ndarray,
    splits: np.ndarray,
    closers: np.ndarray,
    step_names: np.ndarray,
    backends: np.ndarray,
) -> None:
    """Per path: layers whose stage 2 / reduce is present or absent, against their S. The
    trace's very last layer never counts as a lost stage 2: tracing may stop before it.
    ``step_names``: per step, its backend's index in ``backends`` (the distinct backends), so
    each distinct one is split once instead of every step's."""
    uniq, first_at, inv = np.unique(step_names, return_index=True, return_inverse=True)
    upath = [str(backends[i]).split(" ", 1)[0] for i in uniq.tolist()]
    # paths in order of their first step: the distinct backends by their first step
    names = list(dict.fromkeys(upath[i] for i in np.argsort(first_at, kind="stable").tolist()))
    code = np.array([names.index(p) for p in upath] or [0], np.int64)[inv.reshape(-1)]
    if not len(code):
        code = np.zeros(1, np.int64)
    # a step's layers are a run of lstep (layer keys ascend): its code looked up once a run
    runs = run_heads(lstep)
    per_run = code[np.searchsorted(steps["step"], lstep[runs])]
    # one path (the usual trace): every layer is its, no per-layer codes nor masks
    one = bool(len(per_run)) and bool((per_run == per_run[0]).all())
    lcode = None if one else np.repeat(per_run, np.diff(np.r_[runs, len(lstep)]))
    last = np.zeros(len(lstep), bool)
    last[-1:] = True  # keys ascend: the last layer of the last step
    out: dict[str, dict[str, int]] = {}
    present = (
        [per_run[0]] if lcode is None else np.flatnonzero(np.bincount(lcode, minlength=len(names)))
    )
    for c in present:
        sel = slice(None) if lcode is None else lcode == c
        sp, cl, lt = splits[sel], closers[sel], last[sel]
        known = sp > 0
        out[names[c]] = {
            "layers": len(sp),
            "s1_without_stage2": int(((sp == 1) & (cl == 0)).sum()),
            "s1_with_stage2": int(((sp == 1) & (cl > 0)).sum()),
            "split_without_stage2": int(((sp > 1) & (cl == 0) & ~lt).sum()),
            "split_with_stage2": int(((sp > 1) & (cl > 0)).sum()),
            "s_unknown_without_stage2": int((~known & (cl == 0)).sum()),
        }
    summary.checks["stage2"] = out


def _derived(
    kc: KernelColumns,
    summary: ImportSummary,
    pats: list[KernelPattern | None],
    step: np.ndarray,
    layer: np.ndarray,
    splits: np.ndarray,
    rows: np.ndarray,
    qlen: np.ndarray,
    role: np.ndarray,
    replay: np.ndarray,
    plan: Plan | None,
    s1_all: np.ndarray,
    in_layer: np.ndarray,
    codes: np.ndarray,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The steps and layers tables as columns. A step's path, variant, batch rows and qlen are
    its first stage-1 kernel's; a layer spans its stage-1 kernel to the end of its last stage-2
    / reduce kernel, and its S is the stage-1 kernel's. An eager step the step model bounded
    spans its whole segment (input preparation to sampling); it ran ``piecewise`` where graph
    launches without MLA kernels (PIECEWISE pieces) lie inside it, else ``eager``."""
    start, end = kc.ints["start_ns"], kc.ints["end_ns"]
    s = (step >= 0) & (role != 4)
    if not s.any():
        return {}, {}
    got = None
    if s.all():  # every kernel in a step (a trace of graph replays): the columns as they are
        got = _groups(step, start, end)
    elif not (role == 4).any():  # the steps as runs among every kernel's, NULL runs left out
        got = _runs_of_keys(step, start, end)
    if got is None:
        got = _groups(step[s], start[s], end[s])
    st, t0, t1, _, _ = got
    del s, got
    s1 = s1_all[step[s1_all] >= 0]
    order, _, first = step_model.replay_runs(s1, step, start)
    # lead: the first stage-1 kernel of every step, steps ascending (== st)
    lead = order[first] if len(s1) else s1
    del order, first
    names = np.array(
        [f"{p.path} {nm}" if p else "" for nm, p in zip(kc.names, pats, strict=True)] or [""],
        dtype=object,
    )
    lead_names = kc.name_idx[lead]
    graph = replay[lead] >= 0
    # a kernel with its own correlation id was launched on its own (eager); without any id the
    # trace cannot tell (graph_mode NULL: "unknown")
    if "correlation" in kc.ints:
        cm = kc.masks.get("correlation")
        eager = ~graph & (True if cm is None else ~cm[lead])
    else:
        eager = np.zeros(len(lead), bool)
    t0, t1 = _segment_spans(kc, plan, lead, graph, replay, role, t0, t1)
    # only an eager step can be piecewise: a trace of graph replays alone skips the search
    piecewise = (
        eager & _holds_pieces(kc, replay, role, lead, t0, t1, codes) if eager.any() else eager
    )
    mode = np.where(
        graph, "graph", np.where(piecewise, "piecewise", np.where(eager, "eager", ""))
    ).astype(object)
    steps = {
        "step": st,
        "t_start_ns": t0,
        "duration_ns": t1 - t0,
        "num_reqs": rows[lead],
        "qlen": qlen[lead],
        "backend": names[lead_names],
        "graph_mode": mode,
        "timing": np.where(graph, "trace-replay", np.where(eager, "trace-eager", "trace")).astype(
            object
        ),
    }

    # the layers' kernels: MLA kernels (stage 1, stage 2, reduce) in a step and a layer, found
    # among the MLA kernels only (a share of the trace)
    m = in_layer & (step >= 0)
    m &= layer >= 0
    m = np.flatnonzero(m)
    if not len(m):
        return steps, {}
    st_m, ly_m = step[m], layer[m]
    width = int(ly_m.max()) + 1
    lkey = st_m.astype(np.int64)
    del st_m
    lkey *= width
    lkey += ly_m
    del ly_m
    # kernels closing each layer (stage 2 / reduce): absent is consistent only when S == 1
    cols = start[m], end[m], splits[m], role[m] >= 2
    del m
    key, l0, l1, sp, closers = _groups(lkey, *cols)
    del cols
    del lkey
    lstep = key // width
    _stage2_checks(summary, steps, lstep, sp, closers, lead_names, names)
    layers = {
        "step": lstep,
        "layer": key % width,
        "t_start_ns": l0,
        "duration_ns": l1 - l0,
        "splits_used": sp,
    }
    return steps, layers


def _segment_spans(
    kc: KernelColumns,
    plan: Plan | None,
    lead: np.ndarray,
    graph: np.ndarray,
    replay: np.ndarray,
    role: np.ndarray,
    t0: np.ndarray,
    t1: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Eager steps widened to their step-model segment, where the segment holds that one eager
    step: from the segment's first kernel (input preparation) to the end of its last MLA kernel
    or graph piece (the forward; the sampler after it is not the step's time, as a FULL
    replay's step is its replay)."""
    if plan is None or plan.seg is None or graph.all():
        return t0, t1
    seg = plan.seg
    ok = seg >= 0
    if not ok.any():
        return t0, t1
    start, end = kc.ints["start_ns"], kc.ints["end_ns"]
    keys, s0, _, _, _ = _groups(seg[ok], start[ok], end[ok])
    mine = seg[lead]
    eager = ~graph & (mine >= 0)
    uniq, cnt = np.unique(mine[eager], return_counts=True)
    alone = np.isin(mine, uniq[cnt == 1]) & eager
    pos = np.searchsorted(keys, mine[alone])
    t0, t1 = t0.copy(), t1.copy()
    t0[alone] = np.minimum(t0[alone], s0[pos])
    piece = ok & (replay >= 0) & ~((role >= 1) & (role <= 3))
    if piece.any():
        pk, _, p1, _, _ = _groups(seg[piece], start[piece], end[piece])
        at = np.clip(np.searchsorted(pk, mine[alone]), 0, len(pk) - 1)
        hit = pk[at] == mine[alone]
        rows = np.flatnonzero(alone)[hit]
        t1[rows] = np.maximum(t1[rows], p1[at[hit]])
    return t0, t1


def _holds_pieces(
    kc: KernelColumns,
    replay: np.ndarray,
    role: np.ndarray,
    lead: np.ndarray,
    t0: np.ndarray,
    t1: np.ndarray,
    codes: np.ndarray,
) -> np.ndarray:
    """Per step: whether a graph launch holding no MLA kernel (a PIECEWISE piece) starts
    inside its span on its device (``codes``: per kernel, :func:`_device_codes`)."""
    reps = np.flatnonzero(replay >= 0)
    if not len(reps) or not len(lead):
        return np.zeros(len(lead), bool)
    nrep = int(replay[reps].max()) + 1
    mla = np.zeros(nrep, bool)
    mla[replay[reps[(role[reps] >= 1) & (role[reps] <= 3)]]] = True
    piece = reps[~mla[replay[reps]]]
    out = np.zeros(len(lead), bool)
    if not len(piece):
        return out
    start = kc.ints["start_ns"]
    for d in np.unique(codes[lead]).tolist():
        t = np.sort(start[piece[codes[piece] == d]])
        rows = np.flatnonzero(codes[lead] == d)
        inside = np.searchsorted(t, t1[rows], side="right") - np.searchsorted(t, t0[rows])
        out[rows] = inside > 0
    return out


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
    numbered = {p.agent_ids for p in parts}
    agent_ids = numbered.pop() if len(numbered) == 1 else MIXED_IDS
    return KernelColumns(list(names), np.concatenate(idx), ints, masks, agent_ids)


def store_kernels(
    bulk: Any,
    kc: KernelColumns,
    matcher: KernelMatcher,
    summary: ImportSummary,
    grid_in_workitems: bool,
    replay: np.ndarray | None = None,
    background: bool = False,
    sums: bool = False,
) -> None:
    """Annotate and store the kernels, then the derived steps and layers; the trace checks are
    stored per rank (the ``trace_checks`` table). ``background``: the kernel file is written by a background
    thread from the moment its columns are final, beside the checks and tables, and the layer
    file after it (the bulk writer's commit waits for both). ``sums``: also store the rank's
    replay-time sums (a fleet's report then reads them instead of joining every kernel again;
    one rank's report joins its kernels in one query, so a single-rank import skips them)."""

    heads: dict[str, np.ndarray] | None = None

    def write(derived: dict[str, np.ndarray]) -> None:
        nonlocal heads
        if sums:  # read before the write hands the parked columns (grids) back
            heads = layer_heads(kc, derived, matcher, grid_in_workitems)
        write_kernels(bulk, kc, summary, derived)
        if background:
            bulk.flush_columnar(wait=False)

    host = HostTrace.read(bulk)
    derived, steps, layers = annotate(kc, matcher, summary, grid_in_workitems, replay, write, host)
    summary.checks["launches"] = _launch_checks(bulk, kc, derived)
    if summary.patterns:
        from mlaprof.store import runmeta

        # which table rows matched and where their S came from (run.json), and this rank's
        # evidence counts (the store's trace_checks table): the analysis cites them (views
        # never re-derive them)
        runmeta.update(bulk.run_dir, kernel_patterns=summary.patterns)
        bulk.write_trace_checks(summary.checks)
    store_derived(bulk, steps, layers, summary)
    if sums:
        store_replay_sums(bulk, kc, derived, layers)
        if heads is not None and hasattr(bulk, "rank"):
            from mlaprof.analysis import replay_sums
            from mlaprof.formats.arrow_numpy import table
            from mlaprof.store import aggregates

            key = {"kernels": kc.n, "workitems": grid_in_workitems}  # the units it divided by
            aggregates.write(bulk, replay_sums.HEADS, table(heads), key)
    if background:
        bulk.flush_columnar(wait=False)


def store_replay_sums(
    bulk: Any, kc: KernelColumns, derived: dict[str, np.ndarray], layers: dict[str, np.ndarray]
) -> None:
    """The rank's replay-time sums (:mod:`mlaprof.analysis.replay_sums`), kept by the store so a
    report does not join every kernel to its layer again."""
    if not hasattr(bulk, "rank") or "start_ns" not in kc.ints or "end_ns" not in kc.ints:
        return
    from mlaprof.analysis import replay_sums

    (start, sm), (end, em) = kc.col("start_ns"), kc.col("end_ns")
    if (sm is not None and sm.any()) or (em is not None and em.any()):
        return  # a kernel without its times: the report's SQL decides what it means
    got = replay_sums.rank_sums(
        kc.name_idx, start, end, derived["step"], derived["replay"], derived["layer"], layers
    )
    if got is None:
        return
    from mlaprof.formats.arrow_numpy import Coded, table  # from buffers: pa.table loads pandas
    from mlaprof.store import aggregates

    steps, hist, key = got
    aggregates.write(bulk, replay_sums.STEPS, table(steps), key)
    name = Coded(kc.names, hist["name_idx"])  # built a name's run of rows at a time
    hist_tab = table({"name": name, "d": hist["d"], "c": hist["c"], "mla": hist["mla"]})
    aggregates.write(bulk, replay_sums.HIST, hist_tab, {})
    per_name = replay_sums.name_totals(kc.names, kc.name_idx, start, end)
    names_tab = table(
        {"name": per_name["name"], "sum_ns": per_name["sum_ns"], "count": per_name["count"]}
    )
    aggregates.write(bulk, replay_sums.NAMES, names_tab, {"kernels": kc.n})


def layer_heads(
    kc: KernelColumns,
    derived: dict[str, np.ndarray],
    matcher: KernelMatcher,
    grid_in_workitems: bool,
) -> dict[str, np.ndarray] | None:
    """The head counts the rank's layered stage-2 / reduce grids show
    (:func:`mlaprof.analysis.replay_sums.layer_head_votes`), for the store to keep so that a
    fleet's report does not scan every kernel for them
    (:func:`mlaprof.analysis.engines.rank_heads`). None off the default kernel table: the
    report matches names with it."""
    from mlaprof.analysis import replay_sums
    from mlaprof.kernel_table import DEFAULT_PATTERNS, heads_axis_of

    if matcher.patterns is not DEFAULT_PATTERNS:
        return None
    axis = _lut([NULL if (a := heads_axis_of(matcher.match(nm))) is None else a for nm in kc.names])

    def take(col: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None] | None:
        return kc.take(col, rows) if col in kc.ints else None

    return replay_sums.layer_head_votes(
        take, kc.name_idx, derived["layer"], axis, grid_in_workitems
    )


def _launch_checks(bulk: Any, kc: KernelColumns, derived: dict[str, np.ndarray]) -> dict[str, int]:
    """Graph launches in the API trace against the kernels: how many MLA replays have their
    launch call, how many launches correlate to no kernel at all."""
    n_api = bulk.execute(f"SELECT COUNT(*) FROM api WHERE {RUNTIME_API_SQL}").fetchone()[0]
    launches = np.array(
        [r[0] for r in bulk.execute(f"SELECT correlation FROM api WHERE {GRAPH_LAUNCH_SQL}")
         if r[0] is not None] or [NULL],
        np.int64,
    )  # fmt: skip
    n_launch = int((launches != NULL).sum())
    out = {"runtime_api_calls": int(n_api), "graph_launches": n_launch}
    if "correlation" not in kc.ints:
        return out
    if not n_launch:  # no API trace: no replay has its launch, no launch lacks kernels
        out.update(mla_replays_with_launch=0, launches_without_kernels=0)
        return out
    corr, cm = kc.col("correlation")
    ok = (derived["replay"] >= 0) & (derived["step"] >= 0)
    if cm is not None:
        ok &= ~cm
    step_corr = np.unique(corr[ok])
    out["mla_replays_with_launch"] = int(np.isin(step_corr, launches).sum())
    all_corr = np.unique(corr if cm is None else corr[~cm])
    lost = launches[(launches != NULL) & ~np.isin(launches, all_corr)]
    # a launch called after every traced kernel's launch (correlation ids count the host's
    # calls) ran where tracing had stopped: the window's end, not a loss
    late = lost > all_corr.max() if len(all_corr) else np.ones(len(lost), bool)
    out["launches_without_kernels"] = int((~late).sum())
    out["launches_past_window_end"] = int(late.sum())
    return out


def write_kernels(
    bulk: Any,
    kc: KernelColumns,
    summary: ImportSummary,
    derived: dict[str, np.ndarray] | None = None,
) -> None:
    """Store kernels as given, with the ``derived`` columns (NULL as -1) beside or over theirs;
    imported kernels are written once, so they go to the run's Parquet side file
    (mlaprof.store.columnar), not row by row into SQLite."""
    derived = derived or {}
    lazy = kc.ints if isinstance(kc.ints, LazyInts) else None
    spilled = [c for c in (lazy.spilled() if lazy else []) if c not in derived]
    numbers = {c: kc.storable(c) for c in kc.ints if c not in derived and c not in spilled}
    numbers.update({c: (a, m if (m := a == NULL).any() else None) for c, a in derived.items()})
    text = {"name": (kc.names, kc.name_idx)}
    spill = (lazy.spill, spilled) if lazy is not None and lazy.spill and spilled else None
    summary.add("kernels", bulk.write_columnar("kernels", kc.n, numbers, text, spill))


def store_derived(
    bulk: Any, steps: dict[str, np.ndarray], layers: dict[str, np.ndarray], summary: ImportSummary
) -> None:
    if steps:
        text_cols = [c for c, a in steps.items() if a.dtype == object]
        nums = {c: a for c, a in steps.items() if c not in text_cols}
        n_steps = len(steps["step"])
        combos = (
            list(zip(*(map(str, steps[c].tolist()) for c in text_cols), strict=True))
            if text_cols
            else [()] * n_steps
        )
        # text columns are constants per insert: one insert per run of steps with the same
        # (path, mode, timing), in step order
        brk = [0, *(i for i in range(1, len(combos)) if combos[i] != combos[i - 1]), len(combos)]
        for a0, a1 in zip(brk[:-1], brk[1:], strict=True):
            sel = slice(a0, a1)
            cols = {c: (a[sel], a[sel] == NULL) for c, a in nums.items()}
            text = {c: v for c, v in zip(text_cols, combos[a0], strict=True) if v}
            summary.add("steps", bulk.insert_columns("steps", cols, int(a1 - a0), text))
    if layers:
        # a trace's layers (tens of thousands per rank) are written once like its kernels: to
        # the rank's Parquet side file, where SQL joins them to the kernels without a copy
        n = len(layers["step"])
        cols = {c: (a, a == NULL) for c, a in layers.items()}
        summary.add("layers", bulk.write_columnar("layers", n, cols))
