"""NumPy's transparent huge pages, off in a command's own process.

NumPy asks the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array of
4 MiB or more, unless ``NUMPY_MADVISE_HUGEPAGE=0`` is set before it is imported (NumPy's "Global
state" documentation). An import makes and drops hundreds of such arrays per rank (a column of
10^6 int64s is 8 MB); with huge pages each one's first touch makes the kernel clear whole 2 MiB
pages, again after every return to the system. Without them a fleet of 8 ranks x 1.25M kernel
records imports with ~8% less CPU, the kernel's share (page clearing) down by a quarter, at
the same peak memory (docs/performance.md, "Huge pages"). A command process only, and only
where the user has not chosen: a notebook or a caller's own process keeps its own setting.
"""

from __future__ import annotations

import os
import sys

VARIABLE = "NUMPY_MADVISE_HUGEPAGE"


def command_process() -> None:
    """Called by the ``mlaprof`` command's entry point before anything imports NumPy (which
    reads the variable once, on import)."""
    if "numpy" not in sys.modules:
        os.environ.setdefault(VARIABLE, "0")
