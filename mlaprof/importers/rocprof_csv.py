"""rocprofv3 CSV importer: kernel, API (HIP/HSA/marker/RCCL), memory copy/allocation, counter and
stats CSVs, ROCm 6.3 and 7.x header generations and ``rocpd convert`` output (leading Guid).

Columns are found by header name, case-insensitively; numbers may be quoted or bare; timestamps
are parsed as exact integers (never through float). A kernel trace is read with pyarrow (a
dependency: the fast path for million-dispatch traces); ``use_arrow=False`` reads it with the
csv module instead, an independent parser the tests hold to identical rows.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.formats import arrow_numpy
from mlaprof.formats.spreadsheet import QUOTE, restore
from mlaprof.importers.annotate import NULL, KernelColumns, LazyInts
from mlaprof.importers.common import (
    GpuAgent,
    ImportSummary,
    agent_ids_of,
    agent_number,
    agent_ref,
    gpu_agent,
    read_text,
    release_arrow_memory,
    to_float,
    to_int,
    trim_heap,
)
from mlaprof.importers.mapped import MappedRange
from mlaprof.live_inputs import changing, still_written
from mlaprof.rank_counts import plural

if TYPE_CHECKING:
    from mlaprof.store.spill import Spill
    from mlaprof.store.staging import BulkWriter

csv.field_size_limit(1 << 24)  # mangled C++ kernel names can be long

KERNEL = "kernel"
COUNTER = "counter"
API = "api"
MEMCPY = "memory_copy"
ALLOC = "memory_allocation"
STATS = "stats"
AGENT_INFO = "agent_info"

KERNEL_COLS = (
    "name",
    "start_ns",
    "end_ns",
    "device",
    "stream",
    "correlation",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "graph_id",
    "graph_node_id",
)
# store column -> rocprofv3 header (normalized); None: absent from that generation is fine
_KERNEL_SRC = {
    "name": "kernel_name",
    "start_ns": "start_timestamp",
    "end_ns": "end_timestamp",
    "device": "agent_id",
    "stream": "stream_id",
    "correlation": "correlation_id",
    "grid_x": "grid_size_x",
    "grid_y": "grid_size_y",
    "grid_z": "grid_size_z",
    "block_x": "workgroup_size_x",
    "block_y": "workgroup_size_y",
    "block_z": "workgroup_size_z",
    "graph_id": "graph_exec_id",
    "graph_node_id": "graph_node_id",
}
_KERNEL_REQUIRED = ("kernel_name", "start_timestamp", "end_timestamp", "grid_size_x")
# fields that may not be empty in a kernel row (an empty one means a cut or mangled record)
_KERNEL_NONEMPTY = (
    "start_ns",
    "end_ns",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)
# the CSV reader parses blocks of this size in parallel, each a chunk of every column (the
# annotation reads chunked columns in place: the tests shrink this to cut fixtures into many).
# Each block costs a pass of Python over its columns: 2 MiB blocks read a 277 MB rank file
# with ~3% less CPU than 1 MiB ones, for ~3 MB more peak (docs/performance.md)
BLOCK_BYTES = 2 << 20
MAX_BLOCK_BYTES = 1 << 30  # the reader's block size is a 32-bit int: rows up to half of it
_STATS_VALUES = ("calls", "totaldurationns", "averagens", "percentage", "minns", "maxns", "stddev")


def norm(h: str) -> str:
    return re.sub(r"[\s\-]+", "_", h.strip().strip('"').lower())


def classify(header: Sequence[str]) -> str | None:
    """Which rocprofv3 CSV a header row belongs to (None: not a rocprofv3 CSV)."""
    h = {norm(c) for c in header}
    if {"counter_name", "counter_value"} <= h:
        return COUNTER
    if set(_KERNEL_REQUIRED) <= h:
        return KERNEL
    if {"direction", "start_timestamp", "end_timestamp"} <= h:
        return MEMCPY
    if {"operation", "allocation_size", "start_timestamp"} <= h:
        return ALLOC
    if {"domain", "function", "start_timestamp", "end_timestamp"} <= h:
        return API
    if {"name", "calls", "totaldurationns"} <= h:
        return STATS
    if "logical_node_id" in h or ("node_id" in h and "gpu_id" in h):
        return AGENT_INFO
    return None


def _kernel_columns_missing(header: Sequence[str]) -> list[str]:
    """The kernel trace columns a header lacks, as rocprofv3 spells them, where it holds the
    kernel name and a timestamp (a kernel trace with a column cut); [] for any other CSV."""
    h = {norm(c) for c in header}
    if "kernel_name" not in h or not h & {"start_timestamp", "end_timestamp"}:
        return []
    return [c.title() if c != "grid_size_x" else "Grid_Size_X" for c in _KERNEL_REQUIRED
            if c not in h]  # fmt: skip


def _header_of(path: Path, text: str) -> list[str]:
    first = text.split("\n", 1)[0]
    try:
        return next(csv.reader([first]))
    except (StopIteration, csv.Error):
        raise MlaprofError(f"{path} has no CSV header") from None


def sniff(path: Path) -> str | None:
    """Classify a CSV file by its first line only (cheap; for folder scans)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
    except OSError as e:
        raise MlaprofError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return classify(next(csv.reader([first.decode("utf-8-sig")])))
    except (StopIteration, UnicodeDecodeError, csv.Error):
        return None


def not_read(path: Path) -> str | None:
    """Why a CSV of an imported folder is passed over, or None to read it: a well-formed header
    of a kind mlaprof does not read (rocprofv3 writes more kinds than these: scratch memory as
    ``rocpd convert`` lays it out, GPU events, PC sampling, graph launches). A kernel trace
    with a column cut, or a file that is no CSV, is still read, and refused with its reason."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
        header = next(csv.reader([first.decode("utf-8-sig")]))
    except (OSError, StopIteration, UnicodeDecodeError, csv.Error):
        return None
    if len(header) < 2 or classify(header) is not None or _kernel_columns_missing(header):
        return None
    if "kernel_name" in {norm(c) for c in header}:
        return None
    shown = ", ".join(c.strip() for c in header[:4])[:80]
    return (
        f"not read: {path.name} (header {shown}, ...: a rocprofv3 CSV kind mlaprof does not read)"
    )


def _rows(path: Path, text: str, ncols: int) -> Iterator[list[str]]:
    """Data rows; a row with the wrong field count (a truncated or mangled file) is an error."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        next(reader)
        for row in reader:
            if not row:
                continue
            if len(row) != ncols:
                raise MlaprofError(
                    f"{path}:{reader.line_num}: expected {ncols} fields, found {len(row)} "
                    "(truncated or not a rocprofv3 CSV)"
                )
            yield [restore(v) if v[:1] == QUOTE else v for v in row]
    except csv.Error as e:
        raise MlaprofError(f"{path}:{reader.line_num}: malformed CSV ({e})") from None


def _index(path: Path, header: Sequence[str], names: Sequence[str]) -> dict[str, int]:
    pos = {norm(c): i for i, c in enumerate(header)}
    missing = [n for n in names if n not in pos]
    if missing:
        raise MlaprofError(
            f"{path}: missing {plural('column(s)', len(missing))} {', '.join(missing)}"
        )
    return pos


def _intf(path: Path, col: str) -> Callable[[str], int | None]:
    return lambda v: to_int(v, f"{path.name} {col}")


# -- kernels --------------------------------------------------------------------------------------
def _kernel_converters(
    path: Path, pos: dict[str, int], forms: set[str]
) -> list[tuple[int | None, Callable]]:
    """Per kernel column, its field's position and converter; the agents' forms go to
    ``forms``."""
    agents: dict[str, int] = {}

    def device(v: str) -> int | None:
        got = _agent(agents, forms, v)
        return None if got == NULL else got

    convs: list[tuple[int | None, Callable]] = []
    for col in KERNEL_COLS:
        src = _KERNEL_SRC[col]
        idx = pos.get(src)
        if col == "name":
            convs.append((idx, lambda v: v))
        elif col == "device":
            convs.append((idx, device))
        else:
            convs.append((idx, _intf(path, src)))
    return convs


def _kernels_csvmodule(path: Path, text: str, header: list[str]) -> KernelColumns:
    pos = _index(path, header, _KERNEL_REQUIRED)
    forms: set[str] = set()
    convs = _kernel_converters(path, pos, forms)
    flat: list[Any] = []
    ext = flat.extend
    check = [
        j for j, c in enumerate(KERNEL_COLS) if c in _KERNEL_NONEMPTY and convs[j][0] is not None
    ]
    for row in _rows(path, text, len(header)):
        vals = [None if i is None else f(row[i]) for i, f in convs]
        for j in check:
            if vals[j] is None:
                raise MlaprofError(f"{path}: a kernel record has an empty {KERNEL_COLS[j]} field")
        ext(vals)
    present = tuple(c for c, (i, _) in zip(KERNEL_COLS, convs, strict=True) if i is not None)
    if len(present) != len(KERNEL_COLS):
        keep = [j for j, (i, _) in enumerate(convs) if i is not None]
        k = len(KERNEL_COLS)
        flat = [flat[r * k + j] for r in range(len(flat) // k) for j in keep]
    kc = KernelColumns.from_rows(present, flat)
    kc.agent_ids = agent_ids_of(forms)
    return kc


# what the annotation reads in full; the other kernel columns (stream, graph node, grids,
# blocks) are parked on disk (mlaprof.store.spill) until the store writes them, and the grids
# read back only at the MLA kernels' rows
IN_MEMORY = ("name", "start_ns", "end_ns", "device", "correlation", "graph_id")


class _Straddle(Exception):
    """A row longer than the reader's block."""


class _Filled:
    """Per-row columns filled in place as the blocks are parsed: each sized for the whole file
    from the rows per byte read so far (grown by half when rows run shorter than that), so a
    value is copied once and a block's copies are never held beside the joined column (a
    1M-dispatch file's in-memory columns are 32 MB, touched once instead of twice)."""

    def __init__(self, size: int, block: int) -> None:
        self.size, self.block = size, block
        self.cols: dict[str, np.ndarray] = {}

    def slot(self, col: str, dtype: Any, at: int, rows: int, blocks: int) -> np.ndarray:
        """Rows ``at`` to ``at + rows`` of ``col``, to fill; ``blocks``: blocks parsed so far."""
        a = self.cols.get(col)
        end = at + rows
        if a is None or end > len(a):
            read = max(1, min(self.size, blocks * self.block))
            want = max(end, int(end * (self.size / read) * 1.05) + 64)
            if a is not None:
                want = max(want, len(a) + len(a) // 2)
            grown = np.empty(want, dtype)
            if a is not None:
                grown[:at] = a[:at]
            self.cols[col] = a = grown
        return a[at:end]

    def final(self, col: str, n: int, dtype: Any) -> np.ndarray:
        """The column's ``n`` rows (a copy where the estimate left much of it unused)."""
        return _fitted(self.room(col, n, dtype), n)

    def room(self, col: str, n: int, dtype: Any) -> np.ndarray:
        """The column's whole array, its first ``n`` rows filled (the rest room to fill)."""
        a = self.cols.pop(col, None)
        return np.zeros(n, dtype) if a is None else a


def _fitted(a: np.ndarray, n: int) -> np.ndarray:
    """``a``'s first ``n`` rows: a view, or a copy where much of ``a`` would be left unused."""
    return a[:n] if len(a) <= n + n // 4 + 4096 else a[:n].copy()


def _kernels_arrow(path: Path, header: list[str], ways: int = 1) -> KernelColumns:
    """pyarrow's CSV reader, streamed a block at a time: typed columns, names and agents parsed
    into dictionaries (no million-string column); the columns the annotation reads become
    NumPy arrays, the others go to a :class:`~mlaprof.store.spill.Spill` as they are parsed,
    so memory holds a few columns of the trace, never the whole parsed file."""
    import pyarrow as pa

    pos = _index(path, header, _KERNEL_REQUIRED)
    by_norm = {norm(c): c for c in header}
    if len(by_norm) != len(header):
        raise MlaprofError(f"{path}: duplicate column names in the header")
    wanted = {col: by_norm[_KERNEL_SRC[col]] for col in KERNEL_COLS if _KERNEL_SRC[col] in pos}
    block = BLOCK_BYTES
    while True:
        try:
            return _stream_kernels(path, header, wanted, block, ways)
        except _Straddle as e:
            # a row longer than a block (a 10 MB mangled name): read again in blocks that hold
            # the longest row, once
            longest = longest_line(path) if block == BLOCK_BYTES else MAX_BLOCK_BYTES
            if longest >= MAX_BLOCK_BYTES // 2:
                raise MlaprofError(f"{path}: malformed kernel trace ({e})") from None
            block = max(BLOCK_BYTES, 2 * longest + 1)
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError) as e:
            msg = str(e).splitlines()[0][:200]
            raise MlaprofError(f"{path}: malformed kernel trace ({msg})") from None


@dataclass
class _Part:
    """One byte range of a kernel file, parsed: its rows' in-memory columns, names and agents
    coded in the range's own order of first appearance, its NULLs and its spill."""

    n: int
    codes: dict[str, int]  # a name as written -> its index in ``names``
    names: list[str | None]
    ints: dict[str, np.ndarray]  # IN_MEMORY columns (``name``: codes into ``names``)
    # the first of several ranges: each of those columns' whole array, sized for the whole
    # file's rows (the later ranges' rows are copied in after its own: no joined copy)
    room: dict[str, np.ndarray]
    nulls: dict[str, list[tuple[int, np.ndarray]]]  # column -> (row in the range, mask) parts
    spill: Spill | None
    agent_forms: set[str]  # how its rows write their agents (common.agent_ref's first items)


def _stream_kernels(
    path: Path, header: list[str], wanted: dict[str, str], block: int, ways: int
) -> KernelColumns:
    from mlaprof.store.spill import SpillChain

    spans = _spans(path, ways)
    if len(spans) == 1:
        parts = [_parse_span(path, header, wanted, block, None)]
    else:
        # pyarrow parses without the GIL: the ranges after the first are parsed on other cores
        # while this thread parses the first
        with ThreadPoolExecutor(len(spans) - 1) as pool:
            later = [pool.submit(_parse_span, path, header, wanted, block, s) for s in spans[1:]]
            got = [_outcome(lambda: _parse_span(path, header, wanted, block, spans[0], True))]
            got += [_outcome(f.result) for f in later]
        parts = [g for g in got if isinstance(g, _Part)]
        failed = [g for g in got if isinstance(g, BaseException)]
        if failed:  # the earliest range's error is the one a reader of the whole file meets
            for p in parts:
                if p.spill is not None:
                    p.spill.discard()
            raise failed[0]
    names, luts = _joined_names(parts)
    idx = _join(parts, "name", luts)
    kept = [c for c in wanted if c in IN_MEMORY and c != "name"]
    # one column joined at a time: the ranges' copies of the others are not held beside it
    ints = {c: _join(parts, c) for c in kept}
    counts = [p.n for p in parts]
    masks: dict[str, np.ndarray] = {}
    for c in dict.fromkeys(c for p in parts for c in p.nulls):
        mask = arrow_numpy.placed_ranges(counts, [p.nulls.get(c, []) for p in parts])
        if mask is not None:
            masks[c] = mask
    spills = [p.spill for p in parts if p.spill is not None]
    spill: Spill | SpillChain | None = None
    if spills:
        spill = spills[0] if len(spills) == 1 else SpillChain(spills)
        masks.update(spill.masks())
    trim_heap()
    # the parsed blocks' memory, kept by Arrow's pool for reuse, back to the system before the
    # annotation and the write allocate theirs (the import's peak is after the parse)
    release_arrow_memory()
    forms = set().union(*(p.agent_forms for p in parts))
    return KernelColumns(names, idx, LazyInts(ints, {}, spill), masks, agent_ids_of(forms))


def _outcome(parse: Callable[[], _Part]) -> _Part | BaseException:
    """A range's parse, or what it raised (every range is waited for before one error is
    raised)."""
    try:
        return parse()
    except BaseException as e:  # noqa: BLE001 - raised again by the caller, in range order
        return e


def _join(parts: list[_Part], col: str, luts: list[np.ndarray] | None = None) -> np.ndarray:
    """The ranges' ``col`` as one column (``luts``: each later range's values mapped through its
    own, name codes onto the first range's): laid in after the first range's rows where its
    array has room for them all, else joined into a new array."""
    first = parts[0]
    head = first.ints.pop(col)
    if len(parts) == 1:
        return head
    later = [p.ints.pop(col) for p in parts[1:]]
    total = first.n + sum(len(a) for a in later)
    room = first.room.pop(col, None)
    if room is None or len(room) < total:  # the first range's estimate fell short
        room = np.empty(total, head.dtype)
        room[: first.n] = head
    del head
    at = first.n
    for i, a in enumerate(later):
        into = room[at : at + len(a)]
        if luts is None:
            into[:] = a
        else:  # "clip": codes of the range's own names, all within its map
            np.take(luts[i], a, out=into, mode="clip")
        at += len(a)
    return _fitted(room, total)


def _joined_names(parts: list[_Part]) -> tuple[list[str | None], list[np.ndarray]]:
    """The names in the file's order of first appearance (what one reader of the whole file
    gives), and for each later range the map of its own name codes onto them."""
    codes, names = parts[0].codes, parts[0].names
    luts = [np.array([_code(codes, names, v) for v in p.codes] or [0], np.int32) for p in parts[1:]]
    return names, luts


# bytes of a kernel file per range parsed at once (a smaller file is parsed in one piece)
SPAN_BYTES = 32 << 20


def free_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _spans(path: Path, ways: int) -> list[tuple[int, int]]:
    """The byte ranges (after the header line) to parse at once, at most ``ways``, each ending
    at the end of a line; one, the whole file, when it is small."""
    size = path.stat().st_size
    k = min(ways, size // SPAN_BYTES)
    if k < 2:
        return [(0, size)]
    with open(path, "rb") as f:
        f.readline()
        cuts = [f.tell()]
        for i in range(1, k):
            f.seek(max(cuts[-1], size * i // k))
            f.readline()  # the rest of the line the cut fell in
            cuts.append(f.tell())
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a] or [(0, size)]


def _parse_span(
    path: Path,
    header: list[str],
    wanted: dict[str, str],
    block: int,
    span: tuple[int, int] | None,
    room: bool = False,
) -> _Part:
    """Parse the whole file (``span`` None: its first line is the header) or one byte range of
    it (rows only) into a :class:`_Part`. ``room``: the first of several ranges, whose columns
    are sized for the whole file's rows (the rows per byte it reads, times the file's bytes)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from mlaprof.store import spill as spill_rows
    from mlaprof.store.spill import Spill

    text = pa.dictionary(pa.int32(), pa.string())
    types = {
        src: (text if col in ("name", "device") else pa.int64()) for col, src in wanted.items()
    }
    # the page cache's pages, handed back as the parse passes them (no copy into the process)
    first, last = (0, path.stat().st_size) if span is None else span
    source = MappedRange(path, first, last)
    try:
        reader = pcsv.open_csv(
            source,
            read_options=pcsv.ReadOptions(
                column_names=header, skip_rows=1 if span is None else 0, block_size=block
            ),
            parse_options=pcsv.ParseOptions(newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(
                include_columns=list(wanted.values()),
                column_types=types,
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid as e:
        try:
            _straddle(e)
            _written(source, e)
        finally:
            source.close()
        raise
    to_disk = [c for c in wanted if c not in IN_MEMORY]
    spill = Spill(to_disk) if to_disk else None
    parked: list[pa.RecordBatch] = []  # parsed rows not yet given to the spill
    parked_rows = 0
    codes: dict[str, int] = {}  # a name as written -> its index in ``names``
    names: list[str | None] = []
    agents: dict[str, int] = {}
    forms: set[str] = set()
    kept = [c for c in wanted if c in IN_MEMORY]
    size = path.stat().st_size if room else last - first
    filled = _Filled(size, block)
    null_parts: dict[str, list[tuple[int, np.ndarray]]] = {}
    n = blocks = 0
    try:
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            except pa.ArrowInvalid as e:
                _straddle(e)
                _written(source, e)
                raise
            rows = batch.num_rows
            blocks += 1
            # one batch a block; the reader reads ahead, so only blocks two behind are done
            source.parsed((blocks - 2) * block)
            for col, src in wanted.items():
                arr = batch.column(src)
                if (
                    col == "name"
                ):  # an mlaprof CSV export's neutralized formulas come back as written
                    lut = np.array(
                        [_code(codes, names, v) for v in arr.dictionary.to_pylist()] or [0],
                        np.int32,
                    )
                    # "clip": indices into the block's own dictionary, taken unbuffered into place
                    out = filled.slot(col, np.int32, n, rows, blocks)
                    np.take(lut, arrow_numpy.numbers(arr.indices), out=out, mode="clip")
                elif col == "device":
                    lut = np.array(  # int32: agent indices are small
                        [_agent(agents, forms, v) for v in arr.dictionary.to_pylist()] or [NULL],
                        np.int32,
                    )
                    vals = filled.slot(col, np.int32, n, rows, blocks)
                    np.take(lut, arrow_numpy.numbers(arr.indices), out=vals, mode="clip")
                    if (vals == NULL).any():
                        null_parts.setdefault(col, []).append((n, vals == NULL))
                elif arr.null_count and col in _KERNEL_NONEMPTY:
                    raise MlaprofError(f"{path}: a kernel record has an empty {col} field")
                elif col in kept:
                    if arr.null_count:
                        null_parts.setdefault(col, []).append((n, arrow_numpy.nulls(arr)))
                    # copied out: a view would keep the whole parsed batch (every column) alive
                    filled.slot(col, np.int64, n, rows, blocks)[:] = arrow_numpy.numbers(arr, NULL)
            if spill is not None:
                # gathered to a row group's worth before the spill narrows them: a parsed block
                # holds a few thousand rows, and the per-append work is per column, not per row
                parked.append(
                    pa.RecordBatch.from_arrays([batch.column(wanted[c]) for c in to_disk], to_disk)
                )
                parked_rows += rows
                if parked_rows >= spill_rows.FILE_ROWS:
                    spill.append(pa.Table.from_batches(parked))
                    parked, parked_rows = [], 0
            n += rows
        _written(source)
        if spill is not None:
            if parked:
                spill.append(pa.Table.from_batches(parked))
            spill.close()
    except BaseException:
        if spill is not None:
            spill.discard()
        raise
    finally:
        source.close()
    # names and agents as int32 codes, the rest int64
    dtypes = {c: np.int32 if c in ("name", "device") else np.int64 for c in kept}
    if room:
        rooms = {c: filled.room(c, n, dtypes[c]) for c in kept}
        return _Part(n, codes, names, {c: a[:n] for c, a in rooms.items()}, rooms, null_parts,
                     spill, forms)  # fmt: skip
    ints = {c: filled.final(c, n, dtypes[c]) for c in kept}
    return _Part(n, codes, names, ints, {}, null_parts, spill, forms)


def _written(source: MappedRange, failed: Exception | None = None) -> None:
    """A file a writer had open while it was read (no lease: it may be growing) is refused as
    changing where it moved, and, where its rows ``failed`` to parse (a row still half
    written), as still written: never called malformed while a writer holds it."""
    if not source.writer_open:
        return
    if source.moved():
        raise changing(source.path, "open for writing by another process")
    if failed is not None:
        raise still_written(source.path, str(failed).splitlines()[0][:200])


def _straddle(e: Exception) -> None:
    """Arrow's error for a row longer than its block, raised as :class:`_Straddle`."""
    msg = str(e).splitlines()[0][:200]
    if "straddl" in msg:
        raise _Straddle(msg) from None


def _code(codes: dict[str, int], names: list[str | None], value: str) -> int:
    """The index of a name in ``names`` (added, as written before neutralizing, when new)."""
    got = codes.get(value)
    if got is None:
        got = codes[value] = len(names)
        names.append(restore(value))
    return got


def _agent(agents: dict[str, int], forms: set[str], value: str) -> int:
    """The device number of an agent as written (NULL: none, or a type-relative agent that is
    no GPU), its form added to ``forms``."""
    got = agents.get(value)
    if got is None:
        ref = agent_ref(value)
        if ref is not None:
            forms.add(ref[0])
        a = agent_number(ref)
        got = agents[value] = NULL if a is None else a
    return got


def longest_line(path: Path) -> int:
    """The length in bytes of the file's longest line (scanned 16 MiB at a time)."""
    longest, run = 0, 0  # ``run``: bytes since the last newline, carried across chunks
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            nl = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10)
            if not len(nl):
                run += len(chunk)
                continue
            longest = max(longest, run + int(nl[0]))
            if len(nl) > 1:
                longest = max(longest, int(np.diff(nl).max()) - 1)
            run = len(chunk) - int(nl[-1]) - 1
    return max(longest, run)


def _kernel_header(path: Path) -> list[str]:
    """The header of a kernel trace, validated cheaply (without decoding the file in Python)."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError as e:
        raise MlaprofError(f"cannot read {path}: {e.strerror or e}") from None
    if b"\x00" in head:
        raise MlaprofError(f"{path} is binary, not a CSV")
    return next(csv.reader([head.split(b"\n", 1)[0].decode("utf-8-sig", "replace")]))


def read_kernel_file(path: Path, ways: int = 1) -> KernelColumns:
    """A kernel trace CSV (sniffed as one) read through pyarrow: what :func:`import_csv` returns
    for it (thread-safe; the multi-rank importer reads the next rank's file meanwhile).
    ``ways``: byte ranges of a big file parsed at once, in threads (pyarrow parses without the
    GIL): give it the cores nothing else is using, so the read's wall time drops on them at the
    cost of a few percent more CPU."""
    return _kernels_arrow(path, _kernel_header(path), ways)


def read_kernels(path: Path, text: str | None, header: list[str], use_arrow: bool) -> KernelColumns:
    if use_arrow:
        return _kernels_arrow(path, header)
    return _kernels_csvmodule(path, text if text is not None else read_text(path, "CSV"), header)


# -- the small tables -----------------------------------------------------------------------------
def _import_api(bulk: BulkWriter, path: Path, text: str, header: list[str]) -> int:
    req = ("domain", "function", "start_timestamp", "end_timestamp")
    pos = _index(path, header, req)
    ids = [pos.get(c) for c in ("process_id", "thread_id", "correlation_id")]
    f = _intf(path, "field")

    def rows() -> Iterator[list[Any]]:
        for r in _rows(path, text, len(header)):
            pid, tid, corr = (None if i is None else f(r[i]) for i in ids)
            yield [
                r[pos["domain"]],
                r[pos["function"]],
                pid,
                tid,
                corr,
                f(r[pos["start_timestamp"]]),
                f(r[pos["end_timestamp"]]),
            ]

    cols = ("domain", "function", "pid", "tid", "correlation", "start_ns", "end_ns")
    return bulk.insert("api", cols, rows())


def _getter(pos: dict[str, int]) -> Callable[[list[str], str], str | None]:
    """Field ``c`` of a row, None where the header has no such column."""

    def get(r: list[str], c: str) -> str | None:
        i = pos.get(c)
        return None if i is None else r[i]

    return get


def _import_memcpy(bulk: BulkWriter, path: Path, text: str, header: list[str]) -> int:
    pos = _index(path, header, ("direction", "start_timestamp", "end_timestamp"))
    f = _intf(path, "field")

    get = _getter(pos)

    def rows() -> Iterator[list[Any]]:
        for r in _rows(path, text, len(header)):
            size = get(r, "bytes") or get(r, "size")
            yield [
                get(r, "kind") or "MEMORY_COPY",
                get(r, "direction"),
                get(r, "source_agent_id"),
                get(r, "destination_agent_id"),
                f(size) if size is not None else None,
                None,
                f(get(r, "correlation_id")),
                f(get(r, "start_timestamp")),
                f(get(r, "end_timestamp")),
            ]

    return bulk.insert("transfers", _TRANSFER_COLS, rows())


_TRANSFER_COLS = (
    "kind",
    "operation",
    "src_agent",
    "dst_agent",
    "size_bytes",
    "address",
    "correlation",
    "start_ns",
    "end_ns",
)


def _import_alloc(bulk: BulkWriter, path: Path, text: str, header: list[str]) -> int:
    pos = _index(path, header, ("operation", "allocation_size", "start_timestamp", "end_timestamp"))
    f = _intf(path, "field")

    get = _getter(pos)

    def rows() -> Iterator[list[Any]]:
        for r in _rows(path, text, len(header)):
            yield [
                get(r, "kind") or "MEMORY_ALLOCATION",
                get(r, "operation"),
                None,
                get(r, "agent_id"),
                f(get(r, "allocation_size")),
                get(r, "address"),
                f(get(r, "correlation_id")),
                f(get(r, "start_timestamp")),
                f(get(r, "end_timestamp")),
            ]

    return bulk.insert("transfers", _TRANSFER_COLS, rows())


def _import_counters(bulk: BulkWriter, path: Path, text: str, header: list[str]) -> int:
    pos = _index(path, header, ("counter_name", "counter_value", "kernel_name"))
    ts = pos.get("start_timestamp")

    def rows() -> Iterator[list[Any]]:
        for r in _rows(path, text, len(header)):
            yield [
                "rocprof-counters",
                r[pos["counter_name"]],
                r[pos["kernel_name"]],
                to_float(r[pos["counter_value"]], f"{path.name} Counter_Value"),
                None if ts is None else to_int(r[ts], f"{path.name} Start_Timestamp"),
            ]

    return bulk.insert("counters", ("source", "name", "key", "value", "t_ns"), rows())


def _import_stats(bulk: BulkWriter, path: Path, text: str, header: list[str]) -> int:
    pos = _index(path, header, ("name", "calls", "totaldurationns"))
    stem = re.sub(r"^\d+_", "", path.stem)  # "<pid>_hip_api_stats" -> "hip_api_stats"
    cols = [(c, header[pos[c]]) for c in _STATS_VALUES if c in pos]

    def rows() -> Iterator[list[Any]]:
        for r in _rows(path, text, len(header)):
            for c, original in cols:
                v = to_float(r[pos[c]], f"{path.name} {original}")
                yield [f"rocprof-stats:{stem}", original.strip(), r[pos["name"]], v, None]

    return bulk.insert("counters", ("source", "name", "key", "value", "t_ns"), rows())


def read_agent_info(path: Path) -> list[GpuAgent]:
    """The GPU agents of rocprofv3's ``<pid>_agent_info.csv`` (rocprofiler-sdk generateCSV.cpp:
    Node_Id, Logical_Node_Id, Agent_Type, ..., Name, Vendor_Name, Product_Name, Model_Name).
    A kernel trace's Agent_Id is "Agent <node id>" (6.3, or 7.x ``--agent-index absolute``) or
    "Agent <logical node id>" (7.x's default): each agent answers to both. With
    ``--agent-index type-relative`` it is "GPU <n>": the n-th GPU counted from 0 in logical
    node order (rocprofiler-sdk agent.cpp numbers ``logical_node_type_id`` per type in the same
    pass as ``logical_node_id``); the file has no column for n, so it is each GPU row's place
    among the GPU rows by Logical_Node_Id (by Node_Id, then file order, where that is absent;
    unknown where a GPU row leaves it empty)."""
    text = read_text(path, "CSV")
    header = _header_of(path, text)
    pos = _index(path, header, ("agent_type", "name"))
    ids = [pos[c] for c in ("node_id", "logical_node_id") if c in pos]
    order_by = next((pos[c] for c in ("logical_node_id", "node_id") if c in pos), None)
    product, model = pos.get("product_name"), pos.get("model_name")
    gpus = []
    for r in _rows(path, text, len(header)):
        if r[pos["agent_type"]].strip().upper() != "GPU":
            continue
        # no id column: the file's order (rocprofv3 writes the rows sorted by node id)
        key = 0 if order_by is None else to_int(r[order_by], f"{path.name} {header[order_by]}")
        gpus.append((key, len(gpus), r))
    # a row without the ordering id leaves the GPU indices unknown (never guessed)
    ordered = (None if any(k is None for k, _, _ in gpus)
               else {at: i for i, (_, at, _) in enumerate(sorted(gpus, key=lambda g: g[:2]))})  # fmt: skip
    return [
        gpu_agent(
            [to_int(r[i], f"{path.name} {header[i]}") for i in ids],
            r[pos["name"]],
            None if product is None else r[product],
            None if model is None else r[model],
            None if ordered is None else ordered[at],
        )
        for _, at, r in gpus
    ]


def import_csv(
    bulk: BulkWriter, path: Path, summary: ImportSummary, use_arrow: bool = True
) -> KernelColumns | None:
    """Import one rocprofv3 CSV. Kernel traces are returned (stored after annotation), the other
    kinds are stored at once. Raises MlaprofError on anything unexpected."""
    text: str | None = None
    kind = sniff(path)
    if kind == KERNEL and use_arrow:
        header = _kernel_header(path)
    else:
        text = read_text(path, "CSV")
        if not text.strip():
            raise MlaprofError(f"{path} is empty")
        header = _header_of(path, text)
        kind = classify(header)
    if kind is None:
        near = _kernel_columns_missing(header)
        if near:  # a kernel trace without a column it needs: named, not "not a rocprofv3 CSV"
            raise MlaprofError(
                f"{path}: a kernel trace CSV missing {plural('column(s)', len(near))} "
                f"{', '.join(near)} (rocprofv3's kernel_trace.csv has Kernel_Name, Start_Timestamp, End_Timestamp, Grid_Size_X)"
            )
        shown = ", ".join(header[:6])[:120]
        raise MlaprofError(f"{path}: not a rocprofv3 CSV (header: {shown})")
    kernels = None
    if kind == KERNEL:
        kernels = read_kernels(path, text, header, use_arrow)
    elif kind == AGENT_INFO:
        pass  # read for the rank's device (read_agent_info), no table of its own
    else:
        body = text if text is not None else read_text(path, "CSV")
        fn = {
            API: _import_api,
            MEMCPY: _import_memcpy,
            ALLOC: _import_alloc,
            COUNTER: _import_counters,
            STATS: _import_stats,
        }[kind]
        table = {API: "api", MEMCPY: "transfers", ALLOC: "transfers"}.get(kind, "counters")
        summary.add(table, fn(bulk, path, body, header))
    summary.files.append(str(path))
    return kernels
