"""A CPU step's padding and splits rows are written in the step's own commit: a run stopped in
the middle of a step (killed, or its backend failing) keeps no padding or splits row of a step
it never committed, so its padding never counts a step more than its status says."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import mlaprof
from mlaprof import cpu_runner
from mlaprof.backends.registry import get_backend
from mlaprof.scenario import Scenario


class FailsInStep1:
    """The torch backend, failing on the first layer of the second step."""

    def __init__(self, layers: int) -> None:
        self.inner, self.calls, self.layers = get_backend("torch"), 0, layers

    def forward(self, *a, **k) -> None:  # noqa: ANN002, ANN003
        self.calls += 1
        if self.calls > self.layers:
            raise RuntimeError("stopped mid-step")
        self.inner.forward(*a, **k)


def test_a_step_stopped_midway_leaves_no_padding_or_splits_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sc = dataclasses.replace(Scenario(), kv_lens=[64, 40], layers=2, steps=3).validate()
    monkeypatch.setattr(cpu_runner, "get_backend", lambda name: FailsInStep1(sc.layers))
    writer = cpu_runner.start_run(sc, "torch", "cpu", tmp_path, name="w", threads=1)
    with pytest.raises(RuntimeError, match="stopped mid-step"):
        cpu_runner.run_cpu(sc, "torch", writer, check_syncs="off")
    writer.finish()
    with mlaprof.load(tmp_path / "w") as run:
        steps = set(run.steps["step"])
        assert steps == {0}
        assert set(run.table("padding")["step"]) == steps
        assert set(run.table("splits")["step"]) == steps
