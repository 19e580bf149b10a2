"""Findings: what a run shows, with severity, evidence and what to do.

``analyze(run)`` runs one analyzer per question (syncs, splits, padding, capture) over a stored
run's tables and returns the findings sorted by severity (Holistic Trace Analysis' layout).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("critical", "warning", "info")


@dataclass
class Finding:
    kind: str  # sync | alloc | split-collapse | split-frozen | padding | capture | memory | timing
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
