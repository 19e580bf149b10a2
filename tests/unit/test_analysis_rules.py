"""Each analysis rule once, with literal cases: changing a rule (the collapse factor, the padding
threshold, a capture status, the memory measure, the CPU spread) breaks one of these."""

from __future__ import annotations

import functools
from typing import Any

import pandas as pd
import pytest

from mlaprof.analysis.capture import capture_memory_bytes, capture_summary
from mlaprof.analysis.diff import diff_summaries, diff_table
from mlaprof.analysis.evidence.model import run_meta
from mlaprof.analysis.padding import padding_findings, padding_severity, padding_waste
from mlaprof.analysis.splits import is_collapsed, split_findings
from mlaprof.analysis.timing import CPU_SPREAD, DEFAULT_THREADS, timing_label
from mlaprof.store.schema import columns
from tests import shipped_demo


def frame(table: str, rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(columns(table)))


@pytest.mark.parametrize(
    ("used", "deserved", "collapsed"),
    [(1, 2, True), (4, 8, True), (5, 8, False), (2, 3, False), (8, 8, False), (None, 4, False)],
)
def test_collapse_is_half_or_less_of_what_real_rows_deserve(used, deserved, collapsed) -> None:
    assert is_collapsed(used, deserved) is collapsed


def split(policy: str, used: int, deserved: int) -> dict:
    return {
        "step": 0,
        "capture_size": 8,
        "policy": policy,
        "used": used,
        "deserved": deserved,
        "frozen": used,
        "min_kv_used": 4,
        "min_kv_deserved": 1024,
        "occupancy_used": 0.5,
        "occupancy_deserved": 1.0,
        "target": "mi300x",  # a ROCm target: AITER's ASM kernels ship for gfx942
    }


def test_the_collapse_finding_names_only_the_collapsed_policy() -> None:
    # the dashboard draws the same summary (tests/unit/test_live_fold.py)
    rows = [split("vllm-triton", 5, 8), split("aiter-asm", 4, 8)]
    found = split_findings(frame("splits", rows), "aiter-asm", "PIECEWISE")
    assert [f.data["policy"] for f in found if f.kind == "split-collapse"] == ["aiter-asm"]


def test_padding_waste_is_the_padding_share_of_verify_tokens() -> None:
    assert padding_waste(300, 100) == 0.25
    assert padding_waste(0, 0) is None
    assert padding_severity(0.25) == "warning" and padding_severity(0.24) == "info"
    pad = frame(
        "padding",
        [
            {
                "step": 0,
                "capture_size": 4,
                "real_rows": 3,
                "padding_rows": 1,
                "real_tokens": 12,
                "padding_tokens": 4,
                "kv_bytes_real": 0,
                "kv_bytes_padding": 0,
            }
        ],
    )
    (f,) = padding_findings(pad)
    assert f.severity == "warning" and f.data["padding_fraction"] == 0.25


def test_capture_status_rules() -> None:
    syncs = frame("syncs", [{"kind": "sync", "op": "x", "location": "a.py:1", "layer": 0}])
    none = frame("syncs", [])
    caps = lambda status: frame("captures", [{"status": status, "fallback": "PIECEWISE"}])  # noqa: E731
    no_caps, mem = frame("captures", []), frame("memory", [])
    full = run_meta({"scenario": {"graph_mode": "FULL"}})
    pw = run_meta({"scenario": {"graph_mode": "PIECEWISE"}})
    # layer 0 of step 0 watched, none found / never watched (the sync probe off)
    clean = frame("layers", [{"rank": 0, "step": 0, "layer": 0, "syncs": 0}])
    unwatched = frame("layers", [{"rank": 0, "step": 0, "layer": 0, "syncs": None}])
    assert capture_summary(full, none, unwatched, caps("failed"), mem).status == "failed"
    assert capture_summary(full, syncs, clean, caps("captured"), mem).status == "captured"
    assert capture_summary(full, syncs, clean, no_caps, mem).status == "predicted-fail"
    assert capture_summary(full, none, clean, no_caps, mem).status == "predicted-ok"
    assert capture_summary(pw, syncs, clean, no_caps, mem).status == "not-attempted"
    alloc = frame("syncs", [{"kind": "alloc", "op": "x", "location": "a.py:1"}])
    assert capture_summary(full, alloc, clean, no_caps, mem).status == "predicted-ok"
    # nothing watched predicts nothing: not "no sync seen", the sync count's own "not checked"
    blind = capture_summary(full, none, unwatched, no_caps, mem)
    assert blind.status == "unknown" and blind.provenance == "not checked", blind
    assert "no step watched for syncs" in blind.label, blind.label
    assert capture_summary(pw, none, unwatched, no_caps, mem).status == "not-attempted"


def test_capture_memory_is_the_driver_delta_of_the_serving_graphs() -> None:
    mem = frame(
        "memory",
        [
            {"capture_size": 8, "graph_mode": "FULL", "pool_bytes": 0, "driver_bytes": 2 << 20},
            {"capture_size": 16, "graph_mode": "FULL", "pool_bytes": 5, "driver_bytes": 1 << 20},
            {"capture_size": 8, "graph_mode": "FULL+events", "driver_bytes": 7 << 20},
        ],
    )
    assert capture_memory_bytes(mem) == 3 << 20
    unknown = frame("memory", [{"capture_size": 8, "graph_mode": "FULL", "pool_bytes": 9}])
    assert capture_memory_bytes(unknown) is None  # not measured: unknown, never 0


def summary_with(step_us: float, timing: str, threads: int | None = DEFAULT_THREADS) -> Any:
    """A shipped run's typed summary with its step timing replaced (threads: as `mlaprof run`
    records them)."""
    from dataclasses import replace

    base = _base_summary()
    t = replace(base.timing, steps=4, timing=timing, timing_label=timing_label(timing),
                step_median_us=step_us, layer_median_us=None, full_share=1.0, threads=threads)  # fmt: skip
    return replace(base, run=timing, timing=t, findings=[])


@functools.cache
def _base_summary() -> Any:
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.store import load

    demo = shipped_demo.run("fix-padding-active-rows-c16")
    with load(demo) as run:
        return build_summary(run)


def test_cpu_timings_inside_the_run_spread_are_not_a_verdict() -> None:
    def verdict(a: Any, b: Any) -> tuple[str, str]:
        row = next(r for r in diff_table(a, b) if r["metric"] == "median step time")
        return row["verdict"], row["provenance"]

    # the default run's clock (the stepping thread's CPU time): its measured spread
    assert CPU_SPREAD > 1.0  # measured (bench/results/cpu_step_stability.json)
    cpu = summary_with(1000.0, "cpu-thread")
    inside = 1000.0 * (1 + CPU_SPREAD) / 2
    assert verdict(cpu, summary_with(inside, "cpu-thread")) == (
        "within spread",
        "CPU time of the stepping thread, 1 thread",
    )
    slower = summary_with(1000.0 * CPU_SPREAD * 1.1, "cpu-thread")
    assert verdict(cpu, slower)[0] == "worse"
    gpu = summary_with(1000.0, "graph-replay")
    assert verdict(gpu, summary_with(1500.0, "graph-replay")) == ("worse", "measured graph replay")


def test_the_spread_is_the_one_measured_on_the_runs_clock_and_thread_count() -> None:
    """A change the thread clock's spread calls a result is "within spread" for wall-timed runs
    (their wider spread measured at one thread) and for runs whose thread count was not recorded
    (torch's default pool: the widest spread measured)."""
    from mlaprof.analysis.timing import CPU_SPREAD_BY_CLOCK, CPU_SPREAD_UNSET

    thread, wall = CPU_SPREAD_BY_CLOCK[("cpu-thread", 1)], CPU_SPREAD_BY_CLOCK[("cpu-wall", 1)]
    assert 1.0 < thread < wall < CPU_SPREAD_UNSET  # measured (bench/results/cpu_*.json)

    def at(step_us: float, threads: int | None, timing: str = "cpu-wall") -> Any:
        return summary_with(step_us, timing, threads)

    def row(a: Any, b: Any) -> dict:
        return next(r for r in diff_table(a, b) if r["metric"] == "median step time")

    between = (thread + wall) / 2  # outside the thread clock's spread, inside the wall clock's
    assert row(at(1000.0, 1, "cpu-thread"), at(1000.0 * between, 1, "cpu-thread"))["verdict"] == (
        "worse"
    )
    assert row(at(1000.0, 1), at(1000.0 * between, 1))["verdict"] == "within spread"
    change = (wall + CPU_SPREAD_UNSET) / 2  # outside the 1-thread wall spread, inside the unset one
    assert row(at(1000.0, 1), at(1000.0 * change, 1))["verdict"] == "worse"
    assert row(at(1000.0, None), at(1000.0 * change, None))["verdict"] == "within spread"
    assert row(at(1000.0, 1), at(1000.0 * change, None))["verdict"] == "within spread"
    two = row(at(1000.0, 1), at(1000.0 * change, 2))
    assert (
        two["provenance"]
        == "A: CPU reference timing (1 thread), B: CPU reference timing (2 threads)"
    )
    assert diff_summaries(at(1.0, 1), at(1.0, 1))["cpu_spread"] == wall
    assert (
        diff_summaries(at(1.0, 1, "cpu-thread"), at(1.0, 1, "cpu-thread"))["cpu_spread"] == thread
    )
