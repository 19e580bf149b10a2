"""What every figure shares: the lazy Plotly import, table access, units and colours.

Figures take a :class:`~mlaprof.store.Run`, a mapping ``{table: DataFrame}`` or (for one-table
figures) a DataFrame, so notebooks can plot a filtered frame and the report a whole run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.capture import FAILED_CAPTURE  # noqa: F401 - the figures' name for it
from mlaprof.analysis.capture_status import CAPTURE_LABELS, ON_CPU, CaptureStatus
from mlaprof.analysis.series import is_run, kernel_label, shorten  # noqa: F401 - one definition
from mlaprof.errors import MissingExtraError, MlaprofError
from mlaprof.rank_counts import plural, rank_list, ranks_of
from mlaprof.store.schema import TABLES, columns

if TYPE_CHECKING:
    from types import ModuleType

# One palette for every figure (and the TUI's colours follow the same meaning).
USED = "#d62728"  # what the run did
DESERVED = "#2ca02c"  # what its real rows deserve
FROZEN = "#9467bd"  # what a captured graph replays with
REAL = "#1f77b4"
PADDING = "#ff7f0e"
NEUTRAL = "#7f7f7f"
BETTER = "#2ca02c"
WORSE = "#d62728"
MODE_COLORS = {
    "FULL": "#1f77b4",
    "PIECEWISE": "#ff7f0e",
    "NONE": "#8c564b",
    "graph": "#1f77b4",
    "eager": "#8c564b",
}
MODE_LABELS = {
    "FULL": "FULL graph",
    "PIECEWISE": "PIECEWISE fallback",
    "NONE": "eager (no graph)",
    # imported traces: what the trace shows (a graph replay or kernels launched one by one)
    "graph": f"{CAPTURE_LABELS[CaptureStatus.REPLAYED]} (trace)",
    "eager": "eager (trace)",
}
# a scenario step timed on the CPU ran eagerly in its mode's shape (analysis.timing.step_modes)
for _m in ("FULL", "PIECEWISE"):
    MODE_COLORS[_m + ON_CPU] = MODE_COLORS[_m]
    MODE_LABELS[_m + ON_CPU] = f"{_m} shape, eager on the CPU"
TEMPLATE = "plotly_white"
MIB = 1024.0 * 1024.0


def go() -> ModuleType:
    """``plotly.graph_objects``, or a clear error saying what to install."""
    try:
        import plotly.graph_objects as _go
    except ImportError:
        raise MissingExtraError("Plotly figures", "") from None  # a core dependency
    return _go


def _in_our_template(fig: Any) -> Any:
    """``fig`` in :data:`TEMPLATE`, assigned as plotly assigns its default template: a registered
    template is valid already, so it is set without validating it again (validating it costs ~13
    ms a figure, what ``update_layout(template=...)`` pays; nothing else of the figure is left
    unchecked)."""
    import plotly.io as pio

    layout = fig.layout
    checks = getattr(layout, "_validate", None)
    if checks is None:  # a plotly without the switch: validated, as any assignment is
        layout.template = pio.templates[TEMPLATE]
        return fig
    layout._validate = False
    try:
        layout.template = pio.templates[TEMPLATE]
    finally:
        layout._validate = checks
    return fig


def figure() -> Any:
    """A new ``go.Figure`` in mlaprof's template."""
    return _in_our_template(go().Figure())


def subplots() -> Any:
    """``plotly.subplots.make_subplots`` (lazy, like :func:`go`), its figure in mlaprof's
    template."""
    go()
    from plotly.subplots import make_subplots

    def make(*a: Any, **k: Any) -> Any:
        return _in_our_template(make_subplots(*a, **k))

    return make


def table(data: Any, name: str, rank: int | None = None) -> pd.DataFrame:
    """Table ``name`` of a Run / mapping / DataFrame, restricted to one rank.

    ``rank=None`` keeps the lowest rank present: every rank records the same steps, and mixing
    them would double-count; pass a rank to look at another one.
    """
    if isinstance(data, pd.DataFrame):
        df = data
    elif isinstance(data, Mapping):
        df = data.get(name)
        if df is None:
            df = pd.DataFrame(columns=list(columns(name)))
    elif name in TABLES and hasattr(data, "table"):
        df = data.table(name)
    else:
        raise MlaprofError(
            f"cannot read table {name!r} from a {type(data).__name__}: "
            "pass a Run (mlaprof.load), a dict of DataFrames or a DataFrame"
        )
    missing = [c for c, _ in TABLES.get(name, ()) if c not in df.columns]
    if missing and isinstance(data, pd.DataFrame):
        raise MlaprofError(
            f"the {name} frame lacks {plural('column(s)', len(missing))} {', '.join(missing)}"
        )
    df = df.copy()
    for c in missing:
        df[c] = pd.NA
    if "rank" in df.columns and len(df):
        ranks = sorted(pd.to_numeric(df["rank"]).dropna().unique())
        pick = ranks[0] if rank is None else rank
        if rank is not None and rank not in ranks:
            has = rank_list(int(r) for r in ranks)
            raise MlaprofError(f"no rank {rank} in the {name} table (it has {has})")
        df = df[pd.to_numeric(df["rank"]) == pick]
    return df.reset_index(drop=True)


def series_of(
    data: Any, name: str = "", rank: int | None = None, window: Any = None
) -> tuple[Any, str]:
    """(the :class:`~mlaprof.analysis.series.RankSeries` a figure draws, its title label) from
    a summary, its series section, a rank's series, a Run (its summary is built: analysis
    computes, the figure draws), a mapping ``{table: DataFrame}`` or a DataFrame of table
    ``name`` (the series of those frames, by the same analysis functions). ``window``: a Run's
    other timeline window (:class:`~mlaprof.analysis.series.Window`)."""
    from mlaprof.analysis.series import RankSeries, Series, series_from_tables

    if isinstance(data, RankSeries):
        return data, ""
    ser = getattr(data, "series", None)
    if isinstance(data, Series):
        ser = data
    elif not isinstance(ser, Series):
        if isinstance(data, pd.DataFrame):
            ser = series_from_tables({name: table(data, name)})
        elif isinstance(data, Mapping):
            ser = series_from_tables(dict(data))
        elif hasattr(data, "table") and hasattr(data, "meta"):
            from mlaprof.analysis.series import series_for_run

            ser = series_for_run(data, window=window)
        else:
            raise MlaprofError(
                f"cannot draw a {type(data).__name__}: pass a run summary, a Run "
                "(mlaprof.load), a dict of DataFrames or a DataFrame"
            )
    if ser is None:
        return None, ""
    return ser.rank(rank), ser.label(rank)


def numeric(df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    """Columns as floats (SQLite NULLs become NaN) so arithmetic never sees ``None``."""
    out = df.copy()
    for c in cols:
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return out


def meta(data: Any) -> dict[str, Any]:
    m = getattr(data, "meta", None)
    return m if isinstance(m, dict) else {}


def run_label(data: Any, rank: int | None = None) -> str:
    """`` — <run name>`` for titles when the data is a Run (empty otherwise), with the rank
    drawn when the run has several (figures draw one rank: :func:`table`), never unsaid."""
    name = getattr(data, "name", None)
    if not (isinstance(name, str) and name):
        return ""
    ranks = getattr(data, "ranks", None) or []
    if len(ranks) > 1:
        shown = min(ranks) if rank is None else rank
        return f" — {name}, {ranks_of([shown], len(ranks))}"
    return f" — {name}"


def target_label(target: str | None) -> str:
    """``mi355x (256 CUs)`` from a device preset name."""
    if not target:
        return "unknown device"
    from mlaprof.devices import DEVICES

    d = DEVICES.get(str(target))
    return f"{target} ({d.units} {d.unit_name}s)" if d else str(target)


def unit_name(target: str | None) -> str:
    from mlaprof.devices import DEVICES

    d = DEVICES.get(str(target)) if target else None
    return f"{d.unit_name}s" if d else "compute units"


def style(fig: Any, title: str, x_title: str, y_title: str, height: int = 420) -> Any:
    """Title, axis titles (with units), legend on top, one template: the same look everywhere."""
    fig.update_layout(
        title={"text": title, "x": 0.01, "xanchor": "left"},
        height=height,
        margin={"l": 70, "r": 30, "t": 90, "b": 60},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.01, "xanchor": "left", "x": 0},
        hoverlabel={"namelength": -1},
    )
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title)
    return fig


SUBTITLE_CHARS = 120  # a subtitle line that fits a report figure (~1000 px) at its small font


def lines(text: str, width: int = SUBTITLE_CHARS) -> str:
    """``text`` broken into ``<br>``-joined lines of at most ``width`` characters at spaces:
    Plotly never wraps a title or note, so a long one ran past the figure's right edge."""
    out: list[str] = []
    for word in text.split(" "):
        if out and len(out[-1]) + 1 + len(word) <= width:
            out[-1] += " " + word
        else:
            out.append(word)
    return "<br>".join(out)


def said(v: Any) -> Any:
    """A hover value as the views say it: one the run does not hold reads as every other view
    says it (the one rule, :func:`mlaprof.reporters.fmt.gap_text`: "unknown" for None or NaN,
    "none" for an empty one), so the series hand None for a value they lack, never a sentinel
    such as -1 that a reader takes for a count; any other value as it is (the hover template
    formats it)."""
    from mlaprof.reporters.fmt import gap_text

    gap = gap_text(v)
    return v if gap is None else gap


def empty(title: str, why: str) -> Any:
    """A figure that says what is missing instead of an empty plot."""
    fig = figure()
    fig.add_annotation(
        text=why, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font={"size": 14}
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(title={"text": title, "x": 0.01}, height=220, meta={"empty": True})
    return fig


def is_empty(fig: Any) -> bool:
    """True for the placeholder figures :func:`empty` makes."""
    m = fig.layout.meta
    return isinstance(m, dict) and bool(m.get("empty"))


def time_unit(max_ns: float) -> tuple[str, float]:
    """µs for what a GPU step takes, ms once values reach 100 ms (CPU runs): readable ticks."""
    return ("ms", 1e6) if max_ns >= 1e8 else ("µs", 1e3)
