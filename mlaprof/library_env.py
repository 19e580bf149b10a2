"""Library settings a command's own process makes before the libraries load: transparent huge
pages off for NumPy and Arrow's allocator, NumPy's BLAS on one thread; and, for an import, one
C heap arena for all its threads (:func:`one_malloc_arena`).

NumPy asks the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array of
4 MiB or more unless ``NUMPY_MADVISE_HUGEPAGE=0`` is set before it is imported (NumPy's "Global
state" documentation); Arrow's default allocator, mimalloc (3.x in pyarrow 26), allows them on
its arenas unless ``MIMALLOC_ALLOW_THP=0`` is set before pyarrow loads it (mimalloc reads its
``MIMALLOC_*`` options once, at process start). An import makes and drops hundreds of large
arrays and buffers per rank; with huge pages each first touch makes the kernel clear a whole
2 MiB page, again after every purge back to the system. Without them a fleet of 8 ranks x
1.25M kernel records imports and reports with ~10% less CPU and a lower peak
(docs/performance.md, "Huge pages").

NumPy's wheels bundle OpenBLAS, which starts a worker thread per core when NumPy loads and
lets each spin, waiting for work, after its start and after every BLAS call (OpenBLAS's
``OPENBLAS_NUM_THREADS``, read once when the library loads). mlaprof makes no BLAS call worth a
second thread (one small ``polyfit``), so the spinning is pure cost: ~0.05-0.1 s CPU of every
command that imports NumPy, a third of a first report's (docs/performance.md, "NumPy's BLAS
threads"). Torch's CPU kernels use MKL and OpenMP, which this variable does not touch.

Set in a command process only, only where the user has not chosen, and only before the library
that reads each is loaded: a notebook or a caller's own process keeps its own setting. A child
process that runs the user's code or a library's own program gets the environment the command
started with (:func:`child_env`); neither setting changes a number, only how memory is mapped
and how many threads wait for BLAS work.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable  # loaded at start already

# variable -> (value, the module that reads it when it loads: set too late, it has no effect,
# the variables that, set by the user, already choose for it)
SETTINGS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "NUMPY_MADVISE_HUGEPAGE": ("0", "numpy", ()),
    "MIMALLOC_ALLOW_THP": ("0", "pyarrow", ()),
    # OpenBLAS reads its own variable first, then GOTO_NUM_THREADS, then OMP_NUM_THREADS
    "OPENBLAS_NUM_THREADS": ("1", "numpy", ("GOTO_NUM_THREADS", "OMP_NUM_THREADS")),
}

# the variables this process set (never one the user set): what a child does not inherit
_SET: set[str] = set()
# glibc's mallopt parameter for the number of malloc arenas (malloc.h, M_ARENA_MAX)
M_ARENA_MAX = -8
_STATE = {"command": False, "one_arena": False}


def command_process() -> None:
    """Called by the ``mlaprof`` command's entry point, before NumPy or pyarrow is imported."""
    _STATE["command"] = True
    for variable, (value, reader, chosen_by) in SETTINGS.items():
        if reader in sys.modules or variable in os.environ:
            continue
        if any(v in os.environ for v in chosen_by):
            continue
        os.environ[variable] = value
        _SET.add(variable)


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) without the settings
    :func:`command_process` made: a child running the user's code or another program starts
    with the environment the user gave the command."""
    base = dict(os.environ if env is None else env)
    for variable in _SET:
        if base.get(variable) == SETTINGS[variable][0]:
            base.pop(variable)
    return base


def one_malloc_arena() -> None:
    """For an import, in a command's own process, before it starts a thread: every thread's C
    allocations from one glibc arena (``mallopt(M_ARENA_MAX, 1)``, glibc's mallopt(3)), unless
    the user chose (``MALLOC_ARENA_MAX``, which glibc reads at start). An import parses, annotates
    and writes on several threads, each of which glibc would give an arena of its own; the
    memory one thread frees then sits in its arena, unused by the others, until a trim hands it
    back and the next rank faults it in again. With one arena the next rank reuses it: a fleet of
    8 ranks x 1.25M kernel records imports with half the page faults (~0.3 s less system CPU)
    and a lower peak (~30 MB for CSV files, ~180 MB for rocpd databases; docs/performance.md,
    "One malloc arena for an import"). No-op off glibc."""
    if not _STATE["command"] or _STATE["one_arena"] or "MALLOC_ARENA_MAX" in os.environ:
        return
    mallopt = libc_function("mallopt")
    if mallopt is not None:
        _STATE["one_arena"] = mallopt(M_ARENA_MAX, 1) == 1  # 1: set (musl's stub answers 0)


def libc_function(name: str) -> Callable[..., int] | None:
    """The C library's function ``name``, from the process's own symbols (glibc's where it is
    the C library: no library lookup); None where the C library has none."""
    import ctypes

    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def one_arena() -> bool:
    """Whether this process's threads allocate from one glibc arena (:func:`one_malloc_arena`)."""
    return _STATE["one_arena"]
