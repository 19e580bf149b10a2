"""Kernel timelines of profiled GPU steps: layers from the kernels of a graph replay or from the
GPU-side layer ranges of eager steps (pure parsing of a Kineto trace, no GPU)."""

import json
from decimal import Decimal
from pathlib import Path

from mlaprof.gpu.timeline import kernel_records, layer_marks
from mlaprof.importers.kineto import parse

P = Path("synthetic.json")


def _k(name, ts, dur, corr, grid=(1, 1, 1)):
    return {
        "ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
        "args": {"device": 0, "stream": 7, "correlation": corr, "grid": list(grid),
                 "block": [128, 1, 1]},
    }  # fmt: skip


def _doc(events):
    return parse(P, json.dumps({"traceEvents": events, "baseTimeNanoseconds": 1_000_000_000}))


def test_graph_replay_layers_start_at_each_stage1_kernel():
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 9.0, "dur": 2.0,
              "pid": 1, "tid": 1, "args": {"correlation": 5}}  # fmt: skip
    ev = [
        launch,
        _k("mla_verify_stage1_0d1d", 10.0, 3.0, 5, (2, 1, 16)),
        _k("mla_verify_stage2_0d1d", 13.5, 1.0, 5),
        _k("mla_verify_stage1_0d1d", 15.0, 3.25, 5, (2, 1, 16)),
        _k("mla_verify_stage2_0d1d", 18.5, 1.0, 5),
    ]
    recs = kernel_records(_doc(ev), P, step=30)
    assert [r["layer"] for r in recs] == [0, 0, 1, 1]
    assert {r["step"] for r in recs} == {30} and {r["replay"] for r in recs} == {0}
    assert recs[2]["start_ns"] == 1_000_015_000 and recs[2]["end_ns"] == 1_000_018_250
    assert recs[0]["grid_z"] == 16 and recs[0]["splits"] is None  # the grid may be only a cap


def test_eager_layers_from_gpu_layer_ranges():
    ev = [
        {"ph": "X", "cat": "gpu_user_annotation", "name": "mlaprof layer 0", "ts": 10.0, "dur": 5.0},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "mlaprof layer 1", "ts": 20.0, "dur": 5.0},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "other range", "ts": 0.0, "dur": 50.0},
        _k("elementwise", 11.0, 1.0, 1),
        _k("gemm", 21.0, 2.0, 2),
        _k("late", 30.0, 1.0, 3),  # outside every layer range
    ]  # fmt: skip
    doc = _doc(ev)
    assert [m[2] for m in layer_marks(doc)] == [0, 1]
    assert [r["layer"] for r in kernel_records(doc, P, step=2)] == [0, 1, None]


def test_exact_nanoseconds_from_fractional_microseconds():
    doc = parse(P, json.dumps({"traceEvents": [_k("k", 1.001, 0.002, 1)]}))
    assert isinstance(doc["traceEvents"][0]["ts"], Decimal)
    (r,) = kernel_records(doc, P, step=0)
    assert (r["start_ns"], r["end_ns"]) == (1001, 1003)


def test_profiled_steps_are_not_timings():
    import pandas as pd

    from mlaprof.analysis.timing import timing_summary

    steps = pd.DataFrame(
        {
            "step": [0, 1, 2, 3],
            "timing": ["eager-events", "eager-events", "eager-profiled", "eager-profiled"],
            "duration_ns": [1000, 1000, 9000, 9000],
            "graph_mode": ["PIECEWISE"] * 4,
        }
    )
    layers = pd.DataFrame({"step": [0, 1, 2, 3], "duration_ns": [100, 100, 900, 900]})
    t = timing_summary(steps, layers)
    assert (t.steps, t.step_median_us, t.layer_median_us) == (2, 1.0, 0.1)


def test_timeline_records_follow_the_steps_record(tmp_path):
    from mlaprof.gpu.capture_runner import _record_timeline
    from mlaprof.gpu.hostwork import HostQueue
    from mlaprof.gpu.timeline import StepProfile
    from mlaprof.store import load
    from mlaprof.store.writer import create_run

    w = create_run(tmp_path, "r", {"source": "test"})
    prof = StepProfile(None, on=False)
    prof.doc = _doc(
        [_k("mla_verify_stage1", 10.0, 3.0, 5, (2, 1, 16)), _k("mla_verify_stage2", 14.0, 1.0, 5)]
    )
    q = HostQueue()
    q.add(lambda: w.add("steps", step=7, timing="graph-replay-profiled"), "write")
    _record_timeline(w, prof, 7, q, splits=16)
    assert len(q) == 0  # the step's own record went first
    w.finish()
    run = load(tmp_path / "r")
    k = run.kernels
    assert k["splits"].tolist() == [16, 16] and k["layer"].tolist() == [0, 0]
    assert k["start_ns"].notna().all() and run.events["kind"].tolist()[-1] == "kernel-timeline"
