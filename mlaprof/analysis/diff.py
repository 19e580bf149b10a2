"""Question 6: did my fix help? A diff of two runs' summaries."""

from __future__ import annotations

from typing import Any

from mlaprof.store.reader import Run


def diff_runs(a: Run, b: Run) -> dict[str, Any]:
    """What changed from run ``a`` (before) to run ``b`` (after), and by how much."""
    from mlaprof.analysis import summary

    sa, sb = summary(a), summary(b)

    def ratio(x: float | None, y: float | None) -> float | None:
        return None if not x or y is None else y / x

    splits = []
    pb = {r["policy"]: r for r in sb["splits"]}
    for r in sa["splits"]:
        o = pb.get(r["policy"])
        if o and (r["used"] != o["used"] or r["occupancy"] != o["occupancy"]):
            splits.append(
                {
                    "policy": r["policy"],
                    "used_before": r["used"],
                    "used_after": o["used"],
                    "occupancy_before": r["occupancy"],
                    "occupancy_after": o["occupancy"],
                }
            )
    ta, tb = sa["timing"], sb["timing"]
    return {
        "before": sa["run"],
        "after": sb["run"],
        "syncs": {"before": len(sa["syncs"]), "after": len(sb["syncs"])},
        "capture": {"before": sa["capture"]["status"], "after": sb["capture"]["status"]},
        "splits": splits,
        "padding_rows": {
            "before": sa["padding"]["padding_rows"],
            "after": sb["padding"]["padding_rows"],
        },
        "step_median_us": {
            "before": ta["step_median_us"],
            "after": tb["step_median_us"],
            "ratio": ratio(ta["step_median_us"], tb["step_median_us"]),
        },
        "findings": {"before": len(sa["findings"]), "after": len(sb["findings"])},
    }
