"""The import's trace checks as the analyzers read them: each rank's own record from the store
(:meth:`mlaprof.store.reader.Run.trace_checks`, the ``trace_checks`` table), and, where a
question is about the whole trace, their sum over ranks, asked for by name (:meth:`RunChecks.fleet`).

The trace adapter gathers them (:mod:`mlaprof.analysis.evidence.trace`); the analyzers decide
what they mean (trust, capture, syncs, collapse). Nothing here reads ``run.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlaprof.store.trace_checks import RECORDS, SUMMED_RANKS, TraceChecks

if TYPE_CHECKING:
    from mlaprof.store.reader import Run


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

    def only(self, rank: int) -> RunChecks:
        """One rank's checks alone (that rank's own verdicts)."""
        mine = self.by_rank.get(rank)
        return RunChecks({rank: mine} if mine is not None else {})

    def __bool__(self) -> bool:
        return any(self.by_rank.values())
