"""``mlaprof import rocprof PATH``: a rocprofv3 CSV or JSON file, a rocpd database, or an output
folder, into one run (all or nothing).

A folder of several processes' outputs (rocprofv3 names each ``<pid>_kernel_trace.csv`` /
``<pid>_results.db`` / ``<pid>_results.json``, one per rank of a multi-GPU server) becomes one rank each: its own
database and kernel file, its own replays (correlation ids are per process). Ranks are numbered
by a ``rank<N>`` folder or file name part when the paths carry one, else host by host (the
folder of the files: vLLM numbers a node's ranks together), in the order of the GPU each
process's first kernel ran on (then by pid). Ranks are imported one after the other, the
next rank's kernel file read (on the cores the annotation leaves free: byte ranges of a CSV,
id ranges of a database, at once) while one is annotated and written, so memory holds about
two ranks at a time.
"""

from __future__ import annotations

import csv
import json
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.importers import rocpd_sqlite, rocprof_csv, rocprof_json
from mlaprof.importers.annotate import NULL, KernelColumns, concat, store_kernels
from mlaprof.importers.common import (
    NODE_IDS,
    TYPE_IDS,
    GpuAgent,
    ImportSummary,
    agent_number,
    agent_ref,
    kernel_device,
    read_text,
    release_arrow_memory,
    run_device,
)
from mlaprof.importers.duplicates import merge_duplicate_dispatches
from mlaprof.importers.foreign import Foreign, foreign
from mlaprof.kernel_table import KernelMatcher, table_meta
from mlaprof.portable import portable_path
from mlaprof.store import runmeta, validate
from mlaprof.store.staging import staged_run
from mlaprof.store.trace_checks import LEGACY_KEYS

# ranks read ahead, in a thread (SQLite and pyarrow release the GIL while reading); each read
# is itself split over the free cores, so a second rank ahead only holds memory: on 2 cores it
# read an 8-rank fleet in no less time (CSV and rocpd) for a quarter more peak (rocpd)
AHEAD = 1


def _is_rocprof_json(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return rocprof_json.TOP_KEY.encode() in head


# the record sections of rocprofv3's results JSON (generateJSON.cpp: ``strings`` names them
# before the records); its --output-config file (tool.cpp ``generate_config_output``,
# ``<pid>_config.json``) opens with the same top key and holds the run's settings only, with
# the tool's ``build_spec``, which a results file's metadata does not hold
_RECORDS = (b'"buffer_records"', b'"callback_records"')
_BUILD_SPEC = b'"build_spec"'


def _is_config_json(path: Path) -> bool:
    """Whether a rocprofv3 JSON file is its --output-config file: the build spec and no record
    section (read until a record section is named: the first MBs of a results file, all of a
    config file's few KB). Anything else is left to the JSON importer to judge."""
    keep = max(len(k) for k in (*_RECORDS, _BUILD_SPEC)) - 1
    tail, spec = b"", False
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                buf = tail + chunk
                if any(k in buf for k in _RECORDS):
                    return False
                spec = spec or _BUILD_SPEC in buf
                tail = buf[-keep:]
    except OSError:
        return False  # unreadable: the import itself says why
    return spec


def _config_only(path: Path) -> MlaprofError:
    return MlaprofError(
        f"{path} is rocprofv3's configuration output (--output-config: the run's settings, no "
        "records); import the results written beside it (the .db, <pid>_results.json or .csv "
        "files, or their folder)"
    )


def _other_format(path: Path, known: Foreign) -> MlaprofError:
    """A file of a format mlaprof does not read, refused with what it is; for another of
    rocprofv3's formats, the output of the same run beside it (a run asked for several), else
    how to record one mlaprof reads."""
    beside = (
        _outputs(sorted(q for q in path.parent.iterdir() if q.is_file())) if known.rocprof else None
    )
    todo = f"import the output the same run wrote beside it ({beside[1][0]})" if beside else None
    return known.error(path, todo)


def _outputs(files: list[Path]) -> tuple[str, list[Path]] | None:
    """The files of the one format a folder's ``files`` are imported in: rocpd databases win,
    then results JSON (not the ``--output-config`` file), then CSVs; None where none is."""
    dbs = [p for p in files if p.suffix == ".db" and rocpd_sqlite.is_sqlite(p)]
    if dbs:
        return "rocpd", dbs
    jsons = [p for p in files if p.suffix == ".json" and _is_rocprof_json(p)]
    jsons = [p for p in jsons if not _is_config_json(p)]
    if jsons:
        return "json", jsons
    csvs = [p for p in files if p.suffix.lower() == ".csv"]
    return ("csv", csvs) if csvs else None


# rocprofv3 -i runs the application once per job of its input file, each job's output in a
# folder of its own: pass_<N> (a YAML or JSON input) or pmc_<N> (a text input, one line of
# counters per pass) under the output path (rocprofiler-sdk source/bin/rocprofv3.py
# parse_yaml, parse_json, parse_input; run() joins sub_directory and the pass number)
_PASS = re.compile(r"^(?:pass|pmc)_\d+$")


def _one_pass(path: Path, files: list[Path]) -> None:
    """Refuse a folder holding several rocprofv3 passes: each is a run of the application of
    its own (its processes are not ranks of one run)."""
    passes = sorted({part for f in files for part in f.relative_to(path).parts[:-1]
                     if _PASS.match(part)}, key=lambda p: (len(p), p))  # fmt: skip
    if len(passes) > 1:
        shown = ", ".join(passes[:4]) + (f" and {len(passes) - 4} more" if len(passes) > 4 else "")
        raise MlaprofError(
            f"{path} holds {len(passes)} rocprofv3 passes ({shown}: rocprofv3 -i runs the "
            "application once per job, each in a folder of its own); each is a run of its own, "
            f"not ranks of one: import one pass folder (e.g. {path / passes[0]})"
        )


def collect(path: Path) -> tuple[str, list[Path]]:
    """The files of one format to import from ``path`` (a folder holds one run's outputs, often
    in several formats at once: rocpd databases win, then JSON, then CSVs). A JSON file with
    rocprofv3's top key, its build spec and no records (its ``--output-config`` file) is no
    results file."""
    if not path.exists():
        raise MlaprofError(f"{path} does not exist")
    if path.is_file():
        if rocpd_sqlite.is_sqlite(path):
            return "rocpd", [path]
        known = foreign(path)
        if known is not None:
            raise _other_format(path, known)
        if path.suffix.lower() in (".json", ".gz") or _is_rocprof_json(path):
            if path.suffix.lower() != ".gz" and _is_rocprof_json(path) and _is_config_json(path):
                raise _config_only(path)
            return "json", [path]
        return "csv", [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    _one_pass(path, files)
    found = _outputs(files)
    if found is not None:
        return found
    tool = [p for p in files if p.suffix == ".json" and _is_rocprof_json(p)]
    if tool:  # a rocprofv3 JSON that is no results file: its --output-config file
        raise _config_only(tool[0])
    for p in files:
        known = foreign(p)
        if known is not None:
            raise _other_format(p, known)
    raise MlaprofError(f"{path} holds no rocprofv3 output (.db, .json or .csv files)")


@validate.boundary
@rocpd_sqlite.pinning  # a database still being written: every read of it sees one state
def import_rocprof(
    path: Path | str,
    traces: Path | str,
    name: str | None = None,
    matcher: KernelMatcher | None = None,
    use_arrow: bool = True,
) -> tuple[Path, ImportSummary]:
    path = Path(path)
    fmt, files = collect(path)
    matcher = matcher or KernelMatcher()
    summary = ImportSummary(source=f"rocprof-{fmt}")
    # rocprofv3 grids count work-items; a round-tripped mlaprof export keeps its own units
    meta: dict[str, Any] = {
        "source": "rocprof",
        "kind": "trace",
        "imported_from": portable_path(str(path.resolve())),
        "format": fmt,
        "grid_units": "workitems",
    }
    meta.update(table_meta(matcher))  # the user's rows of the kernel table, where given
    run_name = name or f"rocprof-{path.stem or 'import'}"
    groups = rank_groups(fmt, files)
    if fmt == "rocpd" and len(files) > 1:
        groups = _one_per_export(groups, summary)
    if len(groups) > 1:
        meta["rank_sources"] = rank_sources(path, fmt, groups)
    # kernel traces (CSV, rocpd): the next ranks' reads overlap this rank's annotation and write,
    # and the first ones start before the run is created
    pending: dict[Path, Future[KernelColumns | None]] = {}
    # a file's parse is split over the cores the other ranks' reads leave free: one rank's
    # import parses on every core, a fleet's reads ahead already keep them busy
    ways = max(1, rocprof_csv.free_cores() // min(AHEAD, len(groups)))
    with ThreadPoolExecutor(AHEAD) as pool:

        def prefetch(rank: int) -> None:
            if rank >= len(groups):
                return
            for f in groups[rank]:
                if fmt == "rocpd":
                    pending[f] = pool.submit(rocpd_sqlite.read_dispatches, f, ways)
                elif fmt == "csv" and use_arrow and rocprof_csv.sniff(f) == rocprof_csv.KERNEL:
                    pending[f] = pool.submit(rocprof_csv.read_kernel_file, f, ways)

        for rank in range(AHEAD):
            prefetch(rank)
        try:
            with staged_run(traces, run_name, meta, unique=name is None) as (bulk, final):
                embedded: dict[str, Any] = {}
                devices: dict[int, str | None] = {}  # each rank's, from its agent records
                # ranks whose kernels name their GPU type-relative ("GPU N", --agent-index
                # type-relative): an export writes them back as such
                type_relative: dict[str, str] = {}
                passed: list[str] = []  # the folder's files of kinds mlaprof does not read
                hosts = [r["host"] for r in meta.get("rank_sources", [])]
                for rank, group in enumerate(groups):
                    w = bulk.rank_writer(rank)
                    w.host = hosts[rank] if rank < len(hosts) else host_folder(path, group[0])
                    prefetch(rank + AHEAD)
                    parts: list[KernelColumns] = []
                    kfiles: list[Path] = []  # the files of those parts
                    agents: list[GpuAgent] = []  # the rank's GPU agents, as its files name them
                    for f in group:
                        kc: KernelColumns | None
                        with validate.decoding(f):
                            w.reading(f)
                            if fmt == "rocpd":
                                read = pending.pop(f).result() if f in pending else None
                                found, kc = rocpd_sqlite.import_rocpd(f, w, summary, read)
                                embedded = found or embedded
                                agents += rocpd_sqlite.gpu_agents(f)
                            elif f in pending:
                                kc = pending.pop(f).result()
                                summary.files.append(str(f))
                            elif (
                                fmt == "csv" and path.is_dir() and (skip := rocprof_csv.not_read(f))
                            ):
                                summary.notes.append(skip)  # a kind mlaprof does not read
                                passed.append(f.relative_to(path).as_posix())
                                kc = None
                            elif fmt == "csv":
                                kc = rocprof_csv.import_csv(w, f, summary, use_arrow)
                                if rocprof_csv.sniff(f) == rocprof_csv.AGENT_INFO:
                                    agents += rocprof_csv.read_agent_info(f)
                            else:
                                text = read_text(f, "JSON file")
                                kc = rocprof_json.import_json(f, text, w, summary, agents)
                        if kc is not None:
                            validate.kernel_columns(kc, str(f), 2 if fmt == "csv" else 1)
                            parts.append(kc)
                            kfiles.append(f)
                            kc = None  # the rank's columns are freed once written
                    sizes = [p.n for p in parts if p.n]
                    kfiles = [f for f, p in zip(kfiles, parts, strict=True) if p.n]
                    kernels = concat(parts)
                    parts.clear()
                    if kernels is not None and len(sizes) > 1:  # one pid, several kernel files
                        kernels = merge_duplicate_dispatches(kernels, sizes, kfiles, summary.notes)
                    devices[rank] = _rank_device(w, kernels, agents)
                    if kernels is not None and kernels.agent_ids == TYPE_IDS:
                        type_relative[str(rank)] = TYPE_IDS
                    if kernels is not None:
                        counts = (
                            summary.mla_kernels,
                            summary.replays,
                            summary.layers,
                            summary.eager_steps,
                        )
                        # this rank's checks start empty (annotate fills the dict in place and
                        # stores it as the rank's own trace_checks rows)
                        summary.checks = {}
                        # the kernel and layer files are written in the background while
                        # the trace checks run and the next rank is annotated
                        store_kernels(
                            w,
                            kernels,
                            matcher,
                            summary,
                            True,
                            background=True,
                            sums=len(groups) > 1,
                        )
                        summary.mla_kernels += counts[0]
                        summary.replays += counts[1]
                        summary.layers += counts[2]
                        summary.eager_steps += counts[3]
                    del kernels
                if len(groups) > 1:
                    summary.notes.append(
                        f"{len(groups)} processes imported as ranks 0-{len(groups) - 1}"
                    )
                if not any(summary.rows.values()):
                    raise MlaprofError(f"{path}: no records found (empty trace)")
                if embedded:
                    # its kernels are stored as they are, never checked again: the trust
                    # verdict stands on the checks the export carried
                    summary.notes.append(
                        "mlaprof export: steps, layers, analysis tables and trace checks restored"
                        if summary.rows.get("trace_checks")
                        else "mlaprof export: steps, layers and analysis tables restored; it "
                        "carries no trace checks (exported before they were carried), so the "
                        "trace's trust is unknown"
                    )
                bulk.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('import', ?)",
                    (json.dumps({"files": summary.files, "rows": summary.rows}),),
                )
                _record_device(bulk.run_dir, fmt, devices, summary)
                if passed:  # every view says which of the folder's files were not read
                    runmeta.update(bulk.run_dir, not_read=passed)
                if type_relative:  # rank -> how its kernels' device column is numbered
                    runmeta.update(bulk.run_dir, kernel_agent_ids=type_relative)
                if embedded:  # an mlaprof export's own device stands
                    _restore_meta(bulk.run_dir, embedded)
        finally:
            for fut in pending.values():
                fut.cancel()  # an import that failed: reads not yet started are dropped
    release_arrow_memory()
    return final, summary


# where a rank's device was read, per format (docs/trace_io.md cites the writers)
DEVICE_SOURCES = {
    "csv": "rocprofv3 agent_info.csv (Name, Product_Name) of the kernels' Agent_Id",
    "rocpd": "rocpd_info_agent (name, product_name) of the kernel dispatches' agent_id",
    "json": "rocprofv3 JSON agents (name, product_name) of the dispatches' agent_id",
}


def _agent_ids(kernels: KernelColumns) -> list[int]:
    """The distinct agents a rank's kernel records name (NULL: none named)."""
    arr, mask = kernels.col("device")
    vals = arr if mask is None else arr[~mask]
    vals = vals[vals != NULL]
    if not len(vals):
        return []
    if vals.min() >= 0 and vals.max() < 1 << 16:  # agent numbers: a count, not a sort
        return [int(i) for i in np.flatnonzero(np.bincount(vals))]
    return [int(i) for i in np.unique(vals)]


def _rank_device(w: Any, kernels: KernelColumns | None, agents: list[GpuAgent]) -> str | None:
    """The GPU device the rank's kernels ran on, as its own agent records name it (kept in the
    rank's database as ``device_name``); None where they do not (no agent records: unknown)."""
    if kernels is None or not agents:
        return None
    device = kernel_device(_agent_ids(kernels), agents, kernels.agent_ids)
    if device is not None:
        w.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('device_name', ?)", (device,))
    return device


def _record_device(
    run_dir: Path, fmt: str, devices: dict[int, str | None], summary: ImportSummary
) -> None:
    """run.json's device (one name, or each rank's where they differ) and where it was read."""
    device = run_device(devices)
    if device is None:
        return
    runmeta.update(run_dir, device=device, device_source=DEVICE_SOURCES[fmt])
    summary.notes.append(f"device {device}, from {DEVICE_SOURCES[fmt]}")


def host_folder(root: Path, first: Path) -> str | None:
    """The host folder of a process's files relative to the imported folder (rocprofv3 writes
    ``<host>/<pid>_...``); None when they lie in the imported folder itself or a file was given."""
    rel = Path(_process_key(first)[0]).relative_to(root) if root.is_dir() else Path(".")
    return None if str(rel) == "." else rel.as_posix()


def _one_per_export(groups: list[list[Path]], summary: ImportSummary) -> list[list[Path]]:
    """Drop repeated mlaprof exports of one run (same run name and creation time): a folder
    holding two exports of a run is that run, not two ranks. rocprofv3's own databases carry no
    such identity and are all kept."""
    seen: dict[tuple[str, str, str], Path] = {}
    out = []
    for group in groups:
        kept = []
        for f in group:
            ident = rocpd_sqlite.export_identity(f)
            if ident is not None and ident in seen:
                summary.notes.append(
                    f"{f.name}: another export of run {ident[0]!r} (as {seen[ident].name}); "
                    "read once"
                )
                continue
            if ident is not None:
                seen[ident] = f
            kept.append(f)
        if kept:
            out.append(kept)
    return out


def _restore_meta(run_dir: Path, embedded: dict[str, Any]) -> None:
    """Carry the exported run's descriptive metadata (scenario, device, backend) over."""
    keep = {
        k: v
        for k, v in embedded.items()
        if k
        not in (
            "name",
            "created",
            "status",
            "schema_version",
            "imported_from",
            "format",
            "run_id",
            "ranks",
            # an older export's trace checks: this import stores its own, per rank
            *LEGACY_KEYS,
        )  # fmt: skip
    }
    keep["exported_from"] = embedded.get("name")
    runmeta.update(run_dir, **keep)


_RANK_IN_PATH = re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)(?:[^0-9]|$)", re.I)
_PID_PREFIX = re.compile(r"^(\d+)_")


def _process_key(path: Path) -> tuple[str, str]:
    """Which process wrote ``path``: (folder, pid prefix of rocprofv3's file names or "")."""
    m = _PID_PREFIX.match(path.name)
    return str(path.parent), m.group(1) if m else ""


def _explicit_rank(paths: list[Path]) -> int | None:
    for p in paths:
        for part in (*p.parent.parts, p.stem):
            m = _RANK_IN_PATH.search(part)
            if m:
                return int(m.group(1))
    return None


NO_DEVICE = 1 << 62  # sorts a process whose first kernel names no agent last


def _first_agent(fmt: str, paths: list[Path]) -> tuple[int, int | str | None]:
    """The agent of the process's first kernel: (its number, for ordering the ranks; the agent
    as run.json's rank_sources keep it: the number, or "GPU N" where the trace numbers agents
    type-relative). (:data:`NO_DEVICE`, None) where none is found."""
    for p in paths:
        try:
            if fmt == "csv" and rocprof_csv.sniff(p) == rocprof_csv.KERNEL:
                with open(p, newline="", encoding="utf-8-sig", errors="replace") as f:
                    r = csv.reader(f)
                    head = [rocprof_csv.norm(c) for c in next(r, [])]
                    row = next(r, None)
                if row and "agent_id" in head and len(row) == len(head):
                    ref = agent_ref(row[head.index("agent_id")])
                    n = agent_number(ref)
                    if ref is None or n is None:
                        return NO_DEVICE, None
                    return n, n if ref[0] == NODE_IDS else f"GPU {n}"
            elif fmt == "rocpd":
                dev = rocpd_sqlite.first_agent(p)
                if dev is not None:
                    return dev, dev
        except (OSError, csv.Error, MlaprofError):
            continue  # the import itself reports what is wrong with the file
    return NO_DEVICE, None


def rank_sources(root: Path, fmt: str, groups: list[list[Path]]) -> list[dict[str, Any]]:
    """Where each rank came from: its host folder (relative to the imported folder; None when
    the files lie in it directly), the pid of rocprofv3's file names, the GPU of its first
    kernel, and its files. Kept in run.json, so every view names ranks the same way."""
    out = []
    for rank, g in enumerate(groups):
        pid = _process_key(g[0])[1]
        _, agent = _first_agent(fmt, g)
        out.append(
            {
                "rank": rank,
                "host": host_folder(root, g[0]),
                "pid": int(pid) if pid else None,
                "agent": agent,
                "files": [f.name for f in g],
            }
        )
    return out


def rank_groups(fmt: str, files: list[Path]) -> list[list[Path]]:
    """The files of each rank, rank 0 first: one group per process (see the module's doc)."""
    by_proc: dict[tuple[str, str], list[Path]] = {}
    for f in files:
        by_proc.setdefault(_process_key(f), []).append(f)
    if len(by_proc) < 2:  # rocprofv3 writes one <pid>_results.json per process, like its CSVs
        return [files]
    groups = list(by_proc.items())
    explicit = [_explicit_rank(g) for _, g in groups]
    if all(r is not None for r in explicit) and len(set(explicit)) == len(explicit):
        return [g for _, (_, g) in sorted(zip(explicit, groups, strict=True))]

    def order(item: tuple[tuple[str, str], list[Path]]) -> tuple[str, int, int, str]:
        (folder, pid), g = item
        return (folder, _first_agent(fmt, g)[0], int(pid or 0), pid)

    return [g for _, g in sorted(groups, key=order)]
