"""The dashboard's header names where a run came from: a scenario run's scenario, an import's
file and format as the report says it (the analysis' ``imported`` section: "imported from
tests/data/aiter/eager_syncs (csv)", not the importer's name "rocprof"), an engine record's
source ("recorded from", by store.runkind), never "scenario rocprof" for a trace that has no
scenario (its JSON: ``scenario: {}``)."""

from __future__ import annotations

import pytest

from mlaprof.tui.once import read_view
from mlaprof.tui.text import header_lines
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"


@pytest.mark.parametrize(
    ("name", "origin"),
    [
        ("demo-bug-legacy-flat-syncs-break-capture", "scenario "),
        ("aiter-eager_syncs", "imported from tests/data/aiter/eager_syncs (csv)"),
        ("kineto_graph_replay", "imported from tests/data/kineto_graph_replay.json.gz (kineto)"),
        ("log-tp2_two_starts", "imported from tests/data/vllm/tp2_two_starts.log (vLLM log)"),
        ("engine-engine_ngram_run", "recorded from "),
    ],
)
def test_the_header_says_where_the_run_came_from(name: str, origin: str) -> None:
    view, _ = read_view(shipped_runs.run_dir(name))
    second = header_lines(view)[1]
    assert second.startswith(origin), second
    if not origin.startswith("scenario"):
        assert not second.startswith("scenario")


def test_the_view_never_gives_the_mode_asked_for_as_the_mode_that_ran() -> None:
    """Where the capture section does not say the mode that ran, the view says so and names
    the mode asked for as only that; the mode that ran, where said, is the view's."""
    import dataclasses

    from mlaprof.tui.view import _graph_mode

    view, _ = read_view(shipped_runs.run_dir("demo-bug-legacy-flat-syncs-break-capture"))
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.store.reader import Run

    cap = build_summary(
        Run(shipped_runs.run_dir("demo-bug-legacy-flat-syncs-break-capture"))
    ).capture
    assert cap is not None and cap.effective_mode and view.graph_mode == cap.effective_mode
    unsaid = dataclasses.replace(cap, effective_mode=None, per_rank=None, mode="FULL")
    assert _graph_mode(unsaid, "PIECEWISE") == unsaid.ran_text == "unknown (asked for FULL)"
    assert _graph_mode(None, "FULL") == "unknown (asked for FULL)"
    assert _graph_mode(None, None) == "unknown"
