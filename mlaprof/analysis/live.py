"""The live path: the rows a run's databases committed since the last poll
(:class:`mlaprof.store.follow.RunFollow`), folded into a provisional summary with the same rules
as the full analysis.

:class:`LiveFold` keeps the committed rows per table (appended per poll: a poll reads only what
arrived). :meth:`LiveFold.provisional` hands them, as a :class:`FoldedRun` shaped like
:class:`mlaprof.store.reader.Run`, to the very code the full pass runs
(:func:`mlaprof.analysis.run_summary.build_summary`: the run kind's evidence adapter, every
analyzer): medians, the collapse rule, padding totals, syncs checked vs not checked are the
analyzers' own, never re-implemented here. The result is a :class:`RunSummary`, marked
provisional in :class:`LiveSummary` until the full pass (which re-reads the whole run) replaces
it. Cross-process checks compare only what both sides committed
(:mod:`mlaprof.analysis.consistency`).

Only the per-step series the dashboard draws (its sparkline and recent-step statistics) and the
rows of one chosen step are computed here, from the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mlaprof.analysis.evidence import folds_live
from mlaprof.store.liveness import (
    EXPORTED_REASON,
    EXPORTED_STATUS,
    process_run_status,
    run_reason,
)
from mlaprof.store.schema import columns

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.analysis.sections import LayerRow
    from mlaprof.store.follow import Rows

Key = tuple[int, str]  # (rank, role) of a database (mlaprof.store.follow.Key)

# the tables the analyzers read (mlaprof.analysis.evidence.common.TABLES)
FOLDED = ("syncs", "captures", "memory", "splits", "padding", "steps", "layers", "events")
WINDOW = 512  # recent steps of the dashboard's sparkline and recent-step statistics


@dataclass(frozen=True)
class StepSeries:
    """One rank's latest step times (ms, oldest first) and their statistics (None: no step)."""

    rank: int
    values_ms: tuple[float, ...]
    last: float | None
    p50: float | None
    p90: float | None
    min: float | None
    max: float | None
    timing: str | None  # how the latest step was timed (steps.timing)


@dataclass(frozen=True)
class LiveSummary:
    """What the dashboard draws at one moment: the run's summary (``None`` until one could be
    made: ``note`` says why), whether it is the provisional fold of the committed rows or the
    full pass, and the step series and row counts no summary section holds."""

    summary: RunSummary | None
    provisional: bool
    note: str
    meta: dict[str, Any]
    status: str
    statuses: dict[tuple[int, str], str]
    rows: dict[str, int]  # committed rows per table, all databases
    series: dict[int, StepSeries] = field(default_factory=dict)
    rank_rows: dict[int, int] = field(default_factory=dict)  # committed rows per rank
    step_ids: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # False until the analysis told the run's steps apart (:func:`steps_decided`): ``series``
    # and ``step_ids`` are then empty and the views say "analysing", never a count
    steps_decided: bool = True

    @property
    def ranks(self) -> list[int]:
        return sorted({r for r, _ in self.statuses})


class FoldedRun:
    """The committed rows of a run, shaped like :class:`mlaprof.store.reader.Run` for the
    evidence adapters and the summary (``meta``, ``name``, ``status``, ``reason``, ``ranks``,
    ``databases``, ``table``, ``rank_meta``)."""

    def __init__(self, fold: LiveFold) -> None:
        self._fold = fold
        self.meta = fold.meta
        self.name = fold.name
        self.status = fold.status
        self.reason = fold.reason
        self.ranks = fold.ranks
        self.databases = sorted(fold.statuses)

    def table(self, name: str) -> pd.DataFrame:
        return self._fold.frame(name)

    def rank_meta(self, rank: int, role: str = "") -> dict[str, str]:
        """The part of a database's ``meta`` the fold keeps (its card, its rank's rule:
        mlaprof.store.follow.KEPT_META)."""
        return dict(self._fold.kept.get((rank, role), {}))


class LiveFold:
    """The rows committed so far, per table, all databases of one run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.meta: dict[str, Any] = {"name": name}
        self.statuses: dict[tuple[int, str], str] = {}
        # a database's meta the analysis reads (its device_name, ...: follow.KEPT_META)
        self.kept: dict[tuple[int, str], dict[str, str]] = {}
        self._ends: dict[tuple[int, str], tuple[str | None, bool]] = {}
        # per table and database, its batches in rowid order: read back in the reader's order
        # (databases by rank and role, each in rowid order), which rules like "the last record
        # of a layer" depend on
        self._parts: dict[str, dict[Key, list[pd.DataFrame]]] = {t: {} for t in FOLDED}
        self._whole: dict[str, pd.DataFrame] = {}
        self.rows: dict[str, int] = {}
        self.rank_rows: dict[int, int] = {}  # a rank's own records (the dashboard's rank view)
        self.version = 0  # bumped by every fold: a summary is stale when it is older
        # a run without any database yet: its status as the reader judges it (starting, failed,
        # abandoned: mlaprof.store.liveness.empty_run); None: not judged (no run.json yet)
        self.empty: str | None = None

    # -- folding -------------------------------------------------------------------------------
    def add(self, batch: Rows) -> None:
        """Fold one batch of committed rows (of a table outside :data:`FOLDED`: its count)."""
        if not batch.count:
            return
        self.rows[batch.table] = self.rows.get(batch.table, 0) + batch.count
        rank = batch.key[0]
        self.rank_rows[rank] = self.rank_rows.get(rank, 0) + batch.count
        if batch.table in self._parts and not batch.frame.empty:
            self._parts[batch.table].setdefault(batch.key, []).append(batch.frame)
            self._whole.pop(batch.table, None)
        self.version += 1

    def set_status(
        self,
        key: Key,
        status: str,
        reason: str | None = None,
        drained: bool = False,
        meta: Mapping[str, str] | None = None,
    ) -> bool:
        """Record a database's status (and why it ended, whether it drained, the part of its
        meta the analysis reads: the card its rank measured on, ...); True when it changed."""
        kept = dict(meta) if meta is not None else self.kept.get(key, {})
        changed = (
            self.statuses.get(key) != status
            or self._ends.get(key) != (reason, drained)
            or self.kept.get(key, {}) != kept
        )
        self.statuses[key] = status
        self._ends[key] = (reason, drained)
        self.kept[key] = kept
        self.version += int(changed)
        return changed

    def set_empty(self, status: str) -> bool:
        """Record the status of a run that has run.json and no database yet (the reader's
        judgement: :func:`mlaprof.store.liveness.empty_run`); True when it changed."""
        changed = self.empty != status
        self.empty = status
        self.version += int(changed)
        return changed

    @property
    def reason(self) -> str | None:
        """The reader's rule (:func:`mlaprof.store.liveness.run_reason`)."""
        return run_reason(
            [
                (k[1], *self._ends.get(k, (None, False)), s)
                for k, s in sorted(self.statuses.items())
            ],
            self.meta.get("status"),
            self.meta.get("reason"),
            self.meta.get(EXPORTED_STATUS),
            self.meta.get(EXPORTED_REASON),
        )

    @property
    def ranks(self) -> list[int]:
        return sorted({r for r, _ in self.statuses})

    @property
    def status(self) -> str:
        """The reader's rule (:func:`mlaprof.store.liveness.process_run_status`)."""
        if not self.statuses:  # no database yet: as the reader judged the folder, else waiting
            return self.empty or "waiting"
        return process_run_status(
            [(role, s) for (_, role), s in sorted(self.statuses.items())],
            self.meta.get("status"),
            self.meta.get(EXPORTED_STATUS),
        )

    def frame(self, table: str) -> pd.DataFrame:
        """Every committed row of ``table`` so far (one concatenation per fold, cached)."""
        got = self._whole.get(table)
        if got is None:
            by_db = self._parts[table]
            parts = [p for key in sorted(by_db) for p in by_db[key] if len(p)]
            got = (
                pd.concat(parts, ignore_index=True)
                if len(parts) > 1
                else parts[0]
                if parts
                else pd.DataFrame(columns=list(columns(table)))
            )
            for key, ps in by_db.items():  # one frame per database from now on
                if len(ps) > 1:
                    by_db[key] = [pd.concat(ps, ignore_index=True)]
            self._whole[table] = got
        return got

    def snapshot(self) -> LiveFold:
        """The rows folded so far, frozen: a summary of it can be built while folding goes on
        (the frames are never changed in place; a later fold makes new ones)."""
        snap = LiveFold(self.name)
        snap.meta = dict(self.meta)
        snap.statuses = dict(self.statuses)
        snap.kept = dict(self.kept)
        snap._ends = dict(self._ends)
        snap.rows = dict(self.rows)
        snap.rank_rows = dict(self.rank_rows)
        snap.version = self.version
        snap.empty = self.empty
        snap._whole = {t: self.frame(t) for t in FOLDED}
        return snap

    # -- summaries -----------------------------------------------------------------------------
    def provisional(self) -> tuple[RunSummary | None, str]:
        """``(summary, "")`` of the rows committed so far, by the full analysis' code, or
        ``(None, why)`` where the run's kind needs the full pass or no row is in yet."""
        from mlaprof.analysis.run_summary import build_summary

        foldable, why = folds_live(self.meta)
        if not foldable:
            return None, why
        if not self.statuses:
            return None, "waiting for the first records"
        return build_summary(FoldedRun(self)), ""  # type: ignore[arg-type]

    def live_summary(
        self, summary: RunSummary | None, provisional: bool, note: str = ""
    ) -> LiveSummary:
        """``summary`` with the step series and row counts the dashboard draws beside it."""
        decided = steps_decided(self.meta, summary)
        counted = verify_steps(self.frame("steps"), summary) if decided else pd.DataFrame()
        return LiveSummary(
            summary=summary,
            provisional=provisional,
            note=note,
            meta=dict(self.meta),
            status=self.status,
            statuses=dict(self.statuses),
            rows=dict(self.rows),
            rank_rows=dict(self.rank_rows),
            series=step_series(counted),
            step_ids=step_ids(counted),
            steps_decided=decided,
        )

    def step_layers(
        self, step: int, rank: int | None, summary: RunSummary | None = None
    ) -> list[LayerRow]:
        """The analysis' layer rows (:func:`mlaprof.analysis.layers.layer_table`) of one step,
        per rank (``rank``: that rank's only), typed as the summary's. ``summary``: the run's
        (an imported trace's, whose host-sync check is its sync count: the step's layers read
        that check's counts, :mod:`mlaprof.analysis.step_syncs`); a live run's rows are the
        probe's, folded as they arrive."""
        from mlaprof.analysis.layers import layer_table
        from mlaprof.analysis.step_syncs import fill_host_syncs, host_sync_rows
        from mlaprof.analysis.syncs import counted_by_host, fill_layer_syncs

        run = FoldedRun(self)
        ly, sy = run.table("layers"), run.table("syncs")
        pick = ly["step"] == step
        if rank is not None:
            pick &= ly["rank"] == rank
        if not pick.any():
            return []
        syn = sy[(sy["step"] == step) & ((sy["rank"] == rank) if rank is not None else True)]
        lay = fill_layer_syncs(ly[pick], syn)  # the one sync-counting rule (analysis.syncs)
        trace = summary.trace if summary is not None else None
        # an import is never live: its host check's counts, decided as the summary's count
        host = counted_by_host(ly, sy, trace.syncs) if trace is not None else None
        if host is not None:
            lay = fill_host_syncs(lay, host, verify_steps(self.frame("steps"), summary))
            mine = host_sync_rows(host)
            mine = mine[(mine["step"] == step) & ((mine["rank"] == rank) if rank is not None
                                                  else True)]  # fmt: skip
            syn = pd.concat([syn, mine], ignore_index=True) if not mine.empty else syn
        return layer_table(lay, syn)


def left_out_steps(summary: RunSummary | None) -> list[tuple[int, int]]:
    """``(rank, step)`` of every committed step the summary leaves out of the run's steps, as
    its sections name them: an imported trace's start-up warm-ups (``trace.capture_phase``,
    each rank's ``warmup_step_ids``) and its drafter's passes (``trace.drafter.pass_steps``).
    The trace adapter (:func:`mlaprof.analysis.evidence.trace.trace_evidence`) decides both;
    every analyzer, and so the report, sees the other steps only."""
    trace = summary.trace if summary is not None else None
    if trace is None:
        return []
    out = [(r.rank, s) for r in (trace.capture_phase.ranks if trace.capture_phase else [])
           for s in r.warmup_step_ids]  # fmt: skip
    if trace.drafter is not None:
        out += [(r, s) for r, ids in trace.drafter.pass_steps.items() for s in ids]
    return out


def steps_decided(meta: dict[str, Any], summary: RunSummary | None) -> bool:
    """Whether the committed steps can be counted as the report counts them: once a summary
    is in, or from the first row for a run whose analysis leaves no committed step out (its
    evidence is its rows alone: a scenario or engine run). An imported trace's warm-ups and
    drafter passes are told apart by its full pass only: until it lands, no count."""
    return summary is not None or folds_live(meta)[0]


def verify_steps(steps: pd.DataFrame, summary: RunSummary | None) -> pd.DataFrame:
    """The committed steps the summary counts as the run's steps: every one but those it left
    out (:func:`left_out_steps`: an imported trace's warm-ups and drafter passes), as the report
    leaves them out. Steps newer than the summary stay in until the next one decides them (an
    import, whose steps wait for the full pass, lands whole: :func:`steps_decided`)."""
    gone = left_out_steps(summary)
    if steps.empty or not gone:
        return steps
    passes = pd.MultiIndex.from_tuples(gone, names=["rank", "step"])
    mine = pd.MultiIndex.from_arrays(
        [pd.to_numeric(steps["rank"]), pd.to_numeric(steps["step"])], names=["rank", "step"]
    )
    return steps[~mine.isin(passes)]


def step_series(steps: pd.DataFrame, window: int = WINDOW) -> dict[int, StepSeries]:
    """Per rank, its latest ``window`` served step times (the summary's median step's steps:
    :func:`mlaprof.analysis.timing.served_steps`, profiled steps left out) and their
    statistics."""
    from mlaprof.analysis.timing import served_steps

    out: dict[int, StepSeries] = {}
    if steps.empty:
        return out
    steps = served_steps(steps, pd.DataFrame())[0]
    for rank, g in steps.groupby("rank", sort=True):
        tail = g.tail(window)
        ms = pd.to_numeric(tail["duration_ns"], errors="coerce").dropna().to_numpy() / 1e6
        timing = tail["timing"].dropna()
        out[int(rank)] = StepSeries(
            rank=int(rank),
            values_ms=tuple(float(x) for x in ms),
            last=float(ms[-1]) if len(ms) else None,
            p50=float(np.median(ms)) if len(ms) else None,
            p90=float(np.quantile(ms, 0.9, method="nearest")) if len(ms) else None,
            min=float(ms.min()) if len(ms) else None,
            max=float(ms.max()) if len(ms) else None,
            timing=str(timing.iloc[-1]) if len(timing) else None,
        )
    return out


def step_ids(steps: pd.DataFrame) -> dict[int, tuple[int, ...]]:
    """Per rank, its step ids in the order they were committed."""
    if steps.empty:
        return {}
    return {int(r): tuple(int(s) for s in g["step"]) for r, g in steps.groupby("rank", sort=True)}
