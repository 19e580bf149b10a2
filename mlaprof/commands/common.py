"""Helpers shared by the verbs: locating runs, the traces folder, rich consoles."""

from __future__ import annotations

import os
from pathlib import Path

from mlaprof.errors import MlaprofError

DEFAULT_TRACES = "traces"


def traces_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get("MLAPROF_TRACES") or DEFAULT_TRACES)


def resolve_run(spec: str, traces: str | None = None) -> Path:
    """A run folder path, or a run name under the traces folder, or 'latest'."""
    p = Path(spec)
    if p.is_dir():
        return p
    base = traces_dir(traces)
    if spec == "latest":
        from mlaprof.store.reader import list_runs

        runs = [r for r in list_runs(base) if r.error is None]
        if not runs:
            raise MlaprofError(f"no runs under {base}")
        return runs[0].path
    if (base / spec).is_dir():
        return base / spec
    if p.exists():
        raise MlaprofError(f"{p} is not a run folder")
    raise MlaprofError(f"run {spec!r} not found (neither a folder nor a run under {base})")


def add_traces_arg(parser) -> None:  # noqa: ANN001
    parser.add_argument(
        "--traces",
        metavar="DIR",
        help=f"folder of runs (default: $MLAPROF_TRACES or ./{DEFAULT_TRACES})",
    )
