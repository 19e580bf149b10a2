"""A value a run does not hold reads "unknown" in every figure's hover, never a sentinel a
reader takes for a count: the timeline's layer bars said "KV splits used -1, deserved -1" for
an S the run did not record (every imported trace's "S deserved"), its kernels "layer -1", the
step-time points "step -1"; a capture with no recorded time read a blank in its memory hover,
and a padding panel with one side unrecorded was drawn as a 0 of real work or of padding. Each
test failed with its rule broken."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from mlaprof.analysis.series import (
    Bar,
    MemoryBar,
    ModeTiming,
    PaddingStep,
    RankSeries,
    StepPoint,
    Timeline,
)
from mlaprof.figures import (
    capture_memory,
    full_vs_fallback,
    padding_waterfall,
    run_figures,
    step_timeline,
)
from tests import made_runs, shipped_runs

WORKER_GROUP = "shipped-runs"
SENTINELS = (-1, -1.0)
TRACE = "kineto_graph_replay"  # an imported trace: its layers hold no S deserved


def _values(x: Any) -> list[Any]:
    """Every value of a trace's customdata, nested tuples and lists flattened."""
    if isinstance(x, (list, tuple)) or type(x).__name__ == "ndarray":
        return [v for y in x for v in _values(y)]
    return [x]


def _leaks(fig: Any) -> list[str]:
    """Each hover value of ``fig`` that is a sentinel or an unsaid gap (None, NaN)."""
    out = []
    for t in fig.data:
        data = getattr(t, "customdata", None)
        for v in _values(data if data is not None else ()):
            if v is None or (isinstance(v, float) and math.isnan(v)) or (
                not isinstance(v, str) and v in SENTINELS
            ):  # fmt: skip
                out.append(f"{t.name}: {v!r}")
    return out


def _every(s: Any) -> list[str]:
    return [f"{stem}: {leak}" for stem, fig in run_figures(s) for leak in _leaks(fig)]


@pytest.mark.parametrize("name", made_runs.NAMES)
def test_a_run_mlaprof_makes_has_no_sentinel_in_its_figures(name: str) -> None:
    assert _every(made_runs.summary(name)) == [], name


@pytest.mark.parametrize("name", shipped_runs.NAMES)
def test_a_shipped_run_has_no_sentinel_in_its_figures(name: str) -> None:
    assert _every(shipped_runs.summary(name)) == [], name


def test_an_imported_traces_unknown_s_deserved_reads_unknown_in_the_timeline() -> None:
    fig = step_timeline(shipped_runs.summary(TRACE).series)
    layers = [t for t in fig.data if str(t.name).startswith("layer")]
    assert layers, [t.name for t in fig.data]
    for t in layers:
        assert "deserved %{customdata[4]}" in t.hovertemplate
        assert {d[4] for d in t.customdata} == {"unknown"}, t.customdata


def _rank(**kw: Any) -> RankSeries:
    return RankSeries(rank=0, policy="p", target=None, **kw)


def test_a_bar_with_no_value_says_unknown_in_every_lane() -> None:
    bars = (
        Bar("steps", "step:FULL", 0.0, 10.0, "step 0", (0, None, None)),
        Bar("layers", "layer:clean", 0.0, 5.0, "L0", (0, 0, 0, 4, None)),
        Bar("layers", "layer:clean", 5.0, 5.0, "L1", (0, 1, 0, None, 2)),
        Bar("kernels", "kernel:k", 1.0, 1.0, "k", (None, None)),
    )
    tl = Timeline((0,), 1, 1, 1, ("steps", "layers", "kernels"), bars)
    fig = step_timeline(_rank(timeline=tl))
    assert _leaks(fig) == []
    data = {t.name: [tuple(d) for d in t.customdata] for t in fig.data if t.customdata is not None}
    layer = next(v for k, v in data.items() if k.startswith("layer"))
    assert layer == [(0, 0, 0, 4, "unknown"), (0, 1, 0, "unknown", 2)]
    assert data["kernel k"] == [("k", "unknown", "unknown")]
    assert next(v for k, v in data.items() if k.startswith("step")) == [(0, "unknown", "unknown")]


def test_a_step_with_no_id_reads_unknown_in_the_step_time_figure() -> None:
    points = (StepPoint(None, 10.0, None), StepPoint(3, 12.0, 4))
    fig = full_vs_fallback(
        _rank(modes=(ModeTiming("FULL", 11.0, 10.0, 12.0, 2, "events", points),))
    )
    assert _leaks(fig) == []
    (pts,) = [t for t in fig.data if t.customdata is not None and t.type == "scatter"]
    assert [tuple(d) for d in pts.customdata] == [("unknown", "unknown"), (3, 4)]


def test_a_capture_with_no_time_reads_unknown_in_its_memory_hover() -> None:
    bars = (MemoryBar("FULL", 8, 2.0**20, None, None, None),
            MemoryBar("FULL", 16, 2.0**21, None, None, 3e6))  # fmt: skip
    fig = capture_memory(_rank(memory=bars))
    assert _leaks(fig) == []
    (t,) = [t for t in fig.data if t.customdata is not None]
    assert list(t.customdata) == ["unknown", "3.0 ms"]


def test_a_padding_panel_with_one_side_unrecorded_is_not_drawn_as_zero() -> None:
    step = PaddingStep(0, 16, None, 12, 4, 48, None, None)  # real rows unknown, tokens known
    fig = padding_waterfall(_rank(padding_steps=(step,)), step=0)
    drawn = {t.name: list(t.y) for t in fig.data if t.type == "waterfall"}
    assert drawn == {"query tokens": [4.0, 48.0, 0.0]}, drawn  # never "requests": real 0
    said = [a.text for a in fig.layout.annotations]
    assert "real work not recorded: not drawn" in said, said
    # both sides recorded: drawn as before
    known = dataclasses.replace(step, real_rows=4)
    assert "requests" in {t.name for t in padding_waterfall(_rank(padding_steps=(known,)), 0).data}


def test_kv_bytes_no_step_recorded_are_unknown_not_zero() -> None:
    # the series' sum of the real rows' KV bytes: over the steps that recorded them, None where
    # none did (it read 0, a "0 of real work" the waterfall could draw as one)
    import pandas as pd

    from mlaprof.analysis.series import PADDING_COLUMNS, padding_totals

    def frame(kv: list[float | None]) -> pd.DataFrame:
        rows = [
            {"step": i, "capture_size": 16, **dict.fromkeys(PADDING_COLUMNS, 1), "kv_bytes_real": v}
            for i, v in enumerate(kv)
        ]
        return pd.DataFrame(rows)

    assert padding_totals(frame([None, None]))[1] is None
    assert padding_totals(frame([1000, None]))[1] == 1000
    assert padding_totals(pd.DataFrame())[1] is None
    # the run-wide waterfall leaves the KV panel out, saying why, where no step recorded it
    one = pd.DataFrame([{"step": 0, "capture_size": 16, "real_rows": 3, "padding_rows": 12,
                         "real_tokens": 4, "padding_tokens": 48, "kv_bytes_real": None,
                         "kv_bytes_padding": 100}])  # fmt: skip
    total, kv = padding_totals(one)
    step = PaddingStep(0, 16, 3, 12, 4, 48, None, 100)
    fig = padding_waterfall(_rank(padding=total, padding_steps=(step,), kv_bytes_real=kv))
    assert "KV read per layer" not in {t.name for t in fig.data if t.type == "waterfall"}
    assert "real work not recorded: not drawn" in [a.text for a in fig.layout.annotations]
