"""Transparent huge pages, off in a command's own process for NumPy and Arrow's allocator.

NumPy asks the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array of
4 MiB or more unless ``NUMPY_MADVISE_HUGEPAGE=0`` is set before it is imported (NumPy's "Global
state" documentation); Arrow's default allocator, mimalloc (3.x in pyarrow 26), allows them on
its arenas unless ``MIMALLOC_ALLOW_THP=0`` is set before pyarrow loads it (mimalloc reads its
``MIMALLOC_*`` options once, at process start). An import makes and drops hundreds of large
arrays and buffers per rank; with huge pages each first touch makes the kernel clear a whole
2 MiB page, again after every purge back to the system. Without them a fleet of 8 ranks x
1.25M kernel records imports and reports with ~10% less CPU and a lower peak
(docs/performance.md, "Huge pages").

Set in a command process only, only where the user has not chosen, and only before the library
that reads each is loaded: a notebook or a caller's own process keeps its own setting. A
process the command starts (a rank, a server) inherits them, as it inherits the rest of the
environment; neither changes a number, only how memory is mapped.
"""

from __future__ import annotations

import os
import sys

# variable -> the module that reads it when it loads (set too late, it has no effect)
SETTINGS = {
    "NUMPY_MADVISE_HUGEPAGE": ("0", "numpy"),
    "MIMALLOC_ALLOW_THP": ("0", "pyarrow"),
}


def command_process() -> None:
    """Called by the ``mlaprof`` command's entry point, before NumPy or pyarrow is imported."""
    for variable, (value, reader) in SETTINGS.items():
        if reader not in sys.modules:
            os.environ.setdefault(variable, value)
