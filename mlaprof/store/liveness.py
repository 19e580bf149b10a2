"""Is a run's writer still alive? A lock that dies with the process, not a modification time.

Each rank's writer holds an exclusive ``flock`` on ``rank<N>.lock`` in the run folder from before
its database exists until it finishes. The kernel drops the lock when the process exits, however
it exits (SIGKILL included), so a reader that can take the lock knows the writer is gone: a rank
still marked ``running`` is then ``incomplete`` (its committed records are all there is). Readers
open the lock file read-only and never create it, so probing works on a read-only copy of a run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from enum import StrEnum
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError


class RunStatus(StrEnum):
    """A run's status, the one vocabulary (the store's rules below, every view and the
    summary's ``status`` / ``state.status``; a member equals its string)."""

    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"  # stopped (Ctrl-C, SIGTERM) with steps still to write
    # (an engine stopped after a clean drain reads FINISHED, its reason says drained)
    FAILED = "failed"
    INCOMPLETE = "incomplete"  # a writer died without closing its record


# statuses a run's writer writes to run.json only after its records (a run that says one holds
# a database; one that failed may have failed before its first)
AFTER_RECORDS = (RunStatus.FINISHED, RunStatus.INTERRUPTED)
LIVE = (RunStatus.RUNNING, "importing")  # recorded states that claim a writer is at work


def lock_path(run_dir: Path, rank: int, role: str = "") -> Path:
    """The lock of database ``rank<N>[.<role>].db`` (one writer process per database)."""
    return Path(run_dir) / (f"rank{int(rank)}.{role}.lock" if role else f"rank{int(rank)}.lock")


# the role of the lock ``mlaprof run --ranks N`` holds while its rank processes start: a run
# folder with that lock held reads "starting" (it names no database of its own)
LAUNCHER = "launcher"
_LOCK = re.compile(r"^rank(\d+)(?:\.([a-z]+))?\.lock$")


RESERVE_BYTES = (128 * 1024, 32 * 1024, 8 * 1024)  # the largest that fits


class WriterLock:
    """The exclusive lock a rank's writer holds for its whole life (released by :meth:`release`
    or by the process dying).

    The lock file also holds a small reserve of disk space while the writer runs: on a disk that
    fills up, :meth:`free_reserve` gives it back so that the writer can still record how and why
    the run ended."""

    def __init__(self, run_dir: Path, rank: int, role: str = "") -> None:
        self.path = lock_path(run_dir, rank, role)
        try:
            self._fd: int | None = os.open(
                self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644
            )
        except OSError as e:
            raise MlaprofError(f"cannot create {self.path}: {e.strerror or e}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise MlaprofError(
                f"rank {rank} of {Path(run_dir).name} is being written by another process"
            ) from None

    def reserve(self) -> None:
        """Hold back a little disk space (best effort: on a disk already full, nothing)."""
        for size in RESERVE_BYTES:
            try:
                os.posix_fallocate(self._fd, 0, size)  # type: ignore[arg-type]
                return
            except (OSError, TypeError):
                continue

    def free_reserve(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)

    def release(self) -> None:
        self.free_reserve()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def lock_held(path: Path) -> bool | None:
    """Whether a live process holds an exclusive ``flock`` on ``path`` (a writer's or an
    import's lock): None when there is no such file (the caller decides what that means)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops the shared lock we may have taken
    return False


def writer_alive(run_dir: Path, rank: int, role: str = "") -> bool:
    """True while a process holds the writer lock of rank ``rank`` (and ``role``)."""
    # no lock file: a writer from before locks existed, long gone
    return bool(lock_held(lock_path(run_dir, rank, role)))


def any_writer_alive(run_dir: Path) -> bool:
    """True while any rank's writer of the folder is alive (including one still initialising)."""
    try:
        names = [m for p in Path(run_dir).iterdir() if (m := _LOCK.match(p.name))]
    except OSError:
        return False
    return any(writer_alive(run_dir, int(m.group(1)), m.group(2) or "") for m in names)


# meta key the vLLM recorder sets to "1" while it has written every step it saw (the engine is
# idle, no step open) and to "0" when the next step begins: a writer that dies while it reads "1"
# lost nothing (e.g. an engine stopped by SIGTERM / Ctrl-C, or force-killed at shutdown, after a
# clean drain): its run reads finished (drained), never interrupted
DRAINED = "drained"
# meta key the vLLM recorder sets to a stop signal's name (e.g. "SIGTERM") when one arrives
STOP_SIGNAL = "stop_signal"
DRAINED_REASON = (
    "drained: every step the writer saw was written before it was stopped without closing its "
    "record (a stop signal or a kill at shutdown)"
)


class EmptyStatus(StrEnum):
    """A run folder with run.json but no rank database yet (:func:`empty_run`): what every
    view (``report``, ``runs``, the dashboard) calls it."""

    STARTING = "starting"  # a writer holds its lock: its database is on the way
    FAILED = "failed"  # its writer failed before its first record and said why (a full disk)
    ABANDONED = "abandoned"  # no writer alive: killed before its first record


def empty_run(run_dir: Path, meta: Any) -> tuple[EmptyStatus, str, str]:
    """``(status, reason, text)`` of a run folder with run.json (``meta``, as written) and no
    rank database: the one judgement the reader (``report``, ``runs``) and the live dashboard
    make of it. ``text`` is the line every view says (the reader's error, the dashboard's
    banner): ``<run_dir> is an empty run abandoned before its first record ...``."""
    reason = ""
    if any_writer_alive(run_dir):
        status = EmptyStatus.STARTING
    elif isinstance(meta, dict) and meta.get("status") == RunStatus.FAILED:
        status, reason = EmptyStatus.FAILED, str(meta.get("reason") or "")
    else:
        status = EmptyStatus.ABANDONED
    return status, reason, empty_run_text(run_dir, status, reason)


def empty_run_text(run_dir: Path, status: str, reason: str = "") -> str:
    """The words of :func:`empty_run` for ``status``."""
    what = {
        EmptyStatus.STARTING: "is starting (no records yet)",
        EmptyStatus.FAILED: f"failed before its first record: {reason or 'no reason recorded'}",
    }.get(status, "is an empty run abandoned before its first record (its writer is gone)")
    return f"{run_dir} {what}"


# the one order in which ranks' states make the run's: the first present wins
RUN_STATUS_ORDER = (
    RunStatus.FAILED,
    RunStatus.INTERRUPTED,
    RunStatus.INCOMPLETE,
    RunStatus.RUNNING,
)


def effective_status(
    run_dir: Path, rank: int, recorded: str | None, role: str = "", drained: str | None = None
) -> str:
    """A database's status as a reader should show it: a recorded live state whose writer is
    gone reads ``finished`` when the writer had drained (``drained`` meta "1": every step it
    saw is on disk; :func:`run_reason` says so), else ``incomplete``."""
    status = recorded or "running"
    if status in LIVE and not writer_alive(run_dir, rank, role):
        return RunStatus.FINISHED if drained == "1" else RunStatus.INCOMPLETE
    return status


def drained_reason(signal: str | None = None) -> str:
    """:data:`DRAINED_REASON`, naming the stop signal where the writer recorded one."""
    if not signal:
        return DRAINED_REASON
    return (
        f"drained: every step the writer saw was written before {signal} stopped it without "
        "closing its record"
    )


def run_reason(
    dbs: list[tuple[Any, ...]],
    verdict: str | None = None,
    verdict_reason: str | None = None,
    exported: str | None = None,
    exported_reason: str | None = None,
) -> str | None:
    """Why a run ended early or how it ended, from ``(role, recorded reason, drained, status)``
    per database: the launcher's reason where its verdict (run.json) is that a rank failed,
    else the first reason a writer recorded (e.g. disk full), else :func:`drained_reason`
    where a rank's own database drained and was stopped without closing (``drained``: its
    recorded state was still live; its status then reads finished); an optional fifth element
    is the stop signal that database recorded."""
    if verdict == RunStatus.FAILED and verdict_reason:
        return verdict_reason
    if exported in ENDED_EARLY:
        why = f": {exported_reason}" if exported_reason else ""
        return f"the run this was exported from was {exported}{why}"
    for _, why, *_ in dbs:
        if why:
            return why
    for role, _, drained, status, *signal in dbs:
        if not role and drained and status in (RunStatus.FINISHED, RunStatus.INTERRUPTED):
            return drained_reason(signal[0] if signal else None)
    return None


# run.json keys an import of an mlaprof export carries over: the status and reason the exported
# run had (an export of a killed run imports as that run, never as a finished one)
EXPORTED_STATUS = "exported_status"
EXPORTED_REASON = "exported_reason"
ENDED_EARLY = (RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.INCOMPLETE)


def process_run_status(
    states: list[tuple[str, str]], verdict: str | None = None, exported: str | None = None
) -> str:
    """The run's status from ``(role, status)`` per database: a rank's own database (role "")
    decides; another process of it (the vLLM EngineCore, often killed at shutdown without
    finishing) only counts when it failed. ``verdict``: run.json's status, which a launcher
    writes last: "failed" (a rank it started failed) counts as one more state, so a rank killed
    before it could close its record never leaves the run reading "interrupted" (its peers
    were stopped because it died) while run.json says "failed"."""
    own = [s for role, s in states if not role or s == RunStatus.FAILED]
    if verdict == RunStatus.FAILED:
        own.append(RunStatus.FAILED)
    if exported in ENDED_EARLY:  # ``exported``: the status of the run an import was exported from
        own.append(exported)
    return run_status(own)


def run_status(states: list[str]) -> str:
    """The run's status from its ranks' (one vocabulary: running, finished, interrupted,
    failed, incomplete): the first of :data:`RUN_STATUS_ORDER` any rank is in, else finished
    when every rank finished."""
    for s in RUN_STATUS_ORDER:
        if s in states:
            return s
    return (
        "finished"
        if states and all(s == "finished" for s in states)
        else (states[0] if states else "running")
    )
