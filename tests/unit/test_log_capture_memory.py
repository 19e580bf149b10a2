"""A vLLM log of several ranks: its capture section holds each rank's measured capture memory
(``Capture.per_rank``, the 'Graph capturing finished' amount each worker logged) and, as the
section's ``memory_bytes``, their sum over the ranks that logged one, labelled so by every view
(it read "capture memory (sum over 2 ranks): unknown" beside findings giving 1.02 GiB and
1.03 GiB per rank). A rank that logged no amount stays unknown and is named; the sum is the last
start's, never one start's with another's, and says it is "as the log says"."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mlaprof.analysis.memory import human_bytes
from mlaprof.analysis.starts import gib
from mlaprof.importers.vllm_log import gib_bytes, import_vllm_log
from mlaprof.reporters import rows
from tests import shipped_runs
from tests.unit.test_add_a_section import _views as shipped_views
from tests.view_texts import every_view, flat

WORKER_GROUP = "shipped-runs"
SUMMED = "(sum over 2 ranks)"
ENGINE = (
    "(EngineCore_DP0 pid=1) INFO 09-02 14:03:11 [core.py:93] Initializing a V1 LLM engine "
    "(v0.32.0) with config: model='m', tensor_parallel_size={tp}, pipeline_parallel_size=1, "
    "data_parallel_size=1"
)


def _line(rank: int, msg: str) -> str:
    return (
        f"(Worker_TP{rank} pid={100 + rank}) INFO 09-02 14:04:31 [gpu_model_runner.py:6582] {msg}"
    )


def _took(rank: int, amount: str) -> str:
    return _line(rank, f"Graph capturing finished in 14 secs, took {amount} GiB")


def _estimate(rank: int, amount: str) -> str:
    return _line(rank, f"Estimated CUDA graph memory: {amount} GiB total")


def _summary(tmp_path: Path, *lines: str) -> tuple[Path, Any]:
    import mlaprof

    p = tmp_path / "server.log"
    p.write_text("\n".join(lines) + "\n")
    run_dir, _ = import_vllm_log(p, tmp_path / "t", "v")
    with mlaprof.load(run_dir) as run:
        return run_dir, mlaprof.build_summary(run)


def _labels(s: Any) -> dict[str, tuple[str, str]]:
    return {r.key: (r.label, r.text) for b in rows.summary_blocks(s) for r in b.rows}


def _words(text: str) -> str:
    """A view's text as words (a table's cells in order, whatever draws its borders)."""
    return " ".join(re.sub(r"[^\w.µ%']+", " ", text).split())


def test_a_logs_capture_section_holds_each_ranks_memory_and_their_labelled_sum() -> None:
    """The committed two-start TP2 log: the capture section (start 2) holds rank 0's 1.02 GiB
    and rank 1's 1.03 GiB, the figures its memory finding gives, and their sum labelled over
    the 2 ranks in the rows layer, the headline and the compare's row; every view says so."""
    from mlaprof.analysis.diff import diff_table

    name = "log-tp2_two_starts"
    s = shipped_runs.summary(name)
    cap = s.capture
    want = [(0, "captured", gib_bytes("1.02")), (1, "captured", gib_bytes("1.03"))]
    assert [(r.rank, str(r.status), r.memory_bytes) for r in cap.per_rank or []] == want
    assert cap.memory_bytes == gib_bytes("1.02") + gib_bytes("1.03")
    assert cap.memory_measure == "driver free-memory delta"
    # the same figures as the last start's memory rows and its finding
    st = s.engine_starts[-1]
    assert [(m.rank, m.measured_bytes) for m in st.memory] == [(r, b) for r, _, b in want]
    (f,) = [f for f in s.findings if f.kind == "memory" and "start 2" in f.title]
    for r in cap.per_rank or []:
        assert human_bytes(r.memory_bytes or 0) == gib(r.memory_bytes)  # the log's precision
        assert f"rank {r.rank}: {gib(r.memory_bytes)} in 14 s" in f.title, f.title
    assert _labels(s)["capture.memory_bytes"] == (f"capture memory {SUMMED}", "2.05 GiB")
    (head,) = [h for h in s.headline if h.label.startswith("capture memory")]
    # per GPU: the headline says it per rank, never the sum (each rank's GPU holds its own)
    assert (head.label, head.value) == ("capture memory (driver free-memory delta)",
                                        "1.02-1.03 GiB per rank (2 ranks)")  # fmt: skip
    # the log's, of the start the capture line is of
    assert head.provenance == f"{cap.provenance}, start 2 of 2, as the log says"
    (row,) = [r for r in diff_table(s, s) if r["metric"].startswith("capture memory")]
    assert row["provenance"].endswith(SUMMED), row
    for view, text in shipped_views(s, name).items():
        words = flat(text)
        assert "1.02-1.03 GiB per rank (2 ranks)" in words, view  # the headline's
        assert f"capture memory {SUMMED}: unknown" not in words, view
        if view != "json":  # the section's sum, labelled as one
            assert "2.05 GiB" in words and f"capture memory {SUMMED}" in words, view
            assert "0 captured 1.02 GiB" in _words(words), view
            assert "1 captured 1.03 GiB" in _words(words), view


def test_a_rank_that_logged_no_capture_memory_is_named_and_left_out_of_the_sum(
    tmp_path: Path,
) -> None:
    """Three workers, rank 2 logged only vLLM's estimate: the sum is ranks 0-1's, labelled
    over those 2 ranks, and rank 2's memory reads unknown in its row and beside the sum."""
    run_dir, s = _summary(
        tmp_path,
        ENGINE.format(tp=3),
        _estimate(2, "0.52"),
        _took(0, "0.50"),
        _took(1, "0.51"),
    )
    cap = s.capture
    assert [(r.rank, str(r.status), r.memory_bytes) for r in cap.per_rank or []] == [
        (0, "captured", gib_bytes("0.50")),
        (1, "captured", gib_bytes("0.51")),
        (2, "unknown", None),
    ]
    assert cap.memory_bytes == gib_bytes("0.50") + gib_bytes("0.51")
    assert _labels(s)["capture.memory_bytes"] == (f"capture memory {SUMMED}", "1.01 GiB")
    (head,) = [h for h in s.headline if h.label.startswith("capture memory")]
    assert "sum over" not in head.label
    assert head.value == "512.00-522.24 MiB per rank (2 ranks); rank 2: unknown", head.value
    for view, text in every_view(run_dir, s, with_json=True).items():
        assert "512.00-522.24 MiB per rank (2 ranks); rank 2: unknown" in text, view
        if view == "json":  # rank 2's row holds no amount (an optional key it did not write)
            assert '{"rank": 2, "status": "unknown"}' in text, view
            continue
        assert "2 unknown unknown" in _words(text), view  # rank 2's row: status, memory


def test_one_rank_measured_of_two_is_that_ranks_memory_never_a_sum(tmp_path: Path) -> None:
    _, s = _summary(tmp_path, ENGINE.format(tp=2), _took(0, "0.50"), _estimate(1, "0.52"))
    cap = s.capture
    assert [(r.rank, r.memory_bytes) for r in cap.per_rank or []] == [
        (0, gib_bytes("0.50")),
        (1, None),
    ]
    assert cap.memory_bytes == gib_bytes("0.50")
    assert _labels(s)["capture.memory_bytes"] == ("capture memory", "512.00 MiB")
    (head,) = [h for h in s.headline if h.label.startswith("capture memory")]
    assert "sum over" not in head.label and head.value == "512.00 MiB; rank 1: unknown"


@pytest.mark.parametrize("later", ["none", "one rank", "no rank"])
def test_a_multi_rank_log_without_a_capture_amount_says_no_sum(tmp_path: Path, later: str) -> None:
    """Two workers that logged a downgrade and no amount, then (``later``) a second start whose
    one worker logged an amount, or whose workers logged nothing: the memory is unknown, or that
    one rank's, never labelled a sum over the log's 2 ranks."""
    down = (
        "CUDAGraphMode.FULL is not supported with FlashInferMLABackend backend (support: "
        "AttentionCGSupport.NEVER); setting cudagraph_mode=PIECEWISE because attention is "
        "compiled piecewise"
    )
    lines = [ENGINE.format(tp=2), *(_line(r, down).replace("INFO", "WARNING") for r in (0, 1))]
    if later == "one rank":
        lines += [ENGINE.format(tp=1), _took(0, "0.25")]
    elif later == "no rank":
        lines += [ENGINE.format(tp=2)]
    _, s = _summary(tmp_path, *lines)
    cap = s.capture
    got = [(r.rank, str(r.status), r.memory_bytes) for r in cap.per_rank or []]
    label, text = _labels(s)["capture.memory_bytes"]
    assert label == "capture memory", label
    if later == "one rank":
        assert got == [(0, "captured", gib_bytes("0.25"))]
        assert text == "256.00 MiB" and cap.start == 2
        return
    assert text == "unknown" and cap.memory_bytes is None
    if later == "no rank":  # the log's ranks, each unknown at the start the line is of
        assert got == [(0, "unknown", None), (1, "unknown", None)] and cap.start == 2
    else:
        assert got == [(0, "downgraded", None), (1, "downgraded", None)]
