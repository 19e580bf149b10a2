"""Which GPU a run's numbers were measured on: ``mlaprof run`` keeps the card's name
(``device_name`` in run.json, from ``torch.cuda.get_device_name``) and the report's measured
provenance names it beside the device ("measured on cuda (NVIDIA H200)"); a run without it
(recorded before, or on the CPU) says the device alone, never a card it did not record."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from mlaprof import cpu_runner
from mlaprof.analysis.run_summary import build_summary
from mlaprof.scenario import Scenario
from mlaprof.store import load, runmeta
from tests import shipped_demo

CARD = "NVIDIA H200"


def _fake_gpu(monkeypatch: pytest.MonkeyPatch, asked: list) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: asked.append(d) or CARD)


def test_a_cuda_run_keeps_the_cards_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list = []
    _fake_gpu(monkeypatch, asked)
    sc = dataclasses.replace(Scenario(), kv_lens=[64], layers=1, steps=1).validate()
    w = cpu_runner.start_run(sc, "torch", "cuda:1", tmp_path, name="g")
    w.finish()
    assert runmeta.read(tmp_path / "g")["device_name"] == CARD
    assert asked == [torch.device("cuda:1")]  # the card the run names, not the current one
    w = cpu_runner.start_run(sc, "torch", "cpu", tmp_path, name="c")
    w.finish()
    assert "device_name" not in runmeta.read(tmp_path / "c")
    assert len(asked) == 1  # the CPU run asked no driver


def _headline_provenance(run_dir: Path) -> set[str]:
    with load(run_dir) as run:
        s = build_summary(run, series=False)
    return {h.provenance for h in s.headline if h.provenance.startswith("measured")}


def test_measured_provenance_names_the_card_only_where_recorded(tmp_path: Path) -> None:
    name = "fix-padding-active-rows-c16"
    run_dir = tmp_path / name
    shutil.copytree(shipped_demo.folder() / name, run_dir)
    # recorded before the name was kept: the device alone, the step time too
    assert _headline_provenance(run_dir) == {"measured on cuda", "measured graph replay on cuda"}
    runmeta.update(run_dir, device_name=CARD)
    assert _headline_provenance(run_dir) == {
        f"measured on cuda ({CARD})",
        f"measured graph replay on cuda ({CARD})",
    }
