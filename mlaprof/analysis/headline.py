"""The run's key numbers as label/value lines, built once from :func:`mlaprof.analysis.summary`
so that the terminal report, the HTML report and the TUI print the same words and numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlaprof.analysis.capture import CAPTURE_MEMORY_MEASURE, human_bytes
from mlaprof.analysis.claims import full_graph_serves
from mlaprof.analysis.padding import amounts, scope_text
from mlaprof.analysis.share import share_text

if TYPE_CHECKING:
    from mlaprof.analysis.evidence import Evidence


def _ratio(r: dict[str, Any]) -> float:
    if r.get("used") is None or not r.get("deserved"):
        return float("inf")
    return r["used"] / r["deserved"]


def own_split(s: dict[str, Any]) -> dict[str, Any] | None:
    """The worst-step splits row of the run's own policy (the first policy when it names none),
    on the rank where it is worst."""
    rows = s.get("splits") or []
    own = (s.get("scenario") or {}).get("policy") or (rows[0]["policy"] if rows else None)
    mine = [r for r in rows if r["policy"] == own]
    return min(mine, key=_ratio) if mine else None


def _pct(x: float | None) -> str:
    return share_text(x)


def _replayed(
    measured: dict[str, Any] | None,
    r: dict[str, Any],
    sc: dict[str, Any],
    status: str | None = None,
) -> str:
    """What a FULL graph replays beside the S used per step: measured where the run replayed
    one, else the S the capture-time dummy run would freeze (modelled), when it differs and a
    FULL graph serves the steps (not where its capture failed: mlaprof.analysis.claims)."""
    if measured is not None:
        lo, hi = measured["min"], measured["max"]
        return f"; the FULL graph replayed S = {lo if lo == hi else f'{lo}-{hi}'} (measured)"
    full = full_graph_serves(sc.get("graph_mode"), status)
    if full and r.get("frozen") is not None and r["frozen"] != r["used"]:
        return (
            f"; a FULL graph captured by vLLM's dummy run would replay S = {r['frozen']} (modelled)"
        )
    return ""


def split_rows(s: dict[str, Any], device: str) -> list[dict[str, str]]:
    """The headline's S and occupancy rows for the run's own policy (none without one)."""
    out: list[dict[str, str]] = []
    r = own_split(s)
    sc = s.get("scenario") or {}
    cap = s.get("capture")  # the evidence's Capture section
    status = cap.status if cap is not None else None
    where = f" on rank {r['rank']}" if r is not None and len(s.get("ranks") or []) > 1 else ""
    if r is not None and r.get("on_device"):
        out.append(
            {
                "label": f"KV splits ({r['policy']})",
                "value": "decided on the device at every replay (no host S; never frozen)",
                "provenance": f"model: {r['source']}",
            }
        )
    elif r is not None and r["used"] is None:  # the policy's kernel does not take this config
        out.append(
            {
                "label": f"KV splits ({r['policy']})",
                "value": "no S: the policy's kernel does not run in this configuration"
                + _replayed(s.get("replayed_splits"), r, sc, status),
                "provenance": f"model: {r.get('source') or r['policy']}",
            }
        )
    elif r is not None:
        out.append(
            {
                "label": f"KV splits ({r['policy']}, worst step{where})",
                "value": f"S used {r['used']}, deserved {r['deserved']}"
                + _replayed(s.get("replayed_splits"), r, sc, status),
                "provenance": "model" if device.startswith("cpu") else "recorded",
            }
        )
        out.append(
            {
                "label": "occupancy (model)",
                "value": f"{_pct(r['occupancy'])} with S used, {_pct(r['occupancy_deserved'])} "
                "deserved",
                "provenance": f"model: {r['policy']} on the {sc.get('target') or 'unknown'} preset",
            }
        )
    return out


def headline(s: dict[str, Any], ev: Evidence) -> list[dict[str, str]]:
    """``[{label, value, provenance}]``: capture, capture memory, S, occupancy, padding, timing."""
    src = str(ev.provenance)
    cap = ev.capture
    mem = cap.memory_bytes
    out = [
        {"label": "capture", "value": cap.text, "provenance": str(cap.provenance)},
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
    # an imported trace's paths, typed from their analyzer (Evidence.kernel_paths: trace.paths)
    paths = [p for p in ev.kernel_paths if p.S is not None]
    engines = (s.get("fleet") or {}).get("engines")
    if paths and engines:  # several engines: S per engine, never one range over them
        out.append(
            {
                "label": "KV splits (from the trace, per engine)",
                "value": "; ".join(_engine_s(e) for e in engines),
                "provenance": src,
            }
        )
    elif paths:  # an imported trace: S as its kernels' grids give it, per path and variant
        out.append(
            {
                "label": "KV splits (from the trace)",
                "value": "; ".join(f"S {p.S} on {p.path} ({p.variant})" for p in paths),
                "provenance": src,
            }
        )
    out += split_rows(s, str(ev.meta.get("device") or ""))
    pad = s["padding"]
    if pad["real_rows"] or pad["steps_padded"]:
        out.append(
            {
                "label": "padding waste",
                "value": f"{share_text(pad['padding_fraction'] or 0, 1)} of verify tokens "
                f"{amounts(pad)[2]} ({scope_text(pad)})",
                "provenance": src,
            }
        )
    t = s["timing"]
    if t["step_median_us"] is not None:
        out.append(
            {
                "label": "median step",
                "value": t["step_median_text"],
                "provenance": t["timing_label"],
            }
        )
    return out


def _engine_s(e: dict[str, Any]) -> str:
    """``engine 0 (ranks 0-3, 16 heads): S 4 on vllm-triton``."""
    from mlaprof.analysis.ranks import rank_span

    lo, hi = e.get("S_min"), e.get("S_max")
    s = "unknown" if lo is None else str(lo) if lo == hi else f"{lo}-{hi}"
    heads = f", {e['heads']} heads" if e.get("heads") is not None else ""
    return f"engine {e['engine']} (ranks {rank_span(e['ranks'])}{heads}): S {s} on " + (
        ", ".join(e.get("paths") or []) or "no MLA path"
    )
