"""The path check (one layer of the native and the flattened verify path, sync-checked on step 0's
metadata) reuses the run's own step-0 inputs where they are fp32: its counts and ops follow the
metadata, not the values, so a second random draw of the KV pool only cost time."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from mlaprof import cpu_runner
from mlaprof.backends.base import InputPool
from mlaprof.metadata import build_metadata, step_shape
from mlaprof.scenario import Scenario

SC = dataclasses.replace(Scenario(), kv_lens=[64, 40, 96], layers=1, steps=2).validate()


class Rows:
    """A writer that keeps what it is given."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, dict[str, Any]]] = []

    def add(self, table: str, **row: Any) -> None:
        self.rows.append((table, row))


def _events(inp: Any) -> list[dict[str, Any]]:
    w = Rows()
    cpu_runner.record_path_check(SC, w, inp)  # type: ignore[arg-type]
    return [json.loads(r["data"]) for t, r in w.rows if t == "events"]


def test_the_run_inputs_give_the_drawn_inputs_path_check() -> None:
    meta = build_metadata(step_shape(SC, 0), SC.page_size, SC.min_kv_mode, "cpu", seed=SC.seed)
    own = InputPool(SC.heads, torch.float32, seed=12345).inputs(meta)
    drawn = _events(None)
    assert [e["backend"] for e in drawn] == ["torch", "legacy-flat"]
    assert (
        drawn[1]["syncs_per_layer"] > 0 and drawn[1]["ops"]
    )  # the flattened path's syncs are seen
    assert _events(own) == drawn


def test_a_run_draws_its_inputs_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_second_draw(*a: Any, **k: Any) -> None:
        raise AssertionError("the path check drew its own inputs")

    monkeypatch.setattr(cpu_runner, "make_inputs", no_second_draw)
    writer = cpu_runner.start_run(SC, "torch", "cpu", tmp_path, name="r")
    cpu_runner.run_cpu(SC, "torch", writer)
    writer.finish()
