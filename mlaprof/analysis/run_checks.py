"""The import's trace checks as the analyzers read them: each rank's own record from the store
(:meth:`mlaprof.store.reader.Run.trace_checks`, the ``trace_checks`` table), and, where a
question is about the whole trace, their sum over ranks, asked for by name (:meth:`RunChecks.fleet`).

The trace adapter gathers them (:mod:`mlaprof.analysis.evidence.trace`); the analyzers decide
what they mean (trust, capture, syncs, collapse). Nothing here reads ``run.json``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from mlaprof.analysis.sections import (
    Stage2Check,
    TraceChecksLaunches,
    TraceChecksQlen,
    TraceChecksReplays,
    TraceChecksSteps,
    TraceGraph,
)
from mlaprof.analysis.sections import TraceChecks as CheckSection
from mlaprof.errors import MlaprofError
from mlaprof.store.trace_checks import RECORDS, SUMMED_RANKS, TraceChecks

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

T = TypeVar("T")


def _record(cls: type[T], items: Mapping[str, Any], where: str) -> T:
    """One check group's items as its section type (an item the type does not declare, or one
    it needs and the import did not record, is one clear error)."""
    try:
        return cls(**items)
    except TypeError as e:
        raise MlaprofError(f"internal: trace check {where!r}: {e}") from None


def step_rows(by_rank: Mapping[int, TraceChecks]) -> list[TraceChecksSteps] | None:
    """Each rank's step checks (how its steps were told apart, each step's graph), typed: one
    row per rank, ranks whose checks are the same in one row that names them; never a sum, nor
    one rank's standing for another's (an older import's sum over its ranks: its own row, whose
    ``ranks`` are None). None: no rank ran the check."""
    rows: dict[tuple[bool, str], tuple[list[int], Mapping[str, Any]]] = {}
    for rank, c in sorted(by_rank.items()):
        g = c.groups.get("steps")
        if g is None:
            continue
        key = (rank == SUMMED_RANKS, json.dumps(g, sort_keys=True, default=str))
        rows.setdefault(key, ([], g))[0].append(rank)
    out = []
    for (summed, _), (ranks, g) in rows.items():
        graphs = [_record(TraceGraph, x, "steps.graphs") for x in g.get("graphs") or []]
        own = None if summed else ranks
        out.append(_record(TraceChecksSteps, {**g, "graphs": graphs, "ranks": own}, "steps"))
    return out or None


def checks_section(
    groups: Mapping[str, Any], steps: list[TraceChecksSteps] | None = None
) -> CheckSection:
    """The store's check groups (check -> item -> count or value), summed over ranks, as the
    trace section's typed checks, with each rank's step checks (``steps``: :func:`step_rows`;
    a summed ``steps`` group is never shown); a group the import did not run is None."""
    known = {"heads", "launches", "qlen", "replays", "stage2", "steps"}
    if set(groups) - known:
        raise MlaprofError(
            f"internal: trace checks mlaprof does not know: {sorted(set(groups) - known)}"
        )
    stage2 = groups.get("stage2")
    return CheckSection(
        heads={str(p): {str(k): int(v) for k, v in h.items()} for p, h in groups["heads"].items()}
        if groups.get("heads") is not None
        else None,
        launches=_record(TraceChecksLaunches, groups["launches"], "launches")
        if groups.get("launches") is not None
        else None,
        qlen=_record(TraceChecksQlen, groups["qlen"], "qlen")
        if groups.get("qlen") is not None
        else None,
        replays=_record(TraceChecksReplays, groups["replays"], "replays")
        if groups.get("replays") is not None
        else None,
        stage2={str(v): _record(Stage2Check, c, f"stage2.{v}") for v, c in stage2.items()}
        if stage2 is not None
        else None,
        steps=steps,
    )


class _Differ:
    """An item that is not a count and differs between ranks (left out of their sum)."""

    def __repr__(self) -> str:
        return "<differs between ranks>"


DIFFER = _Differ()


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def add_counts(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two ranks' checks added up item by item (nested records of counts); an item that is not
    a count (a text, a list) is the ranks' one value where they agree, and :data:`DIFFER` where
    they do not (:func:`agreed` leaves it out: no rank's value stands for another's)."""
    out = dict(a)
    for k, v in b.items():
        if k not in out:
            out[k] = v
            continue
        have = out[k]
        if have is DIFFER:
            continue
        if isinstance(v, Mapping) and isinstance(have, Mapping):
            out[k] = add_counts(have, v)
        elif _count(v) and _count(have):
            out[k] = have + v
        elif v != have:
            out[k] = DIFFER
    return out


def agreed(groups: Mapping[str, Any]) -> dict[str, Any]:
    """``groups`` without the items that differ between ranks (:func:`add_counts`)."""
    return {
        k: agreed(v) if isinstance(v, Mapping) else v for k, v in groups.items() if v is not DIFFER
    }


@dataclass(frozen=True)
class RunChecks:
    """Every rank's trace checks (rank -1: an older import that kept only its ranks' sum)."""

    by_rank: Mapping[int, TraceChecks] = field(default_factory=dict)

    @classmethod
    def of(cls, run: Run) -> RunChecks:
        """The run's checks, read from the store."""
        return cls(run.trace_checks())

    def ranks(self) -> dict[int, TraceChecks]:
        """Each rank's own checks (an older import's sum over ranks is no rank's)."""
        return {r: c for r, c in self.by_rank.items() if r != SUMMED_RANKS}

    def fleet(self) -> TraceChecks:
        """The checks summed over the ranks (rank -1): what a whole-trace verdict counts; an
        item that is no count is there only where every rank that holds it says the same."""
        total: dict[str, Any] = {}
        for _, c in sorted(self.by_rank.items()):
            total = add_counts(total, c.groups)
        return TraceChecks(SUMMED_RANKS, agreed(total))

    def group(self, name: str) -> dict[str, Any]:
        """One check's items summed over the ranks."""
        return self.fleet().group(name)

    def checks_dict(self) -> dict[str, Any]:
        """The checks summed over ranks, the dispatch records left out (the trust verdict
        counts them apart)."""
        return {k: v for k, v in self.fleet().groups.items() if k != RECORDS}

    def section(self, cpu: bool = False) -> CheckSection:
        """The checks as the trace section shows them, typed: the counts summed over ranks
        (:meth:`checks_dict`; the views say so), the step checks each rank's
        (:func:`step_rows`); the launch counts a trace without an API trace cannot know are
        None (:func:`known_launch_checks`)."""
        summed = {k: v for k, v in self.checks_dict().items() if k != "steps"}
        return known_launch_checks(checks_section(summed, step_rows(self.by_rank)), cpu)

    def only(self, rank: int) -> RunChecks:
        """One rank's checks alone (that rank's own verdicts)."""
        mine = self.by_rank.get(rank)
        return RunChecks({rank: mine} if mine is not None else {})

    def __bool__(self) -> bool:
        return any(self.by_rank.values())


def no_launch_evidence(launches: dict[str, Any]) -> str | None:
    """Why the trace cannot count graph launches (None: it can): a kernel trace without any
    HIP/CUDA runtime call holds no launch call to count, and kernels alone do not say which
    launch call made them (a graph's kernels only share a correlation id)."""
    if launches.get("graph_launches") or launches.get("runtime_api_calls"):
        return None
    return (
        "no HIP/CUDA runtime API trace in the import: graph-launch calls are not in the data "
        "(record with rocprofv3 --hip-runtime-trace, or --runtime-trace, beside --kernel-trace)"
    )


def known_launch_checks(checks: TraceChecks, cpu: bool = False) -> TraceChecks:
    """The import's trace checks with the launch counts a trace without an API trace cannot
    know set to None (its kernels' launch calls are not in the data; 0 would read as "none")."""
    launches = checks.launches
    if cpu or launches is None or not no_launch_evidence(dataclasses.asdict(launches)):
        return checks
    unknown = dict.fromkeys(
        ("graph_launches", "launches_without_kernels", "mla_replays_with_launch")
    )
    return dataclasses.replace(checks, launches=dataclasses.replace(launches, **unknown))
