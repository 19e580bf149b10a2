"""CPU-testable parts of the CUDA capture runner: sampling, event-cost calibration, per-layer
times, offender parsing, the host work queue and its records."""

from __future__ import annotations

import random
from itertools import pairwise

import pandas as pd
import pytest
import torch

from mlaprof.errors import MlaprofError
from mlaprof.gpu.hostwork import HostQueue, RowBuffer, analysis_items
from mlaprof.gpu.offender import (
    RESULT_PREFIX,
    CaptureOutcome,
    first_error_line,
    outcome_from_failure,
    parse_child_output,
    pick_offender,
)
from mlaprof.gpu.timing import (
    calibrate,
    layer_times,
    sample_schedule,
    twin_step_ns,
)
from mlaprof.metadata import step_metadata, step_shape
from mlaprof.recording import step_analysis_rows
from mlaprof.scenario import Scenario
from mlaprof.splits.policies import POLICIES
from mlaprof.store import create_run, load


@pytest.mark.parametrize(
    ("steps", "rate"), [(64, 1 / 16), (10, 0.25), (7, 1.0), (5, 0.0), (1, 0.5)]
)
def test_sample_schedule_counts_and_spacing(steps, rate):
    sched = sample_schedule(steps, rate)
    assert len(sched) == steps
    want = min(steps, -(-round(steps * rate * 1e6) // 1_000_000)) if rate else 0
    assert sum(sched) == want
    if want:
        assert sched[0]
        picked = [i for i, s in enumerate(sched) if s]
        gaps = {b - a for a, b in pairwise(picked)}
        assert not gaps or max(gaps) - min(gaps) <= 1  # evenly spread


def test_sample_schedule_rejects_bad_rate():
    with pytest.raises(MlaprofError):
        sample_schedule(10, 1.5)


def test_calibration_and_layer_times_recover_planted_values():
    rng = random.Random(3)
    layers = [rng.uniform(20_000, 90_000) for _ in range(8)]
    cost = 2_500.0
    serving = [sum(layers) + rng.uniform(-50, 50) for _ in range(31)]
    twin = [sum(layers) + cost * 9 + rng.uniform(-50, 50) for _ in range(31)]
    cal = calibrate(serving, twin, event_nodes=9)
    assert cal.event_ns == pytest.approx(cost, abs=30)
    stamps = [0.0]
    for t in layers:
        stamps.append(stamps[-1] + t + cost)  # each interval holds one layer and one event node
    got = layer_times(stamps, cal.event_ns)
    assert got == pytest.approx(layers, abs=40)
    assert sum(got) / statistics_median(serving) == pytest.approx(1.0, abs=2e-3)
    assert twin_step_ns(statistics_median(twin), cal) == pytest.approx(sum(layers), abs=300)


def statistics_median(xs):
    import statistics

    return statistics.median(xs)


def test_calibration_never_negative_and_checks_input():
    cal = calibrate([100.0, 101.0], [99.0, 100.0], 3)
    assert cal.event_ns == 0.0
    assert layer_times([0.0, 5.0, 6.0], 10.0) == [0.0, 0.0]
    with pytest.raises(MlaprofError):
        calibrate([], [1.0], 1)
    with pytest.raises(MlaprofError):
        layer_times([0.0], 1.0)


def test_offender_prefers_the_failing_layer_and_cleans_the_message():
    events = [
        {"kind": "alloc", "layer": 0, "op": "aten.empty", "location": "a.py:1"},
        {"kind": "sync", "layer": 2, "op": "aten._local_scalar_dense", "location": "b.py:7"},
        {"kind": "sync", "layer": 2, "op": "aten.nonzero", "location": "b.py:9"},
    ]
    assert pick_offender(events, 2)["location"] == "b.py:7"
    assert pick_offender(events, 5)["op"] == "aten.empty"
    assert pick_offender([], 1) is None
    msg = "\nCUDA kernel errors might be asynchronously reported\nCUDA error: operation not permitted when stream is capturing\n"
    assert first_error_line(msg) == "CUDA error: operation not permitted when stream is capturing"
    out = outcome_from_failure(events, 2, msg)
    assert (out.status, out.op, out.layer) == ("failed", "aten._local_scalar_dense", 2)


def test_child_output_round_trip_and_missing_result():
    o = CaptureOutcome("failed", 3, "aten.nonzero", "x.py:4", "f", "boom", 12, [])
    parsed = parse_child_output("noise\n" + o.to_json() + "\n")
    assert parsed == o
    dead = parse_child_output("nothing", "Traceback...\nRuntimeError: CUDA error: bad", 1)
    assert dead.status == "failed" and "code 1" in dead.message and "CUDA error" in dead.message
    with pytest.raises(MlaprofError):
        parse_child_output(RESULT_PREFIX + "{not json")


def test_host_queue_runs_only_while_busy():
    q = HostQueue()
    done: list[int] = []
    q.extend([lambda i=i: done.append(i) for i in range(5)])
    budget = iter([True, True, False])
    assert q.run_while(lambda: next(budget)) == 2
    assert done == [0, 1] and len(q) == 3
    assert q.drain() == 3 and done == [0, 1, 2, 3, 4]


def test_host_queue_starts_no_item_expected_to_outlast_the_deadline():
    now = [0]
    q = HostQueue(clock=lambda: now[0])
    ran: list[str] = []

    def item(name: str, cost: int):  # noqa: ANN202
        def run() -> None:
            ran.append(name)
            now[0] += cost

        return run

    q.add(item("a1", 100), "a")  # first of its kind: runs, its cost is learnt
    q.add(item("a2", 100), "a")
    assert q.run_while(lambda: True, deadline_ns=120) == 1  # 100 + 1.5 * 100 > 120: held
    assert ran == ["a1"] and q.held == 1 and q.cost_ns["a"] == 100
    now[0] = 0
    assert q.run_while(lambda: True, deadline_ns=150) == 1  # 0 + 150 fits
    assert ran == ["a1", "a2"]
    q.add(item("a3", 300), "a")
    now[0] = 0
    q.run_while(lambda: True, deadline_ns=1000)
    assert q.cost_ns["a"] == pytest.approx(100 + 0.2 * 200)  # smoothed, not the last alone
    q.add(item("b", 5), "b")
    assert q.run_while(lambda: False, deadline_ns=10**9) == 0  # never when the GPU is done
    assert q.drain() == 1 and ran[-1] == "b"


def test_row_buffer_commits_a_steps_rows_with_its_record(tmp_path):
    sc = Scenario(steps=2, layers=2).validate()
    meta, shape = step_metadata(sc, 1), step_shape(sc, 1)
    w = create_run(tmp_path, "r", {"source": "test"})
    rows = RowBuffer()
    q = HostQueue()
    q.extend(analysis_items(rows, sc, 1, meta, shape, {}))
    q.drain()
    assert {t for t, _ in rows.rows} == {"splits", "padding"}
    n = len(rows.rows)
    with w.transaction():
        rows.write_into(w)
    assert rows.rows == []
    w.finish()
    run = load(tmp_path / "r")
    assert len(run.splits) + len(run.padding) == n


def test_analysis_items_write_what_the_shared_recorder_writes(tmp_path):
    """The GPU runner's queued items record the same rows as the CPU runner writes in a step's
    commit (``step_analysis_rows``): every policy, same values, same padding row."""
    sc = Scenario(steps=2, layers=2).validate()
    meta, shape = step_metadata(sc, 1), step_shape(sc, 1)
    w = create_run(tmp_path, "gpu", {"source": "test"})
    holder: dict = {}
    q = HostQueue()
    q.extend(analysis_items(w, sc, 1, meta, shape, holder))
    q.drain()
    w.finish()
    ref = create_run(tmp_path, "cpu", {"source": "test"})
    rows, main = step_analysis_rows(sc, 1, meta, shape)
    with ref.transaction():
        for table, row in rows:
            ref.add(table, **row)
    ref.finish()
    with load(tmp_path / "gpu") as run, load(tmp_path / "cpu") as cpu:
        got = run.splits.drop(columns=["rank"]).sort_values("policy").reset_index(drop=True)
        want = cpu.splits.drop(columns=["rank"]).sort_values("policy").reset_index(drop=True)
        released = [p for p in POLICIES.values() if not p.unreleased]  # open-PR ones: opt-in
        assert len(want) >= len(released) - 2  # the recorder covers (nearly) every policy
        assert got["policy"].tolist() == want["policy"].tolist()
        pd.testing.assert_frame_equal(got, want)
        assert run.padding.drop(columns=["rank"]).equals(cpu.padding.drop(columns=["rank"]))
    assert holder["main"]["policy"] == sc.policy == main.policy
    assert holder["main"]["used"] == main.used


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error path")
def test_run_cuda_without_gpu_is_a_clear_error(tmp_path):
    from mlaprof.gpu.capture_runner import run_cuda

    w = create_run(tmp_path, "r", {"source": "test"})
    with pytest.raises(MlaprofError, match="GPU"):
        run_cuda(Scenario().validate(), "triton", w)
    w.finish()
