"""Per-layer ranges: the exact call contract with roctx (rocm.bindings) and torch.cuda.nvtx,
checked with recording fake modules, and the no-op fallback."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from mlaprof.probes import ranges


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    ranges.reset()
    yield
    ranges.reset()


def _fake_roctx(monkeypatch: pytest.MonkeyPatch, symbols: set[str]) -> list[tuple]:
    calls: list[tuple] = []
    roctx = types.ModuleType("rocm.bindings.roctx")

    def has_symbol(name: str) -> bool:
        calls.append(("has_symbol", name))
        return name in symbols

    def push(message: bytes) -> tuple[int]:
        calls.append(("roctxRangePushA", message))
        return (0,)

    def pop() -> tuple[int]:
        calls.append(("roctxRangePop",))
        return (0,)

    roctx.has_symbol = has_symbol  # type: ignore[attr-defined]
    roctx.roctxRangePushA = push  # type: ignore[attr-defined]
    roctx.roctxRangePop = pop  # type: ignore[attr-defined]
    bindings = types.ModuleType("rocm.bindings")
    bindings.roctx = roctx  # type: ignore[attr-defined]
    rocm = types.ModuleType("rocm")
    rocm.bindings = bindings  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "rocm", rocm)
    monkeypatch.setitem(sys.modules, "rocm.bindings", bindings)
    monkeypatch.setitem(sys.modules, "rocm.bindings.roctx", roctx)
    return calls


def _fake_nvtx(monkeypatch: pytest.MonkeyPatch, cuda: bool) -> list[tuple]:
    import torch

    calls: list[tuple] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda n: calls.append(("push", n)))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: calls.append(("pop",)))
    return calls


def test_roctx_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_roctx(monkeypatch, {"roctxRangePushA", "roctxRangePop"})
    nv = _fake_nvtx(monkeypatch, cuda=True)
    with ranges.layer_range("layer 0"):
        calls.append(("body",))
    with ranges.layer_range("layer 1"):
        pass
    assert ranges.backend() == "roctx"
    assert calls == [
        ("has_symbol", "roctxRangePushA"),
        ("has_symbol", "roctxRangePop"),
        ("roctxRangePushA", b"layer 0"),
        ("body",),
        ("roctxRangePop",),
        ("roctxRangePushA", b"layer 1"),
        ("roctxRangePop",),
    ]
    assert nv == []  # roctx wins over nvtx


def test_pop_on_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_roctx(monkeypatch, {"roctxRangePushA", "roctxRangePop"})
    with pytest.raises(ValueError), ranges.layer_range("layer 7"):
        raise ValueError("boom")
    assert calls[-2:] == [("roctxRangePushA", b"layer 7"), ("roctxRangePop",)]


def test_nvtx_when_roctx_symbols_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    rc = _fake_roctx(monkeypatch, set())  # bindings import without ROCm: no symbols
    nv = _fake_nvtx(monkeypatch, cuda=True)
    with ranges.layer_range("layer 2"):
        nv.append(("body",))
    assert ranges.backend() == "nvtx"
    assert nv == [("push", "layer 2"), ("body",), ("pop",)]
    assert [c for c in rc if c[0] != "has_symbol"] == []


def test_noop_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rocm", None)  # import fails
    nv = _fake_nvtx(monkeypatch, cuda=False)
    ran = []
    with ranges.layer_range("layer 3"):
        ran.append(1)
    assert ran == [1] and nv == [] and ranges.backend() == "none"


def test_disabled_is_noop(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_roctx(monkeypatch, {"roctxRangePushA", "roctxRangePop"})
    with ranges.layer_range("layer 4", enabled=False):
        pass
    assert calls == []
