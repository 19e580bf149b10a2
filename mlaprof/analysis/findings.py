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


# the findings that describe the verify path the run ran (its syncs, its capture and the
# capture's memory): true of that path, said on it where the run's vLLM route is another
PATH_KINDS = frozenset({"sync", "alloc", "h2d", "capture-error", "capture", "memory"})


def on_purpose(what: str, why: str = "") -> str:
    """The one note a finding's title ends with where the run models, on purpose, what its
    vLLM version does not run (a pre-fix rule, a path off the route): " [<what>, modelled on
    purpose]", then ``why`` after a colon where given."""
    return f" [{what}, modelled on purpose" + (f": {why}" if why else "") + "]"


def off_route_note(backend: str, route_path: str, version: str) -> str:
    """The condition the findings of a backend whose path is not the route vLLM ``version``
    takes hold on (:func:`on_purpose`): the legacy flat path, or the native 4-D entry."""
    ran = (
        "on the legacy flat path"
        if backend == "legacy-flat"
        else (f"on the native 4-D entry ({backend} backend)")
    )
    return on_purpose(ran, f"not vLLM {version}'s route for this configuration ({route_path})")


def on_path(findings: list[Finding], note: str) -> list[Finding]:
    """``findings`` with ``note`` (:func:`off_route_note`; "" where the route runs the path)
    after the title of each that describes the path the run ran (:data:`PATH_KINDS`)."""
    for f in findings:
        if note and f.kind in PATH_KINDS and not f.title.endswith(note):
            f.title += note
    return findings


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
