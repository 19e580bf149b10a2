"""A recorded vLLM engine: S per verify step as AITER would pick it for exactly these batches
(the shadow analysis, modelled), with the padding bug, with the fix, frozen at capture; drawn
from the summary's shadow section (``per_step``) as the series holds it."""

from __future__ import annotations

from typing import Any

from mlaprof.figures import _common as c

SERIES = (
    ("s_bug", "S with the padding bug (min over all rows)", c.USED, "solid"),
    ("s_fix", "S with the fix (active rows)", c.REAL, "solid"),
    ("s_frozen", "S frozen at capture (dummy run)", c.FROZEN, "dot"),
    ("s_deserved", "S deserved (real rows only)", c.DESERVED, "dash"),
)


def shadow_splits(
    data: Any, device: str | None = None, aiter: str | None = None, rank: int | None = None
) -> Any:
    """S per recorded verify step: bug (min over all rows), fix (active rows), frozen
    (capture-time dummy run), deserved (real rows only), as the shadow analysis modelled them
    (``mlaprof report --shadow-device/--shadow-aiter`` pick the model; for a Run, ``device`` and
    ``aiter`` do: its series is built with that shadow analysis)."""
    from mlaprof.analysis.series import Series, series_for_run

    if c.is_run(data) and not isinstance(data, Series):  # a Run: its series, once
        data = series_for_run(data, {k: v for k, v in (("device", device), ("aiter", aiter)) if v})
    rs, label = c.series_of(data, "events", rank)
    ser = data if isinstance(data, Series) else getattr(data, "series", None)
    what = ser.shadow_title if isinstance(ser, Series) and ser.shadow_title else "AITER"
    title = f"KV splits per engine step, modelled from recorded batches ({what})"
    if not (isinstance(ser, Series) and ser.engine):
        return c.empty(title + label, "no engine steps: not a recorded vLLM engine")
    if rs is None or not rs.shadow:
        return c.empty(title + label, "no verify step recorded yet")
    go = c.go()
    fig = c.figure()
    steps = [s.step for s in rs.shadow]
    for col, name, color, dash in SERIES:
        ys = [getattr(s, col) for s in rs.shadow]
        if all(v is None or v != v for v in ys):
            continue  # no legend entry without a point
        fig.add_trace(
            go.Scatter(
                x=steps, y=ys, name=name, mode="lines+markers", line={"color": color, "dash": dash}
            )  # fmt: skip
        )
    return c.style(fig, title + label, "engine step", "KV splits S (count)")
