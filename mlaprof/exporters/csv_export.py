"""Export a run as rocprofv3 7.x CSVs (a folder): ``kernel_trace.csv``, ``<domain>_api_trace.csv``,
``memory_copy_trace.csv``, ``memory_allocation_trace.csv``.

The columns are rocprofv3's, so rocprof-reading tools (and ``mlaprof import rocprof``) read them.
What the layout has no column for (mlaprof's step/layer/split annotations, graph ids, copy sizes,
the analysis tables) is not in the CSVs: export to rocpd for a lossless copy. Imported again,
layers, replays and splits are recomputed from names, correlation ids and grids.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.errors import MlaprofError
from mlaprof.formats.spreadsheet import neutralize
from mlaprof.store.rows import iter_rows

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

KERNEL_HEADER = [
    "Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
    "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size",
    "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X",
    "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z",
]  # fmt: skip
API_HEADER = [
    "Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp",
    "End_Timestamp",
]  # fmt: skip
COPY_HEADER = [
    "Kind", "Direction", "Stream_Id", "Source_Agent_Id", "Destination_Agent_Id", "Correlation_Id",
    "Start_Timestamp", "End_Timestamp",
]  # fmt: skip
ALLOC_HEADER = [
    "Kind", "Operation", "Agent_Id", "Allocation_Size", "Address", "Correlation_Id",
    "Start_Timestamp", "End_Timestamp",
]  # fmt: skip


def _s(v: Any) -> Any:
    return v


def _agent(v: Any) -> str | None:
    return None if v is None else f"Agent {v}"


FAMILY_MAX = 40  # file names are built from trace strings: bounded, and safe on every system


def _family(domain: str | None) -> str:
    d = (domain or "api").lower()
    for fam in ("marker", "hip", "hsa", "rccl"):
        if d.startswith(fam):
            return fam
    fam = re.sub(r"[^a-z0-9]+", "_", d).strip("_") or "api"
    if len(fam) > FAMILY_MAX:  # a long domain keeps a prefix and a digest of the rest
        digest = hashlib.sha1(fam.encode()).hexdigest()[:8]
        fam = f"{fam[: FAMILY_MAX - 9]}_{digest}"
    return fam


def _cell(v: Any) -> str:
    """rocprofv3's quoting: strings quoted, numbers bare, an unknown value an empty bare field
    (readers take it as null; a quoted "" in a number column is a parse error)."""
    if v is None:
        return ""
    if isinstance(v, str):  # formulas made inert (mlaprof.formats.spreadsheet)
        return '"' + neutralize(v).replace('"', '""') + '"'
    return str(v)


def _write(path: Path, header: list[str], data: Iterable[list[Any]]) -> int:
    """Write the rows (streamed: a generator is never held whole); returns how many."""
    n = 0
    with open(path, "w", newline="") as f:
        f.write(",".join(_cell(h) for h in header) + "\n")
        for row in data:
            f.write(",".join(_cell(v) for v in row) + "\n")
            n += 1
    return n


def export_csv(run: Run, out: Path) -> dict[str, int]:
    if out.exists():
        raise MlaprofError(f"{out} already exists; refusing to overwrite")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        counts = _export(run, tmp)
        os.rename(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise MlaprofError(f"cannot write {out}: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return counts


def _no_timestamps(run: Run, first: int, kernels: Iterator[dict[str, Any]]) -> MlaprofError:
    """rocprofv3's kernel rows always carry both timestamps (an empty one reads as a cut record):
    kernels without them cannot be written in this layout."""
    missing = 1 + sum(k["start_ns"] is None or k["end_ns"] is None for k in kernels)
    return MlaprofError(
        f"run {run.name}: {missing} of {run.count('kernels')} kernels have no timestamps (the "
        f"first is kernel {first + 1}); rocprofv3's CSV layout needs Start_Timestamp and "
        "End_Timestamp: export this run to perfetto or rocpd instead"
    )


def _export(run: Run, out: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    if run.count("kernels"):
        ids: dict[str, int] = {}

        def dispatches() -> Iterator[list[Any]]:  # streamed: a 1M-kernel import stays small
            kernels = iter_rows(run, "kernels")
            for i, k in enumerate(kernels):
                if k["start_ns"] is None or k["end_ns"] is None:
                    raise _no_timestamps(run, i, kernels)
                name = k["name"] or ""
                kid = ids.setdefault(name, len(ids) + 1)
                yield ["KERNEL_DISPATCH", _agent(k["device"]), 0, _s(k["stream"]), 0, i + 1, kid,
                       name, _s(k["correlation"]), _s(k["start_ns"]), _s(k["end_ns"]), 0, 0, 0, 0,
                       0, _s(k["block_x"]), _s(k["block_y"]), _s(k["block_z"]),
                       _s(k["grid_x"]), _s(k["grid_y"]), _s(k["grid_z"])]  # fmt: skip

        counts["kernel_trace.csv"] = _write(out / "kernel_trace.csv", KERNEL_HEADER, dispatches())
    by_family: dict[str, list[list[Any]]] = defaultdict(list)
    for a in iter_rows(run, "api"):
        by_family[_family(a["domain"])].append(
            [_s(a["domain"]), _s(a["function"]), _s(a["pid"]), _s(a["tid"]),
             _s(a["correlation"]), _s(a["start_ns"]), _s(a["end_ns"])]
        )  # fmt: skip
    for fam, data in by_family.items():
        counts[f"{fam}_api_trace.csv"] = _write(out / f"{fam}_api_trace.csv", API_HEADER, data)
    copies, allocs = [], []
    for x in iter_rows(run, "transfers"):
        kind = x["kind"] or ""
        if "ALLOC" in kind.upper():
            allocs.append(
                [kind, _s(x["operation"]), _s(x["dst_agent"]), _s(x["size_bytes"]),
                 _s(x["address"]), _s(x["correlation"]), _s(x["start_ns"]), _s(x["end_ns"])]
            )  # fmt: skip
        else:
            copies.append(
                [kind or "MEMORY_COPY", _s(x["operation"]), 0, _s(x["src_agent"]),
                 _s(x["dst_agent"]), _s(x["correlation"]), _s(x["start_ns"]), _s(x["end_ns"])]
            )  # fmt: skip
    if copies:
        counts["memory_copy_trace.csv"] = _write(out / "memory_copy_trace.csv", COPY_HEADER, copies)
    if allocs:
        counts["memory_allocation_trace.csv"] = _write(
            out / "memory_allocation_trace.csv", ALLOC_HEADER, allocs
        )
    if not counts:
        raise MlaprofError(f"run {run.name} has no kernels, API calls or transfers to export")
    return counts
