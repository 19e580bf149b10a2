"""A value and the words that say it (``typed_json.words_of``: a time of several ranks, said as
the pooled value where they agree, else as the range with the ranks behind each value) are said
once in every view where they read the same: a one-rank run's report printed "median step:
862.9 µs" and "step median: 862.9 µs" in its timing block, "outside layers: 0.0 µs" twice in an
imported trace's replay-time block, and its capture's label again as the capture's text. The JSON document keeps both keys. Where the words say
more than the value (ranks that differ), both rows stay: tests/unit/test_replay_time_per_rank.py."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mlaprof.analysis import sections
from mlaprof.analysis.section_base import Section
from mlaprof.analysis.typed_json import WORDS_OF
from mlaprof.reporters.renderer import JsonRenderer
from mlaprof.reporters.rows import summary_blocks
from tests import shipped_runs
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"
GPU = "demo-fix-padding-active-rows-c16"  # one rank, its steps timed on the GPU
KINETO = "kineto_graph_replay"  # an imported one-rank trace with graph replays


def _rows(s: object, key: str) -> dict[str, str]:
    (block,) = [b for b in summary_blocks(s) if b.key == key]
    return {r.key.rsplit(".", 1)[-1]: r.text for r in block.rows}


def test_every_words_field_names_a_field_of_its_section() -> None:
    classes = [c for c in vars(sections).values()
               if isinstance(c, type) and issubclass(c, Section) and dataclasses.is_dataclass(c)]  # fmt: skip
    worded = {
        (c.__name__, f.name): f.metadata[WORDS_OF]
        for c in classes
        for f in dataclasses.fields(c)
        if WORDS_OF in f.metadata
    }
    assert ("Timing", "step_median_text") in worded
    assert ("TraceReplayTime", "outside_layers_text") in worded
    for (cls, name), of in worded.items():
        fields = {f.name for f in dataclasses.fields(getattr(sections, cls))}
        assert of in fields and of != name, (cls, name, of)


def test_one_ranks_median_step_is_said_once() -> None:
    s = shipped_runs.summary(GPU)
    timing = _rows(s, "timing")
    assert timing["step_median_text"] == "862.9 µs"
    assert "step_median_us" not in timing  # its words say the same value
    views = every_view(shipped_runs.run_dir(GPU), s)
    for name in ("terminal", "markdown", "html"):
        assert "step median: 862.9" not in views[name] and "step median 862.9" not in views[name], (
            name
        )
        assert "862.9 µs" in views[name], name
    doc = json.loads(JsonRenderer().render(s))
    assert doc["timing"]["step_median_us"] == pytest.approx(862.9, abs=0.05)  # kept


def test_one_ranks_time_outside_layers_is_said_once() -> None:
    s = shipped_runs.summary(KINETO)
    rt = _rows(s, "trace.replay_time")
    assert rt["outside_layers_text"].endswith("µs")
    assert "outside_layers_us" not in rt
    # the block as each view lays it out: one "outside layers" row before its per-rank table
    views = every_view(shipped_runs.run_dir(KINETO), s)
    for name in ("terminal", "markdown", "html", "tui"):
        block = views[name].split("replay time", 1)[1].split("kernels inside graph replays")[0]
        assert block.count("outside layers") == 1, (name, block)
    doc = json.loads(JsonRenderer().render(s))
    assert "outside_layers_us" in doc["trace"]["replay_time"]


def test_ranks_that_agree_keep_the_row_that_says_they_are_pooled() -> None:
    """Two ranks with the same steps: the words read the pooled value ("862.9 µs"), and the
    value's own row says it pools them ("(median of the steps pooled over 2 ranks)"): that row
    is the one kept, never a bare "median step" that hides the pooling."""
    one = shipped_runs.summary(GPU)
    tim = one.timing
    two = dataclasses.replace(
        one,
        ranks=[0, 1],
        timing=dataclasses.replace(
            tim, per_rank=[*tim.per_rank, dataclasses.replace(tim.per_rank[0], rank=1)]
        ),
    )
    (block,) = [b for b in summary_blocks(two) if b.key == "timing"]
    got = {r.key.rsplit(".", 1)[-1]: r for r in block.rows}
    assert "step_median_text" not in got
    assert got["step_median_us"].label.endswith("(median of the steps pooled over 2 ranks)")
    assert got["step_median_us"].text == "862.9 µs"


def test_a_capture_label_its_text_repeats_is_said_once() -> None:
    """An imported trace's capture printed "label: replayed in a graph" and "capture: replayed
    in a graph"; where the text says more than the label (a recorded run's), both stay."""
    s = shipped_runs.summary(KINETO)
    cap = _rows(s, "trace.capture")
    assert cap["text"] == s.trace.capture.label == "replayed in a graph"
    assert "label" not in cap
    gpu = shipped_runs.summary(GPU)
    assert gpu.capture.text == "FULL -> captured (runs FULL)" != gpu.capture.label
    both = _rows(gpu, "capture")
    assert both["text"] == gpu.capture.text


def test_a_capture_status_its_label_repeats_is_said_once_as_the_status() -> None:
    """A recorded run's capture printed "label: captured" beside "status: captured" (and
    "failed" twice for a failed capture): the status row stays, the one every view names; where
    the label says more than the status ("replayed in a graph"), both stay. The JSON document
    keeps both keys."""
    for run in (GPU, KINETO):
        s = shipped_runs.summary(run)
        cap = s.capture if run == GPU else s.trace.capture
        rows = _rows(s, "capture" if run == GPU else "trace.capture")
        assert rows["status"] == str(cap.status), (run, rows)
        if cap.label == str(cap.status):
            assert "label" not in rows, (run, rows)
        else:
            assert cap.label in (rows.get("label"), rows.get("text")), (run, rows)
    gpu = shipped_runs.summary(GPU)
    assert gpu.capture.label == gpu.capture.status == "captured"
    assert gpu.to_json()["capture"]["label"] == "captured"


@pytest.mark.parametrize("status", ["failed", "captured", "downgraded"])
def test_a_capture_whose_text_label_and_status_read_the_same_is_said_once(status: str) -> None:
    """Where nothing more is known the text is the label and the label the status (a failed
    capture of an engine's log, say): three fields, one row, the status's."""
    from mlaprof.analysis.capture_status import CaptureStatus
    from mlaprof.analysis.evidence.common import capture

    s = shipped_runs.summary(GPU)
    cap = capture(CaptureStatus(status), "p")
    assert cap.text == cap.label == str(cap.status) == status
    s = dataclasses.replace(s, capture=cap)
    rows = _rows(s, "capture")
    said = [k for k, t in rows.items() if t == status]
    assert said == ["status"], rows
    for name, text in every_view(shipped_runs.run_dir(GPU), s).items():
        flat = " ".join(text.replace("|", " ").split())
        assert f"status: {status}" in flat or f"status {status}" in flat, name
        for other in ("label", "capture"):
            assert f"{other}: {status} " not in flat and f"{other} {status} " not in flat, name
