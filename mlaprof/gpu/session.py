"""GPU state of one scenario: per-layer inputs, static metadata per capture size, N-layer graphs.

A FULL graph holds all N layers of one capture size. Its buffers (q, KV pools, outputs, metadata)
live outside the graph's memory pool and keep fixed addresses; a step refreshes the metadata in
place (stream-ordered copies from pinned host memory) and replays. Each capture gets its own
``torch.cuda.MemPool`` so that its memory is measured three ways (see :class:`CaptureMemory`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from mlaprof.backends.base import VerifyInputs
from mlaprof.backends.registry import get_backend
from mlaprof.errors import MlaprofError
from mlaprof.metadata import BatchShape, VerifyMetadata, build_metadata, kv_pool_pages, step_shape
from mlaprof.scenario import KV_DIM, LATENT, Scenario

LayerCtx = Callable[[int], contextlib.AbstractContextManager]


@dataclass
class CaptureMemory:
    """Three views of what a capture cost. ``pool_bytes``: segments of the graph's private pool
    (what the graph keeps). ``allocator_bytes``: the caching allocator's reserved-bytes delta (the
    pool plus anything else reserved meanwhile). ``driver_bytes``: drop in the driver's free memory
    (what vLLM logs): also counts memory outside PyTorch's allocator (graph exec objects, kernel
    modules loaded by the capture, cuBLAS/Triton workspaces)."""

    pool_bytes: int
    allocator_bytes: int
    driver_bytes: int
    capture_ns: int


@dataclass
class Graph:
    graph: Any  # torch.cuda.CUDAGraph
    pool: Any  # torch.cuda.MemPool
    memory: CaptureMemory
    events: list[Any] = field(default_factory=list)  # external timing events (twin only)


@dataclass
class Group:
    """Everything one capture size needs."""

    num_reqs: int
    capture_size: int | None
    splits: int  # S captured into the graph (frozen for every step of this size)
    meta: VerifyMetadata  # static device metadata (fixed addresses)
    q: list[VerifyInputs]  # per layer
    out: list[torch.Tensor]
    lse: list[torch.Tensor]
    first_step: int
    serving: Graph | None = None
    twin: Graph | None = None


def _pin(meta: VerifyMetadata) -> VerifyMetadata:
    if not torch.cuda.is_available():
        return meta
    out = VerifyMetadata(**{**meta.__dict__})
    for n in ("qo_lens", "qo_indptr", "seq_lens", "kv_indptr", "kv_indices", "last_page_len"):
        setattr(out, n, getattr(meta, n).pin_memory())
    return out


class CudaSession:
    def __init__(
        self,
        sc: Scenario,
        backend_name: str,
        splits_for: Callable[[int, VerifyMetadata, BatchShape], int],
        dtype: torch.dtype = torch.bfloat16,
        device: str = "cuda",
        seed: int = 0,
    ) -> None:
        if not torch.cuda.is_available():
            raise MlaprofError("--device cuda needs a CUDA (or ROCm) GPU; none is visible")
        self.sc = sc
        self.backend_name = backend_name
        self.backend = get_backend(backend_name)
        self.device = torch.device(device)
        self.dtype = dtype
        self.layers = sc.layers
        self.shapes = [step_shape(sc, s) for s in range(sc.steps)]
        self.host_metas = [
            _pin(build_metadata(sh, sc.page_size, sc.min_kv_mode, "cpu", seed=sc.seed + i))
            for i, sh in enumerate(self.shapes)
        ]
        g = torch.Generator(device=self.device).manual_seed(seed)
        slots = max(kv_pool_pages(m) for m in self.host_metas) * sc.page_size
        self.kv = [
            torch.empty(slots, KV_DIM, device=self.device, dtype=dtype).normal_(0, 0.5, generator=g)
            for _ in range(self.layers)
        ]
        self.groups: dict[int, Group] = {}
        # the tensor-parallel all-reduce after each attention layer (mlaprof.multirank): it runs
        # in every forward, so the FULL graph captures it beside attention
        self.collective: Callable[[torch.Tensor], None] | None = None
        for step, (sh, hm) in enumerate(zip(self.shapes, self.host_metas, strict=True)):
            if sh.num_reqs in self.groups:
                continue
            cap = max(
                m.kv_indices.numel()
                for s2, m in zip(self.shapes, self.host_metas, strict=True)
                if s2.num_reqs == sh.num_reqs
            )
            meta = hm.to(self.device)
            meta.kv_indices = torch.zeros(cap, dtype=torch.int32, device=self.device)
            meta.kv_indices[: hm.kv_indices.numel()].copy_(hm.kv_indices)
            b, qlen, h = sh.num_reqs, sh.qlen, sc.heads
            qs, outs, lses = [], [], []
            for layer in range(self.layers):
                q = torch.randn(b, qlen, h, KV_DIM, device=self.device, dtype=dtype, generator=g)
                qs.append(
                    VerifyInputs(
                        q[..., :LATENT].contiguous(),
                        q[..., LATENT:].contiguous(),
                        self.kv[layer],
                        KV_DIM**-0.5,
                    )
                )
                outs.append(torch.empty(b, qlen, h, LATENT, device=self.device, dtype=dtype))
                lses.append(torch.empty(b, qlen, h, device=self.device, dtype=torch.float32))
            self.groups[sh.num_reqs] = Group(
                sh.num_reqs, sh.capture_size, splits_for(step, hm, sh), meta, qs, outs, lses, step
            )

    # -- running -------------------------------------------------------------------------------
    def group_of(self, step: int) -> Group:
        return self.groups[self.shapes[step].num_reqs]

    def load_step(self, step: int) -> Group:
        """Refresh the static metadata of the step's group (stream-ordered, no host sync)."""
        grp = self.group_of(step)
        hm = self.host_metas[step]
        for n in ("qo_lens", "qo_indptr", "seq_lens", "kv_indptr", "last_page_len"):
            getattr(grp.meta, n).copy_(getattr(hm, n), non_blocking=True)
        k = hm.kv_indices.numel()
        grp.meta.kv_indices[:k].copy_(hm.kv_indices, non_blocking=True)
        for a in ("min_kv_seq_len_all", "min_kv_seq_len_active", "num_real_reqs"):
            setattr(grp.meta, a, getattr(hm, a))
        grp.meta.host_seq_lens = hm.host_seq_lens
        grp.meta.host_qo_lens = hm.host_qo_lens
        grp.meta.host_kv_indptr = hm.host_kv_indptr
        return grp

    def forward_layers(
        self,
        grp: Group,
        hook: Callable[[int], None] | None = None,
        layer_ctx: LayerCtx | None = None,
    ) -> None:
        """All N layers of one step; ``hook(i)`` runs before layer i and ``hook(N)`` after."""
        for i in range(self.layers):
            if hook:
                hook(i)
            ctx = layer_ctx(i) if layer_ctx else contextlib.nullcontext()
            with ctx:
                self.backend.forward(
                    grp.q[i], grp.meta, grp.out[i], grp.lse[i], num_splits=grp.splits
                )
            if self.collective is not None:
                self.collective(grp.out[i])
        if hook:
            hook(self.layers)

    def warmup(self, grp: Group) -> None:
        """Eager forwards on a side stream before capture (compiles kernels, reserves
        workspaces outside the graph's pool)."""
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.forward_layers(grp)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()

    # -- capture -------------------------------------------------------------------------------
    def capture(
        self, grp: Group, instrumented: bool = False, layer_ctx: LayerCtx | None = None
    ) -> Graph:
        """Capture all N layers into one graph with a private pool; measure its memory."""
        events: list[Any] = []
        if instrumented:
            events = [
                torch.cuda.Event(enable_timing=True, external=True) for _ in range(self.layers + 1)
            ]
        hook = (lambda i: events[i].record()) if instrumented else None
        with _measure() as m:
            pool = torch.cuda.MemPool()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool.id):
                self.forward_layers(grp, hook=hook, layer_ctx=layer_ctx)
        pool_bytes = _pool_bytes(pool)
        mem = CaptureMemory(pool_bytes, m["allocator"], m["driver"], m["ns"])
        return Graph(graph, pool, mem, events)


def _pool_bytes(pool: Any) -> int:
    """Bytes of the segments a private pool holds (``MemPool.snapshot`` where it exists)."""
    if hasattr(pool, "snapshot"):
        segs = pool.snapshot()
    else:
        segs = [s for s in torch.cuda.memory_snapshot() if s.get("segment_pool_id") == pool.id]
    return sum(int(seg.get("total_size", 0)) for seg in segs)


@contextlib.contextmanager
def _measure() -> Iterator[dict[str, int]]:
    """Allocator and driver deltas and wall time around a capture (synchronized both ends)."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # torch.cuda.graph empties the cache too: do it before the baseline
    free0 = torch.cuda.mem_get_info()[0]
    res0 = torch.cuda.memory_stats().get("reserved_bytes.all.current", 0)
    t0 = time.perf_counter_ns()
    out: dict[str, int] = {}
    yield out
    torch.cuda.synchronize()
    out["ns"] = time.perf_counter_ns() - t0
    out["driver"] = free0 - torch.cuda.mem_get_info()[0]
    out["allocator"] = torch.cuda.memory_stats().get("reserved_bytes.all.current", 0) - res0
