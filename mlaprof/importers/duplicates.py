"""Two kernel files of one process in one folder (a copied ``<pid>_kernel_trace.csv``, a trace
written twice): one rank, each dispatch once.

A dispatch is known by its correlation id (rocprofv3 tags each dispatch with the id of the API
call that launched it, unique in its process: rocprofiler-sdk ``source/lib/output/csv.cpp``
writes it as ``Correlation_Id``; the kernels of one graph launch share it) together with its
name, device and timestamps. A record found in two files is kept once and the import says how
many were merged; a correlation id that names different dispatches in two files means two runs
under one pid, refused in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.importers.annotate import NULL, KernelColumns
from mlaprof.rank_counts import counted
from mlaprof.store.trace_checks import RECORDS

_KEY = ("correlation", "start_ns", "end_ns", "device")


def _column(kc: KernelColumns, c: str) -> np.ndarray:
    v = np.asarray(kc.ints[c], np.int64)
    m = kc.masks.get(c)
    if m is not None:
        v = v.copy()
        v[m] = NULL
    return v


def merge_duplicate_dispatches(
    kc: KernelColumns, sizes: Sequence[int], files: Sequence[Path], notes: list[str]
) -> KernelColumns:
    """``kc``, the kernels of one process's ``files`` concatenated (``sizes``: rows per file, in
    order), with each dispatch once."""
    part = np.repeat(np.arange(len(sizes)), sizes)
    if len(part) != kc.n:
        raise MlaprofError("internal: kernel file sizes do not add up to the kernels read")
    key = np.stack([np.asarray(kc.name_idx, np.int64)] + [_column(kc, c) for c in _KEY
                                                          if c in kc.ints], axis=1)  # fmt: skip
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    owner = part[first][inverse]  # the file where each row's dispatch first appears
    keep = np.flatnonzero(owner == part)  # a row repeated from an earlier file goes
    which = ", ".join(p.name for p in files)
    if "correlation" in kc.ints:
        corr = _column(kc, "correlation")[keep]
        pairs = np.unique(np.stack([corr, part[keep]], axis=1)[corr != NULL], axis=0)
        ids, n_files = np.unique(pairs[:, 0], return_counts=True)
        if (n_files > 1).any():
            bad = ids[n_files > 1]
            raise MlaprofError(
                f"{which}: kernel files of one process (pid) give correlation id {int(bad[0])} "
                f"to different dispatches ({counted(len(bad), 'such id(s)')}): two runs under "
                "one pid? import them separately"
            )
    if len(keep) == kc.n:
        return kc
    notes.append(
        f"{counted(kc.n - len(keep), 'kernel record(s)')} repeated in more than one kernel file "
        f"of one process ({which}): kept once each (merged by correlation id)"
    )
    ints = {c: np.asarray(v, np.int64)[keep] for c, v in kc.ints.items()}
    masks = {c: m[keep] for c, m in kc.masks.items() if m[keep].any()}
    return KernelColumns(list(kc.names), np.asarray(kc.name_idx)[keep], ints, masks, kc.agent_ids)


def repeated_rows(kc: KernelColumns) -> np.ndarray:
    """Rows equal in every field to the row before them: a dispatch record written twice.
    Readers list a database's dispatches by id, so the copies of one dispatch id sit next to
    each other, and one pass over adjacent rows finds them (no sort of millions of rows)."""
    n = kc.n
    out = np.zeros(n, bool)
    if n < 2:
        return out
    # rows that equal the row before them in one column first (a start time: two dispatches
    # rarely share one), then every field at those rows only: two passes over the trace, not
    # two per field
    first = "start_ns" if "start_ns" in kc.ints else None
    if first is not None:
        v = _column(kc, first)
        rows = np.flatnonzero(v[1:] == v[:-1]) + 1
    else:
        rows = np.arange(1, n)
    name = np.asarray(kc.name_idx)
    same = name[rows] == name[rows - 1]
    for c in kc.ints:
        if c != first and len(rows):
            same &= _at(kc, c, rows) == _at(kc, c, rows - 1)
    out[rows[same]] = True
    return out


def _at(kc: KernelColumns, c: str, rows: np.ndarray) -> np.ndarray:
    """Column ``c`` at ``rows`` as int64, NULL as -1 (what :func:`_column` holds there)."""
    v = np.asarray(kc.ints[c])[rows].astype(np.int64)
    m = kc.masks.get(c)
    if m is not None:
        v[m[rows]] = NULL
    return v


def drop_repeated_dispatches(kc: KernelColumns) -> tuple[KernelColumns, int]:
    """``kc`` with every repeated dispatch record (:func:`repeated_rows`) kept once, and how
    many copies went."""
    rep = repeated_rows(kc)
    n = int(rep.sum())
    if not n:
        return kc, 0
    keep = np.flatnonzero(~rep)
    ints = {c: np.asarray(v, np.int64)[keep] for c, v in kc.ints.items()}
    masks = {c: m[keep] for c, m in kc.masks.items() if m[keep].any()}
    return KernelColumns(
        list(kc.names), np.asarray(kc.name_idx)[keep], ints, masks, kc.agent_ids
    ), n


def nameless(kc: KernelColumns) -> int:
    """Dispatches whose kernel symbol the trace lacks (stored without a name)."""
    none = [i for i, s in enumerate(kc.names) if s is None]
    return int(np.isin(np.asarray(kc.name_idx), none).sum()) if none else 0


def check_records(kc: KernelColumns, path: Path, bulk: Any, notes: list[str]) -> KernelColumns:
    """A trace's dispatch records as data: repeated ones kept once, nameless ones counted; both
    named in the import's notes and, per rank, in the store's ``trace_checks`` table (check
    ``records``, which the trust verdict reads)."""
    total = kc.n
    kc, repeated = drop_repeated_dispatches(kc)
    holes = nameless(kc)
    if repeated:
        notes.append(
            f"{path.name}: {repeated} of {total} dispatch records repeat the record before them "
            "(same dispatch id and fields): each dispatch counted once"
        )
    if holes:
        notes.append(
            f"{path.name}: {holes} of {kc.n} dispatches name a kernel symbol the trace lacks: "
            "stored without a name (their kernels cannot be attributed)"
        )
    mine = bulk.trace_checks().group(RECORDS)  # the rank's files before this one
    bulk.write_trace_checks({RECORDS: {
        "dispatches": int(mine.get("dispatches", 0)) + kc.n,
        "repeated_dispatches": int(mine.get("repeated_dispatches", 0)) + repeated,
        "nameless_dispatches": int(mine.get("nameless_dispatches", 0)) + holes,
    }})  # fmt: skip
    return kc
