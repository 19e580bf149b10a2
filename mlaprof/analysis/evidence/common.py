"""What every adapter shares: the tables a run holds, and the capture dict's common shape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlaprof.analysis.evidence.model import CAPTURE_LABELS, CaptureStatus, capture_text

if TYPE_CHECKING:
    import pandas as pd

    from mlaprof.store.reader import Run

TABLES = ("syncs", "captures", "memory", "splits", "padding", "steps", "layers", "events")


def load_tables(run: Run) -> dict[str, pd.DataFrame]:
    """Every table the analyzers read, queried once (each ``run.<table>`` access re-reads), all
    of them together where the run can (:meth:`mlaprof.store.reader.Run.read_tables`; a live
    fold's rows are read one table at a time)."""
    from mlaprof.analysis.syncs import fill_layer_syncs

    together = getattr(run, "read_tables", None)
    t = together(TABLES) if together is not None else {name: run.table(name) for name in TABLES}
    # the store gives the rows as recorded; the sync-counting rule is the analysis' (once)
    t["layers"] = fill_layer_syncs(t["layers"], t["syncs"])
    return t


def capture(status: CaptureStatus, provenance: str, why: str = "", **fields: Any) -> dict[str, Any]:
    """A capture dict in the one vocabulary: ``status``, its ``label``, the ``text`` every view
    prints, ``provenance``, and for an unknown status ``why``. ``mode`` / ``effective_mode`` /
    ``memory_bytes`` are ``None`` where the evidence does not hold them."""
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
    out["text"] = capture_text(out)
    return out
