"""``mlaprof check`` in a child process whose end the parent judges: the code under test cannot
talk the gate out of failing.

The gated callable runs in its own Python (``python -m mlaprof.gate.isolated``, never a fork of
the parent, which may hold a CUDA context). The child writes what it learns to a result file as
it learns it, one JSON line each: every recorded sync or allocation the moment the checker
records it, then the report. The parent alone prints a verdict, from that file and the child's
exit, so that

- a callable that syncs and then ends the process (``sys.exit(0)``, ``os._exit(0)``) still fails:
  its recorded events are there, the report is not;
- a callable that ends the process before anything was recorded gets no pass: "ended the process
  before the check finished", exit 3;
- a callable that forks prints no second verdict: only the child's own pid writes to the file,
  the verdict is the parent's, and the child's whole process group is killed when it ends;
- a callable or module that hangs is stopped after ``timeout`` seconds with a clear message;
- the callable's own prints go to stderr, so ``--json`` prints exactly one JSON object.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlaprof.library_env import child_env

# the child's end, as the parent saw it
FINISHED, RAISED, ERROR, ENDED, TIMED_OUT = "finished", "raised", "error", "ended", "timed-out"


@dataclass
class Outcome:
    """What the child did: ``how`` it ended, the events it recorded, and its report if any."""

    how: str
    target: str
    events: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] | None = None
    message: str = ""
    returncode: int | None = None


def run_isolated(spec: dict[str, Any], timeout: float) -> Outcome:
    """Run the gate described by ``spec`` (target, shapes, setup, layers, device, real_capture)
    in a child process; wait at most ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="mlaprof-check-") as tmp:
        result = Path(tmp) / "result.jsonl"
        result.touch()
        # the user's code runs with the environment the user gave the command
        env = child_env()
        # the child imports what the parent can: its path, the working folder first
        path = [os.getcwd(), *(p for p in sys.path if p)]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlaprof.gate.isolated", str(result), json.dumps(spec)],
            stdin=subprocess.DEVNULL,
            stdout=2,  # the callable's prints go to stderr: they never mix with the verdict
            env=env,
            start_new_session=True,  # its own process group: forks of the callable go with it
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc)
        return _judge(spec, result, proc.returncode, timed_out, timeout)


def run_in_process(spec: dict[str, Any], timeout: float) -> Outcome:
    """The same record and judgement in this process, with none of the child's protection (an
    exit ends the caller, a hang hangs it): for a test tier that starts no process."""
    with tempfile.TemporaryDirectory(prefix="mlaprof-check-") as tmp:
        result = Path(tmp) / "result.jsonl"
        result.touch()
        _child(str(result), spec)
        return _judge(spec, result, 0, False, timeout)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The child and whatever it forked: nothing of the callable outlives the check."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _judge(
    spec: dict[str, Any], result: Path, returncode: int | None, timed_out: bool, timeout: float
) -> Outcome:
    out = Outcome(ENDED, str(spec["target"]), returncode=returncode)
    for line in result.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the kill: what came before it stands
        if not isinstance(rec, dict):
            continue
        if "target" in rec:
            out.target = str(rec["target"])
        if "event" in rec:
            out.events.append(rec["event"])
        if "report" in rec:
            out.how, out.report = FINISHED, rec["report"]
        if "raised" in rec:
            out.how, out.message = RAISED, str(rec["raised"])
        if "error" in rec:
            out.how, out.message = ERROR, str(rec["error"])
    if out.how == FINISHED:
        return out
    if timed_out:
        out.how = TIMED_OUT
        out.message = (
            f"{spec['target']} did not finish within {timeout:g} s (--timeout): it hangs, or "
            "needs a longer --timeout"
        )
    elif out.how == ENDED:
        out.message = (
            f"{spec['target']} ended the process (exit status {returncode}) before the check "
            "finished: no verdict from the code under test is taken as a pass"
        )
    return out


# -- the child -------------------------------------------------------------------------------
class _Emitter:
    """Appends one JSON line per record to the result file, from this process only (a fork of
    the callable inherits the file but writes nothing)."""

    def __init__(self, path: str) -> None:
        self.owner = os.getpid()
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    def __call__(self, **rec: Any) -> None:
        if os.getpid() != self.owner:
            return
        os.write(self.fd, (json.dumps(rec, default=str) + "\n").encode())


class _EmittingList(list):  # type: ignore[type-arg]
    """The checker's event list: every event also written out the moment it is recorded."""

    def __init__(self, emit: _Emitter) -> None:
        super().__init__()
        self.emit = emit

    def append(self, ev: Any) -> None:
        super().append(ev)
        self.emit(event=ev.to_row())


def _child(result: str, spec: dict[str, Any]) -> None:
    emit = _Emitter(result)
    from mlaprof.errors import MlaprofError

    try:
        import torch

        from mlaprof.gate.core import _name, run_gated
        from mlaprof.gate.target import as_call, load_target, parse_shapes

        device = spec["device"]
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device not in ("cpu", "cuda"):
            raise MlaprofError(f"--device must be cpu, cuda or auto, got {device!r}")
        if device == "cuda" and not torch.cuda.is_available():
            raise MlaprofError("--device cuda: no CUDA/HIP device here")
        fn = load_target(spec["target"])
        emit(target=_name(fn))
        pos, kw = parse_shapes(spec["shapes"], device)
        if spec.get("setup"):
            pos, kw = as_call(load_target(spec["setup"])(*pos, **kw))
    except MlaprofError as e:
        emit(error=str(e))
        return
    try:
        report = run_gated(
            fn,
            *pos,
            layers=int(spec["layers"]),
            real_capture=spec["real_capture"],
            events=_EmittingList(emit),
            **kw,
        )
    except MlaprofError as e:
        emit(error=str(e))
        return
    except Exception as e:  # the user's callable failed: said distinctly from a finding
        emit(raised=f"{type(e).__name__}: {e}")
        return
    emit(report=report.to_dict(), region=report.region)


if __name__ == "__main__":
    _child(sys.argv[1], json.loads(sys.argv[2]))
    sys.stdout.flush()
    os._exit(0)  # nothing of the callable (atexit hooks, threads) runs after its report
