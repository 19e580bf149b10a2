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
    trace_splits = _trace_splits(sa.get("trace"), sb.get("trace"))
    ta, tb = sa["timing"], sb["timing"]
    return {
        "before": sa["run"],
        "after": sb["run"],
        "syncs": {"before": _sync_count(sa), "after": _sync_count(sb)},
        "capture": {"before": _capture(sa), "after": _capture(sb)},
        "route": {
            "before": (sa.get("route") or {}).get("path"),
            "after": (sb.get("route") or {}).get("path"),
        },
        "splits": splits,
        "trace_splits": trace_splits,
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


def _sync_count(s: dict[str, Any]) -> int | None:
    """Syncs in the region; for an imported trace the API trace's count, None when unknown."""
    tr = s.get("trace")
    return tr["syncs"]["count"] if tr else len(s["syncs"])


def _capture(s: dict[str, Any]) -> str:
    return str(s["capture"].get("label") or s["capture"]["status"])


def _trace_splits(a: dict | None, b: dict | None) -> list[dict[str, Any]]:
    """S and batch rows per (path, kernel variant) of two imported traces, as read from them."""
    pa = {(p["path"], p["variant"]): p for p in (a or {}).get("paths", [])}
    pb = {(p["path"], p["variant"]): p for p in (b or {}).get("paths", [])}
    out = []
    for key in dict.fromkeys([*pa, *pb]):
        x, y = pa.get(key, {}), pb.get(key, {})
        out.append(
            {
                "path": key[0],
                "variant": key[1],
                "S_before": x.get("S"),
                "S_after": y.get("S"),
                "rows_before": x.get("rows"),
                "rows_after": y.get("rows"),
                "source": "imported traces (S from the kernels' grids)",
            }
        )
    return out
