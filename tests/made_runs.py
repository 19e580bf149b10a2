"""The runs mlaprof itself makes, made here in a temporary folder (once per process): ``mlaprof
run`` on the CPU as a user types it (the default scenario, the legacy path with its real syncs,
other modes and routes), the same run carried out as rocpd and imported back, and the synthetic
runs the dashboard and figure tests draw (GPU-like ones included). With :mod:`tests.shipped_runs`
(the demo runs, imported traces, logs and recorded engine runs) they are every kind of run the
contradiction property holds (tests/unit/test_no_contradictions.py). Nothing here reads or
writes the working tree's traces/ or out/."""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# `mlaprof run` arguments of each CPU run (one process, one rank: --ranks is the e2e tier's)
CPU_RUNS: dict[str, list[str]] = {
    "cpu-default": [],
    "cpu-legacy-flat": ["--backend", "legacy-flat", "--layers", "3"],
    "cpu-legacy-flat-every-step": ["--backend", "legacy-flat", "--check-syncs", "all"],
    "cpu-unwatched": ["--check-syncs", "off"],
    "cpu-piecewise": ["--graph-mode", "PIECEWISE"],
    "cpu-eager": ["--graph-mode", "NONE"],
    "cpu-active-rows": ["--min-kv-mode", "active-rows"],
    "cpu-pre-fix": ["--vllm-version", "pre-51171"],
    "cpu-fp8-asm": ["--kv-cache-dtype", "fp8"],
    "cpu-kimi-k2": ["--scenario", "kimi-k2-tp8", "--layers", "2", "--steps", "2"],
}
ROUND_TRIP = {"rocpd-cpu-default": "cpu-default"}  # exported as rocpd, imported back
SYNTHETIC = ("synthetic-dashboard-bug", "synthetic-dashboard-fix", "synthetic-dashboard-2-ranks",
             "synthetic-cpu-bug", "synthetic-gpu-bug", "synthetic-gpu-fix")  # fmt: skip
NAMES = [*CPU_RUNS, *ROUND_TRIP, *SYNTHETIC]


@functools.cache
def traces() -> Path:
    tmp = tempfile.mkdtemp(prefix="mlaprof-made-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    return Path(tmp) / "traces"


def _cli(*argv: str) -> None:
    from mlaprof.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    if code != 0:
        raise RuntimeError(f"mlaprof {' '.join(argv)}: exit {code}: {err.getvalue()[-2000:]}")


def _synthetic(name: str) -> Callable[[Path], Path]:
    from mlaprof.synthetic.dashboard import make_run
    from mlaprof.synthetic.figures import write_run

    makers: dict[str, Callable[[Path], Path]] = {
        "synthetic-dashboard-bug": lambda t: make_run(t, name),
        "synthetic-dashboard-fix": lambda t: make_run(t, name, bug=False),
        "synthetic-dashboard-2-ranks": lambda t: make_run(t, name, ranks=2),
        "synthetic-cpu-bug": lambda t: write_run(t, name),
        "synthetic-gpu-bug": lambda t: write_run(t, name, device="cuda"),
        "synthetic-gpu-fix": lambda t: write_run(t, name, fixed=True, device="cuda"),
    }
    return makers[name]


@functools.cache
def run_dir(name: str) -> Path:
    """The run ``name``, made on first use."""
    t = traces()
    if name in CPU_RUNS:
        _cli("run", "--traces", str(t), "--name", name, "--quiet", *CPU_RUNS[name])
        return t / name
    if name in ROUND_TRIP:
        src = run_dir(ROUND_TRIP[name])
        db = t.parent / f"{name}.db"
        _cli("export", "--traces", str(t), str(src), "--format", "rocpd", "-o", str(db))
        _cli("import", "--traces", str(t), "rocprof", str(db), "--name", name)
        return t / name
    return Path(_synthetic(name)(t))


@functools.cache
def summary(name: str) -> Any:
    import mlaprof
    from mlaprof.analysis.run_summary import build_summary

    with mlaprof.load(run_dir(name)) as run:
        return build_summary(run)
