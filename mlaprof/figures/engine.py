"""A recorded vLLM engine: S per verify step as AITER would pick it for exactly these batches
(the shadow analysis, modelled), with the padding bug, with the fix, frozen at capture."""

from __future__ import annotations

from typing import Any

from mlaprof.figures import _common as c


def shadow_splits(run: Any, device: str | None = None, aiter: str | None = None) -> Any:
    """S per recorded verify step: bug (min over all rows), fix (active rows), frozen (capture-time
    dummy run), deserved (real rows only); from mlaprof.analysis.shadow (computed there)."""
    from mlaprof.analysis.evidence.engine import engine_steps
    from mlaprof.analysis.shadow import SHADOW_AITER, SHADOW_DEVICE, shadow

    device, aiter = device or SHADOW_DEVICE, aiter or SHADOW_AITER
    title = f"KV splits per engine step, modelled from recorded batches (AITER {aiter} on {device})"
    if c.meta(run).get("source") != "vllm plugin":
        return c.empty(title + c.run_label(run), "no engine steps: not a recorded vLLM engine")
    frame = shadow(engine_steps(run.events), device, aiter)
    if frame.empty:
        return c.empty(title + c.run_label(run), "no verify step recorded yet")
    frame = frame[frame["rank"] == frame["rank"].min()]
    go = c.go()
    fig = go.Figure()
    for col, name, color, dash in (
        ("s_bug", "S with the padding bug (min over all rows)", c.USED, "solid"),
        ("s_fix", "S with the fix (active rows)", c.REAL, "solid"),
        ("s_frozen", "S frozen at capture (dummy run)", c.FROZEN, "dot"),
        ("s_deserved", "S deserved (real rows only)", c.DESERVED, "dash"),
    ):
        fig.add_trace(
            go.Scatter(
                x=frame["step"],
                y=frame[col],
                name=name,
                mode="lines+markers",
                line={"color": color, "dash": dash},
            )  # fmt: skip
        )
    return c.style(fig, title + c.run_label(run), "engine step", "KV splits S (count)")
