"""``mlaprof run --ranks N``: N tensor-parallel ranks side by side, each recording its own database.

The launcher starts N copies of the same ``mlaprof run`` command, one process per rank, and joins
them through ``torch.distributed`` (gloo on the CPU, NCCL on GPUs, one GPU per rank through
``CUDA_VISIBLE_DEVICES``). Each rank runs the scenario with an all-reduce after every attention
layer, as tensor parallelism does after the row-parallel output projection; on a GPU that
all-reduce sits inside the captured FULL graph. Every rank writes ``rank<N>.db`` of one run
folder; the launcher marks the run failed, naming the rank, when any rank fails, and leaves what
the other ranks recorded readable.

The all-reduce moves a buffer of ``[tokens, HIDDEN]`` in the run's dtype (zeros, so the sum
stays finite over any number of steps): it stands in for the o_proj output whose size sets the
collective's cost. Attention's own inputs and outputs are untouched.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlaprof.argv import child_run_command
from mlaprof.errors import MlaprofError
from mlaprof.library_env import child_env

ENV_RANK = "MLAPROF_TP_RANK"
ENV_WORLD = "MLAPROF_TP_WORLD"
ENV_LAUNCHER = "MLAPROF_TP_LAUNCHER"  # the launcher's pid: a rank ends with it
HIDDEN = 7168  # DeepSeek-V3 / Kimi-K2 hidden_size: what o_proj writes per token
MAX_RANKS = 64
JOIN_TIMEOUT_S = 120  # a rank that never joins (or dies inside a collective) fails the others
STOP_GRACE_S = 20.0


@dataclass(frozen=True)
class RankContext:
    """Where this process sits in the run's ranks."""

    rank: int
    world: int

    def backend(self, device: str) -> str:
        return "nccl" if device == "cuda" else "gloo"


def from_env() -> RankContext | None:
    """The rank this process was started as by :func:`launch`, or None (a single-process run)."""
    if ENV_RANK not in os.environ:
        return None
    try:
        rank, world = int(os.environ[ENV_RANK]), int(os.environ[ENV_WORLD])
    except (KeyError, ValueError):
        raise MlaprofError(f"{ENV_RANK}/{ENV_WORLD} must be integers") from None
    if not 0 <= rank < world:
        raise MlaprofError(f"{ENV_RANK}={rank} is outside a world of {world}")
    launcher = os.environ.get(ENV_LAUNCHER, "")
    if launcher.isdigit():
        end_with_launcher(int(launcher))
    return RankContext(rank, world)


PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent thread dies


def end_with_launcher(launcher: int) -> None:
    """A rank ends with its launcher: where the launcher is killed outright (SIGKILL, an OOM
    kill) it cannot stop its ranks, which went on writing the run for nobody. On Linux the
    kernel sends this process SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), which a rank
    handles as a stop (it records itself interrupted, as when the launcher stops it); a
    launcher already gone by now (it died before the request) is the same SIGTERM at once.
    Elsewhere nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != launcher:
        os.kill(os.getpid(), signal.SIGTERM)


def tp_meta(ctx_world: int, device: str) -> dict[str, Any]:
    """What run.json says of the ranks (every view reads the collective from here)."""
    return {
        "world_size": ctx_world,
        "collective": "all_reduce after each attention layer",
        "collective_backend": "nccl" if device == "cuda" else "gloo",
        "hidden": HIDDEN,
        "inside_graph": device == "cuda",
    }


# -- in a rank ---------------------------------------------------------------------------------
class TensorParallel:
    """The process group of one rank and the all-reduce it runs after each attention layer."""

    def __init__(self, ctx: RankContext, device: str) -> None:
        import torch.distributed as dist

        self.ctx, self.device = ctx, device
        self._dist = dist
        import datetime

        if device == "cuda":
            import torch

            torch.cuda.set_device(0)  # the launcher gives each rank one visible GPU
        try:
            dist.init_process_group(
                ctx.backend(device),
                rank=ctx.rank,
                world_size=ctx.world,
                timeout=datetime.timedelta(seconds=JOIN_TIMEOUT_S),
            )
        except Exception as e:  # a peer that never came, a port taken
            raise MlaprofError(f"rank {ctx.rank} could not join the other ranks: {e}") from None
        self._buffers: dict[tuple[int, Any], Any] = {}

    def buffer(self, tokens: int, dtype: Any) -> Any:
        """The o_proj-sized buffer of a batch of ``tokens`` (allocated once, outside capture)."""
        import torch

        key = (tokens, dtype)
        if key not in self._buffers:
            dev = "cuda" if self.device == "cuda" else "cpu"
            self._buffers[key] = torch.zeros(tokens, HIDDEN, dtype=dtype, device=dev)
        return self._buffers[key]

    def after_attention(self, out: Any) -> None:
        """The all-reduce TP runs after a layer's attention (sized by the layer's tokens)."""
        tokens = out.shape[0] * out.shape[1]
        try:
            self._dist.all_reduce(self.buffer(tokens, out.dtype))
        except RuntimeError as e:  # a peer died or hung: one line, the launcher names the rank
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise MlaprofError(f"rank {self.ctx.rank}: all-reduce failed: {first}") from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._dist.destroy_process_group()


# -- the launcher ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_argv(argv: list[str], name: str, traces: Path) -> list[str]:
    """The rank processes' command: the user's ``run`` without ``--ranks``/``--live``/``--json``
    (the launcher gives every rank the same run folder and reports itself), quiet."""
    return child_run_command(argv, name, traces, ("--ranks",), ("--live", "--json"))


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


@dataclass
class RankOutcome:
    rank: int
    code: int | None
    message: str
    pid: int | None = None
    gpu: str | None = None  # the rank's device: "GPU <id>" (CUDA_VISIBLE_DEVICES) or "cpu"


def rank_sources(outcomes: list[RankOutcome], world: int) -> list[dict[str, Any]]:
    """Where each rank ran, for run.json's ``rank_sources`` (the fleet view's host/pid/GPU and
    DP group: the launcher placed every rank in one tensor-parallel group)."""
    host = platform.node()
    return [
        {
            "rank": o.rank,
            "host": host,
            "pid": o.pid,
            "agent": o.gpu,
            "dp_group": 0,
            "placed_by": f"mlaprof run --ranks {world} (one DP group of {world} TP ranks)",
        }
        for o in sorted(outcomes, key=lambda o: o.rank)
    ]


def launch(
    argv: list[str],
    world: int,
    device: str,
    run_dir: Path,
    progress: Callable[[int, int], None] | None = None,
) -> list[RankOutcome]:
    """Start ``world`` rank processes of ``argv`` into ``run_dir`` and wait for all of them.

    When one rank fails the others are stopped (SIGTERM: they record themselves interrupted)
    and the outcomes say which rank failed first. Ctrl-C stops every rank."""
    if not 1 <= world <= MAX_RANKS:
        raise MlaprofError(f"--ranks must be 1..{MAX_RANKS}, got {world}")
    port = _free_port()
    logs = Path(tempfile.mkdtemp(prefix="mlaprof-ranks-"))
    procs: list[subprocess.Popen] = []
    files = []
    cmd = child_argv(argv, run_dir.name, run_dir.parent)
    gpu_ids: list[str | None] = []
    try:
        for r in range(world):
            env = child_env()
            env.update(
                {
                    ENV_RANK: str(r),
                    ENV_WORLD: str(world),
                    ENV_LAUNCHER: str(os.getpid()),
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port),
                }
            )
            if device == "cuda":
                visible = os.environ.get("CUDA_VISIBLE_DEVICES")
                ids = visible.split(",") if visible else [str(i) for i in range(world)]
                if r >= len(ids):
                    raise MlaprofError(
                        f"--ranks {world} needs {world} GPUs; CUDA_VISIBLE_DEVICES has {len(ids)}"
                    )
                env["CUDA_VISIBLE_DEVICES"] = ids[r]
                gpu_ids.append(f"GPU {ids[r]}")
            f = open(logs / f"rank{r}.log", "wb")  # noqa: SIM115 - closed below
            files.append(f)
            procs.append(subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT))
        gpus = gpu_ids if device == "cuda" else ["cpu"] * world
        out = _wait(procs, logs)
        for o in out:
            o.pid, o.gpu = procs[o.rank].pid, gpus[o.rank]
        return out
    except KeyboardInterrupt:
        _stop(procs)
        raise
    finally:
        for f in files:
            f.close()
        for p in logs.glob("*"):
            p.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            logs.rmdir()


def _wait(procs: list[subprocess.Popen], logs: Path) -> list[RankOutcome]:
    first_failure: int | None = None
    while True:
        codes = [p.poll() for p in procs]  # every rank each sweep: deaths are seen together
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed and first_failure is None:
            # peers of a dead rank fail in their next collective: within one sweep, a rank
            # ended by a signal is the cause, not its peers' errors
            first_failure = min(failed, key=lambda r: (codes[r] >= 0, r))
            _stop([q for q in procs if q.poll() is None])
        if all(c is not None for c in codes):
            break
        time.sleep(0.05)
    out = []
    for r, p in enumerate(procs):
        msg = _last_line(logs / f"rank{r}.log") if p.returncode else ""
        if first_failure is not None and r != first_failure and p.returncode:
            msg = f"stopped after rank {first_failure} failed"
        out.append(RankOutcome(r, p.returncode, msg))
    if first_failure is not None:  # the first failure leads the list
        out.sort(key=lambda o: o.rank != first_failure)
    return out


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(OSError):
                p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(max(0.0, deadline - time.monotonic()))
        if p.poll() is None:
            p.kill()
            p.wait()


def failure_reason(outcomes: list[RankOutcome]) -> str | None:
    """One line for run.json: which rank failed first and why (None when every rank ended well)."""
    bad = [o for o in outcomes if o.code]
    if not bad:
        return None
    o = bad[0]
    how = f"killed by signal {-o.code}" if o.code < 0 else f"exit {o.code}"
    text = o.message.removeprefix("mlaprof: error: ")
    return f"rank {o.rank} failed ({how})" + (f": {text}" if text else "")
