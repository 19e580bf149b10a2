"""The run's key numbers as label/value lines, built once from :func:`mlaprof.analysis.summary`
so that the terminal report, the HTML report and the TUI print the same words and numbers."""

from __future__ import annotations

from typing import Any

from mlaprof.analysis.capture import CAPTURE_MEMORY_MEASURE, human_bytes


def own_split(s: dict[str, Any]) -> dict[str, Any] | None:
    """The worst-step splits row of the run's own policy (the first policy when it names none)."""
    rows = s.get("splits") or []
    own = (s.get("scenario") or {}).get("policy")
    return next((r for r in rows if r["policy"] == own), rows[0] if rows else None)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def provenance(meta: dict[str, Any]) -> str:
    """Where a run's measured numbers come from."""
    if meta.get("imported_from"):
        return f"imported from {meta['imported_from']}"
    device = meta.get("device")
    return f"measured on {device}" if device else "unknown source"


def headline(s: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, str]]:
    """``[{label, value, provenance}]``: capture, capture memory, S, occupancy, padding, timing."""
    src = provenance(meta)
    cap = s["capture"]
    mem = cap.get("memory_bytes")
    if cap.get("provenance"):  # an imported engine log says it itself
        src = str(cap["provenance"])
    out = [
        {
            "label": "capture",
            "value": f"{cap['mode']} -> {cap['status']} (runs {cap['effective_mode']})",
            "provenance": "predicted from syncs" if cap["status"].startswith("predicted") else src,
        },
        {
            "label": f"capture memory ({CAPTURE_MEMORY_MEASURE})",
            "value": "unknown" if mem is None else human_bytes(mem),
            "provenance": src
            if mem is not None
            else "per rank and start (see the server starts)"
            if s.get("engine_starts")
            else "not recorded",
        },
    ]
    r = own_split(s)
    sc = s.get("scenario") or {}
    if r is not None:
        out.append(
            {
                "label": f"KV splits ({r['policy']}, worst step)",
                "value": f"S used {r['used']}, deserved {r['deserved']}",
                "provenance": "model"
                if str(meta.get("device") or "").startswith("cpu")
                else "recorded",
            }
        )
        out.append(
            {
                "label": "occupancy (model)",
                "value": f"{_pct(r['occupancy'])} with S used, {_pct(r['occupancy_deserved'])} "
                "deserved",
                "provenance": f"model: {r['policy']} on the {sc.get('target') or '?'} preset",
            }
        )
    pad = s["padding"]
    if pad["real_rows"] or pad["steps_padded"]:
        out.append(
            {
                "label": "padding waste",
                "value": f"{100 * (pad['padding_fraction'] or 0):.1f}% of verify tokens",
                "provenance": src,
            }
        )
    t = s["timing"]
    if t["step_median_us"] is not None:
        out.append(
            {
                "label": "median step",
                "value": f"{t['step_median_us']:.1f} µs",
                "provenance": t["timing_label"],
            }
        )
    return out
