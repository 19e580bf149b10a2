"""Per-layer roctx / NVTX ranges, so that rocprofv3 ``--marker-trace`` and Nsight show mlaprof's
layers next to the kernels.

``with layer_range("layer 3"): ...`` pushes a range on entry and pops it on exit (also when the
body raises). The emitter is chosen once, lazily: ``rocm.bindings.roctx`` (PyPI
``rocm-bindings-systems``; it imports without ROCm, so its symbols are checked with
``has_symbol``), else ``torch.cuda.nvtx`` when CUDA is available (ROCm builds of PyTorch emit
roctx through it), else nothing. Ranges are host-side markers: no sync, no allocation, safe
inside a graph-capture region.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_backend: tuple[str, Callable[[str], Any] | None, Callable[[], Any] | None] | None = None


def _choose() -> tuple[str, Callable[[str], Any] | None, Callable[[], Any] | None]:
    try:
        from rocm.bindings import roctx  # type: ignore[import-not-found]

        if roctx.has_symbol("roctxRangePushA") and roctx.has_symbol("roctxRangePop"):
            return (
                "roctx",
                lambda name: roctx.roctxRangePushA(name.encode("utf-8", "replace")),
                roctx.roctxRangePop,
            )
    except Exception:  # absent, or a broken install: fall through to the next emitter
        pass
    try:
        import torch

        if torch.cuda.is_available():
            nvtx = torch.cuda.nvtx
            return "nvtx", nvtx.range_push, nvtx.range_pop
    except Exception:  # a torch without CUDA support raises on nvtx use: no ranges then
        pass
    return "none", None, None


def backend() -> str:
    """Which emitter ``layer_range`` uses: ``roctx``, ``nvtx`` or ``none``."""
    return _get()[0]


def _get() -> tuple[str, Callable[[str], Any] | None, Callable[[], Any] | None]:
    global _backend
    if _backend is None:
        with _lock:
            if _backend is None:
                _backend = _choose()
    return _backend


def reset() -> None:
    """Forget the chosen emitter (tests swap the modules it is chosen from)."""
    global _backend
    with _lock:
        _backend = None


@contextmanager
def layer_range(name: str, enabled: bool = True) -> Iterator[None]:
    """A named range around the body; a no-op when disabled or when no emitter is available."""
    if not enabled:
        yield
        return
    _, push, pop = _get()
    if push is None or pop is None:
        yield
        return
    push(name)
    try:
        yield
    finally:
        pop()
