"""Files users record that mlaprof does not read, told apart by what they are: a refusal names
the format and what to import instead, never "binary, not a CSV" or "not a rocpd database".

- rocprofv3's two other output formats (rocprofiler-sdk ``source/bin/rocprofv3.py``
  ``--output-format``: csv, json, pftrace, otf2, rocpd; rocpd when none is given): a Perfetto
  protobuf (``source/lib/output/generatePerfetto.cpp``: ``results`` with the suffix
  ``.pftrace``) and an OTF2 archive (``generateOTF2.cpp``: ``OTF2_Archive_Open`` on the
  ``results`` name, an ``.otf2`` anchor file beside its definitions and event files).
- Nsight Systems reports (``.nsys-rep``, ``.qdrep`` before 2021) and their SQLite export
  (``nsys export --type sqlite``: tables ``StringIds``, ``CUPTI_ACTIVITY_KIND_KERNEL``, ...,
  NVIDIA's "SQLite Export Schema Reference"); Nsight Compute reports (``.ncu-rep``).
- A rocpd database given where a Kineto trace is expected (its ``rocpd_`` tables).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from mlaprof.errors import MlaprofError
from mlaprof.importers.inputs import is_sqlite

ROCPROF_TODO = (
    "record with --output-format rocpd (rocprofv3's default), csv or json, which hold the same "
    "records"
)
NVIDIA_TODO = (
    "on NVIDIA, record vLLM with its torch profiler (--profiler-config "
    '\'{"profiler":"torch","torch_profiler_dir":DIR}\') and import DIR with mlaprof import kineto'
)
ROCPD_TODO = "import it with mlaprof import rocprof"

# suffix -> (what the file is, what to do)
_BY_SUFFIX = {
    ".pftrace": ("rocprofv3's pftrace output (--output-format pftrace)", ROCPROF_TODO),
    ".otf2": ("rocprofv3's otf2 output (--output-format otf2)", ROCPROF_TODO),
    ".nsys-rep": ("an Nsight Systems report", NVIDIA_TODO),
    ".qdrep": ("an Nsight Systems report", NVIDIA_TODO),
    ".ncu-rep": ("an Nsight Compute report", NVIDIA_TODO),
}
# a table only an Nsight Systems SQLite export holds (CUPTI's activity records)
_NSYS_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "TARGET_INFO_GPU")


@dataclass(frozen=True)
class Foreign:
    """What a file mlaprof does not read is, and what to do instead."""

    what: str
    todo: str
    rocprof: bool  # rocprofv3's own output (another format of the same records)
    readable: bool = False  # mlaprof reads it, with another command (``todo`` says which)

    def error(self, path: Path, todo: str | None = None, expected: str = "") -> MlaprofError:
        """The refusal; ``expected``: what the command that met it reads."""
        how = (
            f"not a {expected}" if self.readable and expected
            else "which this command does not read" if self.readable
            else "which mlaprof does not read"
        )  # fmt: skip
        return MlaprofError(f"{path} is {self.what}, {how}: {todo or self.todo}")


def _tables(path: Path) -> set[str]:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return set()
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error:
        return set()
    finally:
        con.close()


def foreign(path: Path, rocpd_too: bool = False) -> Foreign | None:
    """What ``path`` is, where it is a format mlaprof does not read (None: not one it knows).
    ``rocpd_too``: a rocpd database counts as one (the reader expects another format)."""
    got = _BY_SUFFIX.get(path.suffix.lower())
    if got is not None:
        return Foreign(*got, rocprof=got[1] is ROCPROF_TODO)
    if not path.is_file() or not is_sqlite(path):
        return None
    tables = _tables(path)
    if any(t in tables for t in _NSYS_TABLES):
        return Foreign(
            "an Nsight Systems SQLite export (nsys export --type sqlite)", NVIDIA_TODO, False
        )
    if rocpd_too and any(t.startswith("rocpd_") for t in tables):
        return Foreign("a rocpd database (rocprofv3)", ROCPD_TODO, False, readable=True)
    return None
