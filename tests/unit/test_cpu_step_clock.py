"""A CPU run's step time at one thread is the stepping thread's CPU time: time the thread spends
off the CPU (another job holding the core) is not in it, and the wall time is recorded beside."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

import mlaprof
from mlaprof import cpu_runner
from mlaprof.backends.registry import get_backend
from mlaprof.scenario import Scenario

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

OFF_CPU_S = 0.08  # a layer that waits this long off the CPU, as under another job


class WaitsOffCpu:
    """The torch backend, but every forward first sleeps: wall time passes, CPU time does not."""

    def __init__(self) -> None:
        self.inner = get_backend("torch")

    def forward(self, *a, **k) -> None:  # noqa: ANN002, ANN003
        time.sleep(OFF_CPU_S)
        self.inner.forward(*a, **k)


def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int) -> Run:
    monkeypatch.setattr(cpu_runner, "get_backend", lambda name: WaitsOffCpu())
    before = torch.get_num_threads()
    sc = dataclasses.replace(Scenario(), kv_lens=[64, 40], layers=2, steps=1).validate()
    try:
        used = cpu_runner.use_threads(threads)
        writer = cpu_runner.start_run(sc, "torch", "cpu", tmp_path, name="w", threads=used)
        cpu_runner.run_cpu(sc, "torch", writer, check_syncs="off")
        writer.finish()
    finally:
        torch.set_num_threads(before)
    return mlaprof.load(tmp_path / "w")


def test_one_thread_times_the_thread_on_the_cpu_and_keeps_the_wall_time_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with record(tmp_path, monkeypatch, 1) as run:
        steps, layers, c = run.steps, run.layers, run.table("counters")
    assert set(steps["timing"]) == {"cpu-thread"}
    wall = c[c["name"] == "step_wall_ns"].set_index("key")["value"]
    assert set(c.loc[c["name"] == "step_process_cpu_ns", "key"]) == set(map(str, steps["step"]))
    for s in steps.itertuples():
        waited = 2 * OFF_CPU_S * 1e9  # two layers, each off the CPU for OFF_CPU_S
        assert wall[str(s.step)] >= waited  # the wall clock counts the wait
        assert s.duration_ns < wall[str(s.step)] - 0.9 * waited  # the thread's clock does not
    # layers on the same clock: together no more than their step
    per_step = layers.groupby("step")["duration_ns"].sum()
    assert (per_step.values <= steps.set_index("step")["duration_ns"].values).all()


def test_more_threads_time_the_step_on_the_wall_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the thread's CPU time would miss the pool's work: the step's time is then its wall time
    with record(tmp_path, monkeypatch, 2) as run:
        steps = run.steps
    assert set(steps["timing"]) == {"cpu-wall"}
    assert (steps["duration_ns"] >= 2 * OFF_CPU_S * 1e9).all()
