"""What the vLLM plugin records, from the host values the wrappers hand it (vllm_patches.Sink).

One record per decode metadata build (the engine builds once per step and KV-cache group, also
for the capture-time dummy runs): batch shape, query lengths, padding rows, the
``min_kv_seq_len`` the builder passed, S per relevant split policy, graph mode and capture size.
The graph mode is known only after the build: a ``forward_mqa`` that runs Python under the
forward context says NONE / PIECEWISE / FULL-capture; a build whose ``forward_mqa`` never ran
before the next build was replayed from a FULL graph. So a record is written when the builder
builds again (or when the process ends): one step behind, never blocking the step.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from mlaprof.metadata import BatchShape, VerifyMetadata
from mlaprof.recording import padding_row
from mlaprof.scenario import DEVICES, DevicePreset
from mlaprof.splits.analysis import step_splits
from mlaprof.store.writer import RunWriter

MAX_LISTED_ROWS = 1024  # per-row lists in an event's JSON are cut here
log = logging.getLogger("mlaprof.vllm")


@dataclass
class BuildRecord:
    backend: str  # ROCM_AITER_MLA | TRITON_MLA
    builder: str  # builder class name
    layer: str | None  # first layer the builder serves
    capture: bool  # built by build_for_cudagraph_capture (the capture-time dummy run)
    t_ns: int
    num_reqs: int  # decode rows the kernel sees (padding requests included)
    qo_lens: list[int]
    qlen: int
    num_decode_tokens: int  # padded token count: the capture size under FULL graphs
    max_seq_len: int | None
    seq_lens: list[int] | None  # host upper bound per row (padding rows pinned to qlen)
    heads: int | None
    path: str  # gluon-verify | gluon-decode | asm | triton
    min_kv_seq_len: int | None  # what the AITER builder handed mla_gluon (None: not used)
    max_model_len: int | None
    graph_mode: str | None = None  # filled when forward_mqa runs under a forward context
    runtime_tokens: int | None = None  # the forward context's batch descriptor
    stream_capturing: bool | None = None
    forward_calls: int = 0
    step: int = -1  # assigned in build order, so markers and records agree
    notes: list[str] = field(default_factory=list)

    @property
    def num_real(self) -> int:
        return sum(1 for q in self.qo_lens if q > 0)

    @property
    def real_tokens(self) -> int:
        return sum(self.qo_lens)

    @property
    def num_padding(self) -> int:
        return self.num_reqs - self.num_real

    def resolved_mode(self) -> str:
        if self.capture:
            return "FULL"
        if self.graph_mode:
            return self.graph_mode
        return "FULL"  # built but no Python forward ran: the step replayed a FULL graph

    def min_kv_source(self) -> str:
        """Which minimum the builder passed: over active rows (the fix) or over all rows."""
        if self.min_kv_seq_len is None:
            return "not used"
        if self.seq_lens is None:
            return "unknown"
        active = [s for s, q in zip(self.seq_lens, self.qo_lens) if q > 0]
        if active and self.min_kv_seq_len == min(active):
            return "active-rows"
        if self.min_kv_seq_len == min(self.seq_lens):
            return "all-rows"
        if self.min_kv_seq_len == 1:
            return "default (1)"
        return "other"


def engine_device() -> DevicePreset:
    """The device preset the split/occupancy model uses for this GPU (host queries only)."""
    if not torch.cuda.is_available():
        return DEVICES["cpu"]
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    arch = (getattr(props, "gcnArchName", "") or "").split(":")[0]
    if not arch:
        major, minor = torch.cuda.get_device_capability()
        arch = f"sm_{major}{minor}"
    units = int(props.multi_processor_count)
    for d in DEVICES.values():
        if d.arch == arch and d.units == units:
            return d
    unit = "CU" if arch.startswith("gfx") else "SM"
    return DevicePreset(f"{arch}-{units}", units, unit, arch, props.name)


def builder_heads(builder: Any) -> int | None:
    h = getattr(builder, "_decode_num_heads", None)
    if isinstance(h, int):
        return h
    n = getattr(builder, "num_heads", None)
    if isinstance(n, int):
        return n * int(getattr(builder, "dcp_world_size", 1) or 1)
    return None


def _max_model_len(builder: Any) -> int | None:
    cfg = getattr(getattr(builder, "vllm_config", None), "model_config", None)
    v = getattr(cfg, "max_model_len", None)
    return v if isinstance(v, int) else None


def _mode_name(mode: Any) -> str | None:
    return getattr(mode, "name", None) or (str(mode) if mode is not None else None)


class EngineRecorder:
    """Turns wrapper callbacks into run-store records for one process (one rank)."""

    def __init__(
        self,
        writer_factory: Callable[[], RunWriter],
        device: Callable[[], DevicePreset] = engine_device,
        gluon_policies: Callable[[], list[str]] | None = None,
        markers: bool | None = None,
        background: bool = True,
    ) -> None:
        self._writer_factory = writer_factory
        self._writer: RunWriter | None = None
        self._device_fn = device
        self._device: DevicePreset | None = None
        self._gluon_policies_fn = gluon_policies or default_gluon_policies
        self._gluon: list[str] | None = None
        self._pending: dict[int, BuildRecord] = {}  # builder id -> its last build
        self._by_meta: dict[int, BuildRecord] = {}  # id(attn_metadata) -> record
        self._support_seen: set[str] = set()
        self._lock = threading.Lock()
        self.step = 0
        self.disabled = False
        # a roctx/NVTX mark per build lets rocprofv3 --marker-trace line steps up with kernels
        self.markers = markers if markers is not None else torch.cuda.is_available()
        self._forward_context: Callable[[], Any] | None = None
        # the split model and the SQLite commit run on a writer thread, off the step's path
        self.background = background
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    # -- lazily created things ---------------------------------------------------------------
    @property
    def writer(self) -> RunWriter:
        if self._writer is None:
            self._writer = self._writer_factory()
        return self._writer

    @property
    def device(self) -> DevicePreset:
        if self._device is None:
            self._device = self._device_fn()
        return self._device

    def gluon_policies(self) -> list[str]:
        if self._gluon is None:
            self._gluon = self._gluon_policies_fn()
        return self._gluon

    # -- Sink ----------------------------------------------------------------------------------
    def on_build_decode(self, builder: Any, info: dict[str, Any]) -> None:
        pass  # the enclosing build() reads the same values from the thread-local it left

    def on_build(
        self, backend: str, builder: Any, host: dict[str, Any], result: Any, capture: bool
    ) -> None:
        now = time.time_ns()
        rec = self._record(backend, builder, host, result, capture, now)
        with self._lock:
            self._note_support(builder)
            prev = self._pending.pop(id(builder), None)
            if prev is not None:
                self._by_meta = {k: v for k, v in self._by_meta.items() if v is not prev}
                interval = now - prev.t_ns
                self._submit(lambda: self._write(prev, interval))
            if rec is None:
                return
            rec.step = self.step
            self.step += 1
            self._pending[id(builder)] = rec
            self._by_meta[id(result)] = rec
        if self.markers:
            _mark(f"mlaprof step={rec.step} {rec.backend} rows={rec.num_reqs} qlen={rec.qlen}")

    def on_forward(self, backend: str, impl: Any, attn_metadata: Any) -> None:
        rec = self._by_meta.get(id(attn_metadata))
        if rec is None:
            return
        rec.forward_calls += 1
        if rec.forward_calls > 1:
            return  # per layer: only the first call reads the context
        ctx = self._context()
        if ctx is not None:
            rec.graph_mode = _mode_name(getattr(ctx, "cudagraph_runtime_mode", None))
            bd = getattr(ctx, "batch_descriptor", None)
            rec.runtime_tokens = getattr(bd, "num_tokens", None)
        if torch.cuda.is_available():
            rec.stream_capturing = bool(torch.cuda.is_current_stream_capturing())

    def on_cg_resolve(self, config: Any, args: dict[str, Any], requested: Any, result: Any) -> None:
        support = args.get("min_cg_support")
        backend = args.get("min_cg_attn_backend")
        req, res = _mode_name(requested), _mode_name(result)
        sizes = getattr(config, "cudagraph_capture_sizes", None)
        data = {
            "requested": req,
            "resolved": res,
            "min_cg_support": _mode_name(support),
            "min_cg_support_value": getattr(support, "value", None),
            "min_cg_attn_backend": backend,
            "uniform_decode_query_len": args.get("uniform_decode_query_len"),
            "capture_sizes": list(sizes) if sizes else None,
        }
        if req == res:
            msg = f"cudagraph_mode {res} kept (min support {data['min_cg_support']} from {backend})"
        else:
            msg = (
                f"CUDAGraphMode.{req} is not supported with {backend} backend "
                f"(support: {data['min_cg_support']}); setting cudagraph_mode={res}"
            )
        t_ns = time.time_ns()
        self._submit(
            lambda: self.writer.add(
                "events",
                t_ns=t_ns,
                source="vllm",
                kind="cudagraph-mode",
                message=msg,
                data=json.dumps(data),
            )
        )

    # -- records -------------------------------------------------------------------------------
    def _context(self) -> Any:
        if self._forward_context is None:
            try:
                from vllm.forward_context import get_forward_context, is_forward_context_available
            except ImportError:
                self._forward_context = lambda: None
            else:

                def ctx() -> Any:
                    return get_forward_context() if is_forward_context_available() else None

                self._forward_context = ctx
        return self._forward_context()

    def _note_support(self, builder: Any) -> None:
        name = type(builder).__name__
        if name in self._support_seen:
            return
        self._support_seen.add(name)
        support = getattr(type(builder), "_cudagraph_support", None)
        t_ns = time.time_ns()
        data = {"builder": name, "support": _mode_name(support),
                "value": getattr(support, "value", None)}  # fmt: skip
        self._submit(
            lambda: self.writer.add(
                "events",
                t_ns=t_ns,
                source="vllm",
                kind="cudagraph-support",
                message=f"{name} reports cudagraph support {data['support']}",
                data=json.dumps(data),
            )
        )

    # -- the writer thread ---------------------------------------------------------------------
    def _submit(self, job: Callable[[], None]) -> None:
        if not self.background:
            self._run(job)
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="mlaprof-writer", daemon=True)
            self._thread.start()
        self._queue.put(job)

    def _run(self, job: Callable[[], None]) -> None:
        if self.disabled:
            return
        try:
            job()
        except Exception as e:  # recording must never break serving
            log.warning("mlaprof: recording failed, recording off in this process: %s", e)
            self.disabled = True

    def _serve(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                self._run(job)
            finally:
                self._queue.task_done()

    def drain(self) -> None:
        """Wait until every submitted record is committed."""
        if self._thread is not None:
            self._queue.join()

    def _record(
        self, backend: str, builder: Any, host: dict[str, Any], result: Any, capture: bool, now: int
    ) -> BuildRecord | None:
        decode = getattr(result, "decode", None)
        num_decodes = getattr(result, "num_decodes", 0) or 0
        if decode is None or num_decodes <= 0:
            return None  # a prefill-only batch: not the verify path
        info = host.get("decode_info") or {}
        qsl = host.get("query_start_loc")  # build()'s query_start_loc_cpu, read once
        tokens = int(getattr(result, "num_decode_tokens", 0) or 0)
        notes: list[str] = []
        if qsl is not None and len(qsl) > num_decodes:
            qo = [qsl[i + 1] - qsl[i] for i in range(num_decodes)]
        else:
            qo = [tokens // num_decodes] * num_decodes
            notes.append("query lengths not on the host: assumed uniform")
        max_qo = info.get("max_qo_len")
        qlen = int(max_qo) if isinstance(max_qo, int) else (tokens // num_decodes or max(qo))
        ub = host.get("seq_lens_upper_bound")
        seq: list[int] | None = None
        if ub is not None and len(ub) >= num_decodes:
            seq = [s if q > 0 else qlen for s, q in zip(ub[:num_decodes], qo)]
        else:
            notes.append("no host sequence lengths: splits not modelled")
        if backend == "TRITON_MLA":
            path = "triton"
        elif info.get("use_gluon_verify"):
            path = "gluon-verify"
        elif info.get("use_gluon_decode"):
            path = "gluon-decode"
        else:
            path = "asm"
        min_kv = info.get("min_kv_seq_len") if path.startswith("gluon") else None
        names = getattr(builder, "layer_names", None) or [None]
        max_seq = getattr(result, "max_seq_len", None)
        return BuildRecord(
            backend=backend,
            builder=type(builder).__name__,
            layer=names[0],
            capture=capture,
            t_ns=now,
            num_reqs=num_decodes,
            qo_lens=qo,
            qlen=qlen,
            num_decode_tokens=tokens,
            max_seq_len=max_seq if isinstance(max_seq, int) else None,
            seq_lens=seq,
            heads=builder_heads(builder),
            path=path,
            min_kv_seq_len=int(min_kv) if isinstance(min_kv, int) else None,
            max_model_len=_max_model_len(builder),
            notes=notes,
        )

    def policies(self, rec: BuildRecord) -> list[str]:
        if rec.path == "triton":
            return ["vllm-triton"]
        if rec.path.startswith("gluon"):
            return self.gluon_policies()
        return ["aiter-asm"]

    def _meta(self, rec: BuildRecord) -> VerifyMetadata:
        """Host-only stand-in of the batch's metadata for the split/padding model."""
        seq = rec.seq_lens or []
        active = [s for s, q in zip(seq, rec.qo_lens) if q > 0]
        min_all = min(seq) if seq else rec.qlen
        min_active = min(active) if active else rec.qlen
        source = rec.min_kv_source()
        mode = "active-rows" if source == "active-rows" else "all-rows"
        if rec.min_kv_seq_len is not None and source not in ("active-rows", "all-rows"):
            min_all = rec.min_kv_seq_len  # model S with the value the kernel really got
        indptr = [0]
        for s in seq:
            indptr.append(indptr[-1] + s)
        empty = torch.zeros(0, dtype=torch.int32)
        return VerifyMetadata(
            qo_lens=empty, qo_indptr=empty, seq_lens=empty, kv_indptr=empty, kv_indices=empty,
            last_page_len=empty, qlen=rec.qlen, page_size=1, num_real_reqs=rec.num_real,
            min_kv_seq_len_all=min_all, min_kv_seq_len_active=min_active, min_kv_mode=mode,
            host_seq_lens=list(seq), host_qo_lens=list(rec.qo_lens), host_kv_indptr=indptr,
        )  # fmt: skip

    def _write(self, rec: BuildRecord, interval_ns: int | None) -> None:
        step = rec.step
        mode = rec.resolved_mode()
        size = rec.num_decode_tokens if mode == "FULL" else None
        shape = BatchShape(
            kv_lens=[s for s, q in zip(rec.seq_lens or [], rec.qo_lens) if q > 0],
            qlen=rec.qlen,
            num_reqs=rec.num_reqs,
            capture_size=size,
            graph_mode=mode,
        )
        split_rows: list[dict[str, Any]] = []
        if rec.seq_lens is not None and rec.heads:
            meta = self._meta(rec)
            device = self.device
            for s in step_splits(meta, rec.heads, device, mode, rec.max_model_len or 0,
                                 self.policies(rec)):  # fmt: skip
                split_rows.append(
                    {
                        "step": step, "capture_size": size, "policy": s.policy, "used": s.used,
                        "deserved": s.deserved, "frozen": s.frozen, "all_rows": s.all_rows,
                        "active_rows": s.active_rows, "min_kv_used": s.min_kv_used,
                        "min_kv_deserved": s.min_kv_deserved,
                        "occupancy_used": s.occupancy_used,
                        "occupancy_deserved": s.occupancy_deserved, "target": device.name,
                        "note": s.note,
                    }
                )  # fmt: skip
            pad = padding_row(step, meta, shape)
        else:
            pad = {
                "step": step, "capture_size": size, "real_rows": rec.num_real,
                "padding_rows": rec.num_padding, "real_tokens": rec.real_tokens,
                "padding_tokens": rec.num_decode_tokens - rec.real_tokens,
                "kv_bytes_real": None, "kv_bytes_padding": None,
            }  # fmt: skip
        pad["real_tokens"] = rec.real_tokens
        pad["padding_tokens"] = max(0, rec.num_decode_tokens - rec.real_tokens)
        skip = ("qo_lens", "seq_lens", "t_ns", "notes")
        data = {f.name: getattr(rec, f.name) for f in fields(rec) if f.name not in skip}
        data["notes"] = list(rec.notes)
        data["qo_lens"] = rec.qo_lens[:MAX_LISTED_ROWS]
        data["seq_lens_upper_bound"] = (rec.seq_lens or [])[:MAX_LISTED_ROWS] or None
        data["min_kv_source"] = rec.min_kv_source()
        data["graph_mode_resolved"] = mode
        data["splits"] = {r["policy"]: r["used"] for r in split_rows}
        w = self.writer
        with w.transaction():
            w.add(
                "steps",
                step=step,
                t_start_ns=rec.t_ns,
                duration_ns=None if rec.capture else interval_ns,
                num_reqs=rec.num_reqs,
                num_real_reqs=rec.num_real,
                qlen=rec.qlen,
                real_tokens=rec.real_tokens,
                padded_tokens=rec.num_decode_tokens,
                graph_mode=mode,
                backend=rec.backend,
                timing="capture" if rec.capture else "build-interval",
            )
            for r in split_rows:
                w.add("splits", **r)
            w.add("padding", **pad)
            w.add(
                "events",
                t_ns=rec.t_ns,
                source="vllm",
                kind="capture-build" if rec.capture else "mla-build",
                message=(
                    f"{rec.backend} {rec.path}: {rec.num_real} real + {rec.num_padding} padding "
                    f"rows x qlen {rec.qlen}, min_kv_seq_len {rec.min_kv_seq_len} "
                    f"({rec.min_kv_source()}), graph {mode}"
                ),
                data=json.dumps(data),
            )

    def flush(self) -> None:
        """Write every pending record (the last build of each builder) and wait for the commits."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            self._by_meta.clear()
        for rec in pending:
            self._submit(lambda rec=rec: self._write(rec, None))
        self.drain()

    def close(self, status: str = "finished") -> None:
        try:
            self.flush()
        finally:
            if self._thread is not None:
                self._queue.put(None)
                self._thread.join(timeout=10)
                self._thread = None
            if self._writer is not None and not self._writer.closed:
                self._writer.finish(status)


def _mark(text: str) -> None:
    """A host-side roctx/NVTX mark (ROCm builds of torch route torch.cuda.nvtx to roctx)."""
    torch.cuda.nvtx.mark(text)


def default_gluon_policies() -> list[str]:
    """The gluon policy of the installed AITER; both published ones when it cannot be told."""
    from mlaprof.backends.aiter_backend import gluon_policy
    from mlaprof.errors import MlaprofError
    from mlaprof.integrations import aiter_env

    try:
        env = aiter_env.detect()
    except MlaprofError:
        return ["aiter-gluon-v0.1.19", "aiter-gluon-v0.1.20"]
    return [gluon_policy(env, "bh16bn64")]
