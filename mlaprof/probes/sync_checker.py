"""Sync/capture checker: finds device->host syncs and data-dependent allocations in a region.

Works on any device (the CPU included) through a ``TorchDispatchMode`` that sees every aten op
and only looks at argument metadata (dtype, device, sizes): it never reads tensor data, so it adds
no sync, no allocation, and never changes a result. ``Tensor.tolist`` and a tensor's text
(``print``, ``str``, ``repr``, ``format``, f-strings: torch's formatter turns dispatch modes off)
are invisible to dispatch and are wrapped separately; ``bool``, ``int``, ``float``, ``__index__``
and ``.item()`` reach ``aten::_local_scalar_dense``. Iterating a tensor is ``unbind`` (views, no
sync on a GPU either); what each element then becomes is seen as above. Each finding names the layer, the op and the ``file:line`` of the first
caller outside torch and mlaprof's probes.

On a CUDA device ``cuda_debug=True`` also arms ``torch.cuda.set_sync_debug_mode("warn")`` inside
the region (capture begin itself synchronizes, so it must be armed inside) and counts its warnings.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mlaprof.portable import portable_path

_TORCH_DIR = os.path.dirname(torch.__file__)
_PROBES_DIR = os.path.dirname(os.path.abspath(__file__))
_SKIP_FILES = (contextlib.__file__,)

# ops whose output depends on tensor values read back to the host
_SYNC_OPS = {
    "aten::_local_scalar_dense": ".item() / int() / float() / bool() of a tensor",
    "aten::nonzero": "nonzero: output shape depends on the data",
    "aten::masked_select": "masked_select: output shape depends on the data",
    "aten::_unique2": "unique: output shape depends on the data",
    "aten::unique_dim": "unique: output shape depends on the data",
    "aten::unique_consecutive": "unique_consecutive: output shape depends on the data",
    "aten::_unique": "unique: output shape depends on the data",
    "aten::is_nonzero": "bool(tensor): reads the value back",
    "aten::equal": "torch.equal: reads the result back",
    "aten::allclose": "allclose: reads the result back",
}
_ALLOC_OPS = {
    "aten::empty",
    "aten::zeros",
    "aten::ones",
    "aten::full",
    "aten::empty_strided",
    "aten::new_empty",
    "aten::new_zeros",
    "aten::new_full",
    "aten::arange",
    "aten::randn",
    "aten::rand",
}


@dataclass
class SyncEvent:
    step: int | None
    layer: int | None
    kind: str  # sync | alloc | h2d
    op: str
    location: str
    function: str
    detail: str

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


class CaptureBreak(RuntimeError):
    """Raised before the offending op runs when the checker is in ``raise_on_first`` mode."""

    def __init__(self, event: SyncEvent) -> None:
        super().__init__(f"{event.op} at {event.location} (layer {event.layer}): {event.detail}")
        self.event = event


def caller_location() -> tuple[str, str]:
    """``file:line`` and function of the first frame outside torch, contextlib and the probes."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith(_TORCH_DIR) or fn.startswith(_PROBES_DIR) or fn in _SKIP_FILES):
            return f"{_short(fn)}:{f.f_lineno}", f.f_code.co_name
        f = f.f_back
    return "<unknown>", "<unknown>"


def _short(path: str) -> str:
    """Recorded locations never hold the machine's absolute path (:mod:`mlaprof.portable`)."""
    return portable_path(path)


def _op_name(func: Any) -> str:
    return func._schema.name  # e.g. "aten::_local_scalar_dense"


def _display(func: Any) -> str:
    name = _op_name(func).replace("::", ".")
    overload = getattr(func, "_overloadname", "default")
    return name if overload == "default" else f"{name}.{overload}"


def _sizes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    out: list[int] = []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, bool):
            continue
        if isinstance(a, int):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, int) and not isinstance(x, bool))
    return out


class _Mode(TorchDispatchMode):
    """The checker's mode where ``torch._dynamo`` is not loaded. torch wraps a mode's handler in
    ``torch._disable_dynamo`` (so that Dynamo never compiles it), which imports ``torch._dynamo``
    at the handler's first call: ~1.4 s of imports counted in the first checked step. Without
    Dynamo loaded no compiled frame can run, so this handler goes unwrapped; the region switches
    to :class:`_CompileSafeMode` before ``torch.compile`` runs inside it."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # torch's hook: False leaves the handler unwrapped
        return False

    def __init__(self, checker: SyncChecker) -> None:
        super().__init__()
        self.checker = checker

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        self.checker._inspect(func, args, kwargs)
        result = func(*args, **kwargs)
        if _op_name(func) == "aten::_local_scalar_dense":
            self.checker._read_back(result)
        return result


class _CompileSafeMode(_Mode):
    """The same handler, kept out of Dynamo as torch does for every mode (where Dynamo is
    loaded, or ``torch.compile`` is called inside the region)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        return _Mode.__torch_dispatch__(self, func, types, args, kwargs)


class SyncChecker:
    """Records syncs/allocations inside ``with checker.region(layer=..., step=...)`` blocks."""

    def __init__(
        self, raise_on_first: bool = False, cuda_debug: bool = False, simulate_device: bool = False
    ) -> None:
        self.raise_on_first = raise_on_first
        # the region's tensors stand for device tensors (the gate on a CPU-only machine): what
        # would copy them to the host (.cpu(), .to("cpu"), .numpy()) and explicit device syncs
        # (torch.cuda.synchronize) are recorded as syncs instead of passing or failing
        self.simulate_device = simulate_device
        self.cuda_debug = cuda_debug and torch.cuda.is_available()
        self.events: list[SyncEvent] = []
        self.cuda_debug_warnings = 0
        self._layer: int | None = None
        self._step: int | None = None
        self._read_values: list[int] = []
        self._quiet = 0  # > 0 while a wrapped Python-level call already reported its sync

    # -- recording ---------------------------------------------------------------------------
    def _add(self, kind: str, op: str, detail: str) -> None:
        loc, fn = caller_location()
        ev = SyncEvent(self._step, self._layer, kind, op, loc, fn, detail)
        self.events.append(ev)
        if self.raise_on_first:
            raise CaptureBreak(ev)

    def _read_back(self, value: Any) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            iv = int(value)
            if iv == value and iv > 1:
                self._read_values.append(iv)

    def _inspect(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self._quiet:
            return
        name = _op_name(func)
        if name in _SYNC_OPS:
            self._add("sync", _display(func), _SYNC_OPS[name])
            return
        if name == "aten::repeat_interleave" and isinstance(
            args[0] if args else None, torch.Tensor
        ):
            if kwargs.get("output_size") is None and (len(args) < 3 or args[-1] is None):
                self._add(
                    "sync",
                    _display(func),
                    "repeat_interleave with tensor repeats and no output_size reads the total back",
                )
            return
        if name in ("aten::index", "aten::index_put", "aten::index_put_"):
            idx = args[1] if len(args) > 1 else kwargs.get("indices", ())
            if any(
                isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8)
                for t in (idx or ())
            ):
                self._add(
                    "sync", _display(func), "boolean-mask indexing: shape depends on the data"
                )
            return
        if name in ("aten::_to_copy", "aten::copy_"):
            self._check_copy(func, name, args, kwargs)
            return
        if name in _ALLOC_OPS and self._read_values:
            hit = set(_sizes(args, kwargs)) & {
                v + d for v in self._read_values[-8:] for d in (-1, 0, 1)
            }
            if hit:
                self._add(
                    "alloc",
                    _display(func),
                    f"allocation sized {sorted(hit)[0]} from a value read back from the device",
                )
            return
        tags = getattr(func, "tags", ())
        if torch.Tag.dynamic_output_shape in tags or torch.Tag.data_dependent_output in tags:
            self._add("sync", _display(func), "output depends on tensor values (data-dependent)")

    def _check_copy(
        self, func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        if name == "aten::copy_":
            if len(args) < 2 or not all(isinstance(a, torch.Tensor) for a in args[:2]):
                return
            dst, src = args[0].device, args[1].device
            pinned = src.type == "cpu" and args[1].is_pinned()
        else:
            if not args or not isinstance(args[0], torch.Tensor):
                return
            src = args[0].device
            dst = torch.device(kwargs.get("device") or src)
            pinned = src.type == "cpu" and args[0].is_pinned()
        if src.type != "cpu" and dst.type == "cpu":
            self._add("sync", _display(func), f"device-to-host copy ({src} -> cpu)")
        elif src.type == "cpu" and dst.type != "cpu" and not pinned:
            self._add("h2d", _display(func), f"pageable host-to-device copy (cpu -> {dst})")

    # -- regions -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def region(self, layer: int | None = None, step: int | None = None) -> Iterator[SyncChecker]:
        """Watch everything run inside the block; nested regions are not supported."""
        self._layer, self._step = layer, step
        self._read_values = []
        mode = (_CompileSafeMode if "torch._dynamo" in sys.modules else _Mode)(self)
        patches = self._python_level_patches()
        if type(mode) is _Mode:
            patches.append((torch, "compile", _compile_safe(mode, torch.compile)))
        for owner, name, wrapper in patches:
            setattr(owner, name, wrapper)
        prev_debug = None
        try:
            with warnings.catch_warnings(record=True) as caught, mode:
                if self.cuda_debug:
                    prev_debug = torch.cuda.get_sync_debug_mode()
                    torch.cuda.set_sync_debug_mode("warn")
                try:
                    yield self
                finally:
                    if prev_debug is not None:
                        torch.cuda.set_sync_debug_mode(prev_debug)
            # count real sync reports, not the one-time "prototype feature" notice
            self.cuda_debug_warnings += sum(
                "called a synchronizing" in str(w.message) for w in caught
            )
            for w in caught:  # pass on unrelated warnings
                if "synchroniz" not in str(w.message):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        finally:
            for owner, name, wrapper in patches:
                setattr(owner, name, wrapper.__wrapped__)  # type: ignore[attr-defined]
            self._layer = self._step = None

    def _python_level_patches(self) -> list[tuple[Any, str, Any]]:
        """Wrappers for what dispatch cannot see: ``Tensor.tolist`` and tensors built from Python
        values on a device (``torch.tensor(1.0, device="cuda")``: a pageable host->device copy
        that breaks capture, verified on an H200 in bench/results/checker_validation_h200.json)."""
        checker = self

        def reads_back(fn: Any, label: str, detail: str) -> Any:
            """``fn`` of a tensor reads its values to the host: one sync where the caller
            made it, whatever ``fn`` does inside (a repr's per-element reads are that one)."""

            def wrapper(t: torch.Tensor, *a: Any, **k: Any) -> Any:
                if checker._quiet or not _real(t):
                    return fn(t, *a, **k)
                checker._add("sync", label, detail)
                checker._quiet += 1
                try:
                    return fn(t, *a, **k)
                finally:
                    checker._quiet -= 1

            wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
            return wrapper

        def factory(fn: Any, label: str) -> Any:
            def wrapper(data: Any, *a: Any, **k: Any) -> Any:
                dev = k.get("device")
                if (
                    dev is not None
                    and torch.device(dev).type != "cpu"
                    and not isinstance(data, torch.Tensor)
                ):
                    checker._add(
                        "h2d",
                        label,
                        f"{label}(<python value>, device={dev}) copies from pageable host memory",
                    )
                return fn(data, *a, **k)

            wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
            return wrapper

        # print(t), str(t), repr(t), f"{t!r}" and the text of every tensor in a container all
        # reach Tensor.__repr__, whose formatter turns dispatch modes off: invisible to the mode
        patches = [
            (
                torch.Tensor,
                "tolist",
                reads_back(
                    torch.Tensor.tolist,
                    "Tensor.tolist",
                    "tolist() copies every element to the host",
                ),
            ),
            (
                torch.Tensor,
                "__repr__",
                reads_back(
                    torch.Tensor.__repr__,
                    "Tensor.__repr__",
                    "print / str / repr / f-string of a tensor copies its values to the host",
                ),
            ),
            (
                torch.Tensor,
                "__format__",
                reads_back(
                    torch.Tensor.__format__,
                    "Tensor.__format__",
                    "format() / f-string of a tensor copies its values to the host",
                ),
            ),
            (torch, "tensor", factory(torch.tensor, "torch.tensor")),
            (torch, "as_tensor", factory(torch.as_tensor, "torch.as_tensor")),
        ]
        return patches + (self._device_patches() if self.simulate_device else [])

    def _device_patches(self) -> list[tuple[Any, str, Any]]:
        """On a CPU standing in for a device: host copies and explicit syncs, each recorded
        where the caller made it. Explicit syncs do not run (there is no device to wait for)."""
        checker = self

        def host_copy(fn: Any, label: str, to_host: Callable[..., bool]) -> Any:
            def wrapper(t: torch.Tensor, *a: Any, **k: Any) -> Any:
                if to_host(*a, **k):
                    checker._add("sync", label, f"{label} copies a device tensor to the host")
                    checker._quiet += 1  # any inner copy is the same sync
                    try:
                        return fn(t, *a, **k)
                    finally:
                        checker._quiet -= 1
                return fn(t, *a, **k)

            wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
            return wrapper

        def explicit(fn: Any, label: str) -> Any:
            def wrapper(*a: Any, **k: Any) -> None:
                checker._add("sync", label, f"{label}() waits for the device on the host")

            wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
            return wrapper

        out: list[tuple[Any, str, Any]] = [
            (torch.Tensor, "cpu", host_copy(torch.Tensor.cpu, "Tensor.cpu", lambda *a, **k: True)),
            (torch.Tensor, "numpy", host_copy(torch.Tensor.numpy, "Tensor.numpy",
                                              lambda *a, **k: True)),
            (torch.Tensor, "to", host_copy(torch.Tensor.to, "Tensor.to(cpu)", _targets_host)),
            (torch.cuda, "synchronize", explicit(torch.cuda.synchronize, "torch.cuda.synchronize")),
        ]  # fmt: skip
        for cls, label in ((torch.cuda.Stream, "Stream"), (torch.cuda.Event, "Event")):
            fn = getattr(cls, "synchronize", None)
            if fn is not None:
                out.append((cls, "synchronize", explicit(fn, f"torch.cuda.{label}.synchronize")))
        return out

    # -- summaries ---------------------------------------------------------------------------
    def syncs(self) -> list[SyncEvent]:
        return [e for e in self.events if e.kind == "sync"]

    def per_layer(self, kind: str = "sync") -> dict[int | None, int]:
        out: dict[int | None, int] = {}
        for e in self.events:
            if e.kind == kind:
                out[e.layer] = out.get(e.layer, 0) + 1
        return out


def _compile_safe(mode: _Mode, fn: Any) -> Any:
    """``torch.compile`` inside a region whose mode started unwrapped: Dynamo loads first, and
    the mode becomes :class:`_CompileSafeMode` before anything compiled can run."""

    def wrapper(*a: Any, **k: Any) -> Any:
        import torch._dynamo  # noqa: F401

        mode.__class__ = _CompileSafeMode
        return fn(*a, **k)

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def _real(t: Any) -> bool:
    """A tensor with values to read (not a meta or fake tensor standing in for one)."""
    return type(t) in (torch.Tensor, torch.nn.Parameter) and not t.is_meta


def _targets_host(*args: Any, **kwargs: Any) -> bool:
    """Whether ``Tensor.to(*args, **kwargs)`` names the host by name (``"cpu"``). On the CPU
    standing in for a device, a ``torch.device`` object is the region's own device (``x.to(
    q.device)``, a no-op on the GPU, must not fail the gate); a real GPU run decides those."""
    dev = kwargs.get("device")
    for a in args:
        if isinstance(a, (str, torch.device)):
            dev = a
            break
    return isinstance(dev, str) and dev.split(":")[0].strip().lower() == "cpu"
