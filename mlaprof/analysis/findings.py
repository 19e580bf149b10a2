"""Findings: what a run shows, with severity, evidence and what to do.

``analyze(run)`` runs one analyzer per question (syncs, splits, padding, capture) over a stored
run's tables and returns the findings sorted by severity (Holistic Trace Analysis' layout).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mlaprof.rank_counts import ranks_of

SEVERITIES = ("critical", "warning", "info")


@dataclass
class Finding:
    kind: str  # sync | alloc | split-collapse | split-frozen | padding | capture | memory | timing
    # | path-check (another verify path on the run's metadata, never a sync of the run) | ...
    severity: str  # critical | warning | info
    title: str  # one line
    evidence: str  # numbers that back it
    fix: str  # what to do
    layer: int | None = None
    location: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    unreliable: bool = False  # drawn from a trace that lost records (see the trust finding)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self.severity)


def fold_ranks(findings: list[Finding], ranks: int) -> list[Finding]:
    """One finding per distinct statement: the same finding from several ranks becomes one that
    names them (``data["ranks"]``); findings that differ between ranks stay apart, each naming
    its ranks, so ranks that disagree are never merged. Single-rank runs are left as they are."""
    if ranks <= 1:
        return findings
    out: list[Finding] = []
    index: dict[tuple, Finding] = {}
    for f in findings:
        if "rank" not in f.data or f.data["rank"] is None:
            out.append(f)
            continue
        key = (f.kind, f.severity, f.title, f.evidence, f.fix, f.layer, f.location)
        if key in index:
            index[key].data["ranks"].append(f.data["rank"])
            continue
        data = {k: v for k, v in f.data.items() if k != "rank"}
        data["ranks"] = [f.data["rank"]]
        g = Finding(f.kind, f.severity, f.title, f.evidence, f.fix, f.layer, f.location, data,
                    f.unreliable)  # fmt: skip
        index[key] = g
        out.append(g)
    for g in index.values():
        g.title = f"{g.title} [{ranks_of(g.data['ranks'], ranks)}]"
    return out
