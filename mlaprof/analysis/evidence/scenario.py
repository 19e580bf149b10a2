"""Adapter for scenario runs (`mlaprof run` on the CPU or a GPU, synthetic runs): the capture
verdict is measured where a capture was attempted, else predicted from the syncs seen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.capture import capture_summary
from mlaprof.analysis.evidence.common import load_tables, on_cards
from mlaprof.analysis.evidence.model import Evidence, Provenance, run_meta
from mlaprof.store.runkind import RunKind

if TYPE_CHECKING:
    from mlaprof.store.reader import Run


def scenario_evidence(run: Run) -> Evidence:
    t = load_tables(run)
    device = str(run.meta.get("device") or "")
    prov = (
        Provenance("measured", on_cards(f"on {device}", run))
        if device
        else Provenance("unknown", "no device")
    )
    meta = run_meta(run.meta)
    cap = capture_summary(
        meta, t["syncs"], t["layers"], t["captures"], t["memory"], str(prov), t["padding"],
        t["steps"],
    )  # fmt: skip
    return Evidence(
        kind=RunKind.SCENARIO,
        name=run.name,
        status=run.status,
        meta=meta,
        ranks=run.ranks,
        tables=t,
        capture=cap,
        device=device or "unknown (the run did not record its device)",
        provenance=prov,
    )
