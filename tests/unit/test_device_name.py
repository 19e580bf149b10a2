"""Which GPU a run's numbers were measured on: ``mlaprof run`` keeps the card's name
(``device_name`` in run.json, from ``torch.cuda.get_device_name``) and the report's measured
provenance names it beside the device ("measured on cuda (NVIDIA H200)"); a run without it
(recorded before, or on the CPU) says the device alone, never a card it did not record. Each
rank keeps its own card in its database (a ``--ranks`` run, a vLLM engine's workers through the
plugin), and the live fold names them as the report does."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import pytest
import torch

from mlaprof import cpu_runner
from mlaprof.analysis.evidence.scenario import scenario_evidence
from mlaprof.analysis.live import FOLDED, FoldedRun, LiveFold
from mlaprof.analysis.run_summary import build_summary
from mlaprof.scenario import Scenario
from mlaprof.store import load, runmeta
from mlaprof.store.follow import RunFollow
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
    with load(tmp_path / "g") as run:
        assert run.rank_meta(0)["device_name"] == CARD  # the rank's own record too
    assert asked == [torch.device("cuda:1")]  # the card the run names, not the current one
    w = cpu_runner.start_run(sc, "torch", "cpu", tmp_path, name="c")
    w.finish()
    assert "device_name" not in runmeta.read(tmp_path / "c")
    assert len(asked) == 1  # the CPU run asked no driver


def _headline_provenance(run_dir: Path) -> set[str]:
    with load(run_dir) as run:
        s = build_summary(run, series=False)
    step = next(h.provenance for h in s.headline if h.label == "median step")
    # one story: the step time's headline row and the timing section (every view's "timing"
    # row, the TUI's step-time line, a compare's provenance) say the same words
    assert s.timing.timing_label == step
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


def _ranks_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cards: list[str | None]) -> Path:
    """A run of one rank per card (None: a CPU rank, no card), as ``--ranks`` records it:
    the launcher's run.json first, each rank joining it."""
    sc = dataclasses.replace(Scenario(), kv_lens=[64], layers=1, steps=1).validate()
    runmeta.init_run_dir(tmp_path, "tp", {"source": "mlaprof run", "kind": "scenario",
                                          "device": "cuda"})  # fmt: skip
    for rank, card in enumerate(cards):
        monkeypatch.setattr(cpu_runner, "card_name", lambda d, c=card: c)
        cpu_runner.start_run(sc, "torch", "cuda", tmp_path, name="tp", rank=rank).finish()
    return tmp_path / "tp"


@pytest.mark.parametrize(
    ("cards", "said"),
    [
        ([CARD, CARD], f"measured on cuda ({CARD})"),
        ([CARD, "NVIDIA H100 80GB HBM3"],
         f"measured on cuda (rank 0: {CARD}; rank 1: NVIDIA H100 80GB HBM3)"),
        (["NVIDIA H100", CARD, CARD, None],
         f"measured on cuda (rank 0: NVIDIA H100; ranks 1-2: {CARD}; rank 3: not recorded)"),
        ([None, None], "measured on cuda"),
    ],
)  # fmt: skip
def test_each_ranks_card_is_its_own(tmp_path, monkeypatch, cards, said) -> None:
    run_dir = _ranks_on(tmp_path, monkeypatch, cards)
    assert "device_name" not in runmeta.read(run_dir)  # the launcher's run.json names none
    with load(run_dir) as run:
        assert str(scenario_evidence(run).provenance) == said


def test_a_live_fold_names_each_ranks_card_as_the_full_reader_does(tmp_path, monkeypatch) -> None:
    # the dashboard's provisional summary and the report tell one story
    run_dir = _ranks_on(tmp_path, monkeypatch, [CARD, "NVIDIA H100 80GB HBM3"])
    store, fold = RunFollow(run_dir), LiveFold("tp")
    store.exists()
    fold.meta = {"name": "tp", **store.read_meta(False)}
    store.discover()
    for key in store.databases:
        fold.set_status(key, *store.state(key))
        for rows in store.new_rows(key, 1000, FOLDED):
            fold.add(rows)
    live = str(scenario_evidence(FoldedRun(fold.snapshot())).provenance)
    with load(run_dir) as run:
        assert live == str(scenario_evidence(run).provenance)
    assert live == f"measured on cuda (rank 0: {CARD}; rank 1: NVIDIA H100 80GB HBM3)"


class _FakeCuda:
    """torch.cuda as a vLLM worker has it: records what the plugin asks."""

    def __init__(self, initialized: bool = True, capturing: bool = False) -> None:
        self.initialized, self.capturing, self.asked = initialized, capturing, []

    def is_initialized(self) -> bool:
        return self.initialized

    def is_current_stream_capturing(self) -> bool:
        return self.capturing

    def current_device(self) -> int:
        return 3

    def get_device_name(self, d: int) -> str:
        self.asked.append(d)
        return CARD


@pytest.mark.parametrize(
    ("initialized", "capturing", "card"),
    [(True, False, CARD), (False, False, None), (True, True, None)],
)
def test_the_plugin_asks_a_workers_card_only_where_cuda_is_up_and_not_capturing(
    monkeypatch, initialized, capturing, card
) -> None:
    from types import SimpleNamespace

    from mlaprof.integrations import vllm_plugin

    fake = _FakeCuda(initialized, capturing)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=fake))
    assert vllm_plugin._worker_card() == card
    assert fake.asked == ([3] if card else [])  # the worker's own device, asked once
    monkeypatch.setitem(sys.modules, "torch", None)  # a process without torch: nothing
    assert vllm_plugin._worker_card() is None


def test_an_engine_runs_workers_keep_their_cards(tmp_path, monkeypatch) -> None:
    from mlaprof.analysis.evidence.engine import engine_evidence
    from mlaprof.integrations import vllm_plugin

    monkeypatch.setenv(vllm_plugin.TRACES_ENV, str(tmp_path))
    monkeypatch.setenv(vllm_plugin.RUN_ENV, "eng")
    asked = []
    monkeypatch.setattr(vllm_plugin, "_worker_card", lambda: asked.append(1) or CARD)
    for rank in (0, 1):
        vllm_plugin.open_writer(rank=rank).finish()
    vllm_plugin.open_writer(role="scheduler", rank=0).finish()
    assert len(asked) == 2  # the workers asked, the scheduler (no GPU of its own) not
    with load(tmp_path / "eng") as run:
        assert run.rank_meta(0, "scheduler").get("device_name") is None
        assert str(engine_evidence(run).provenance) == f"measured by the engine ({CARD})"
