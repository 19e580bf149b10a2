"""Each step time says its window: vLLM's step annotation (``Worker.annotate_profile``'s
record_function around execute_model, vLLM 0.32 ``gpu_worker.py`` L1180-1291) opens before the
model runner dispatches anything, the mlaprof plugin times a step from its attention-metadata
build (dispatch) to its output; the two are different windows of one step and say so."""

from __future__ import annotations

from mlaprof.analysis.timing import TIMING_LABELS, TIMING_SHORT, timing_label
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"


def test_the_plugin_step_says_its_window() -> None:
    t = shipped_runs.summary("engine-engine_ngram_run").timing
    assert t.timing == "dispatch-to-output"
    assert "plugin window" in t.timing_label and "vLLM's step annotation" in t.timing_label


def test_a_profiler_folder_step_says_its_window() -> None:
    t = shipped_runs.summary("vllm_cpu_mla_profile").timing
    assert t.timing == "vllm-step" and "vLLM's step annotation window" in t.timing_label


def test_every_step_window_has_a_label_and_a_short_form() -> None:
    for timing in ("vllm-step", "dispatch-to-output", "dispatch-interval"):
        assert timing_label(timing) != timing and timing in TIMING_SHORT
    assert set(TIMING_SHORT) == set(TIMING_LABELS)


def test_no_shipped_input_reads_its_timing_as_a_raw_key() -> None:
    """Every step timing a producer writes reads as words in every view (an imported trace's
    eager steps read "imported trace (eager steps)", not "trace-eager")."""
    for name in shipped_runs.NAMES:
        t = shipped_runs.summary(name).timing
        if t.timing is not None:
            assert t.timing_label != t.timing and t.timing in TIMING_LABELS, (name, t.timing)
    for timing in ("trace-replay", "trace-eager", "trace"):  # mlaprof.importers.annotate's
        assert timing_label(timing).startswith("imported trace")


def test_an_imports_unchecked_sync_line_says_why_its_own_check_counted_nothing() -> None:
    """One sync line for every view: an import that no probe watched and whose own check could
    not count (no API trace) says both, so Markdown, HTML and the dashboard read the trace's
    reason as the terminal's own "syncs: unknown (...)" line does."""
    s = shipped_runs.summary("vllm_cpu_mla_profile")
    assert s.trace is not None and s.trace.syncs.status == "unknown"
    assert not s.sync_counts.checked
    assert s.sync_counts.text.endswith(f"the trace's own check: {s.trace.syncs.evidence}")
