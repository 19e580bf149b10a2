"""PyTorch profiler (Kineto) trace importer: ``.json`` or ``.json.gz`` Chrome traces.

Under CUDA/HIP graph replay Kineto records one ``cat: "kernel"`` event per kernel node, all
correlated (``args.correlation``) to the ``cudaGraphLaunch`` / ``hipGraphLaunch`` runtime event;
newer CUDA adds ``graph id`` / ``graph node id``. Each graph launch is one replay (numbered by
launch time); the n-th MLA kernel of a replay is layer n. Grids are in blocks. Timestamps are
microseconds with a fractional part: parsed as decimals, so nanoseconds are exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.formats.kineto_events import API_CATS, HEADER_KEYS, KERNEL_CATS, MEMCPY_CATS
from mlaprof.importers.annotate import NULL, KernelColumns, store_derived, store_kernels
from mlaprof.importers.common import ImportSummary, parse_json, to_int
from mlaprof.importers.inputs import text_chunks
from mlaprof.importers.json_stream import RESET, StreamedDocument
from mlaprof.importers.kineto_folder import (
    TraceFile,
    assign_ranks,
    classify,
    distributed_rank,
    folder_files,
)
from mlaprof.importers.kineto_steps import CpuActivity, CpuScan, cpu_tables, x_span
from mlaprof.importers.rocprof_csv import _TRANSFER_COLS, KERNEL_COLS
from mlaprof.kernel_table import KernelMatcher, table_meta
from mlaprof.portable import portable_path
from mlaprof.rank_counts import counted, rank_list
from mlaprof.store import runmeta, validate
from mlaprof.store.staging import staged_run

KCOLS = (*KERNEL_COLS, "replay")
# a trace-event file without Kineto's header keys and without an event the reader reads
_OTHER_PROFILER = (
    f", nor the keys the PyTorch profiler opens every trace with ({', '.join(HEADER_KEYS)}): a "
    "trace-event file of another profiler? Record the run with torch.profiler (vLLM's "
    "--profiler-config) and import its trace"
)


def _maybe_int(v: Any) -> int | None:
    """Kineto's pid/tid are ints or labels; labels are not numbers and become None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, Decimal) and v == v.to_integral_value():
        return int(v)
    return None


def _dim3(v: Any, what: str) -> tuple[int | None, int | None, int | None]:
    if v is None:
        return (None, None, None)
    if not isinstance(v, list) or not 1 <= len(v) <= 3:
        raise MlaprofError(f"kernel {what} {str(v)[:40]} is not a list of 1-3 numbers")
    vals = [to_int(x, f"kernel {what}") for x in v] + [1, 1]
    return (vals[0], vals[1], vals[2])


def parse(path: Path, text: str) -> dict[str, Any]:
    doc = parse_json(path, text, parse_float=Decimal)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, Mapping) or "traceEvents" not in doc:
        raise MlaprofError(f"{path}: not a Kineto/Chrome trace (no 'traceEvents')")
    if not isinstance(doc["traceEvents"], list):
        raise MlaprofError(f"{path}: 'traceEvents' is not a list")
    return dict(doc)


class EventRows:
    """The kernel, runtime and transfer rows of one trace, an event at a time (so a streamed
    trace never needs its events at once); times are relative until :meth:`rows` adds the
    base: a JSON object's members come in any order, so ``baseTimeNanoseconds`` may follow the
    events (the PyTorch 2.x traces in tests/data write it before them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.kernels: list[tuple[int, list[Any]]] = []
        self.launches: list[tuple[int, int]] = []  # (start, correlation)
        self.api: list[list[Any]] = []
        self.xfer: list[list[Any]] = []
        self._names: dict[str, str] = {}  # one string per distinct name (they repeat by the 1000)

    def _name(self, v: Any) -> str:
        s = str(v)
        return self._names.setdefault(s, s)

    def add(self, i: int, ev: Any) -> None:
        where = f"{self.path} event {i}"
        if not isinstance(ev, Mapping):
            raise MlaprofError(f"{where}: not an object")
        if ev.get("ph") != "X":
            return
        cat = str(ev.get("cat", "")).lower()
        args = ev.get("args") or {}
        if not isinstance(args, Mapping):
            raise MlaprofError(f"{where}: 'args' is not an object")
        name = ev.get("name")
        if cat in KERNEL_CATS:
            if name is None:
                raise MlaprofError(f"{where}: kernel event without a name")
            start, end = x_span(ev, where)
            grid = _dim3(args.get("grid"), "grid")
            block = _dim3(args.get("block"), "block")
            row = [
                self._name(name),
                start,
                end,
                to_int(args.get("device", _maybe_int(ev.get("pid"))), f"{where} device"),
                to_int(args.get("stream", _maybe_int(ev.get("tid"))), f"{where} stream"),
                to_int(args.get("correlation"), f"{where} correlation"),
                *grid,
                *block,
                to_int(args.get("graph id"), f"{where} graph id"),
                to_int(args.get("graph node id"), f"{where} graph node id"),
                None,
            ]
            self.kernels.append((i, row))
        elif cat in MEMCPY_CATS:
            start, end = x_span(ev, where)
            self.xfer.append(
                [
                    "MEMORY_COPY" if cat == "gpu_memcpy" else "MEMORY_SET",
                    self._name(name),
                    None,
                    None if args.get("device") is None else str(args.get("device")),
                    to_int(args.get("bytes"), f"{where} bytes"),
                    None,
                    to_int(args.get("correlation"), f"{where} correlation"),
                    start,
                    end,
                ]
            )
        elif cat in API_CATS:
            start, end = x_span(ev, where)
            corr = to_int(args.get("correlation"), f"{where} correlation")
            if "graphlaunch" in str(name).lower() and corr is not None:
                self.launches.append((start, corr))
            self.api.append(
                [
                    self._name(cat),
                    self._name(name),
                    _maybe_int(ev.get("pid")),
                    _maybe_int(ev.get("tid")),
                    corr,
                    start,
                    end,
                ]
            )

    def rows(self, base: int) -> tuple[list[list[Any]], list[list[Any]], list[list[Any]], int]:
        """(kernel rows, api rows, transfer rows, number of graph launches), times + ``base``."""
        replay_of = {corr: r for r, (_, corr) in enumerate(sorted(self.launches))}
        krows = []
        for _, row in sorted(self.kernels, key=lambda t: (t[1][1], t[0])):
            row[-1] = replay_of.get(row[5])
            row[1] += base
            row[2] += base
            krows.append(row)
        for row in self.api:
            row[5] += base
            row[6] += base
        for row in self.xfer:
            row[7] += base
            row[8] += base
        self.kernels = []
        return krows, self.api, self.xfer, len(self.launches)


def _base(doc: Mapping[str, Any]) -> int:
    return to_int(doc.get("baseTimeNanoseconds", 0), "baseTimeNanoseconds") or 0


def load_events(
    path: Path, doc: Mapping[str, Any]
) -> tuple[list[list[Any]], list[list[Any]], list[list[Any]], int]:
    """(kernel rows, api rows, transfer rows, number of graph launches) of a parsed trace."""
    base = _base(doc)
    acc = EventRows(path)
    for i, ev in enumerate(doc["traceEvents"]):
        acc.add(i, ev)
    return acc.rows(base)


@dataclass
class Scanned:
    """One trace file read in a single streamed pass: its top-level members (all but the
    events), its rows and its CPU-side activity."""

    doc: dict[str, Any]
    rows: tuple[list[list[Any]], list[list[Any]], list[list[Any]], int]
    cpu: CpuActivity


def scan(path: Path, events: bool = True) -> Scanned:
    """Read a Kineto trace without holding its events: each is turned into rows as it is decoded
    (``events=False``: the top-level members only). Errors come in ``json.loads``'s order:
    invalid JSON first, then the document's shape, then the first bad event."""
    stream = StreamedDocument(
        text_chunks(path, "Kineto JSON trace"), "traceEvents", path, parse_float=Decimal
    )
    acc, cpu = EventRows(path), CpuScan(str(path))
    first_error: MlaprofError | None = None
    i = 0
    for ev in stream.elements():
        if ev is RESET:  # a repeated traceEvents: json.loads keeps the last one only
            acc, cpu, first_error, i = EventRows(path), CpuScan(str(path)), None, 0
            continue
        if events and first_error is None:
            try:
                acc.add(i, ev)
                cpu.add(i, ev)
            except MlaprofError as e:
                first_error = e  # raised once the whole file is known to be valid JSON
        i += 1
    doc = stream.top
    if "traceEvents" not in doc:
        raise MlaprofError(f"{path}: not a Kineto/Chrome trace (no 'traceEvents')")
    if doc["traceEvents"] is not StreamedDocument.STREAMED:
        raise MlaprofError(f"{path}: 'traceEvents' is not a list")
    _own_export(path, doc)
    if first_error is not None:
        raise first_error
    base = _base(doc)
    return Scanned(doc, acc.rows(base), cpu.result(base))


def _own_export(path: Path, doc: Mapping[str, Any]) -> None:
    own = doc.get("otherData")
    if isinstance(own, dict) and own.get("mlaprof_run") is not None:
        from mlaprof.importers.foreign import own_export

        raise own_export(str(own["mlaprof_run"])).error(path)


@dataclass
class _Rank:
    """One rank's rows, gathered over its files (one per profiler session)."""

    kernels: list[list[Any]] = field(default_factory=list)
    api: list[list[Any]] = field(default_factory=list)
    xfer: list[list[Any]] = field(default_factory=list)
    launches: int = 0
    cpu: list[CpuActivity] = field(default_factory=list)
    device: str | None = None
    vllm_version: str | None = None

    def add(self, sc: Scanned) -> None:
        doc = sc.doc
        krows, api, xfer, n_launch = sc.rows
        offset = self.launches  # replays numbered over the rank's files
        for row in krows:
            if row[-1] is not None:
                row[-1] += offset
        self.kernels += krows
        self.api += api
        self.xfer += xfer
        self.launches += n_launch
        self.cpu.append(sc.cpu)
        self.device = self.device or _device_name(doc)
        v = doc.get("vllm_version")
        self.vllm_version = self.vllm_version or (None if v is None else str(v)[:40])


def _frontend_error(path: Path) -> MlaprofError:
    return MlaprofError(
        f"{path} is vLLM's front-end trace (the API server's CPU profile, "
        "'<host>_<pid>.async_llm'): it holds no engine step; import the profiler folder, or a "
        "worker's 'dp*_pp*_tp*_..._rank<N>' trace beside it"
    )


@validate.boundary
def import_kineto(
    path: Path | str,
    traces: Path | str,
    name: str | None = None,
    matcher: KernelMatcher | None = None,
) -> tuple[Path, ImportSummary]:
    """A PyTorch-profiler trace file (rank 0), or a folder of them: one rank per worker trace
    (:mod:`mlaprof.importers.kineto_folder` says which file is which)."""
    path = Path(path)
    summary = ImportSummary(source="kineto")
    frontends: list[TraceFile] = []
    if path.is_dir():
        files, others = folder_files(path)
        frontends = [f for f in files if f.role == "frontend"]
        pairs = []
        for tf in files:
            if tf.role != "frontend":
                with validate.decoding(tf.path):  # a worker's trace still being written: changing
                    dist = (
                        None if tf.rank is not None else distributed_rank(scan(tf.path, False).doc)
                    )
                pairs.append((tf, dist))
        if not pairs:
            raise _frontend_error(frontends[0].path)
        groups, notes = assign_ranks(pairs)
        summary.notes += notes
        if others:
            summary.notes.append(
                f"{counted(len(others), 'other file(s)')} in the folder not read (e.g. "
                f"{others[0].name}: vLLM's *.profiler_out.txt are op tables, not traces)"
            )
    elif path.is_file():
        tf = classify(path)
        if tf.role == "frontend":
            raise _frontend_error(path)
        groups = {0: [tf]}
    else:
        raise MlaprofError(f"{path} is neither a file nor a folder")
    stem = path.name.removesuffix(".gz").removesuffix(".json")
    meta: dict[str, Any] = {
        "source": "kineto",
        "kind": "trace",
        "imported_from": portable_path(str(path.resolve())),
        "grid_units": "blocks",
        "device": None,
    }
    if frontends:
        meta["frontend_traces"] = [f.path.name for f in frontends]
        summary.notes.append(
            f"{counted(len(frontends), 'vLLM front-end trace(s)')} (the API server's CPU profile, "
            f"no engine steps) not imported as ranks: {', '.join(f.path.name for f in frontends[:2])}"
        )
    matcher = matcher or KernelMatcher()
    meta.update(table_meta(matcher))  # the user's rows of the kernel table, where given
    cpu_by_rank: dict[str, dict[str, Any]] = {}
    with staged_run(traces, name or f"kineto-{stem}", meta, unique=name is None) as (bulk, final):
        for rank, tfs in groups.items():
            w = bulk.rank_writer(rank)
            r = _Rank()
            headed = False  # a file holds the PyTorch profiler's header keys
            for tf in tfs:
                w.reading(tf.path)
                with validate.decoding(tf.path):
                    sc = scan(tf.path)
                dist = distributed_rank(sc.doc)
                if path.is_dir() and None not in (tf.rank, dist) and tf.rank != dist:
                    raise MlaprofError(
                        f"{tf.path.name}: its name says rank {tf.rank}, its distributedInfo "
                        f"rank {dist}"
                    )
                r.add(sc)
                headed = headed or any(k in sc.doc for k in HEADER_KEYS)
                summary.files.append(str(tf.path))
            if not r.kernels and not r.api:
                raise MlaprofError(
                    f"{tfs[0].path}: no kernel or runtime events found"
                    + ("" if headed else _OTHER_PROFILER)
                )
            _store_rank(w, r, rank, matcher, summary, cpu_by_rank)
        devices = {v["device"] for v in cpu_by_rank.values()}
        update: dict[str, Any] = {"ranks_from": {str(k): [t.path.name for t in v]
                                                 for k, v in groups.items()}}  # fmt: skip
        update["device"] = next(iter(devices)) if len(devices) == 1 else None
        if any(v["cpu_only"] for v in cpu_by_rank.values()):
            update["cpu_trace"] = cpu_by_rank
        versions = {v["vllm_version"] for v in cpu_by_rank.values() if v["vllm_version"]}
        if versions:
            update["vllm_version"] = sorted(versions)[-1]
        runmeta.update(bulk.run_dir, **update)
        if len(groups) > 1:
            summary.notes.append(f"{len(groups)} worker traces imported as {rank_list(groups)}")
    return final, summary


def _store_rank(
    w: Any,
    r: _Rank,
    rank: int,
    matcher: KernelMatcher,
    summary: ImportSummary,
    cpu_by_rank: dict[str, dict[str, Any]],
) -> None:
    acols = ("domain", "function", "pid", "tid", "correlation", "start_ns", "end_ns")
    summary.add("api", w.insert("api", acols, r.api))
    summary.add("transfers", w.insert("transfers", _TRANSFER_COLS, r.xfer))
    cpu_only = not r.kernels and r.device is None
    steps, layers, counts = cpu_tables(r.cpu)
    cpu_by_rank[str(rank)] = {
        "device": "cpu" if cpu_only else r.device,
        "cpu_only": cpu_only,
        "vllm_version": r.vllm_version,
        **counts,
    }
    if r.kernels:
        r.kernels.sort(key=lambda row: row[1])
        kc = KernelColumns.from_rows(KCOLS, [v for row in r.kernels for v in row])
        validate.kernel_columns(kc, str(w.source))
        replay = kc.ints.pop("replay")
        mask = kc.masks.pop("replay", None)
        if mask is not None:
            replay[mask] = NULL
        summary.checks = {}  # this rank's own (stored as its trace_checks rows)
        store_kernels(w, kc, matcher, summary, False, replay)
        if counts["step_annotations"]:
            empty = int(counts.get("empty_annotations") or 0)
            summary.notes.append(
                f"rank {rank}: {counts['step_annotations'] - empty} vLLM step annotations"
                + (
                    f" (and {empty} empty ones, execute_context_0(0)_generation_0(0) with "
                    "nothing scheduled: not steps)"
                    if empty
                    else ""
                )
                + "; steps come from the device kernels' graph replays"
            )
    elif cpu_only and steps:
        # a CPU run: its steps are vLLM's step annotations, its attention the CPU MLA op
        store_derived(w, steps, layers, summary)
    if r.launches and not summary.replays:
        summary.notes.append(f"{r.launches} graph launches, none with a recognised MLA kernel")


def _device_name(doc: Mapping[str, Any]) -> str | None:
    props = doc.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], Mapping):
        n = props[0].get("name")
        return None if n is None else str(n)
    return None
