"""The capture gate: run a callable as it would run inside a captured CUDA/HIP graph region and
report every device->host sync, data-dependent allocation and pageable host->device copy, with
layer, op and ``file:line`` (:class:`mlaprof.probes.sync_checker.SyncChecker`).

On the CPU the region is simulated: the checker sees every aten op through a dispatch mode and
reads no tensor data, so a clean CPU gate means no op of the callable would break capture. With
a CUDA device and ``real_capture`` (default "auto"), a callable that passes the checker is then
captured for real (``torch.cuda.graph``); a capture error becomes a finding. A failed capture
poisons the process (PyTorch CUDA graph behaviour measured on an H200), which is why the checker runs first and capture is only
tried on a callable the checker found clean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from mlaprof.errors import MlaprofError
from mlaprof.probes.sync_checker import _TORCH_DIR, SyncChecker, SyncEvent
from mlaprof.probes.sync_checker import _short as short_path
from mlaprof.rank_counts import counted
from mlaprof.sync_kinds import BREAKS_CAPTURE

# the finding kinds that fail the gate: mlaprof.sync_kinds.BREAKS_CAPTURE


class CaptureGateError(AssertionError):
    """A gated callable syncs or allocates data-dependently: the message lists every site."""

    def __init__(self, report: GateReport) -> None:
        super().__init__(report.format())
        self.report = report


@dataclass
class GateReport:
    target: str
    region: str  # how the captured region was checked
    layers: int
    events: list[SyncEvent] = field(default_factory=list)

    @property
    def findings(self) -> list[SyncEvent]:
        return [e for e in self.events if e.kind in BREAKS_CAPTURE]

    @property
    def ok(self) -> bool:
        return not self.findings

    def format(self) -> str:
        if self.ok:
            return f"{self.target}: no sync or data-dependent allocation ({self.region})"
        lines = [
            f"{self.target}: {counted(len(self.findings), 'op(s)')} would break CUDA/HIP graph "
            "capture "
            f"({self.region}):"
        ]
        for e in self.findings:
            where = f"layer {e.layer}" if e.layer is not None else "region"
            lines.append(
                f"  {where}: {e.kind} {e.op} at {e.location} in {e.function}(): {e.detail}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "region": self.region,
            "layers": self.layers,
            "ok": self.ok,
            "findings": [e.to_row() for e in self.findings],
        }


def _name(fn: Callable[..., Any]) -> str:
    mod = getattr(fn, "__module__", None) or "?"
    return f"{mod}:{getattr(fn, '__qualname__', repr(fn))}"


def _on_cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether any argument holds a CUDA/HIP tensor (directly, in a container, or as a field of
    an object such as a metadata dataclass)."""

    def walk(v: Any, depth: int = 0) -> bool:
        if isinstance(v, torch.Tensor):
            return v.is_cuda
        if depth > 2:
            return False
        if isinstance(v, (list, tuple)):
            return any(walk(x, depth + 1) for x in v)
        if isinstance(v, dict):
            return any(walk(x, depth + 1) for x in v.values())
        fields = getattr(v, "__dict__", None)
        return isinstance(fields, dict) and any(walk(x, depth + 1) for x in fields.values())

    return walk(list(args)) or walk(kwargs)


def _capture(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], layers: int
) -> SyncEvent | None:
    """One real capture of ``layers`` calls; the error as a finding, or None when it captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph, as vLLM does
        fn(*args, **kwargs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(layers):
                fn(*args, **kwargs)
    except Exception as e:  # the driver refused: report what it said, where it was raised
        loc, func = raised_at(e)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return SyncEvent(None, None, "capture-error", type(e).__name__, loc, func, msg)
    return None


def raised_at(e: BaseException) -> tuple[str, str]:
    """``file:line`` and function of the innermost frame of ``e`` outside torch and this gate."""
    best = ("<unknown>", "<unknown>")
    tb = e.__traceback__
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if not (fn.startswith(_TORCH_DIR) or fn == __file__):
            best = (f"{short_path(fn)}:{tb.tb_lineno}", tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return best


def run_gated(
    fn: Callable[..., Any],
    *args: Any,
    layers: int = 1,
    real_capture: str = "auto",
    events: list[SyncEvent] | None = None,
    **kwargs: Any,
) -> GateReport:
    """Call ``fn(*args, **kwargs)`` ``layers`` times, one checker region per call (the layer
    number), and return what would break capture. Arguments are built by the caller, outside
    the region: that is where metadata builders may sync. ``events``: the list the checker
    records into (``mlaprof check``'s child passes one that writes each event out at once)."""
    if layers < 1:
        raise MlaprofError(f"layers must be >= 1, got {layers}")
    if real_capture not in ("auto", "never", "always"):
        raise MlaprofError(f"real_capture must be auto, never or always, got {real_capture!r}")
    cuda = torch.cuda.is_available() and _on_cuda(args, kwargs)
    if real_capture == "always" and not cuda:
        raise MlaprofError("real capture needs CUDA/HIP tensors on a GPU; none here")
    # without a GPU the arguments stand for device tensors: host copies and explicit syncs count
    checker = SyncChecker(cuda_debug=cuda, simulate_device=not cuda)
    if events is not None:
        checker.events = events
    for layer in range(layers):
        with checker.region(layer=layer):
            fn(*args, **kwargs)
    region = (
        "CUDA: sync checker, then a real capture"
        if cuda and real_capture != "never"
        else ("simulated captured region: sync checker on " + ("cuda" if cuda else "the CPU"))
    )
    report = GateReport(_name(fn), region, layers, list(checker.events))
    if cuda and real_capture != "never" and report.ok:
        err = _capture(fn, args, kwargs, layers)
        if err is not None:
            report.events.append(err)
    return report


def assert_capturable(
    fn: Callable[..., Any], *args: Any, layers: int = 1, real_capture: str = "auto", **kwargs: Any
) -> GateReport:
    """:func:`run_gated`, raising :class:`CaptureGateError` (a test failure) on any finding."""
    report = run_gated(fn, *args, layers=layers, real_capture=real_capture, **kwargs)
    if not report.ok:
        raise CaptureGateError(report)
    return report
