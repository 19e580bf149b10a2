"""Scheduler vs worker records of a recorded vLLM engine, read while the two processes commit to
their two databases at different moments: only the steps both committed are compared.

The records have the fields the plugin writes: the worker's ``engine-step`` events carry
``verify_rows`` / ``verify_draft_tokens`` (mlaprof/integrations/vllm_recorder.py, ``step_rows``),
the EngineCore's ``spec-accept`` events ``verify_rows`` / ``draft_tokens``
(``EngineRecorder._finish_accept``), in ``rank0.db`` and ``rank0.scheduler.db``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.consistency import scheduler_agreement
from mlaprof.analysis.evidence.engine import acceptance, engine_steps
from mlaprof.analysis.served import engine_findings, served_summary
from mlaprof.analysis.step_records import EngineStep
from mlaprof.recording import event_row
from mlaprof.store import create_run, load

if TYPE_CHECKING:
    from mlaprof.analysis.sections import EngineSection

META = {"kind": "engine", "source": "vllm plugin", "scenario": {"name": "vllm-engine"}}


def _step(step: int, rows: int) -> dict:
    return {"step": step, "kind": "verify", "backend": "TRITON_MLA", "builder": "b", "heads": 16,
            "graph_mode": "FULL", "num_tokens": rows * 4, "padded_tokens": rows * 4,
            "verify_rows": rows, "verify_draft_tokens": rows * 3, "verify_rows_as_prefill": 0,
            "drafter_builds": 0, "spec_method": "mtp", "num_speculative_tokens": 3}  # fmt: skip


def _accept(seq: int, rows: int, drafts: int) -> dict:
    return {"seq": seq, "verify_rows": rows, "draft_tokens": drafts, "accepted_tokens": rows}


def _text(run_dir) -> tuple[EngineSection | None, str]:
    with load(run_dir) as run:
        eng = served_summary(engine_steps(run.events), acceptance(run.events))
    assert eng is not None
    return eng, " ".join(f.evidence for f in engine_findings(eng, None))


def test_a_lagging_scheduler_database_is_no_disagreement(tmp_path):
    worker = create_run(tmp_path, "r", META)
    sched = create_run(tmp_path, "r", META, role="scheduler")
    rows = [2, 3, 1, 4, 2]
    for i, n in enumerate(rows):
        worker.add("events", **event_row("vllm", "engine-step", "s", _step(i, n)))
    for i, n in enumerate(rows[:2]):  # the EngineCore has committed two steps so far
        sched.add("events", **event_row("vllm", "spec-accept", "a", _accept(i, n, n * 3)))
    eng, text = _text(tmp_path / "r")
    assert eng.scheduler_matches_worker is True
    assert eng.scheduler_worker_compared == 2
    assert "DISAGREE" not in text and "3 worker steps not yet matched" in text
    # the worker lags now: the scheduler is ahead by one; still compared over the common steps
    for i, n in enumerate(rows[2:] + [5, 5], start=2):
        sched.add("events", **event_row("vllm", "spec-accept", "a", _accept(i, n, n * 3)))
    eng, text = _text(tmp_path / "r")
    assert (eng.scheduler_matches_worker, eng.scheduler_worker_compared) == (True, 5)
    assert "2 scheduler steps not yet matched" in text
    worker.finish()
    sched.finish()


def test_records_that_really_differ_disagree(tmp_path):
    worker = create_run(tmp_path, "r", META)
    sched = create_run(tmp_path, "r", META, role="scheduler")
    for i, n in enumerate([2, 3, 1]):
        worker.add("events", **event_row("vllm", "engine-step", "s", _step(i, n)))
    sched.add("events", **event_row("vllm", "spec-accept", "a", _accept(0, 2, 6)))
    sched.add("events", **event_row("vllm", "spec-accept", "a", _accept(1, 3, 8)))  # 9 drafted
    eng, text = _text(tmp_path / "r")
    assert eng.scheduler_matches_worker is False
    assert "DISAGREE on 2 steps both committed (first at verify step 1)" in text


def test_nothing_to_compare_is_not_an_agreement():
    (step,) = [EngineStep.of({**_step(0, 1), "rank": 0})]
    a = scheduler_agreement([step], [])
    assert (a.agree, a.compared, a.text) == (None, 0, "not both present")
