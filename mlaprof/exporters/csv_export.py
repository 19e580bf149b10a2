"""Export a run as rocprofv3 7.x CSVs (a folder): ``kernel_trace.csv``, ``<domain>_api_trace.csv``,
``memory_copy_trace.csv``, ``memory_allocation_trace.csv``.

The columns are rocprofv3's, so rocprof-reading tools (and ``mlaprof import rocprof``) read them.
A run of several ranks gets one set of files per rank (``rank<N>/[<pid>_]kernel_trace.csv``, as
rocprofv3 writes one set per process). Streamed: rows are written as they are read, with no
rank or table held in memory.
What the layout has no column for (mlaprof's step/layer/split annotations, graph ids, copy sizes,
the analysis tables, run.json's scenario, device and status) is not in the CSVs: export to rocpd
for a lossless copy. Imported again, layers, replays and splits are recomputed from names,
correlation ids and grids; :func:`csv_losses` says, for one run, what that changes (the export
command and the dashboard's export key print it).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mlaprof.errors import MlaprofError
from mlaprof.exporters.folder_output import write_folder
from mlaprof.exporters.process_layout import process_prefixes
from mlaprof.formats.spreadsheet import neutralize
from mlaprof.rank_counts import counted
from mlaprof.store.rows import iter_batches, iter_rows, typed

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

KERNEL_HEADER = [
    "Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
    "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size",
    "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X",
    "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z",
]  # fmt: skip
# the kernel columns after End_Timestamp the store keeps none of (nor a dispatch's queue and
# thread, nor a copy's stream): empty fields, as every unknown number here, never a 0 that
# reads as a measured value
NOT_KEPT = ("LDS_Block_Size", "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count")
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


def _agent(v: Any, label: str = "Agent") -> str | None:
    return None if v is None else f"{label} {v}"


def _kernel_agent_label(run: Run, rank: int) -> str:
    """How a rank's kernels name their GPU, as its trace did: "GPU N" for an import of a
    type-relative trace (rocprofv3 --agent-index type-relative; run.json ``kernel_agent_ids``),
    else "Agent N" (a node id)."""
    from mlaprof.importers.common import TYPE_IDS

    kept = run.meta.get("kernel_agent_ids") or {}
    return "GPU" if kept.get(str(rank)) == TYPE_IDS else "Agent"


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


class _Files:
    """The export's CSV files, each opened (and given its header) at its first row and written
    row by row: nothing is held but the open files. At most ``OPEN_MAX`` stay open (a trace of
    many API domains writes many files); one closed early is reopened to append."""

    OPEN_MAX = 32

    def __init__(self, out: Path) -> None:
        self.out = out
        self.open: dict[str, TextIO] = {}
        self.counts: dict[str, int] = {}

    def write(self, name: str, header: list[str], row: list[Any]) -> None:
        f = self.open.get(name)
        if f is None:
            new = name not in self.counts
            if len(self.open) >= self.OPEN_MAX:  # the oldest opened goes
                self.open.pop(next(iter(self.open))).close()
            path = self.out / name
            path.parent.mkdir(parents=True, exist_ok=True)
            f = self.open[name] = open(path, "w" if new else "a", newline="")  # noqa: SIM115 - closed by close()
            if new:
                f.write(",".join(_cell(h) for h in header) + "\n")
                self.counts[name] = 0
        f.write(",".join(_cell(v) for v in row) + "\n")
        self.counts[name] += 1

    def close(self) -> None:
        for f in self.open.values():
            f.close()
        self.open.clear()


# the store tables the layout carries (kernel_trace, *_api_trace, memory_*_trace)
CARRIED = ("kernels", "api", "transfers")
# the tables an import rebuilds from the kernels (its own rules, the same for a re-import of
# an imported trace's export); a recorded run's own rows of them are not rebuilt
REBUILT = ("steps", "layers", "trace_checks")
# what a re-import reads in place of each table the layout cannot carry
_INSTEAD = {
    "layers": "rebuilt from the MLA kernels' names and grids, without their recorded syncs, "
    "S deserved or timing",
    "syncs": "read only from HIP/CUDA API calls (unknown without them): no sync count in the "
    "captured region",
    "splits": "none: no S per policy, S only as the kernels' grids show it",
    "padding": "none: padding unknown",
    "memory": "none: capture memory unknown",
    "captures": "none: the capture verdict is judged from the kernels alone, or unknown",
    "counters": "none",
    "events": "none",
    "trace_checks": "rebuilt from the kernels",
}
REIMPORT = "imported again (mlaprof import rocprof), the CSVs read as another run"
LOSSLESS = "export --format rocpd keeps every table and reads back as this run"


@dataclass(frozen=True, slots=True)
class Loss:
    """One thing of the run the CSV layout cannot carry: what the run holds, and what an import
    of the CSVs reads instead."""

    what: str  # a table, or a run.json field ("status", "device", "scenario")
    held: str
    instead: str

    @property
    def text(self) -> str:
        return f"{self.what}: {self.held}; a re-import: {self.instead}"


def csv_losses(run: Run) -> list[Loss]:
    """What a CSV export of ``run`` leaves out and how an import of it reads differently (empty:
    it reads back as this run). From the run's own rows and run.json, never guessed: a table is
    named with its row count, the steps with the ones its kernels were recorded in (a re-import
    counts steps from the kernels, so at most those)."""
    from mlaprof.rank_counts import per_rank_count
    from mlaprof.store.runkind import RunKind, run_kind
    from mlaprof.store.schema import TABLES

    meta = run.written_meta
    trace = run_kind(meta) is RunKind.TRACE  # its steps and layers were built from its kernels
    out: list[Loss] = []
    status = str(run.status)
    if status != "finished":
        why = f" ({run.reason})" if run.reason else ""
        out.append(Loss("status", f"the run is {status}{why}",
                        "reads as a finished trace (the layout has no run status)"))  # fmt: skip
    steps = run.count_per_rank("steps")
    if not trace and any(steps.values()):
        kern = run.query(
            "SELECT rank, COUNT(DISTINCT step) AS n, MIN(step) AS lo, MAX(step) AS hi "
            "FROM kernels WHERE step IS NOT NULL GROUP BY rank",
            portable=True,
        )
        seen = {int(r.rank): int(r.n) for r in kern.itertuples()}
        span = "; ".join(
            f"{'' if len(seen) == 1 else f'rank {int(r.rank)}: '}steps {int(r.lo)}-{int(r.hi)}"
            for r in kern.itertuples()
        )
        found = {r: seen.get(r, 0) for r in steps}
        if found != steps:
            out.append(Loss(
                "steps",
                f"{per_rank_count(steps, 'recorded step(s)')}",
                f"counts steps from the kernels again: at most "
                f"{per_rank_count(found, 'step(s)')}, the steps its kernels were recorded in"
                + (f" ({span})" if span else ""),
            ))  # fmt: skip
    graphs = run.query("SELECT COUNT(graph_id) AS n FROM kernels", portable=True)
    held = int(graphs["n"].iloc[0] or 0) if len(graphs) else 0
    if held:  # rocpd's graph_exec_id / Kineto's graph ids: no column of the layout holds them
        out.append(Loss(
            "graph ids",
            f"{counted(held, 'kernel(s)')} name the graph (and node) they replayed in",
            "ties kernels to graph replays by correlation ids and launch calls alone",
        ))  # fmt: skip
    for table in TABLES:
        if table in CARRIED or table == "steps" or (trace and table in REBUILT):
            continue
        n = run.count(table)
        if n:
            held = counted(n, "row(s)")
            if table == "captures":  # the verdict's own words: mode and status per attempt
                caps = run.table("captures")
                held += " (" + ", ".join(
                    sorted({f"{m} {st}" for m, st in zip(caps["graph_mode"], caps["status"],
                                                         strict=True)})) + ")"  # fmt: skip
            out.append(Loss(table, held, _INSTEAD.get(table, "none")))
    device = meta.get("device_name") or meta.get("device")
    if device:
        out.append(Loss("device", f"{device}", "names no device (the layout has agent ids only)"))
    if isinstance(meta.get("scenario"), dict) or meta.get("backend"):
        out.append(Loss(
            "scenario",
            f"backend {meta.get('backend') or 'unknown'}, the scenario's model, spec tokens and "
            "policy",
            "none: an imported trace, no modelled S per policy, route or verify buffers",
        ))  # fmt: skip
    return out


def losses_text(losses: list[Loss], indent: str = "  ") -> str:
    """The warning every view of an export prints (empty: nothing is lost)."""
    if not losses:
        return ""
    return (
        f"the rocprofv3 CSV layout carries kernels, API calls and transfers only; {REIMPORT}:\n"
        + "".join(f"{indent}{loss.text}\n" for loss in losses)
        + f"{indent}{LOSSLESS}\n"
    )


def export_csv(run: Run, out: Path) -> dict[str, int]:
    if out.exists():
        raise MlaprofError(f"{out} already exists; refusing to overwrite")
    return write_folder(out, lambda tmp: _export(run, tmp))


def _no_timestamps(run: Run, first: int, missing: int) -> MlaprofError:
    """rocprofv3's kernel rows always carry both timestamps (an empty one reads as a cut record):
    kernels without them cannot be written in this layout."""
    return MlaprofError(
        f"run {run.name}: {missing} of {run.count('kernels')} kernels have no timestamps (the "
        f"first is kernel {first + 1}); rocprofv3's CSV layout needs Start_Timestamp and "
        "End_Timestamp: export this run to perfetto or rocpd instead"
    )


def _export(run: Run, out: Path) -> dict[str, int]:
    """Every rank's rows, streamed. A run of several ranks is written as rocprofv3 writes a
    multi-process run: one set of files per process, in its host's folder where the run knows
    each rank's host and pid (``<host>/<pid>_kernel_trace.csv``, rocprofv3's default
    ``%hostname%/%pid%`` layout, so the hosts import back as hosts), else
    ``rank<N>/[<pid>_]kernel_trace.csv``: the ranks import back as ranks, never merged."""
    files = _Files(out)
    try:
        for rank, pre in process_prefixes(run).items():
            _export_rank(run, rank, files, pre)
    finally:
        files.close()
    if not files.counts:
        raise MlaprofError(f"run {run.name} has no kernels, API calls or transfers to export")
    return files.counts


_KERNEL_SOURCE = ["device", "stream", "correlation", "start_ns", "end_ns", "block_x", "block_y",
                  "block_z", "grid_x", "grid_y", "grid_z", "name"]  # fmt: skip


def _export_kernels(run: Run, rank: int, files: _Files, name: str) -> None:
    """The rank's kernels, an Arrow batch at a time: each column built whole (a name's kernel id
    and its neutralized text once per distinct name) and written by Arrow's CSV writer, whose
    quoting is :func:`_cell`'s (strings quoted, numbers bare, null an empty bare field). A
    per-row writer took 520 s for 11M kernels (bench/results/huge_trace_exports.json)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    ids: dict[str, int] = {}  # name -> Kernel_Id, numbered by first appearance
    cells: dict[str, str] = {}  # name -> its neutralized text
    label = _kernel_agent_label(run, rank)
    n = 0
    writer = None
    sink = None
    try:
        batches = iter_batches(run, "kernels", rank, _KERNEL_SOURCE)
        for batch in batches:
            rows = batch.num_rows
            if not rows:
                continue
            col = {c: batch.column(c) for c in _KERNEL_SOURCE}
            if (missing := _untimed(col["start_ns"], col["end_ns"])) is not None:
                first = n + pc.index(missing, True).as_py()
                count = sum(_count(_untimed(b.column("start_ns"), b.column("end_ns")))
                            for b in batches)  # fmt: skip
                count += _count(missing)
                raise _no_timestamps(run, first, count)
            names = pc.fill_null(col["name"], "")
            uniq = pc.unique(names)  # in order of first appearance
            for u in uniq.to_pylist():
                if u not in ids:
                    ids[u] = len(ids) + 1
                    cells[u] = neutralize(u)
            pos = pc.index_in(names, value_set=uniq)
            kid = pa.array([ids[u] for u in uniq.to_pylist()], pa.int64()).take(pos)
            text = pa.array([cells[u] for u in uniq.to_pylist()], pa.string()).take(pos)
            agent = pc.binary_join_element_wise(label + " ", col["device"].cast(pa.string()), "")
            none = pa.nulls(rows, pa.int64())  # an empty field: a value the store never kept
            out = pa.RecordBatch.from_arrays(
                [pa.array(["KERNEL_DISPATCH"] * rows, pa.string()), agent, none,
                 col["stream"], none, pa.array(range(n + 1, n + rows + 1), pa.int64()), kid,
                 text, col["correlation"], col["start_ns"], col["end_ns"],
                 *[none] * len(NOT_KEPT), col["block_x"], col["block_y"], col["block_z"], col["grid_x"],
                 col["grid_y"], col["grid_z"]],
                names=KERNEL_HEADER,
            )  # fmt: skip
            if writer is None:
                path = files.out / name
                path.parent.mkdir(parents=True, exist_ok=True)
                sink = open(path, "wb")  # noqa: SIM115 - closed below
                writer = pcsv.CSVWriter(
                    sink, out.schema, write_options=pcsv.WriteOptions(quoting_style="needed")
                )
            writer.write_batch(out)
            n += rows
    finally:
        if writer is not None:
            writer.close()
        if sink is not None:
            sink.close()
    if n:
        files.counts[name] = n


def _count(mask: Any) -> int:
    import pyarrow.compute as pc

    return 0 if mask is None else int(pc.sum(mask).as_py() or 0)


def _untimed(start: Any, end: Any) -> Any:
    """The mask of kernels without a start or an end, or None when every one has both."""
    import pyarrow.compute as pc

    if not (start.null_count or end.null_count):
        return None
    return pc.or_(pc.is_null(start), pc.is_null(end))


def _export_kernel_rows(run: Run, rank: int, files: _Files, name: str) -> None:
    """The rank's kernels a row at a time: for database rows holding values their columns do
    not declare (text in an integer column), which typed Arrow columns cannot carry."""
    ids: dict[str, int] = {}
    label = _kernel_agent_label(run, rank)
    kernels = iter_rows(run, "kernels", rank)
    for i, k in enumerate(kernels):
        if k["start_ns"] is None or k["end_ns"] is None:
            missing = 1 + sum(k["start_ns"] is None or k["end_ns"] is None for k in kernels)
            raise _no_timestamps(run, i, missing)
        kname = k["name"] or ""
        kid = ids.setdefault(kname, len(ids) + 1)
        files.write(name, KERNEL_HEADER,
                    ["KERNEL_DISPATCH", _agent(k["device"], label), None, _s(k["stream"]), None, i + 1, kid,
                     kname, _s(k["correlation"]), _s(k["start_ns"]), _s(k["end_ns"]), *[None] * len(NOT_KEPT),
                     _s(k["block_x"]), _s(k["block_y"]), _s(k["block_z"]),
                     _s(k["grid_x"]), _s(k["grid_y"]), _s(k["grid_z"])])  # fmt: skip


def _export_rank(run: Run, rank: int, files: _Files, pre: str) -> None:
    name = f"{pre}kernel_trace.csv"
    if typed(run, "kernels", rank, _KERNEL_SOURCE):
        _export_kernels(run, rank, files, name)
    else:
        _export_kernel_rows(run, rank, files, name)
    for a in iter_rows(run, "api", rank):
        files.write(f"{pre}{_family(a['domain'])}_api_trace.csv", API_HEADER,
                    [_s(a["domain"]), _s(a["function"]), _s(a["pid"]), _s(a["tid"]),
                     _s(a["correlation"]), _s(a["start_ns"]), _s(a["end_ns"])])  # fmt: skip
    for x in iter_rows(run, "transfers", rank):
        kind = x["kind"] or ""
        if "ALLOC" in kind.upper():
            files.write(f"{pre}memory_allocation_trace.csv", ALLOC_HEADER,
                        [kind, _s(x["operation"]), _s(x["dst_agent"]), _s(x["size_bytes"]),
                         _s(x["address"]), _s(x["correlation"]), _s(x["start_ns"]),
                         _s(x["end_ns"])])  # fmt: skip
        else:
            files.write(f"{pre}memory_copy_trace.csv", COPY_HEADER,
                        [kind or "MEMORY_COPY", _s(x["operation"]), None, _s(x["src_agent"]),
                         _s(x["dst_agent"]), _s(x["correlation"]), _s(x["start_ns"]),
                         _s(x["end_ns"])])  # fmt: skip
