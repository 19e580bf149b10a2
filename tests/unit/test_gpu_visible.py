"""Whether a GPU can be there, told from device nodes and visibility variables (no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlaprof.gpu.visible import HIDING, no_gpu_reason


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in HIDING:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("sys.platform", "linux")


def _dev(root: Path, *names: str) -> str:
    (root / "dev").mkdir()
    for n in names:
        (root / "dev" / n).touch()
    return str(root)


def test_no_device_node_is_a_certain_no(tmp_path: Path, bare: None) -> None:
    reason = no_gpu_reason(_dev(tmp_path, "null", "nvidiactl"))  # a control node is no GPU
    assert reason and "no GPU device node" in reason


@pytest.mark.parametrize("node", ["nvidia0", "nvidia7", "kfd", "dxg"])
def test_a_gpu_node_leaves_the_answer_to_the_runtime(tmp_path: Path, bare: None, node: str) -> None:
    assert no_gpu_reason(_dev(tmp_path, node)) is None


@pytest.mark.parametrize("value", ["", "-1", " "])
def test_emptied_visibility_hides_every_gpu(tmp_path, bare, monkeypatch, value: str) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    reason = no_gpu_reason(_dev(tmp_path, "nvidia0"))
    assert reason and "CUDA_VISIBLE_DEVICES" in reason


def test_a_listed_gpu_is_not_hidden(tmp_path, bare, monkeypatch) -> None:
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,1")
    assert no_gpu_reason(_dev(tmp_path, "kfd")) is None


def test_off_linux_the_runtime_answers(tmp_path, bare, monkeypatch) -> None:
    monkeypatch.setattr("sys.platform", "win32")
    assert no_gpu_reason(_dev(tmp_path)) is None
