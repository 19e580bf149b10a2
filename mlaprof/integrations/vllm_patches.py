"""The vLLM functions mlaprof wraps, checked against their expected signatures, patched once.

Targets (vLLM 0.32+, FACTS section 3): the AITER MLA and Triton MLA metadata builders (``build``,
``build_for_cudagraph_capture``, and AITER's ``_build_decode``), both impls' ``forward_mqa``, and
``CompilationConfig.resolve_cudagraph_mode_and_sizes`` (the engine's cudagraph-mode decision).

Every wrapper calls the original unchanged and hands a *sink* only host values: Python ints and
bools, the builder's own CPU tensors (``query_start_loc_cpu``, ``seq_lens_cpu_upper_bound``) and
the metadata fields the builder already computed on the host. A wrapper never touches a device
tensor's data, so it adds no device->host sync and nothing to a captured graph. A failing sink is
logged once and switched off: profiling must never take the engine down.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger("mlaprof.vllm")

AITER_MODULE = "vllm.v1.attention.backends.mla.rocm_aiter_mla"
TRITON_MODULE = "vllm.v1.attention.backends.mla.triton_mla"
COMPILATION_MODULE = "vllm.config.compilation"
MARK = "__mlaprof_original__"  # set on every wrapper: patching twice is a no-op


@dataclass(frozen=True)
class PatchTarget:
    module: str
    cls: str
    method: str
    params: tuple[str, ...]  # expected leading parameter names (self included)
    kind: str  # build | capture | build-decode | forward | cg-resolve
    backend: str | None = None

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.cls}.{self.method}"


_BUILD = ("self", "common_prefix_len", "common_attn_metadata", "fast_build")
_CAPTURE = ("self", "common_attn_metadata")
_FORWARD = ("self", "q", "kv_c_and_k_pe_cache", "attn_metadata", "layer")
_BUILD_DECODE = (
    "self",
    "block_table_tensor",
    "seq_lens_device",
    "max_seq_len",
    "query_start_loc_cpu",
    "query_start_loc_device",
    "num_decode_tokens",
    "max_query_len",
    "dcp_tot_seq_lens_device",
)
_RESOLVE = ("self", "min_cg_support", "min_cg_attn_backend", "uniform_decode_query_len")

AITER = "ROCM_AITER_MLA"
TRITON = "TRITON_MLA"
TARGETS: tuple[PatchTarget, ...] = (
    PatchTarget(AITER_MODULE, "AiterMLAMetadataBuilder", "_build_decode", _BUILD_DECODE,
                "build-decode", AITER),
    PatchTarget(AITER_MODULE, "AiterMLAMetadataBuilder", "build", _BUILD, "build", AITER),
    PatchTarget(AITER_MODULE, "AiterMLAMetadataBuilder", "build_for_cudagraph_capture", _CAPTURE,
                "capture", AITER),
    PatchTarget(AITER_MODULE, "AiterMLAImpl", "forward_mqa", _FORWARD, "forward", AITER),
    PatchTarget(TRITON_MODULE, "TritonMLAMetadataBuilder", "build", _BUILD, "build", TRITON),
    PatchTarget(TRITON_MODULE, "TritonMLAMetadataBuilder", "build_for_cudagraph_capture",
                _CAPTURE, "capture", TRITON),
    PatchTarget(TRITON_MODULE, "TritonMLAImpl", "forward_mqa", _FORWARD, "forward", TRITON),
    PatchTarget(COMPILATION_MODULE, "CompilationConfig", "resolve_cudagraph_mode_and_sizes",
                _RESOLVE, "cg-resolve"),
)  # fmt: skip


class Sink(Protocol):
    """What the wrappers report to (the recorder). Arguments are host values only."""

    def on_build_decode(self, builder: Any, info: dict[str, Any]) -> None: ...

    def on_build(
        self, backend: str, builder: Any, host: dict[str, Any], result: Any, capture: bool
    ) -> None: ...

    def on_forward(self, backend: str, impl: Any, attn_metadata: Any) -> None: ...

    def on_cg_resolve(
        self, config: Any, args: dict[str, Any], requested: Any, result: Any
    ) -> None: ...


# -- checking ----------------------------------------------------------------------------------
def resolve(target: PatchTarget) -> tuple[type, Callable[..., Any]]:
    """The class and the function a target names (ImportError / AttributeError when absent)."""
    mod = importlib.import_module(target.module)
    cls = getattr(mod, target.cls)
    return cls, getattr(cls, target.method)


def signature_problem(target: PatchTarget, fn: Callable[..., Any]) -> str | None:
    """None when ``fn`` starts with the expected parameters, else what differs."""
    fn = getattr(fn, MARK, fn)
    try:
        names = tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError) as e:
        return f"no signature: {e}"
    want = target.params
    if names[: len(want)] != want:
        return f"expected parameters {want}, found {names[: len(want) + 2]}"
    return None


def check_targets(targets: tuple[PatchTarget, ...] = TARGETS) -> dict[str, str]:
    """target -> 'ok' or why it cannot be patched (module missing, renamed, new signature)."""
    out: dict[str, str] = {}
    for t in targets:
        try:
            _, fn = resolve(t)
        except Exception as e:  # a module that fails to import on this platform
            out[t.qualname] = f"unavailable: {type(e).__name__}: {e}"
            continue
        out[t.qualname] = signature_problem(t, fn) or "ok"
    return out


# -- wrappers ----------------------------------------------------------------------------------
_local = threading.local()


def host_list(t: Any) -> list[int] | None:
    """A CPU tensor's values as ints; None for anything on a device (reading it would sync)."""
    dev = getattr(t, "device", None)
    if dev is None or getattr(dev, "type", None) != "cpu":
        return None
    return t.tolist()  # integer tensors give Python ints


def _guarded(sink: Sink, what: str, call: Callable[[], None]) -> None:
    if getattr(sink, "disabled", False):
        return
    try:
        call()
    except Exception as e:  # recording must never break serving
        log.warning("mlaprof: %s recording failed, recording off in this process: %s", what, e)
        sink.disabled = True  # type: ignore[attr-defined]


def _wrap_build(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    @functools.wraps(fn)
    def build(self: Any, common_prefix_len: int, common_attn_metadata: Any, *a: Any, **kw: Any):
        m = common_attn_metadata
        host = {
            "query_start_loc": host_list(getattr(m, "query_start_loc_cpu", None)),
            "seq_lens_upper_bound": host_list(getattr(m, "seq_lens_cpu_upper_bound", None)),
            "num_reqs": getattr(m, "num_reqs", None),
            "num_actual_tokens": getattr(m, "num_actual_tokens", None),
            "max_query_len": getattr(m, "max_query_len", None),
            "max_seq_len": getattr(m, "max_seq_len", None),
        }
        _local.decode_info = None
        result = fn(self, common_prefix_len, common_attn_metadata, *a, **kw)
        host["decode_info"] = getattr(_local, "decode_info", None)
        capture = getattr(_local, "capture_depth", 0) > 0
        _guarded(sink, "build", lambda: sink.on_build(t.backend or "", self, host, result, capture))
        return result

    return build


def _wrap_capture(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    @functools.wraps(fn)
    def build_for_cudagraph_capture(self: Any, *a: Any, **kw: Any) -> Any:
        _local.capture_depth = getattr(_local, "capture_depth", 0) + 1
        try:
            return fn(self, *a, **kw)
        finally:
            _local.capture_depth -= 1

    return build_for_cudagraph_capture


def _wrap_build_decode(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def _build_decode(self: Any, *a: Any, **kw: Any) -> Any:
        result = fn(self, *a, **kw)

        def note() -> None:
            args = sig.bind(self, *a, **kw).arguments
            seq = args.get("seq_lens_device")
            info = {
                "num_decode_tokens": args.get("num_decode_tokens"),
                "max_query_len": args.get("max_query_len"),
                "max_seq_len": args.get("max_seq_len"),
                "num_kernel_reqs": int(seq.shape[0]) if seq is not None else None,  # shape only
                "max_qo_len": getattr(result, "max_qo_len", None),
                "min_kv_seq_len": getattr(result, "min_kv_seq_len", None),
                "use_gluon_verify": getattr(result, "use_gluon_verify", None),
                "use_gluon_decode": getattr(result, "use_gluon_decode", None),
                "has_persistent_metadata": getattr(result, "has_persistent_metadata", None),
            }
            _local.decode_info = info
            sink.on_build_decode(self, info)

        _guarded(sink, "_build_decode", note)
        return result

    return _build_decode


def _wrap_forward(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    @functools.wraps(fn)
    def forward_mqa(self: Any, q: Any, kv_c_and_k_pe_cache: Any, attn_metadata: Any, *a: Any,
                    **kw: Any) -> Any:  # fmt: skip
        _guarded(sink, "forward_mqa", lambda: sink.on_forward(t.backend or "", self, attn_metadata))
        return fn(self, q, kv_c_and_k_pe_cache, attn_metadata, *a, **kw)

    return forward_mqa


def _wrap_resolve(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def resolve_cudagraph_mode_and_sizes(self: Any, *a: Any, **kw: Any) -> Any:
        requested = getattr(self, "cudagraph_mode", None)
        result = fn(self, *a, **kw)

        def note() -> None:
            args = dict(sig.bind(self, *a, **kw).arguments)
            args.pop("self", None)
            sink.on_cg_resolve(self, args, requested, result)

        _guarded(sink, "cudagraph mode", note)
        return result

    return resolve_cudagraph_mode_and_sizes


WRAPPERS = {
    "build": _wrap_build,
    "capture": _wrap_capture,
    "build-decode": _wrap_build_decode,
    "forward": _wrap_forward,
    "cg-resolve": _wrap_resolve,
}


# -- installing --------------------------------------------------------------------------------
@dataclass
class Installed:
    target: PatchTarget
    cls: type
    had_own: bool  # the class defined the method itself (else it was inherited)
    original: Callable[..., Any]


_installed: dict[str, Installed] = {}
_install_lock = threading.Lock()


def install(sink: Sink, targets: tuple[PatchTarget, ...] = TARGETS) -> dict[str, str]:
    """Patch every target that exists with the expected signature; idempotent per process.
    Returns target -> 'patched' | 'already patched' | why it was skipped."""
    report: dict[str, str] = {}
    with _install_lock:
        for t in targets:
            try:
                cls, fn = resolve(t)
            except Exception as e:  # e.g. the AITER module on a platform without AITER
                report[t.qualname] = f"skipped: {type(e).__name__}: {e}"
                continue
            own = cls.__dict__.get(t.method)
            if (own is not None and hasattr(own, MARK)) or t.qualname in _installed:
                report[t.qualname] = "already patched"
                continue
            fn = getattr(fn, MARK, fn)  # inherited from a class another target wrapped
            why = signature_problem(t, fn)
            if why:
                log.warning("mlaprof: not patching %s: %s", t.qualname, why)
                report[t.qualname] = f"skipped: {why}"
                continue
            wrapper = WRAPPERS[t.kind](fn, t, sink)
            setattr(wrapper, MARK, fn)
            _installed[t.qualname] = Installed(t, cls, t.method in cls.__dict__, fn)
            setattr(cls, t.method, wrapper)
            report[t.qualname] = "patched"
    return report


def uninstall() -> None:
    """Restore every patched function (tests, or a plugin turned off at run time)."""
    with _install_lock:
        for inst in _installed.values():
            if inst.had_own:
                setattr(inst.cls, inst.target.method, inst.original)
            elif inst.target.method in inst.cls.__dict__:
                delattr(inst.cls, inst.target.method)
        _installed.clear()


def installed() -> list[str]:
    return sorted(_installed)
