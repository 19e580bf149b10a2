"""What every adapter shares: the tables a run holds, and the capture dict's common shape."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.capture_status import per_rank_label
from mlaprof.analysis.evidence.model import CAPTURE_LABELS, CaptureStatus, capture_text
from mlaprof.analysis.sections import Capture
from mlaprof.analysis.typed_json import OMIT

# the capture's optional keys (left out of the document unless a producer wrote them as null)
_OPTIONAL = frozenset(f.name for f in dataclasses.fields(Capture) if f.metadata.get(OMIT))

if TYPE_CHECKING:
    import pandas as pd

    from mlaprof.store.reader import Run

TABLES = ("syncs", "captures", "memory", "splits", "padding", "steps", "layers", "events")


def load_tables(run: Run) -> dict[str, pd.DataFrame]:
    """Every table the analyzers read, queried once (each ``run.<table>`` access re-reads), all
    of them together where the run can (:meth:`mlaprof.store.reader.Run.read_tables`; a live
    fold's rows are read one table at a time)."""
    from mlaprof.analysis.capture_attempts import with_attempts
    from mlaprof.analysis.syncs import fill_layer_syncs

    together = getattr(run, "read_tables", None)
    t = together(TABLES) if together is not None else {name: run.table(name) for name in TABLES}
    # the store gives the rows as recorded; the sync-counting rule is the analysis' (once), and
    # a failed capture attempt's memory row is read as the attempt (once)
    t["layers"] = fill_layer_syncs(t["layers"], t["syncs"])
    t["memory"] = with_attempts(t["memory"], t["captures"])
    return t


def capture(status: CaptureStatus, provenance: str, why: str = "", **fields: Any) -> Capture:
    """The capture section in the one vocabulary: ``status``, its ``label``, the ``text`` every
    view prints, ``provenance``, and for an unknown status ``why``. ``mode`` / ``effective_mode``
    / ``memory_bytes`` are ``None`` where the evidence does not hold them; ``fields``: the
    producer's own evidence (a name :class:`Capture` does not declare is an error)."""
    out: dict[str, Any] = {
        "mode": None,
        "effective_mode": None,
        "memory_bytes": None,
        **fields,
        "status": str(status),
        "label": CAPTURE_LABELS[status],
        "provenance": provenance,
    }
    if status is CaptureStatus.UNKNOWN:
        out["why"] = why or "no capture evidence in this run"
        out["label"] = f"unknown ({out['why']})"
    if status is CaptureStatus.PER_RANK and out.get("per_rank"):
        # the ranks differ: the line every view prints names each rank's own status
        out["label"] = per_rank_label({r.rank: r.status for r in out["per_rank"]})
    out["text"] = capture_text(out)
    out["status"] = status
    # an optional key the producer wrote as None stays in the document as null
    written_null = frozenset(k for k, v in out.items() if v is None and k in _OPTIONAL)
    return Capture(**out, null_keys=written_null)


def on_cards(where: str, run: Run) -> str:
    """``where`` a run's numbers were measured ("on cuda", "by the engine") with the GPU(s)
    its ranks recorded, in parentheses, where they did (:func:`cards_text`)."""
    card = cards_text(run)
    return f"{where} ({card})" if card else where


def cards_text(run: Run) -> str | None:
    """The GPU(s) the run's ranks measured on, as their rank databases (or, before those kept
    it, run.json) name them: one name, or each name with its ranks where they differ; None
    where none was recorded."""
    from mlaprof.rank_counts import rank_list

    fallback = run.meta.get("device_name")
    own = set(run.databases)  # (rank, role): a rank's own database has role ""
    by_rank = {
        r: (run.rank_meta(r).get("device_name") if (r, "") in own else None) or fallback
        for r in run.ranks
    }
    names = sorted({c for c in by_rank.values() if c})
    if not names:
        return None
    if len(names) == 1 and all(by_rank.values()):
        return names[0]
    ranks_of: dict[str | None, list[int]] = {}  # in the order of each name's first rank
    for r, c in sorted(by_rank.items()):
        ranks_of.setdefault(c, []).append(r)
    return "; ".join(f"{rank_list(rs)}: {c or 'not recorded'}" for c, rs in ranks_of.items())
