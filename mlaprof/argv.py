"""Command lines mlaprof writes again: the run a user retypes, and the run a parent starts in a
child process (``run --live``, the ranks of ``run --ranks``)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path


def strip_options(
    args: Iterable[str], with_value: tuple[str, ...] = (), switches: tuple[str, ...] = ()
) -> list[str]:
    """``args`` without the options ``with_value`` (``--opt V`` and ``--opt=V``) and the
    ``switches`` (flags that take no value)."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in with_value:
            skip = True
            continue
        if a in switches or a.startswith(tuple(f"{o}=" for o in with_value)):
            continue
        out.append(a)
    return out


def child_run_command(
    args: Iterable[str],
    name: str,
    traces: Path,
    with_value: tuple[str, ...] = (),
    switches: tuple[str, ...] = (),
) -> list[str]:
    """``python -m mlaprof run ...`` as the user gave it (less the options named), quiet, into
    the run folder ``traces/name`` the parent chose."""
    out = strip_options(args, ("--name", "--traces", *with_value), switches)
    if not out or out[0] != "run":
        out = ["run", *out]
    return [sys.executable, "-m", "mlaprof", *out, "--quiet", "--name", name,
            "--traces", str(traces)]  # fmt: skip
