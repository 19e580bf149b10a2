"""mlaprof's vLLM general plugin (entry point ``mlaprof`` in the ``vllm.general_plugins`` group).

vLLM calls :func:`register` once per process (the front end, the EngineCore and every worker)
before the model is built. It does nothing unless ``MLAPROF_VLLM=1``; then it wraps the common
MLA metadata builder, the runner's step decisions and the scheduler's acceptance counters
(:mod:`mlaprof.integrations.vllm_patches`) and records every process into one shared run folder:
``$MLAPROF_TRACES/$MLAPROF_RUN/rank<N>.db`` per worker rank, ``rank<N>.scheduler.db`` for the
EngineCore's acceptance counters, N the global rank of its engine's first worker
(:func:`scheduler_rank`; a dense model's independent DP engines numbered by their DP index,
:func:`worker_rank`; ``mlaprof tui`` follows the run live).

Environment:
  MLAPROF_VLLM=1          turn recording on (anything else: the plugin stays inert)
  MLAPROF_TRACES=DIR      folder of runs (default ./traces)
  MLAPROF_RUN=NAME        run folder name; the first process that registers sets it for the
                          processes it starts, so every rank of one engine joins the same run
  MLAPROF_MARKERS=0|1     a roctx/NVTX mark per recorded build (default: on with a GPU)
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.integrations import vllm_patches
from mlaprof.integrations.vllm_names import (  # the rules' names: the analysis reads them too
    ENGINE_KEY,
    FROM_DEFAULT,
    FROM_ENGINE,
    FROM_ENGINE_INDEX,
    FROM_TORCH,
    FROM_VLLM_WORLD,
    RANK_SOURCE_KEY,
)
from mlaprof.integrations.vllm_recorder import SCHEDULER_ROLE, EngineLayout, EngineRecorder
from mlaprof.store import runmeta
from mlaprof.store.writer import RunWriter, create_run

ENABLE_ENV = "MLAPROF_VLLM"
TRACES_ENV = "MLAPROF_TRACES"
RUN_ENV = "MLAPROF_RUN"
MARKERS_ENV = "MLAPROF_MARKERS"
TRUE = ("1", "true", "yes", "on")

log = logging.getLogger("vllm.mlaprof")  # under "vllm": vLLM's handler shows it
_lock = threading.Lock()
_recorder: EngineRecorder | None = None
_report: dict[str, str] = {}


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "").strip().lower() in TRUE


def current_rank() -> int:
    """This process's global rank: torch.distributed or vLLM's world group when initialised,
    else ``RANK`` / ``LOCAL_RANK``, else 0."""
    return rank_and_source()[0]


def rank_and_source() -> tuple[int, str]:
    """:func:`current_rank` and the rule that gave it (``FROM_*``, or the variable's name)."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), FROM_TORCH
    except Exception:  # a half-initialised process group: fall through to the environment
        pass
    try:
        from vllm.distributed import parallel_state

        group = getattr(parallel_state, "_WORLD", None)
        if group is not None:
            return int(group.rank), FROM_VLLM_WORLD
    except Exception:  # vLLM absent or its state not set up yet
        pass
    for var in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(var, "")
        if value.isdigit():
            return int(value), var
    return 0, FROM_DEFAULT


def worker_rank(engine: EngineLayout | None) -> tuple[int, str]:
    """A worker's rank: :func:`rank_and_source`, numbered past the engines before it where its
    engine is an independent one (a dense model's DP engine: vLLM gives each its own world,
    ranks 0 to world_size - 1, so engine k's would collide with engine 0's): its
    ``first_worker_rank`` plus its distributed rank (``FROM_ENGINE_INDEX``)."""
    rank, source = rank_and_source()
    own = source in (FROM_TORCH, FROM_VLLM_WORLD)
    if own and engine is not None and engine.independent and rank < engine.world_size:
        return engine.first_worker_rank + rank, FROM_ENGINE_INDEX
    return rank, source


def scheduler_rank(engine: EngineLayout | None) -> tuple[int, str]:
    """The rank an EngineCore's scheduler database takes: its own distributed rank where this
    process has one (its worker runs here: one worker per engine, or an external launcher;
    :func:`worker_rank`'s); else the global rank of its engine's first worker, where the
    scheduler's config says the engine's layout (a multiprocess engine's EngineCore has no
    rank of its own, and every engine's would read 0); else :func:`current_rank`'s
    environment rule."""
    rank, source = worker_rank(engine)
    if source in (FROM_TORCH, FROM_VLLM_WORLD, FROM_ENGINE_INDEX) or engine is None:
        return rank, source
    return engine.first_worker_rank, FROM_ENGINE


def run_name() -> str:
    name = os.environ.get(RUN_ENV)
    if not name:
        name = runmeta.new_run_name("vllm")
        os.environ[RUN_ENV] = name  # inherited by the workers this process starts
    return name


def _versions() -> dict[str, Any]:
    try:
        import vllm

        return {"vllm": getattr(vllm, "__version__", None)}
    except Exception:  # recording metadata is best effort
        return {"vllm": None}


def open_writer(
    role: str = "", rank: int | None = None, engine: EngineLayout | None = None
) -> RunWriter:
    """This process's writer in the shared run folder (created by whichever comes first).
    Without ``rank``: a worker's is :func:`worker_rank` of ``engine`` (its runner's), the
    scheduler's :func:`scheduler_rank` of ``engine`` (its scheduler's), and its database says
    which rule gave it (``RANK_SOURCE_KEY``), with the engine's layout where that rule read it."""
    traces = Path(os.environ.get(TRACES_ENV) or "traces")
    meta = {
        "source": "vllm plugin",
        "kind": "engine",
        "backend": "vllm",
        "device": "engine",
        "command": os.environ.get("MLAPROF_COMMAND"),
        **_versions(),
    }
    source = None
    if rank is None and role == SCHEDULER_ROLE:
        rank, source = scheduler_rank(engine)
    elif rank is None:
        rank, source = worker_rank(engine)
    writer = create_run(traces, run_name(), meta, rank=rank, role=role)
    if source is not None:  # whether the analysis may take rank N for its engine's workers
        writer.set_meta(RANK_SOURCE_KEY, source)
        if engine is not None and (role == SCHEDULER_ROLE or source == FROM_ENGINE_INDEX):
            writer.set_meta(ENGINE_KEY, engine.as_meta())
    card = _worker_card() if not role else None
    if card:  # the GPU this worker's numbers are measured on, in its own database
        writer.set_meta("device_name", card)
    return writer


def _worker_card() -> str | None:
    """The GPU a vLLM worker runs on, where this process has CUDA/HIP up already: nothing is
    imported or initialised for it, and nothing is asked while a graph is being captured."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_initialized() or cuda.is_current_stream_capturing():
            return None
        return str(cuda.get_device_name(cuda.current_device()))
    except Exception:  # recording metadata is best effort
        return None


def recorder() -> EngineRecorder:
    """The process-wide recorder (its writer opens on the first record, once the rank is known)."""
    global _recorder
    with _lock:
        if _recorder is None:
            flag = os.environ.get(MARKERS_ENV, "").strip().lower()
            markers = None if not flag else flag in TRUE
            _recorder = EngineRecorder(_open_and_announce, markers=markers)
            atexit.register(_close)
            watch_stop_signals(_recorder)
        return _recorder


def watch_stop_signals(rec: EngineRecorder) -> None:
    """Chain a handler before the process's own for SIGTERM and SIGINT that records which one
    stopped the engine (:meth:`EngineRecorder.note_stop`), then does what the previous handler
    did. Main thread only (Python's rule); a handler vLLM installs later replaces this one."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(signum)

        def handler(n: int, frame: Any, previous: Any = previous) -> None:
            rec.note_stop(n)
            if callable(previous):
                previous(n, frame)
            elif previous == signal.SIG_DFL:  # the default action: die by the signal
                signal.signal(n, signal.SIG_DFL)
                os.kill(os.getpid(), n)

        try:
            signal.signal(signum, handler)
        except (ValueError, OSError):  # not allowed here: the run just names no signal
            return


def _close() -> None:
    rec = _recorder
    if rec is not None:
        try:
            rec.close()
        except Exception as e:  # exiting: report, never raise
            log.warning("mlaprof: closing the run failed: %s", e)


def register() -> None:
    """vLLM plugin entry point: idempotent, inert unless ``MLAPROF_VLLM=1``."""
    if not enabled():
        return
    try:  # the store's name rule, checked once: a bad name turns recording off, not vLLM
        folder = runmeta.folder_name(run_name())
    except MlaprofError as e:
        log.warning("mlaprof: not recording: %s", e)
        return
    report = vllm_patches.install(recorder())
    _report.update(report)
    patched = [k for k, v in report.items() if v == "patched"]
    if patched:  # once per process (a second register finds everything already patched)
        skipped = len(report) - len(patched)
        _wrapped.update(patched=len(patched), skipped=skipped)
        _wrapped_folder["name"] = folder  # the folder the store's name rule gives


# what register wrapped, said when this process records its first step: a process that loads
# the plugin and records nothing (vLLM's API server, a front end) announces nothing
_wrapped: dict[str, int] = {}
_wrapped_folder: dict[str, str] = {}
_announced = False
_announce_lock = threading.Lock()


def _open_and_announce(role: str = "") -> RunWriter:
    global _announced
    rec = _recorder
    engine = None if rec is None else rec.engine if role == SCHEDULER_ROLE else rec.worker_engine
    w = open_writer(role, engine=engine)
    with _announce_lock:
        first, _announced = not _announced, True
    if first:
        traces = Path(os.environ.get(TRACES_ENV) or "traces").resolve()
        run = traces / _wrapped_folder.get("name", os.environ.get(RUN_ENV, ""))
        skipped = _wrapped.get("skipped", 0)
        announce(f"mlaprof: recording this process into {run} ({_wrapped.get('patched', 0)} "
                 f"vLLM functions wrapped{f', {skipped} skipped' if skipped else ''}); follow "
                 f"it with: mlaprof tui {run}")  # fmt: skip
    return w


def announce(message: str) -> None:
    """One INFO line where the user sees it: through vLLM's log handler once vLLM configured it
    (EngineCore, workers), else on stderr (a front end loads plugins before its logging)."""
    if log.isEnabledFor(logging.INFO) and log.hasHandlers():
        log.info(message)
    else:
        print(f"(pid={os.getpid()}) INFO {message}", file=sys.stderr, flush=True)


def patch_report() -> dict[str, str]:
    """What the last :func:`register` did per target (for diagnostics and tests)."""
    return dict(_report)
