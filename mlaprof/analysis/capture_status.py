"""The one capture vocabulary every producer's verdict is stated in (scenario runs, engines,
imported traces and logs), and the one rule for "no FULL graph serves these steps"."""

from __future__ import annotations

from enum import StrEnum


class CaptureStatus(StrEnum):
    """What the evidence says about graph capture, for every producer."""

    CAPTURED = "captured"  # a FULL graph was captured (measured)
    FAILED = "failed"  # a capture was attempted and failed (measured)
    DOWNGRADED = "downgraded"  # the engine ran a lesser graph mode than asked (its log says why)
    PREDICTED_FAIL = "predicted-fail"  # a sync inside the region would fail capture (modelled)
    PREDICTED_OK = "predicted-ok"  # nothing seen that would fail capture (modelled)
    NOT_ATTEMPTED = "not-attempted"  # FULL graphs were not asked for
    REPLAYED = "replayed"  # steps replayed in a graph (a trace's or an engine's own record)
    PIECEWISE = "piecewise"  # the engine ran piecewise graphs: attention outside them
    EAGER = "eager"  # attention ran without graphs
    MIXED = "mixed"  # graph replays and eager steps
    UNKNOWN = "unknown"  # no evidence (the capture's ``why`` says which is missing)


# statuses that mean "no FULL graph serves these steps": one rule for every view and the diff
NO_FULL_GRAPH = frozenset(
    {CaptureStatus.FAILED, CaptureStatus.PREDICTED_FAIL, CaptureStatus.DOWNGRADED}
)

CAPTURE_LABELS = {
    CaptureStatus.CAPTURED: "captured",
    CaptureStatus.FAILED: "failed",
    CaptureStatus.DOWNGRADED: "downgraded",
    CaptureStatus.PREDICTED_FAIL: "would fail (predicted from syncs)",
    CaptureStatus.PREDICTED_OK: "no sync seen (predicted)",
    CaptureStatus.NOT_ATTEMPTED: "not attempted",
    CaptureStatus.REPLAYED: "replayed in a graph",
    CaptureStatus.PIECEWISE: "piecewise graphs (attention outside them)",
    CaptureStatus.EAGER: "eager (attention not in a graph)",
    CaptureStatus.MIXED: "mixed: graph replays and eager steps",
    CaptureStatus.UNKNOWN: "unknown",
}


def no_full_graph(status: str | None) -> bool:
    """Whether a capture status means no FULL graph serves the steps (the one rule)."""
    try:
        return CaptureStatus(str(status)) in NO_FULL_GRAPH
    except ValueError:
        return False


def capture_region(graph_mode: str | None) -> str:
    """Where the watched ops sit, in words: "the captured region" where FULL graphs were asked
    for (or the evidence does not say the mode: an imported trace); a run of another graph mode
    captured no such region, so the ops are where a FULL graph's capture would meet them."""
    if graph_mode in (None, "FULL"):
        return "the captured region"
    return "the region a FULL graph would capture"
