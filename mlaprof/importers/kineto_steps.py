"""Steps and CPU attention from a PyTorch-profiler trace's own annotations (vLLM 0.32).

vLLM's worker wraps each engine step in ``torch.profiler.record_function`` (a
``cat: "user_annotation"`` event) named by ``Worker.annotate_profile``
(``vllm/v1/worker/gpu_worker.py`` L1180-1291, inherited by the CPU worker):
``execute_context_{n}({tokens})_generation_{m}({tokens})``, or with
``detailed_trace_annotation``
``execute_{total}_context_{n}(sq{tokens}sk{kv}sqsq{..}sqsk{..})_generation_{m}(sq{tokens}sk..)``.
NVTX / roctx ranges of the same name (``CudaProfilerWrapper`` uses ``torch.cuda.nvtx.range``)
count the same way.

On a CPU run the attention of each MLA layer is the custom op
``vllm::unified_mla_attention_with_output`` (a ``cat: "cpu_op"`` event; vLLM 0.32
``vllm/model_executor/layers/attention/mla_attention.py`` L1464, registered L1504); inside it
the backend's own ops: CPU_MLA's decode rows ``_C::mla_decode_kvcache``
(``vllm/v1/attention/backends/mla/cpu_mla.py`` L180 -> ``vllm/_custom_ops.py`` L158), AMX_MLA's
``_C::decode_attention_cpu`` and ``_C::extend_attention_cpu`` (``amx_mla.py`` L367, L448 ->
``_custom_ops.py`` L3968, L4010).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.importers.annotate import NULL
from mlaprof.importers.common import us_to_ns


def x_span(ev: Mapping[str, Any], where: str) -> tuple[int, int]:
    """A complete ("X") event's (start, end) in ns. The Trace Event Format gives every complete
    event its ``ts`` and ``dur``: one without either is not read as an instant (a kernel of
    0 ns would read as measured), it is an error naming the event."""
    for key in ("ts", "dur"):
        if key not in ev:
            raise MlaprofError(f"{where}: event {str(ev.get('name'))[:60]!r} has no {key!r}")
    start = us_to_ns(ev["ts"], f"{where} ts")
    dur = us_to_ns(ev["dur"], f"{where} dur")
    if dur < 0:
        raise MlaprofError(f"{where}: negative duration")
    return start, start + dur


STEP = re.compile(
    r"^execute_(?:(?P<total>\d+)_)?context_(?P<creq>\d+)\((?:sq)?(?P<ctok>\d+)[^)]*\)"
    r"_generation_(?P<greq>\d+)\((?:sq)?(?P<gtok>\d+)[^)]*\)$"
)
STEP_CATS = {"user_annotation", "gpu_user_annotation", "nvtx", "roctx", "marker"}
# the op that is one MLA layer's attention on a CPU run, and the decode kernel op inside it
CPU_MLA_LAYER_OPS = ("vllm::unified_mla_attention_with_output", "vllm::unified_mla_attention")
CPU_MLA_INNER_OPS = (
    "_C::mla_decode_kvcache",
    "_C::decode_attention_cpu",
    "_C::extend_attention_cpu",
)
CPU_PATH = "cpu-mla"
VLLM_STEP = "vllm-step"  # steps.timing of a step timed by vLLM's own step annotation


@dataclass
class CpuActivity:
    """What one trace file holds on the CPU side: step annotations and MLA ops."""

    steps: list[tuple[int, int, int, dict[str, int]]] = field(default_factory=list)
    layers: list[tuple[int, int, int, str]] = field(default_factory=list)  # (start, end, pid, op)
    inner: dict[str, int] = field(default_factory=dict)  # backend op name -> calls
    cpu_ops: int = 0


def step_fields(name: str) -> dict[str, int] | None:
    """The request and token counts of a vLLM step annotation, or None for another name."""
    m = STEP.match(name)
    if not m:
        return None
    return {k: int(v) for k, v in m.groupdict().items() if v is not None}


def is_empty(f: dict[str, int]) -> bool:
    """A step annotation with no request and no token (``execute_context_0(0)_generation_0(0)``)."""
    return not (f.get("creq") or f.get("greq") or f.get("ctok") or f.get("gtok"))


class CpuScan:
    """:class:`CpuActivity` gathered an event at a time; times are relative until
    :meth:`result` adds the trace's base."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.out = CpuActivity()

    def add(self, i: int, ev: Any) -> None:
        out = self.out
        if not isinstance(ev, Mapping) or ev.get("ph") != "X":
            return
        cat = str(ev.get("cat", "")).lower()
        name = str(ev.get("name"))
        if cat == "cpu_op":
            out.cpu_ops += 1
            if name in CPU_MLA_INNER_OPS:
                out.inner[name] = out.inner.get(name, 0) + 1
                return
            if name not in CPU_MLA_LAYER_OPS:
                return
        elif cat not in STEP_CATS or not name.startswith("execute_"):
            return
        start, end = x_span(ev, f"{self.where} event {i}")
        pid = ev.get("pid") if isinstance(ev.get("pid"), int) else 0  # Kineto pids can be labels
        if cat == "cpu_op":
            out.layers.append((start, end, pid, name))
        elif (f := step_fields(name)) is not None:
            out.steps.append((start, end, pid, f))

    def result(self, base: int) -> CpuActivity:
        out = self.out
        if base:
            out.steps = [(s + base, e + base, p, f) for s, e, p, f in out.steps]
            out.layers = [(s + base, e + base, p, n) for s, e, p, n in out.layers]
        return out


def cpu_activity(doc: Mapping[str, Any], base: int, where: str) -> CpuActivity:
    """The CPU-side activity of a parsed trace."""
    acc = CpuScan(where)
    for i, ev in enumerate(doc["traceEvents"]):
        acc.add(i, ev)
    return acc.result(base)


def _outermost(spans: list[tuple[int, int, int, str]]) -> list[tuple[int, int, int, str]]:
    """Spans not inside another (the op dispatcher can nest a custom op in itself)."""
    out: list[tuple[int, int, int, str]] = []
    for s in sorted(spans, key=lambda s: (s[2], s[0], -s[1])):
        if out and out[-1][2] == s[2] and s[0] >= out[-1][0] and s[1] <= out[-1][1]:
            continue
        out.append(s)
    return out


def cpu_tables(
    acts: list[CpuActivity],
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, Any]]:
    """(steps, layers, counts) of one rank: one step per annotation in time order (numbered from
    0), its MLA layers the outermost MLA ops of the same process inside it; counts: annotations,
    MLA ops, those inside a step, the backend's own ops by name."""
    annotated = sorted((s for a in acts for s in a.steps), key=lambda s: (s[0], s[1]))
    # execute_context_0(0)_generation_0(0): execute_model called with nothing scheduled (no
    # request, no token); it runs no model, so it is no step (counted apart)
    steps = [s for s in annotated if not is_empty(s[3])]
    layers = _outermost([x for a in acts for x in a.layers])
    inner: dict[str, int] = {}
    for a in acts:
        for k, v in a.inner.items():
            inner[k] = inner.get(k, 0) + v
    counts: dict[str, Any] = {"step_annotations": len(annotated), "mla_ops": len(layers),
                              "empty_annotations": len(annotated) - len(steps),
                              "backend_ops": inner, "cpu_ops": sum(a.cpu_ops for a in acts)}  # fmt: skip
    if not steps:
        counts["mla_ops_in_steps"] = 0
        return {}, {}, counts
    n = len(steps)
    st: dict[str, np.ndarray] = {
        "step": np.arange(n, dtype=np.int64),
        "t_start_ns": np.array([s[0] for s in steps], dtype=np.int64),
        "duration_ns": np.array([s[1] - s[0] for s in steps], dtype=np.int64),
        "num_reqs": np.array([s[3]["creq"] + s[3]["greq"] for s in steps], dtype=np.int64),
        "real_tokens": np.array([s[3]["ctok"] + s[3]["gtok"] for s in steps], dtype=np.int64),
        # a step of one generating request and no prefill: its tokens are its query length
        # (1 + the drafts verified); with more requests the split is not in the name
        "qlen": np.array(
            [s[3]["gtok"] if s[3]["creq"] == 0 and s[3]["greq"] == 1 else NULL for s in steps],
            dtype=np.int64,
        ),
    }
    backend = np.full(n, "", dtype=object)  # "" is stored as NULL (store_derived)
    mode = np.full(n, "eager", dtype=object)  # a CPU run has no graphs: ops run one by one
    lay: dict[str, list[int]] = {"step": [], "layer": [], "t_start_ns": [], "duration_ns": []}
    by_pid: dict[int, list[tuple[int, int, int, str]]] = {}
    for x in layers:  # _outermost sorted them by (pid, start)
        by_pid.setdefault(x[2], []).append(x)
    starts = {pid: [x[0] for x in xs] for pid, xs in by_pid.items()}
    for k, (s0, s1, pid, _f) in enumerate(steps):
        xs = by_pid.get(pid, [])
        lo, hi = bisect_left(starts.get(pid, []), s0), bisect_right(starts.get(pid, []), s1)
        inside = [x for x in xs[lo:hi] if x[1] <= s1]
        if inside:
            backend[k] = f"{CPU_PATH} {inside[0][3]}"
        for j, x in enumerate(inside):
            lay["step"].append(k)
            lay["layer"].append(j)
            lay["t_start_ns"].append(x[0])
            lay["duration_ns"].append(x[1] - x[0])
    st["backend"], st["graph_mode"] = backend, mode
    # the step's window is vLLM's own annotation (analysis.timing.TIMING_LABELS["vllm-step"])
    st["timing"] = np.full(n, VLLM_STEP, dtype=object)
    counts["mla_ops_in_steps"] = len(lay["step"])
    lcols = {c: np.array(v, dtype=np.int64) for c, v in lay.items()}
    return st, lcols, counts
