"""Heavy imports without the cyclic garbage collector's passes.

Importing torch or pandas makes hundreds of thousands of objects that live as long as the
process (modules, classes, functions, their tables). Each time enough new ones pile up, Python's
cyclic collector walks them, and now and then every object there is, and frees next to nothing.
Paused while such an import runs, then, in a command's own process, with what the import left
frozen out of its sight (``gc.freeze``), and resumed (where it was on): a default ``mlaprof
run`` spends ~0.1 s less CPU on torch's import, a first ``report`` ~0.05 s less on pandas' and
the analysis' (docs/performance.md). Only imports are wrapped: the work after them keeps the
collector, since frames and analyses do make cycles that must be freed.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_command = False  # this process runs one command and ends (mlaprof.cli.entry)


def command_process() -> None:
    """Called by the ``mlaprof`` command's entry point: what its imports leave is frozen."""
    global _command
    _command = True


@contextlib.contextmanager
def uncollected() -> Iterator[None]:
    """The collector paused for the block (imports), then as it was. In a command's process
    everything the imports left is then frozen (``gc.freeze``): resumed as it is, the
    collector's first pass would walk all of it at once (~20 ms after pandas' import). Not in a
    caller's own process (tests, notebooks), whose later garbage it could keep."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _command:
            gc.freeze()
        if was_on:
            gc.enable()
