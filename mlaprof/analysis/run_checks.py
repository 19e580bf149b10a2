"""The import's trace checks as the analyzers read them: each rank's own record from the store
(:meth:`mlaprof.store.reader.Run.trace_checks`, the ``trace_checks`` table), and, where a
question is about the whole trace, their sum over ranks, asked for by name (:meth:`RunChecks.fleet`).

The trace adapter gathers them (:mod:`mlaprof.analysis.evidence.trace`); the analyzers decide
what they mean (trust, capture, syncs, collapse). Nothing here reads ``run.json``.
"""

from __future__ import annotations

import dataclasses
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


def checks_section(groups: Mapping[str, Any]) -> CheckSection:
    """The store's check groups (check -> item -> count or value) as the trace section's typed
    checks; a group the import did not run is None."""
    known = {"heads", "launches", "qlen", "replays", "stage2", "steps"}
    if set(groups) - known:
        raise MlaprofError(
            f"internal: trace checks mlaprof does not know: {sorted(set(groups) - known)}"
        )
    steps = groups.get("steps")
    if steps is not None:
        graphs = [_record(TraceGraph, g, "steps.graphs") for g in steps.get("graphs") or []]
        steps = _record(TraceChecksSteps, {**steps, "graphs": graphs}, "steps")
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


def add_counts(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two ranks' checks added up item by item (nested records of counts); an item that is not
    a count (a text, a list) is the later rank's."""
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = add_counts(out[k], v)
        elif isinstance(v, int) and isinstance(out.get(k), int):
            out[k] = out[k] + v
        else:
            out[k] = v
    return out


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
        """The checks summed over the ranks (rank -1): what a whole-trace verdict counts."""
        total: dict[str, Any] = {}
        for _, c in sorted(self.by_rank.items()):
            total = add_counts(total, c.groups)
        return TraceChecks(SUMMED_RANKS, total)

    def group(self, name: str) -> dict[str, Any]:
        """One check's items summed over the ranks."""
        return self.fleet().group(name)

    def checks_dict(self) -> dict[str, Any]:
        """The checks summed over ranks, the dispatch records left out (the trust verdict
        counts them apart): the ``checks`` the trace section shows."""
        return {k: v for k, v in self.fleet().groups.items() if k != RECORDS}

    def section(self, cpu: bool = False) -> CheckSection:
        """The checks summed over ranks as the trace section shows them (:meth:`checks_dict`),
        typed; the launch counts a trace without an API trace cannot know are None
        (:func:`known_launch_checks`)."""
        return known_launch_checks(checks_section(self.checks_dict()), cpu)

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
