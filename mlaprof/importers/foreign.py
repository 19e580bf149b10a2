"""Files users record that mlaprof does not read, told apart by what they are: a refusal names
the format and what to import instead, never "binary, not a CSV" or "not a rocpd database".

- rocprofv3's two other output formats (rocprofiler-sdk ``source/bin/rocprofv3.py``
  ``--output-format``: csv, json, pftrace, otf2, rocpd; rocpd when none is given): a Perfetto
  protobuf (``source/lib/output/generatePerfetto.cpp``: ``results`` with the suffix
  ``.pftrace``) and an OTF2 archive (``generateOTF2.cpp``: ``OTF2_Archive_Open`` on the
  ``results`` name, an ``.otf2`` anchor file beside its definitions and event files).
- The legacy rocprof's (v1) kernel trace, ``results.csv``: a header with ``KernelName``,
  ``grd`` (the grid's total work-items, no axis) and ``BeginNs`` / ``EndNs``, as its
  ``--stats`` / ``--hip-trace`` runs write it (rocprofiler's ``bin/tblextr.py``).
- The legacy rocprof's (v1) JSON trace, ``results.json``: a Chrome trace its writer opens with an
  empty first event (rocprofiler's ``bin/sqlitedb.py``, ``open_json``: ``{ "traceEvents":[{}``),
  then ``process_name`` records and ``X`` events whose values are all strings (``dump_json``),
  and an ``otherData`` block; no kernel grid per axis. Before, ``import kineto`` read it as a
  Kineto trace holding no kernel event, and ``import rocprof`` sent it to ``import kineto``.
- A kernel trace whose grid is one total (``Grid_Size``, no axis), with ``Kernel_Name`` and
  ``Start_Timestamp`` / ``End_Timestamp`` and no counter columns of rocprofv3's counter
  collection: the per-dispatch columns of rocprofv2's kernel trace and of rocprof-compute's
  ``pmc_perf.csv``.
- mlaprof's own Perfetto export (mlaprof.exporters.perfetto: a Chrome trace whose closing
  ``otherData`` names the run, ``"mlaprof_run"``): its lanes are mlaprof's, not a profiler's, so
  it is refused by every kind with how to carry the run over instead (before, ``import rocprof``
  sent it to ``import kineto``, which refused it).
- Nsight Systems reports (``.nsys-rep``, ``.qdrep`` before 2021) and their SQLite export
  (``nsys export --type sqlite``: tables ``StringIds``, ``CUPTI_ACTIVITY_KIND_KERNEL``, ...,
  NVIDIA's "SQLite Export Schema Reference"); Nsight Compute reports (``.ncu-rep``).

And a file of a format mlaprof reads given to the wrong ``import`` kind (:func:`other_reader`,
told by its start: rocprofv3's JSON top key or CSV header, a rocpd database's tables, a Kineto
trace's keys or its events' categories, a vLLM log's server-start or engine-config line): said
after the reader's error. A trace-event file of another profiler is sent to no other kind.
"""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from mlaprof.errors import MlaprofError
from mlaprof.formats.kineto_events import API_CATS, HEADER_KEYS, KERNEL_CATS, MEMCPY_CATS
from mlaprof.importers.inputs import is_sqlite

ROCPROF_TODO = (
    "record with --output-format rocpd (rocprofv3's default), csv or json, which hold the same "
    "records"
)
NVIDIA_TODO = (
    "on NVIDIA, record vLLM with its torch profiler (--profiler-config "
    '\'{"profiler":"torch","torch_profiler_dir":DIR}\') and import DIR with mlaprof import kineto'
)

# suffix -> (what the file is, what to do)
_BY_SUFFIX = {
    ".pftrace": ("rocprofv3's pftrace output (--output-format pftrace)", ROCPROF_TODO),
    ".otf2": ("rocprofv3's otf2 output (--output-format otf2)", ROCPROF_TODO),
    ".nsys-rep": ("an Nsight Systems report", NVIDIA_TODO),
    ".qdrep": ("an Nsight Systems report", NVIDIA_TODO),
    ".ncu-rep": ("an Nsight Compute report", NVIDIA_TODO),
}
LEGACY_TODO = (
    "record with rocprofv3 --kernel-trace (rocprof's successor, ROCm 6.2 and later), whose "
    "kernel trace holds each dispatch's grid per axis, which S is read from"
)
# the legacy rocprof's kernel trace columns (a total grid ``grd``, times ``BeginNs`` ``EndNs``)
_LEGACY_COLUMNS = {"KernelName", "grd", "BeginNs", "EndNs"}
# the legacy rocprof's JSON trace starts so (its writer's empty first event), whitespace aside
_LEGACY_JSON = re.compile(rb'\A\s*\{\s*"traceEvents"\s*:\s*\[\s*\{\s*\}')

# a table only an Nsight Systems SQLite export holds (CUPTI's activity records)
_NSYS_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "TARGET_INFO_GPU")


class ForeignInput(MlaprofError):
    """A file refused for the format it is (its message says what to import instead)."""


@dataclass(frozen=True)
class Foreign:
    """What a file mlaprof does not read is, and what to do instead."""

    what: str
    todo: str
    rocprof: bool  # rocprofv3's own output (another format of the same records)

    def error(self, path: Path, todo: str | None = None) -> ForeignInput:
        return ForeignInput(
            f"{path} is {self.what}, which mlaprof does not read: {todo or self.todo}"
        )


# what the legacy rocprof's JSON trace is, and what to record instead
LEGACY_JSON = Foreign("a legacy rocprof (v1) JSON trace (results.json)", LEGACY_TODO, False)


# where mlaprof's Perfetto export names its run: the end of the file (otherData comes last)
_OWN_EXPORT = re.compile(rb'"otherData":\{"mlaprof_run":("(?:[^"\\]|\\.)*")')


def own_export(run: str) -> Foreign:
    """mlaprof's own Perfetto export of ``run``, and how to carry the run over instead."""
    run = run[:200]
    return Foreign(
        f"mlaprof's own Perfetto export of run {run!r}, not a PyTorch profiler trace (its lanes "
        "are mlaprof's, so it would import as eager kernels)",
        f"open the run itself (mlaprof report {run}), or carry it over as rocpd (mlaprof export "
        f"{run} --format rocpd, then mlaprof import rocprof FILE)",
        False,
    )


def _exported_run(path: Path) -> str | None:
    """The run an mlaprof Perfetto export names at its end (None: not one)."""
    import json

    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - _PROBE))
            tail = f.read(_PROBE)
    except OSError:
        return None
    m = _OWN_EXPORT.search(tail)
    if m is None:
        return None
    try:
        return str(json.loads(m.group(1)))
    except ValueError:
        return None


def _chrome_trace(path: Path, head: bytes) -> Foreign | None:
    """A Chrome trace no ``import`` kind reads (``head``: the file's start): the legacy rocprof's
    JSON trace, or mlaprof's own Perfetto export."""
    if _LEGACY_JSON.match(head):
        return LEGACY_JSON
    if head.lstrip()[:1] == b"{" and (run := _exported_run(path)) is not None:
        return own_export(run)
    return None


def _tables(path: Path) -> set[str]:
    from mlaprof.importers.rocpd_sqlite import table_names

    return table_names(path)


def foreign(path: Path) -> Foreign | None:
    """What ``path`` is, where it is a format mlaprof does not read (None: not one it knows)."""
    got = _BY_SUFFIX.get(path.suffix.lower())
    if got is not None:
        return Foreign(*got, rocprof=got[1] is ROCPROF_TODO)
    if not path.is_file():
        return None
    head = _head(path)
    chrome = _chrome_trace(path, head)
    if chrome is not None:
        return chrome
    if path.suffix.lower() == ".csv":
        first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
        cells = [c.strip().strip('"') for c in first.split(",")]
        if set(cells) >= _LEGACY_COLUMNS:
            return Foreign("a legacy rocprof (v1) kernel trace", LEGACY_TODO, False)
        return _total_grid(cells)
    if not is_sqlite(path):
        return None
    tables = _tables(path)
    if any(t in tables for t in _NSYS_TABLES):
        return Foreign(
            "an Nsight Systems SQLite export (nsys export --type sqlite)", NVIDIA_TODO, False
        )
    return None


# a kernel trace's columns whose grid is one total (normalized as rocprof_csv.norm does)
_TOTAL_GRID = {"kernel_name", "grid_size", "start_timestamp", "end_timestamp"}


def _total_grid(header: list[str]) -> Foreign | None:
    """rocprofv2's kernel trace or rocprof-compute's pmc_perf.csv: a grid of one total, which
    no S can be read from (a header rocprofv3's CSV reader knows is none of them)."""
    from mlaprof.importers.rocprof_csv import classify, norm

    names = {norm(c) for c in header}
    if not names >= _TOTAL_GRID or "grid_size_x" in names or classify(header) is not None:
        return None
    return Foreign(
        "a kernel trace whose grid is one total (Grid_Size, no axis), as rocprofv2's kernel "
        "trace and rocprof-compute's pmc_perf.csv write it",
        LEGACY_TODO,
        False,
    )


def foreign_in(path: Path, limit: int = 200) -> tuple[Path, Foreign] | None:
    """The first file of ``path`` (itself, or among a folder's first ``limit`` files) in a format
    mlaprof does not read, with what it is; None for a folder that holds a file mlaprof reads
    (the reader's own error is about that one)."""
    if path.is_dir() and kind_of(path, limit) is not None:
        return None
    files = [path] if path.is_file() else sorted(q for q in path.rglob("*") if q.is_file())
    for p in files[:limit]:
        known = foreign(p)
        if known is not None:
            return p, known
    return None


# ---- a file of a format mlaprof reads, given to the wrong ``import`` kind -------------------

_PROBE = 1 << 16  # bytes of a file's (inflated) start read to tell what it is
# Kineto's writer opens every trace with its schema version and, on a GPU, the device list
# (libkineto output_json.cpp, ChromeTraceLogger::handleTraceStart); a trace-event file without
# them is Kineto's only where its events are of the categories the kineto reader reads (another
# profiler's, e.g. TensorFlow's timeline with its "Op" and "DataFlow" events, holds none: no
# kind reads it)
_KINETO_KEYS = tuple(f'"{k}"'.encode() for k in HEADER_KEYS)
_KINETO_EVENT = re.compile(
    rb'"cat"\s*:\s*"(?:%s)"'
    % b"|".join(c.encode() for c in sorted(KERNEL_CATS | MEMCPY_CATS | API_CATS)),
    re.IGNORECASE,
)
_ROCPROF_KEY = b'"rocprofiler-sdk-tool"'
READS = {
    "rocprof": "rocprofv3 output",
    "kineto": "a PyTorch profiler (Kineto) trace",
    "vllm-log": "a vLLM log",
}


def _head(path: Path) -> bytes:
    """The first :data:`_PROBE` bytes of a file, inflated where it is gzip (a folder's every
    file may be probed: never more than that of each)."""
    from mlaprof.importers.inputs import GZIP_MAGIC

    try:
        with open(path, "rb") as f:
            head = f.read(_PROBE)
        if head[:2] != GZIP_MAGIC:
            return head
        with gzip.open(path, "rb") as z:
            return z.read(_PROBE)
    except (OSError, EOFError, zlib.error):
        return b""


def _vllm_log(head: bytes) -> bool:
    """A server start or an engine's config line in the file's start, read by the vLLM log
    reader's own patterns (mlaprof.importers.vllm_log)."""
    from mlaprof.importers.vllm_log import BANNER, ENGINE, SERVER

    lines = head.decode("utf-8", "replace").splitlines()
    return any(rx.search(line) for line in lines for rx in (SERVER, BANNER, ENGINE))


def _file_kind(path: Path) -> str | None:
    if is_sqlite(path):
        return "rocprof" if any(t.startswith("rocpd_") for t in _tables(path)) else None
    head = _head(path)
    if not head:
        return None
    if _ROCPROF_KEY in head:
        return "rocprof"
    if _chrome_trace(path, head) is not None:
        return None  # Chrome traces too, which no kind reads (foreign() names them)
    if head.lstrip()[:1] in (b"{", b"[") and (
        any(k in head for k in _KINETO_KEYS) or _KINETO_EVENT.search(head)
    ):
        return "kineto"
    if _vllm_log(head):
        return "vllm-log"
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    from mlaprof.importers.rocprof_csv import classify

    return "rocprof" if classify([c.strip() for c in first.split(",")]) else None


def kind_of(path: Path, limit: int = 200) -> str | None:
    """Which ``mlaprof import`` kind reads ``path`` (a folder: the first of its first ``limit``
    files that one reads), None where none is told."""
    if path.is_file():
        return _file_kind(path)
    if not path.is_dir():
        return None
    for i, p in enumerate(sorted(q for q in path.rglob("*") if q.is_file())):
        if i >= limit:
            break
        got = _file_kind(p)
        if got is not None:
            return got
    return None


def other_reader(path: Path, kind: str) -> str | None:
    """Where ``mlaprof import KIND`` failed on ``path``: what it is and the command that reads
    it, if another kind does (None: keep the reader's own error)."""
    got = kind_of(path)
    if got is None or got == kind:
        return None
    return f"it looks like {READS[got]}, not {READS[kind]}: import it with mlaprof import {got}"
