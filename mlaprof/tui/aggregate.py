"""Incremental aggregates of a followed run, one :class:`RankState` per rank.

The store's follower (:mod:`mlaprof.store.follow`) hands out rows already grouped per new rowid
range, so the cost of a refresh depends on what arrived, not on the run's size. Verdicts (what
counts as a collapse, the padding waste) come from :mod:`mlaprof.analysis`.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlaprof.analysis.splits import is_collapsed
from mlaprof.store.follow import PADDING_SUMS, RECENT, Batch

WINDOW = RECENT  # recent steps kept for the sparkline and the recent-latency percentiles


@dataclass
class LayerAgg:
    rows: int = 0
    total_ns: int = 0
    syncs: int = 0
    collapsed: int = 0  # layer-steps whose S is a collapse (mlaprof.analysis.splits)
    used: int | None = None  # latest
    deserved: int | None = None


@dataclass
class SplitAgg:
    rows: int = 0
    collapsed: int = 0
    min_used: int | None = None
    max_used: int | None = None
    last: dict[str, Any] = field(default_factory=dict)


def _opt(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    """``pick(a, b)`` where both are known, else whichever is."""
    return b if a is None else a if b is None else pick(a, b)


@dataclass
class RankState:
    """Aggregates of one rank's database."""

    steps: int = 0
    step_ns_sum: int = 0
    step_ns_min: int | None = None
    step_ns_max: int | None = None
    recent: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=WINDOW))
    step_ids: array = field(default_factory=lambda: array("q"))
    modes: dict[str, int] = field(default_factory=dict)
    last_step: dict[str, Any] = field(default_factory=dict)
    layers: dict[int, LayerAgg] = field(default_factory=dict)
    layer_rowids: dict[int, tuple[int, int]] = field(default_factory=dict)  # step -> rowid range
    syncs: dict[tuple[Any, ...], list[Any]] = field(
        default_factory=dict
    )  # key -> [n, step, detail]
    splits: dict[tuple[int, str], SplitAgg] = field(default_factory=dict)
    padding: dict[int, list[int]] = field(default_factory=dict)  # capture size -> sums
    memory: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    captures: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # rows per table
    status: str = "waiting"

    def add(self, b: Batch) -> None:
        """Merge one batch of the store's follower."""
        self.counts[b.table] = self.counts.get(b.table, 0) + b.count
        g = b.groups
        if b.table == "steps":
            self.add_steps(g["agg"], g["tail"])
            self.add_modes(g["modes"])
            self.step_ids.extend(g["step_ids"])
        elif b.table == "layers":
            self.add_layers(g["sums"], g["splits"], g["last"])
            self.add_layer_rowids(g["rowids"])
        elif b.table == "syncs":
            self.add_syncs(g["sites"])
        elif b.table == "splits":
            self.add_splits(g["pairs"], g["last"])
        elif b.table == "padding":
            self.add_padding(g["sums"])
        elif b.table in ("memory", "captures"):
            dest = getattr(self, b.table)
            for row in g["rows"]:
                row.pop("rank", None)
                dest[(row.get("capture_size"), row.get("graph_mode"))] = row

    # -- merging grouped rows ------------------------------------------------------------------
    def add_steps(self, agg: tuple[int, int, int, int], tail: list[tuple[Any, ...]]) -> None:
        n, total, lo, hi = agg
        if not n:
            return
        self.steps += n
        self.step_ns_sum += total or 0
        self.step_ns_min = _opt(min, self.step_ns_min, lo)
        self.step_ns_max = _opt(max, self.step_ns_max, hi)
        for step, dur, *_ in tail:
            self.recent.append((step, dur or 0))
        if tail:
            s, d, mode, reqs, real, padded, backend, timing = tail[-1]
            self.last_step = {
                "step": s,
                "duration_ns": d,
                "graph_mode": mode,
                "num_reqs": reqs,
                "num_real_reqs": real,
                "padded_tokens": padded,
                "backend": backend,
                "timing": timing,
            }

    def add_modes(self, rows: list[tuple[str, int]]) -> None:
        for mode, n in rows:
            key = mode or "?"
            self.modes[key] = self.modes.get(key, 0) + n

    def add_layers(
        self,
        sums: list[tuple[Any, ...]],
        pairs: list[tuple[Any, ...]],
        last: list[tuple[Any, ...]],
    ) -> None:
        for layer, n, total, syncs in sums:
            a = self.layers.setdefault(layer, LayerAgg())
            a.rows += n
            a.total_ns += total or 0
            a.syncs += syncs or 0
        for layer, used, deserved, n in pairs:
            a = self.layers.setdefault(layer, LayerAgg())
            a.collapsed += n if is_collapsed(used, deserved) else 0
        for layer, used, deserved in last:
            a = self.layers.setdefault(layer, LayerAgg())
            a.used, a.deserved = used, deserved

    def add_layer_rowids(self, rows: list[tuple[int, int, int]]) -> None:
        for step, lo, hi in rows:
            old = self.layer_rowids.get(step)
            self.layer_rowids[step] = (
                (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
            )

    def add_syncs(self, rows: list[tuple[Any, ...]]) -> None:
        for layer, kind, op, loc, fn, n, first, detail in rows:
            key = (layer, kind, op, loc, fn)
            cur = self.syncs.get(key)
            if cur is None:
                self.syncs[key] = [n, first, detail]
            else:
                cur[0] += n
                cur[1] = _opt(min, cur[1], first)

    def add_splits(self, pairs: list[tuple[Any, ...]], last: list[dict[str, Any]]) -> None:
        for size, policy, used, deserved, n in pairs:
            a = self.splits.setdefault((size, policy), SplitAgg())
            a.rows += n
            a.collapsed += n if is_collapsed(used, deserved) else 0
            if used is not None:
                a.min_used = _opt(min, a.min_used, used)
                a.max_used = _opt(max, a.max_used, used)
        for row in last:
            self.splits.setdefault((row["capture_size"], row["policy"]), SplitAgg()).last = row

    def add_padding(self, rows: list[tuple[Any, ...]]) -> None:
        for size, *sums in rows:
            cur = self.padding.setdefault(size, [0] * len(sums))
            for i, v in enumerate(sums):
                cur[i] += v or 0


def merge_ranks(states: list[RankState]) -> RankState:
    """Aggregate several ranks into one (sums; latest values from the highest rank wins)."""
    if len(states) == 1:
        return states[0]
    out = RankState()
    for s in states:
        out.steps += s.steps
        out.step_ns_sum += s.step_ns_sum
        out.step_ns_min = _opt(min, out.step_ns_min, s.step_ns_min)
        out.step_ns_max = _opt(max, out.step_ns_max, s.step_ns_max)
        out.add_modes(list(s.modes.items()))
        out.last_step = s.last_step or out.last_step
        for k, a in s.layers.items():
            b = out.layers.setdefault(k, LayerAgg())
            b.rows += a.rows
            b.total_ns += a.total_ns
            b.syncs += a.syncs
            b.collapsed += a.collapsed
            b.used = a.used if b.used is None else min(b.used, a.used or b.used)
            b.deserved = a.deserved if b.deserved is None else max(b.deserved, a.deserved or 0)
        for k, v in s.syncs.items():
            cur = out.syncs.setdefault(k, [0, v[1], v[2]])
            cur[0] += v[0]
        for k, a in s.splits.items():
            b = out.splits.setdefault(k, SplitAgg())
            b.rows += a.rows
            b.collapsed += a.collapsed
            b.min_used = _opt(min, b.min_used, a.min_used)
            b.max_used = _opt(max, b.max_used, a.max_used)
            b.last = a.last or b.last
        out.add_padding([(k, *v) for k, v in s.padding.items()])
        out.memory.update(s.memory)
        out.captures.update(s.captures)
        for k, n in s.counts.items():
            out.counts[k] = out.counts.get(k, 0) + n
    # the step series of the aggregate: rank 0's (steps are lock-step across ranks)
    out.recent = states[0].recent
    out.step_ids = states[0].step_ids
    return out


__all__ = ["PADDING_SUMS", "LayerAgg", "RankState", "SplitAgg", "merge_ranks"]
