"""Adapter for scenario runs (`mlaprof run` on the CPU or a GPU, synthetic runs): the capture
verdict is measured where a capture was attempted, else predicted from the syncs seen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.capture import capture_summary
from mlaprof.analysis.evidence.common import load_tables
from mlaprof.analysis.evidence.model import Evidence, Provenance, run_meta
from mlaprof.store.runkind import RunKind

if TYPE_CHECKING:
    from mlaprof.store.reader import Run


def scenario_evidence(run: Run) -> Evidence:
    t = load_tables(run)
    device = str(run.meta.get("device") or "")
    card = cards_text(run)
    where = f"on {device} ({card})" if device and card else f"on {device}"
    prov = Provenance("measured", where) if device else Provenance("unknown", "no device")
    meta = run_meta(run.meta)
    cap = capture_summary(meta, t["syncs"], t["captures"], t["memory"], str(prov))
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


def cards_text(run: Run) -> str | None:
    """The GPU(s) the run's ranks measured on, as their rank databases (or, before those kept
    it, run.json) name them: one name, or each name with its ranks where they differ; None
    where none was recorded."""
    from mlaprof.analysis.ranks import rank_span

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
    return "; ".join(
        f"rank{'s' if len(rs) > 1 else ''} {rank_span(rs)}: {c or 'not recorded'}"
        for c, rs in ranks_of.items()
    )
