"""What the vLLM plugin records, from the host values the wrappers hand it (vllm_patches.Sink).

Two halves, so that the engine's thread pays only for a snapshot:
- the engine's thread (``on_*``) appends one tuple per call to a deque: Python ints, the enum and
  result objects vLLM already made, and numpy copies of the CPU tensors vLLM will overwrite
  (``query_start_loc_cpu``, ``seq_lens_cpu_upper_bound``, the draft-token counts);
- a writer thread wakes every ``interval`` seconds, turns the tuples into one record per engine
  step and commits them in one transaction (the run grows while the engine runs).

An engine step, as the runner does it: ``_calc_spec_decode_metadata`` (draft tokens per request),
``_determine_batch_execution_and_padding`` (graph mode, padded size), the target model's metadata
build(s) (one per KV-cache group: the first is recorded, the others counted), then the drafter's
builds (``fast_build=True``, counted). vLLM's acceptance counters come from
``SpecDecodingStats.observe_draft`` in the EngineCore process, which writes its own database
(role ``scheduler``): one record per scheduler step, named after the global rank of its engine's
first worker (:class:`EngineLayout`, read from the scheduler vLLM builds there).
"""

from __future__ import annotations

import collections
import json
import logging
import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlaprof.integrations.vllm_names import (  # the role and events it writes
    ACCEPT_EVENT,
    CG_MODE_EVENT,
    DRAFT_EAGER_EVENT,
    GRAPH_CAPTURE_EVENT,
    SCHEDULER_ROLE,
    STEP_EVENT,
)
from mlaprof.recording import KV_BYTES_PER_ELEMENT, event_row
from mlaprof.scenario import KV_DIM
from mlaprof.store.liveness import DRAINED, STOP_SIGNAL

if TYPE_CHECKING:
    from mlaprof.store.writer import RunWriter

MAX_LISTED_ROWS = 1024  # per-row lists in an event's JSON are cut here
# without the engine's step ends (a vLLM whose execute_model/sample_tokens did not match): an
# open step with nothing new for this long is taken as complete, its duration unknown
IDLE_STEP_NS = 1_000_000_000
log = logging.getLogger("vllm.mlaprof")

# tuple tags on the deque
_DISPATCH, _BUILD, _DRAFT, _ACCEPT, _JOB, _END, _DRAFT_GRAPH = range(7)


@dataclass
class BuilderInfo:
    """What never changes for one builder object (read once, on its first build)."""

    builder: str
    backend: str | None
    layer: str | None
    heads: int | None
    max_model_len: int | None
    cudagraph_support: str | None
    query_len_support: str | None
    decode_threshold: int | None


@dataclass
class RunnerInfo:
    max_num_seqs: int | None
    num_speculative_tokens: int | None
    method: str | None


@dataclass
class Step:
    """One engine step as the writer thread assembles it."""

    t_ns: int
    num_tokens: int | None = None  # unpadded tokens the runner scheduled
    num_reqs: int | None = None
    mode: Any = None  # CUDAGraphMode
    padded_tokens: int | None = None  # BatchDescriptor.num_tokens
    padded_reqs: int | None = None  # BatchDescriptor.num_reqs
    drafts: list[int] | None = None  # draft tokens per request (None: no speculation this step)
    runner: RunnerInfo | None = None
    build: tuple[Any, ...] | None = None  # the first target build's snapshot
    extra_builds: int = 0  # further target builds of the same step (other KV-cache groups)
    drafter_builds: int = 0
    drafter_qlens: list[int] = field(default_factory=list)
    # the model runner V2's drafter dispatches of this step: (mode, graph tokens, rows)
    drafter_graphs: list[tuple[str | None, int, int | None]] = field(default_factory=list)
    drafts_from: str = "runner"  # runner: per-request draft counts; uniform: the batch's qlen
    end_ns: int | None = None  # the engine returned the step's output (execute_model/sample)


@dataclass(frozen=True)
class EngineLayout:
    """An EngineCore's engine among vLLM's data-parallel engines, from the ``ParallelConfig``
    its scheduler (or its worker's runner) was built with. vLLM offsets the global rank of an
    engine's workers by ``data_parallel_rank * world_size`` where it runs several engines or
    nodes (``init_distributed_environment``, vllm/distributed/parallel_state.py), so the
    engine's first worker has :attr:`first_worker_rank`. A dense model's DP engines are
    independent (``run_engine_core`` calls ``reconfigure_for_independent_dp_rank``, vllm/v1/
    engine/core.py): DP size 1, rank 0, each engine's workers ranks 0 to world_size - 1; only
    ``data_parallel_index`` keeps the engine's DP rank. mlaprof numbers those engines' ranks
    by it (:attr:`data_parallel_index`), as vLLM's own weight transfer does
    (``data_parallel_index * world_size + rank``, vllm/v1/worker/gpu_worker.py)."""

    data_parallel_rank: int
    data_parallel_size: int
    world_size: int  # workers per engine: ParallelConfig.world_size (PP x TP x PCP)
    offset: bool  # vLLM offsets this engine's worker ranks (several engines or nodes)
    data_parallel_index: int | None = None  # an independent engine's DP rank (None: not one)

    @property
    def independent(self) -> bool:
        """An independent engine past the first: vLLM did not offset its ranks, mlaprof does."""
        return self.data_parallel_index is not None

    @property
    def first_worker_rank(self) -> int:
        if self.data_parallel_index is not None:
            return self.data_parallel_index * self.world_size
        return self.data_parallel_rank * self.world_size if self.offset else 0

    def as_meta(self) -> dict[str, int | bool]:
        meta: dict[str, int | bool] = {
            "data_parallel_rank": self.data_parallel_rank,
            "data_parallel_size": self.data_parallel_size, "world_size": self.world_size,
            "first_worker_rank": self.first_worker_rank}  # fmt: skip
        if self.data_parallel_index is not None:  # the ranks are mlaprof's numbering, not vLLM's
            meta.update(data_parallel_index=self.data_parallel_index, independent=True)
        return meta


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parallel_layout(cfg: Any) -> EngineLayout | None:
    """The layout a vLLM ``ParallelConfig`` says, or None where it says none, or where vLLM
    ranks the workers otherwise: an external launcher (the ranks are torchrun's, the workers in
    this process) or elastic EP (no offset)."""
    dp_rank = getattr(cfg, "data_parallel_rank", None)
    dp_size = getattr(cfg, "data_parallel_size", None)
    world = getattr(cfg, "world_size", None)
    nnodes = getattr(cfg, "nnodes", 1)
    if not all(_int(v) for v in (dp_rank, dp_size, world)):
        return None
    if getattr(cfg, "distributed_executor_backend", None) == "external_launcher":
        return None
    if getattr(cfg, "enable_elastic_ep", False):
        return None
    offset = dp_size > 1 or (isinstance(nnodes, int) and nnodes > 1)
    index = getattr(cfg, "data_parallel_index", None)
    # DP size 1 with an index past 0: only reconfigure_for_independent_dp_rank makes that
    # (data_parallel_index starts equal to data_parallel_rank, vllm/config/parallel.py)
    independent = dp_size == 1 and dp_rank == 0 and _int(index) and index > 0
    return EngineLayout(dp_rank, dp_size, world, offset, index if independent else None)


def engine_layout(scheduler: Any) -> EngineLayout | None:
    """The layout a vLLM ``Scheduler``'s ``vllm_config.parallel_config`` says
    (:func:`parallel_layout`)."""
    return parallel_layout(parallel_config_of(scheduler))


def parallel_config_of(obj: Any) -> Any:
    """The ``ParallelConfig`` of the ``vllm_config`` an object holds (a scheduler; a worker's
    runner, CudaGraphManager or metadata builder: each keeps its worker's), else None."""
    return getattr(getattr(obj, "vllm_config", None), "parallel_config", None)


def _name(v: Any) -> str | None:
    return getattr(v, "name", None) or (str(v) if v is not None else None)


def builder_heads(builder: Any) -> int | None:
    h = getattr(builder, "_decode_num_heads", None)
    if isinstance(h, int):
        return h
    n = getattr(builder, "num_heads", None)
    if isinstance(n, int):
        return n * int(getattr(builder, "dcp_world_size", 1) or 1)
    return None


def _group_of(builder: Any, runners: list[Any]) -> Any:
    """The runner's AttentionGroup that owns ``builder`` (its backend and layer names)."""
    for runner in runners:
        for groups in getattr(runner, "attn_groups", None) or []:
            for g in groups:
                if any(b is builder for b in getattr(g, "metadata_builders", ())):
                    return g
    return None


def builder_info(builder: Any, runners: list[Any] = ()) -> BuilderInfo:
    """Once per builder object: which backend and layers it serves, its support levels."""
    group = _group_of(builder, list(runners))
    names = getattr(group, "layer_names", None) or getattr(builder, "layer_names", None) or [None]
    cfg = getattr(builder, "vllm_config", None)
    backend = getattr(getattr(group, "backend", None), "get_name", lambda: None)()
    mml = getattr(getattr(cfg, "model_config", None), "max_model_len", None)
    cls = type(builder)
    thr = getattr(builder, "reorder_batch_threshold", None)
    return BuilderInfo(
        builder=cls.__name__,
        backend=backend or cls.__name__.removesuffix("MetadataBuilder"),
        layer=names[0],
        heads=builder_heads(builder),
        max_model_len=mml if isinstance(mml, int) else None,
        cudagraph_support=_name(getattr(cls, "_cudagraph_support", None)),
        query_len_support=_name(getattr(cls, "query_len_support", None)),
        decode_threshold=thr if isinstance(thr, int) else None,
    )


def manager_role(manager: Any) -> str:
    """Whose graphs a model runner V2 ``CudaGraphManager`` holds: the target model's
    (``ModelCudaGraphManager``) or the speculator's (``SpeculatorCudaGraphManager``, DFlash's)."""
    names = [c.__name__ for c in type(manager).__mro__]
    if "ModelCudaGraphManager" in names:
        return "target"
    if any("Speculator" in n or "DFlash" in n for n in names):
        return "drafter"
    return "other"


def manager_info(manager: Any) -> RunnerInfo:
    cfg = getattr(manager, "vllm_config", None)
    spec = getattr(cfg, "speculative_config", None)
    return RunnerInfo(
        max_num_seqs=getattr(manager, "max_num_reqs", None),
        num_speculative_tokens=getattr(spec, "num_speculative_tokens", None),
        method=getattr(spec, "method", None),
    )


def runner_info(runner: Any) -> RunnerInfo:
    spec = getattr(runner, "speculative_config", None)
    sched = getattr(runner, "scheduler_config", None)
    return RunnerInfo(
        max_num_seqs=getattr(sched, "max_num_seqs", None),
        num_speculative_tokens=getattr(spec, "num_speculative_tokens", None),
        method=getattr(spec, "method", None),
    )


class EngineRecorder:
    """Turns wrapper callbacks into run-store records for one process (one rank, or its
    scheduler). ``writer_factory(role)`` opens the database: role "" for the rank's steps,
    ``"scheduler"`` for the acceptance counters."""

    def __init__(
        self,
        writer_factory: Callable[[str], RunWriter],
        markers: bool | None = None,
        background: bool = True,
        interval: float = 0.1,
    ) -> None:
        self._writer_factory = writer_factory
        self._writers: dict[str, RunWriter] = {}
        self.disabled = False
        self.markers = markers if markers is not None else _gpu_available()
        self.background = background
        self.interval = interval
        # the engine thread's side: appends only (deque.append is atomic under the GIL)
        self._q: collections.deque[tuple[Any, ...]] = collections.deque()
        self._builders: dict[int, BuilderInfo] = {}
        self._runners: dict[int, RunnerInfo] = {}
        self._runner_objs: list[Any] = []  # held: their ids key _runners
        self._pending_drafts: Any = None
        self.builds = 0  # target builds seen (marker numbering)
        # the writer thread's side
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stop = False
        self._io = threading.Lock()  # one drain at a time (writer thread, flush, close)
        self._step: Step | None = None
        self._seen_ns = 0  # when the writer last took an item while a step was open
        self.step_ends = False  # the engine's step ends are wrapped (vllm_patches.install)
        self.steps_written = 0  # steps committed (what reached the database)
        self._steps_made = 0  # steps assembled (numbered), committed or not yet
        self._support_seen: set[str] = set()
        self._acc_obj: Any = None
        self._acc_rows: list[tuple[int, int]] = []
        self._acc_t = 0
        self.accept_steps = 0
        self._drained: dict[str, str] = {}  # role -> the DRAINED mark last written
        self.stop_signal: str | None = None  # the stop signal that arrived (note_stop)
        self._eager_drafts: dict[tuple[Any, int], int] = {}  # (rows, k) -> eager draft decodes
        self.engine: EngineLayout | None = None  # the EngineCore's engine (on_scheduler)
        # the worker's engine, from the first runner, manager or builder holding a parallel
        # config (_see_config): read before its first record is queued, so before the writer
        # opens and takes its rank
        self.worker_engine: EngineLayout | None = None
        self._config_seen = False

    # -- the engine thread (keep these cheap) ----------------------------------------------------
    def _see_config(self, obj: Any) -> None:
        """The worker's engine layout, once, from the first object holding a parallel config."""
        if self._config_seen:
            return
        cfg = parallel_config_of(obj)
        if cfg is not None:
            self._config_seen = True
            self.worker_engine = parallel_layout(cfg)

    def on_dispatch(self, runner: Any, num_tokens: int, num_reqs: int, result: Any) -> None:
        self._see_config(runner)
        info = self._runners.get(id(runner))
        if info is None:
            info = self._runners[id(runner)] = runner_info(runner)
            self._runner_objs.append(runner)
        desc = result[1]
        drafts, self._pending_drafts = self._pending_drafts, None
        self._put((_DISPATCH, time.time_ns(), num_tokens, num_reqs, result[0],
                   desc.num_tokens, desc.num_reqs, drafts, info))  # fmt: skip

    def on_dispatch_v2(
        self, manager: Any, num_reqs: int, num_tokens: int, uniform: Any, desc: Any
    ) -> None:
        """The model runner V2's graph for a step (vLLM 0.34): the target's opens a step, the
        drafter's is kept with the open step. Draft tokens per request are not readable there:
        a uniform batch of qlen q has q - 1 per request, others none recorded."""
        self._see_config(manager)
        mode = getattr(desc, "cg_mode", None)
        if manager_role(manager) != "target":
            self._put((_DRAFT_GRAPH, _name(mode), desc.num_tokens, desc.num_reqs))
            return
        info = self._runners.get(id(manager))
        if info is None:
            info = self._runners[id(manager)] = manager_info(manager)
            self._runner_objs.append(manager)
        drafts = None
        if isinstance(uniform, int) and uniform > 1:
            import numpy as np

            drafts = np.full(num_reqs, uniform - 1, dtype=np.int64)
        self._put((_DISPATCH, time.time_ns(), num_tokens, num_reqs, mode, desc.num_tokens,
                   desc.num_reqs, drafts, info, "uniform"))  # fmt: skip

    def on_graph_capture(self, manager: Any, desc: str, error: BaseException | None) -> None:
        """One manager's capture (model runner V2), its graphs per mode, or its failure."""
        self._see_config(manager)
        role = manager_role(manager)
        descs = getattr(manager, "_capture_descs", None) or {}
        modes = {_name(m): len(d) for m, d in descs.items()}
        data = {
            "role": role, "manager": type(manager).__name__, "progress": desc,
            "planned": modes, "captured": len(getattr(manager, "graphs", None) or {}),
            "error": None if error is None else f"{type(error).__name__}: {error}"[:500],
        }  # fmt: skip
        what = "drafter" if role == "drafter" else "target model"
        msg = (f"{what} graph capture ({desc or type(manager).__name__}) failed: {data['error']}"
               if error is not None else
               f"{what} captured {data['captured']} graphs ({desc or type(manager).__name__})")  # fmt: skip
        t_ns = time.time_ns()
        row = event_row("vllm", GRAPH_CAPTURE_EVENT, msg, data, t_ns=t_ns)
        self._put((_JOB, lambda: self.writer("").add("events", **row)))
        if error is not None:
            self.drain()  # the engine is about to go down with it: write it now

    def on_draft_specialize(self, manager: Any, desc: Any, k: int, result: Any) -> None:
        """A draft decode FULL graph not captured for this step's k (num_speculative_tokens
        per batch size tiers): vLLM runs that draft decode eagerly."""
        self._see_config(manager)
        before, after = (
            _name(getattr(desc, "cg_mode", None)),
            _name(getattr(result, "cg_mode", None)),
        )
        if before != "FULL" or after != "NONE":
            return
        self._put((_DRAFT_GRAPH, after, desc.num_tokens, desc.num_reqs, "specialized"))
        key = (desc.num_reqs, k)
        if key in self._eager_drafts:
            self._eager_drafts[key] += 1
            return
        self._eager_drafts[key] = 1
        data = {"num_reqs": desc.num_reqs, "num_tokens": desc.num_tokens,
                "num_speculative_tokens": k}  # fmt: skip
        msg = (
            f"drafter: no FULL draft-decode graph for {desc.num_reqs} requests at {k} "
            "speculative tokens; its draft steps ran eagerly"
        )
        row = event_row("vllm", DRAFT_EAGER_EVENT, msg, data, t_ns=time.time_ns())
        self._put((_JOB, lambda: self.writer("").add("events", **row)))

    def on_spec_meta(self, runner: Any, num_draft_tokens: Any) -> None:
        self._pending_drafts = num_draft_tokens.copy()  # a fresh numpy array per step; cheap

    def on_build(
        self, builder: Any, cam: Any, fast_build: bool, result: Any, capture: bool
    ) -> None:
        self._see_config(builder)
        if fast_build:  # build_for_drafting: a drafter's build
            self._put((_DRAFT, cam.max_query_len))
            return
        info = self._builders.get(id(builder))
        if info is None:
            info = self._builders[id(builder)] = builder_info(builder, self._runner_objs)
        ub = cam.seq_lens_cpu_upper_bound
        d = result.decode
        decode = None
        if d is not None:
            decode = (getattr(d, "min_kv_seq_len", None), getattr(d, "max_qo_len", None),
                      getattr(d, "use_gluon_verify", None))  # fmt: skip
        # vLLM's CPU buffers as Python ints (the runner overwrites them next step); tolist()
        # of a CPU tensor is no dispatched op and costs less than a numpy copy at these sizes
        self._put((_BUILD, time.time_ns(), info, cam.query_start_loc_cpu.tolist(),
                   None if ub is None else ub.tolist(), cam.num_reqs,
                   cam.num_actual_tokens, cam.max_query_len, result.num_decodes,
                   result.num_prefills, decode, capture))  # fmt: skip
        if self.markers:
            _mark(f"mlaprof build={self.builds} {info.backend} reqs={cam.num_reqs}")
        self.builds += 1

    def on_accept(self, stats: Any, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        self._put((_ACCEPT, time.time_ns(), stats, num_draft_tokens, num_accepted_tokens))

    def on_scheduler(self, scheduler: Any) -> None:
        """vLLM built this EngineCore's scheduler (once, before any acceptance is recorded):
        its engine's layout names the scheduler database."""
        self.engine = engine_layout(scheduler)

    def on_step_end(self, runner: Any) -> None:
        self._see_config(runner)
        self._put((_END, time.time_ns()))

    def on_cg_resolve(self, config: Any, args: dict[str, Any], requested: Any, result: Any) -> None:
        # a worker's first record, before any runner is seen: ``config`` is its
        # CompilationConfig, the vllm_config vLLM set around initialize_from_config holds it
        # (set_current_vllm_config, vllm/v1/worker/worker_base.py)
        self._see_config(types.SimpleNamespace(vllm_config=_current_vllm_config()))
        sizes = getattr(config, "cudagraph_capture_sizes", None)
        t_ns = time.time_ns()
        data = {
            "requested": _name(requested),
            "resolved": _name(result),
            "min_cg_support": _name(args.get("min_cg_support")),
            "min_cg_support_value": getattr(args.get("min_cg_support"), "value", None),
            "min_cg_attn_backend": args.get("min_cg_attn_backend"),
            "uniform_decode_query_len": args.get("uniform_decode_query_len"),
            "capture_sizes": list(sizes) if sizes else None,
        }
        self._put((_JOB, lambda: self._write_cg(t_ns, data)))

    def _put(self, item: tuple[Any, ...]) -> None:
        if self.disabled:
            return
        self._q.append(item)
        if not self.background:
            self.drain()
        elif self._thread is None:
            self._start()

    # -- the writer thread -----------------------------------------------------------------------
    def _start(self) -> None:
        with self._io:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="mlaprof-writer",
                                                daemon=True)  # fmt: skip
                self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            self._wake.wait(self.interval)
            self._wake.clear()
            self.drain()

    def writer(self, role: str = "") -> RunWriter:
        w = self._writers.get(role)
        if w is None:
            w = self._writers[role] = self._writer_factory(role)
        return w

    def drain(self, final: bool = False) -> None:
        """Turn every queued snapshot into records and commit them (writer thread, or flush)."""
        with self._io:
            if self.disabled:
                self._q.clear()
                return
            try:
                self._drain(final)
            except Exception as e:  # recording must never break serving
                self._fail(e)

    def _fail(self, e: Exception) -> None:
        """Recording stops in this process; its databases say why, as ``mlaprof run``'s do (a
        full disk reads ``failed`` with "disk full", every committed step kept), at once: the
        engine may serve on for hours, and a run left ``running`` meanwhile would be a lie."""
        from mlaprof.errors import MlaprofError

        self.disabled = True
        self._q.clear()
        reason = str(e) if isinstance(e, MlaprofError) else f"recording failed: {e!r}"
        for w in self._writers.values():
            if not w.closed:
                w.finish("failed", reason)
        log.warning("mlaprof: recording off in this process (the run reads failed): %s", reason)

    def _drain(self, final: bool) -> None:
        rows: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        q = self._q
        item_seen = bool(q)
        while q:
            item = q.popleft()
            tag = item[0]
            if tag == _DISPATCH:
                self._finish_step(rows, item[1])
                _, t, ntok, nreq, mode, ptok, preq, drafts, rinfo, *src = item
                self._step = Step(t, ntok, nreq, mode, ptok, preq,
                                  None if drafts is None else drafts.tolist(), rinfo)  # fmt: skip
                if src:
                    self._step.drafts_from = src[0]
            elif tag == _DRAFT_GRAPH:
                st = self._step
                if st is not None and len(item) == 5 and st.drafter_graphs:
                    st.drafter_graphs[-1] = item[1:4]  # the dispatched graph, specialized
                elif st is not None and len(st.drafter_graphs) < 8:
                    st.drafter_graphs.append(item[1:4])
            elif tag == _BUILD:
                st = self._step
                if st is None or (st.build is not None and st.num_tokens is None):
                    # no runner dispatch before it (another runner, a capture): its own step
                    self._finish_step(rows, item[1])
                    st = self._step = Step(item[1])
                if st.build is None:
                    st.build = item
                else:
                    st.extra_builds += 1
            elif tag == _DRAFT:
                if self._step is not None:
                    self._step.drafter_builds += 1
                    if len(self._step.drafter_qlens) < 8:
                        self._step.drafter_qlens.append(int(item[1]))
            elif tag == _END:
                if self._step is not None:
                    self._step.end_ns = item[1]
            elif tag == _ACCEPT:
                _, t, stats, nd, na = item
                if stats is not self._acc_obj:
                    self._finish_accept(rows)
                    self._acc_obj = stats  # held: its id cannot be reused while we group by it
                self._acc_rows.append((int(nd), int(na)))
                self._acc_t = t
            else:  # _JOB
                item[1]()
        now = time.time_ns()
        if item_seen:
            self._seen_ns = now
        # the scheduler calls observe_draft for all of a step's requests in one loop: a group
        # that saw nothing new for a while is complete
        if final or (self._acc_rows and now - self._acc_t > 200_000_000):
            self._finish_accept(rows)
        # a step whose output the engine returned is complete: written now, timed by its own
        # end (idle time after it is not its duration); a step still running (> 1 s: a slow
        # batch, the profiler writing its trace) waits for its end. Without step ends (an
        # engine whose execute_model did not match), an idle engine's last step is complete
        # after IDLE_STEP_NS, untimed; so is one open at shutdown (often a kill skipping atexit)
        st = self._step
        if st is not None and (
            final
            or st.end_ns is not None
            or (not self.step_ends and now - self._seen_ns > IDLE_STEP_NS)
        ):
            self._finish_step(rows, None)
        # every step seen is written (none open, no acceptance group pending, nothing queued):
        # a kill from here on loses nothing, and a reader says so (liveness.DRAINED)
        drained = "1" if self._step is None and not self._acc_rows and not q else "0"
        for role in set(rows) | set(self._writers):
            if role not in rows and self._drained.get(role) == drained:
                continue  # nothing new to commit (the writer thread wakes every interval)
            w = self.writer(role)
            with w.transaction():
                for table, rec in rows.get(role, []):
                    w.add(table, **rec)
                if self._drained.get(role) != drained:
                    w.set_meta(DRAINED, drained)
                    self._drained[role] = drained
            if role == "":  # committed: these steps are on disk
                self.steps_written = self._steps_made

    # -- records ---------------------------------------------------------------------------------
    def _finish_accept(self, rows: dict[str, list[tuple[str, dict[str, Any]]]]) -> None:
        if not self._acc_rows:
            return
        per_row = self._acc_rows
        self._acc_rows = []
        self._acc_obj = None
        data = {
            "seq": self.accept_steps,
            "verify_rows": len(per_row),
            "draft_tokens": sum(d for d, _ in per_row),
            "accepted_tokens": sum(a for _, a in per_row),
            "per_row": [list(r) for r in per_row[:MAX_LISTED_ROWS]],
        }
        self.accept_steps += 1
        msg = (f"scheduler step {data['seq']}: {data['accepted_tokens']} of "
               f"{data['draft_tokens']} draft tokens accepted over {len(per_row)} requests")  # fmt: skip
        row = event_row("vllm", ACCEPT_EVENT, msg, data, t_ns=self._acc_t)
        rows.setdefault(SCHEDULER_ROLE, []).append(("events", row))

    def _finish_step(self, rows: dict[str, list[tuple[str, dict[str, Any]]]], next_t: int | None):
        st, self._step = self._step, None
        if st is None or st.build is None:
            return  # a dispatch without an MLA build (e.g. a dummy run without attention)
        recs = rows.setdefault("", [])
        step_rows(st, self._steps_made, next_t, recs)
        info: BuilderInfo = st.build[2]
        if info.builder not in self._support_seen:
            self._support_seen.add(info.builder)
            recs.append(("events", {
                "t_ns": st.t_ns, "source": "vllm", "kind": "cudagraph-support",
                "message": f"{info.builder} reports cudagraph support {info.cudagraph_support}",
                "data": json.dumps({"builder": info.builder, "support": info.cudagraph_support,
                                    "backend": info.backend}),
            }))  # fmt: skip
        self._steps_made += 1

    def _write_cg(self, t_ns: int, data: dict[str, Any]) -> None:
        req, res, backend = data["requested"], data["resolved"], data["min_cg_attn_backend"]
        if req == res:
            msg = f"cudagraph_mode {res} kept (min support {data['min_cg_support']} from {backend})"
        else:
            msg = (
                f"CUDAGraphMode.{req} is not supported with {backend} backend "
                f"(support: {data['min_cg_support']}); setting cudagraph_mode={res}"
            )
        self.writer("").add("events", **event_row("vllm", CG_MODE_EVENT, msg, data, t_ns=t_ns))

    # -- life cycle ------------------------------------------------------------------------------
    def note_stop(self, signum: int) -> None:
        """A stop signal arrived (the plugin's handler, on the main thread): each open database
        records its name, so a run stopped after a clean drain reads "finished (drained ...
        before SIGTERM ...)". Never waits: a drain the handler interrupted keeps the lock, and
        then the signal goes unrecorded rather than deadlocking the engine."""
        import signal

        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        self.stop_signal = name
        if self.disabled or not self._io.acquire(blocking=False):
            return
        try:
            for w in self._writers.values():
                if not w.closed:
                    w.set_meta(STOP_SIGNAL, name)
        except Exception as e:  # recording must never break serving (nor its shutdown)
            log.warning("mlaprof: could not record the stop signal: %s", e)
        finally:
            self._io.release()

    def flush(self) -> None:
        """Write everything recorded so far, the step in progress included."""
        self.drain(final=True)

    def close(self, status: str = "finished") -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        try:
            self.flush()
        finally:
            for w in self._writers.values():
                if not w.closed:
                    w.finish(status)


def step_rows(st: Step, step: int, next_t: int | None, out: list[tuple[str, dict[str, Any]]]):
    """The ``steps``, ``padding`` and ``events`` records of one engine step."""
    (_, t_build, info, qsl, ub, n, ntok, max_q, n_dec, n_pre, decode, capture) = st.build
    qo = [qsl[i + 1] - qsl[i] for i in range(min(n, len(qsl) - 1))]
    seq = ub[: len(qo)] if ub is not None else None
    drafts = st.drafts
    real = [i for i, q in enumerate(qo) if q > 0]
    verify = [i for i in real if drafts is not None and i < len(drafts) and drafts[i] > 0]
    as_prefill = [i for i in verify if i >= n_dec]  # verify rows the backend filed as prefill
    mode = _name(st.mode) if st.mode is not None else ("FULL" if capture else None)
    padded = st.padded_tokens if st.padded_tokens is not None else ntok
    real_tokens = sum(qo)
    if capture:
        kind = "capture"
    elif verify:
        kind = "verify"
    elif drafts is None and st.num_tokens is None:
        kind = "dummy"
    elif all(q == 1 for q in (qo[i] for i in real)):
        kind = "decode"
    else:
        kind = "prefill"
    # the step's own end (dispatch to its output returned) where the engine reported it, else
    # the interval to the next dispatch (idle time included), else unknown
    if st.end_ns is not None:
        duration, timing = st.end_ns - st.t_ns, "dispatch-to-output"
    else:
        duration = None if next_t is None else next_t - st.t_ns
        timing = "dispatch-interval"
    if capture:
        timing = "capture"
    row_bytes = KV_DIM * KV_BYTES_PER_ELEMENT
    pad_rows = [i for i, q in enumerate(qo) if q == 0]
    out.append(("steps", {
        "step": step, "t_start_ns": st.t_ns,
        "duration_ns": duration,
        "num_reqs": len(qo), "num_real_reqs": len(real), "qlen": max(qo, default=0),
        "real_tokens": real_tokens, "padded_tokens": padded, "graph_mode": mode,
        "backend": info.backend, "timing": timing,
    }))  # fmt: skip
    out.append(("padding", {
        "step": step, "capture_size": padded if mode == "FULL" else None,
        "real_rows": len(real), "padding_rows": len(pad_rows), "real_tokens": real_tokens,
        "padding_tokens": max(0, (padded or 0) - real_tokens),
        "kv_bytes_real": sum(seq[i] for i in real) * row_bytes if seq else None,
        "kv_bytes_padding": sum(seq[i] for i in pad_rows) * row_bytes if seq else None,
    }))  # fmt: skip
    cut = MAX_LISTED_ROWS
    data = {
        "step": step, "kind": kind, "backend": info.backend, "builder": info.builder,
        "layer": info.layer, "heads": info.heads, "max_model_len": info.max_model_len,
        "cudagraph_support": info.cudagraph_support, "query_len_support": info.query_len_support,
        "decode_threshold": info.decode_threshold, "graph_mode": mode, "capture": capture,
        "num_tokens": st.num_tokens if st.num_tokens is not None else ntok,
        "padded_tokens": padded, "padded_reqs": st.padded_reqs, "max_query_len": max_q,
        "qo_lens": qo[:cut], "seq_lens_upper_bound": seq[:cut] if seq else None,
        "draft_tokens": drafts[:cut] if drafts is not None else None,
        "verify_rows": len(verify), "verify_draft_tokens": sum(drafts[i] for i in verify),
        "classified_decode": n_dec, "classified_prefill": n_pre,
        "verify_rows_as_prefill": len(as_prefill),
        "min_kv_seq_len": decode[0] if decode else None,
        "max_qo_len": decode[1] if decode else None,
        "use_gluon_verify": decode[2] if decode else None,
        "target_builds": 1 + st.extra_builds, "drafter_builds": st.drafter_builds,
        "drafter_qlens": st.drafter_qlens,
        "drafter_graphs": [list(g) for g in st.drafter_graphs], "drafts_from": st.drafts_from,
        "max_num_seqs": st.runner.max_num_seqs if st.runner else None,
        "num_speculative_tokens": st.runner.num_speculative_tokens if st.runner else None,
        "spec_method": st.runner.method if st.runner else None,
        "build_t_ns": t_build,
    }  # fmt: skip
    note = ""
    if as_prefill:
        note = f", {len(as_prefill)} verify rows filed as prefill by {info.backend}"
    out.append(("events", {
        "t_ns": st.t_ns, "source": "vllm", "kind": STEP_EVENT,
        "message": (f"{kind} step: {len(real)} rows, {len(verify)} verify rows "
                    f"({data['verify_draft_tokens']} draft tokens), graph {mode}{note}"),
        "data": json.dumps(data),
    }))  # fmt: skip


def _current_vllm_config() -> Any:
    """vLLM's current config where vLLM is loaded and set one (nothing imported for it)."""
    get = getattr(sys.modules.get("vllm.config"), "get_current_vllm_config_or_none", None)
    try:
        return get() if callable(get) else None
    except Exception:  # recording metadata is best effort
        return None


def _gpu_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # no torch: no markers
        return False


def _mark(text: str) -> None:
    """A host-side roctx/NVTX mark (ROCm builds of torch route torch.cuda.nvtx to roctx)."""
    import torch

    torch.cuda.nvtx.mark(text)
