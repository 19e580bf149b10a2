"""The headline's capture memory: per GPU, so several ranks' are said per rank, never summed
(the per-rank table below is "never summed"); an unknown one says the analysis' one reason, the
same words as the failed-attempt finding (mlaprof.analysis.memory.memory_unknown_why)."""

from __future__ import annotations

from mlaprof.analysis.memory import ATTEMPT_NOT_MEASURED
from tests import shipped_runs
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"

LABEL = "capture memory (driver free-memory delta)"


def _row(s: object):  # noqa: ANN202 (a HeadlineRow)
    (row,) = [h for h in s.headline if h.label.startswith("capture memory")]  # type: ignore[attr-defined]
    return row


def test_two_ranks_capture_memory_is_said_per_rank_in_every_view() -> None:
    name = "log-tp2_two_starts"
    s = shipped_runs.summary(name)
    row = _row(s)
    assert (row.label, row.value) == (LABEL, "1.02-1.03 GiB per rank (2 ranks)"), row
    for view, text in every_view(shipped_runs.run_dir(name), s).items():
        assert "1.02-1.03 GiB per rank (2 ranks)" in text, view
        assert f"{LABEL} (sum over" not in text, view  # the headline's label: no sum


def test_a_failed_attempts_unknown_memory_has_one_reason() -> None:
    name = "demo-bug-legacy-flat-syncs-break-capture"
    s = shipped_runs.summary(name)
    row = _row(s)
    assert (row.value, row.provenance) == ("unknown", ATTEMPT_NOT_MEASURED), row
    (found,) = [f for f in s.findings if f.title.startswith("failed capture attempt")]
    assert found.evidence.startswith(ATTEMPT_NOT_MEASURED + ";"), found.evidence
    for view, text in every_view(shipped_runs.run_dir(name), s).items():
        assert text.count(ATTEMPT_NOT_MEASURED) >= 2, view  # the headline and the finding
        assert "unknown (not recorded)" not in text, view


def test_the_measured_capture_memory_is_never_under_a_modelled_label() -> None:
    """The "verify buffers (modelled)" table holds modelled buffers only; the measured
    capture memory is the headline's, with its own provenance, in every view."""
    name = "demo-bug-padding-collapses-splits-c16"
    s = shipped_runs.summary(name)
    row = _row(s)
    assert row.value == "2.00 MiB" and row.provenance.startswith("measured on"), row
    for view, text in every_view(shipped_runs.run_dir(name), s).items():
        assert "2.00 MiB" in text and row.provenance in text, view
    # the rows layer's table of modelled buffers (every view's) holds no measured number
    from mlaprof.reporters.rows import front_tables, summary_blocks

    (t,) = [t for t in front_tables(summary_blocks(s)) if t.key == "reservation"]
    modelled = " ".join([*(" ".join(r) for r in t.rows), *t.notes])
    assert "capture" not in modelled and "2.00 MiB" not in modelled, modelled
