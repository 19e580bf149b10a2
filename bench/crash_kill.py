"""Crash safety of ``mlaprof run``: SIGKILL the writer at random instants and read what is left.

One process imports mlaprof and torch once, then forks one ``mlaprof run`` per trial (the real
command: ``mlaprof.cli.main(["run", ...])``) and kills it with SIGKILL after a random delay: a
quarter of the delays fall in the child's first 5 ms, a quarter in the 200 ms after its run
folder appears (run.json being written), a quarter in the 30 ms after run.json appears (lock and
database being created), the rest anywhere in the run's lifetime. Until the kill, the parent polls the traces folder like a
live ``mlaprof runs`` would. Each child reports every committed step on a pipe (a hook on the
writer's commit: instrumentation only, the store code is unchanged). After each kill:

- the run is readable, or it is reported as an empty ``abandoned`` run (never ``unreadable``);
- it is never ``running`` (a ghost): the dead writer's lock is free;
- its steps are 0..n-1 with no hole or duplicate, each step whole (all its layers), and every
  step the child saw committed is there (nothing lost).

Usage::

    python bench/crash_kill.py --kills 100 --json bench/results/crash_kill.json

The suite runs 20 kills (tests/test_crash_safety.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STEPS, LAYERS = 60, 2  # a run long enough to be killed mid-way, short enough for CI
# the smallest verify shape: the kills should land among commits, not inside one einsum
SHAPE = ["--model", "deepseek-v3-tp8", "--kv-lens", "64,32", "--spec-tokens", "1"]


MODES = ("start", "folder", "store", "any")
WINDOWS = {"start": 0.005, "folder": 0.2, "store": 0.03}
WAIT_FOR = {"folder": "", "store": "run.json"}


def _child(traces: Path, name: str, ack_fd: int) -> None:
    """In the forked child: run ``mlaprof run``, acknowledging each committed step."""
    from mlaprof.cli import main
    from mlaprof.store import writer as w

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    exit_ = w._Transaction.__exit__
    count = [0]

    def acked_exit(self, exc_type, exc, tb):  # noqa: ANN001, ANN202
        exit_(self, exc_type, exc, tb)
        if exc_type is None:
            steps = self.w._con.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
            if steps != count[0]:
                count[0] = steps
                os.write(ack_fd, f"{steps}\n".encode())

    w._Transaction.__exit__ = acked_exit  # type: ignore[method-assign]
    argv = ["run", "--traces", str(traces), "--name", name, "--quiet", "--check-syncs", "off"]
    argv += ["--steps", str(STEPS), "--layers", str(LAYERS), *SHAPE]
    rc = main(argv)
    os._exit(rc)


def check(run_dir: Path, acked: int) -> dict[str, object]:
    """What a reader finds in a killed run."""
    from mlaprof.store import load
    from mlaprof.store.reader import run_info

    if not (run_dir / "run.json").is_file():
        return {"state": "not-started"}  # killed before run.json: nothing claims to be a run
    info = run_info(run_dir)
    out: dict[str, object] = {"state": info.status, "error": info.error}
    if info.status in ("unreadable", "running", "abandoned", "starting"):
        return out
    with load(run_dir) as run:
        steps = sorted(run.steps["step"].tolist())
        layers = run.layers.groupby("step")["layer"].count()
    out["steps"] = len(steps)
    out["hole_or_dup"] = steps != list(range(len(steps)))
    out["partial_step"] = bool(
        set(layers.index) != set(steps) or (len(layers) and (layers != LAYERS).any())
    )
    out["lost"] = len(steps) < acked
    return out


def trials(kills: int, seed: int, traces: Path, run_seconds: float) -> dict[str, object]:
    import torch  # noqa: F401 - imported once here, before forking (children reuse it)

    import mlaprof.backends.torch_ref  # noqa: F401
    import mlaprof.cli  # noqa: F401
    import mlaprof.cpu_runner  # noqa: F401
    from mlaprof.store.reader import list_runs

    rng = random.Random(seed)
    results = []
    polls = bad_polls = 0
    for i in range(kills):
        # kill instants: the child's first 5 ms; the first 200 ms after its run folder appears
        # (run.json being written); the first 30 ms after run.json appears (lock and database
        # being created); anywhere in the run
        mode = MODES[i % len(MODES)]
        delay = rng.uniform(0, {**WINDOWS, "any": run_seconds}[mode])
        name = f"k{i:03d}"
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                _child(traces, name, wfd)
            finally:
                os._exit(3)
        os.close(wfd)
        t0 = time.perf_counter()
        if mode in WAIT_FOR:  # wait (up to 20 s) for the folder or run.json, then the delay
            while not (traces / name / WAIT_FOR[mode]).exists() and time.perf_counter() - t0 < 20:
                pass
        t_end = time.perf_counter() + delay
        while time.perf_counter() < t_end:
            polls += 1  # a reader polling while the writer starts and runs
            bad_polls += sum(x.status == "unreadable" for x in list_runs(traces) if x.name == name)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        acked = 0
        with os.fdopen(r) as f:
            for line in f.read().split():
                acked = max(acked, int(line))
        res = check(traces / name, acked)
        res.update(kill=i, mode=mode, delay_ms=round(delay * 1000, 2), acked=acked)
        res["finished_before_kill"] = os.WIFEXITED(status)
        results.append(res)
    states: dict[str, int] = {}
    for x in results:
        states[str(x["state"])] = states.get(str(x["state"]), 0) + 1
    return {
        "kills": kills,
        "seed": seed,
        "steps_per_run": STEPS,
        "layers_per_step": LAYERS,
        "states": states,
        "unreadable": states.get("unreadable", 0),
        "running_ghosts": states.get("running", 0) + states.get("starting", 0),
        "lost_steps": sum(bool(x.get("lost")) for x in results),
        "hole_or_duplicate": sum(bool(x.get("hole_or_dup")) for x in results),
        "partial_steps": sum(bool(x.get("partial_step")) for x in results),
        "kills_by_mode": {m: sum(x["mode"] == m for x in results) for m in MODES},
        "kill_windows_s": {**WINDOWS, "any": run_seconds},
        "reader_polls": polls,
        "reader_polls_unreadable": bad_polls,
        "trials": results,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--run-seconds", type=float, default=2.0, help="range of the kill delays")
    ap.add_argument("--traces", type=Path, help="folder for the killed runs (default: a temp)")
    ap.add_argument("--json", type=Path, help="write the result here")
    args = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="mlaprof-kill-") as tmp:
        traces = args.traces or Path(tmp)
        traces.mkdir(parents=True, exist_ok=True)
        out = trials(args.kills, args.seed, traces, args.run_seconds)
    out["wall_s"] = round(time.time() - t0, 1)
    out["machine"] = (
        f"{platform.node()} ({os.cpu_count()} CPUs), python {platform.python_version()}"
    )
    summary = {k: v for k, v in out.items() if k != "trials"}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    bad = out["unreadable"] or out["running_ghosts"] or out["lost_steps"]
    bad = bad or out["hole_or_duplicate"] or out["partial_steps"] or out["reader_polls_unreadable"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
