"""The one capture vocabulary every producer's verdict is stated in (scenario runs, engines,
imported traces and logs), and the one rule for "no FULL graph serves these steps"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Protocol

from mlaprof.rank_counts import rank_list

# a scenario step the CPU ran eagerly in a graph mode's shape: its mode reads "<MODE> shape on
# cpu" (the timing's step modes and the capture's mode that ran), never a graph mode
ON_CPU = " shape on cpu"


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
    MIXED = "mixed"  # graph replays and eager steps (of one rank, or ranks that each mix)
    PER_RANK = "per-rank"  # the ranks' own statuses differ (each rank's: Capture.per_rank)
    UNKNOWN = "unknown"  # no evidence (the capture's ``why`` says which is missing)


# statuses that mean "no FULL graph serves these steps": one rule for every view and the diff
# (PER_RANK is no one verdict: each rank's is its own row, Capture.per_rank, judged by the same
# rule in no_full_graph; the step-mode finding names the ranks whose attention ran outside graphs)
NO_FULL_GRAPH = frozenset(
    {CaptureStatus.FAILED, CaptureStatus.PREDICTED_FAIL, CaptureStatus.DOWNGRADED}
)

# a per-rank status's words: its label, and before each rank's own where a capture names them
DIFFERS_BY_RANK = "differs by rank"

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
    CaptureStatus.PER_RANK: f"{DIFFERS_BY_RANK} (see each rank)",
    CaptureStatus.UNKNOWN: "unknown",
}


def over_ranks(statuses: Iterable[CaptureStatus]) -> CaptureStatus:
    """The status of a capture judged rank by rank, from the ranks' own statuses: theirs
    where every rank has the same, else :attr:`CaptureStatus.PER_RANK`; never a verdict over
    their steps pooled (two ranks that each run one mode are no "mixed" rank)."""
    said = set(statuses)
    return said.pop() if len(said) == 1 else CaptureStatus.PER_RANK


def per_rank_label(statuses: Mapping[int, CaptureStatus]) -> str:
    """A per-rank status's label naming each rank's own status (ranks of one status said
    once): "differs by rank: rank 0 replayed in a graph; rank 1 eager (...)"."""
    by: dict[CaptureStatus, list[int]] = {}
    for r, st in sorted(statuses.items()):
        by.setdefault(CaptureStatus(st), []).append(r)
    each = "; ".join(f"{rank_list(rs)} {CAPTURE_LABELS[st]}" for st, rs in by.items())
    return f"{DIFFERS_BY_RANK}: {each}"


def per_rank_modes(modes: Mapping[int, str | None]) -> str:
    """The mode that ran where the ranks ran modes of their own, naming each rank's (ranks of
    one mode said once): "differs by rank: rank 0 FULL; rank 1 NONE"."""
    by: dict[str, list[int]] = {}
    for r, mode in sorted(modes.items()):
        by.setdefault(mode or "unknown", []).append(r)
    return f"{DIFFERS_BY_RANK}: " + "; ".join(f"{rank_list(rs)} {m}" for m, rs in by.items())


# the cudagraph modes whose decode batches (and uniform verify batches) still replay FULL
# graphs: vLLM's CUDAGraphMode with a FULL decode_mode() (vllm/config/compilation.py)
FULL_GRAPH_MODES = frozenset({"FULL", "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"})


def asked_mode(scenario_mode: str | None, capture_mode: str | None) -> str | None:
    """The graph mode a run asked for: its scenario's, else the one its capture evidence names
    (an engine's vLLM cudagraph-mode resolution); None where neither says (the one rule the
    claims and the summary's consistency checks read)."""
    return scenario_mode or capture_mode or None


def keeps_full_graphs(mode: str | None) -> bool:
    """Whether a downgrade to ``mode`` still runs FULL graphs for the decode and verify
    batches (FULL_AND_PIECEWISE, FULL_DECODE_ONLY): the one rule a downgrade's finding and the
    capture verdict of its run (:func:`no_full_graph`, the compare's "capture fails") read."""
    return str(mode) in FULL_GRAPH_MODES


class RankVerdict(Protocol):
    """One rank's own capture verdict (a row of ``Capture.per_rank``)."""

    @property
    def status(self) -> str: ...

    @property
    def effective_mode(self) -> str | None: ...

    @property
    def served_mode(self) -> str | None: ...


def served_mode(effective_mode: str | None, predicted_mode: str | None) -> str | None:
    """The graph mode the FULL-graph claims judge (an S frozen into a graph, a capture's
    memory): the mode predicted for a GPU where the verdict is a prediction (a scenario run
    that captured nothing), else the mode that ran where it ran as a graph mode; None where
    neither says one (steps a CPU ran eagerly in a mode's shape are no graph mode: the timing's
    rule, :func:`mlaprof.analysis.timing.step_modes`)."""
    if predicted_mode is not None:
        return predicted_mode
    if effective_mode is None or effective_mode.endswith(ON_CPU):
        return None
    return effective_mode


def would_run_text(predicted_mode: str, effective_mode: str | None) -> str:
    """A predicted mode in the words every view prints it with: a prediction, never read as
    the mode that ran ("would run PIECEWISE on a GPU: predicted from syncs", where the steps
    ran eagerly on the CPU, ``effective_mode``)."""
    gpu = " on a GPU" if str(effective_mode or "").endswith(ON_CPU) else ""
    return f"would run {predicted_mode}{gpu}: predicted from syncs"


def no_full_graph(
    status: str | None, effective_mode: str | None = None, per_rank: Iterable[RankVerdict] = ()
) -> bool:
    """Whether a capture status means no FULL graph serves the steps (the one rule): a failed
    or predicted-to-fail capture, and a downgrade, unless the mode it ran (``effective_mode``)
    still runs FULL graphs for the decode batches (:func:`keeps_full_graphs`). A per-rank
    status (``per_rank``: each rank's own verdict) has none where any rank's own verdict has
    none: a tensor-parallel step runs on every rank, so one rank outside FULL graphs keeps the
    step out of them."""
    try:
        st = CaptureStatus(str(status))
    except ValueError:
        return False
    if st is CaptureStatus.PER_RANK:
        return any(no_full_graph(r.status, r.effective_mode) for r in per_rank)
    if st is CaptureStatus.DOWNGRADED and keeps_full_graphs(effective_mode):
        return False
    return st in NO_FULL_GRAPH


def capture_region(graph_mode: str | None) -> str:
    """Where the watched ops sit, in words: "the captured region" where FULL graphs were asked
    for (or the evidence does not say the mode: an imported trace); a run of another graph mode
    captured no such region, so the ops are where a FULL graph's capture would meet them."""
    if graph_mode is None or keeps_full_graphs(graph_mode):
        return "the captured region"
    return "the region a FULL graph would capture"
