"""Export a run as a Chrome JSON trace that Perfetto UI (and chrome://tracing) loads.

Tracks, every one keyed by rank: per rank a process per GPU with a thread per stream and a host
process with a thread per API/marker thread; an "mlaprof" process with step and per-layer
slices and counters per rank. Perfetto needs the slices of one track to nest, so every track is
split into lanes: a slice goes on the first lane where it either starts after the open slices
end or fits inside the innermost open one. Counter tracks: S used / S deserved per step, padding
rows, capture memory. Flow arrows join each launch call to the kernels it launched, by rank and
correlation id (every process numbers its correlations from 1 again), one flow per launched
kernel (a graph launch fans out to all its kernels).

Streamed: the trace is written rank by rank, each event as it is made, and time is linear in
the ranks. Within a rank a table of more than ``HOLD_ROWS`` rows stored in start order (as an
import stores them) is laned as it streams past; a smaller one, or one in another order, is held
and sorted per track (bench/perfetto_fleet_bench.py).

Timestamps are microseconds written with three decimals, so the nanoseconds are exact, and
relative to the run's earliest time, written as ``baseTimeNanoseconds`` at the top level (as
Kineto writes its traces) and in ``otherData``: absolute epoch times (~1.8e15 us) keep only
about 0.25 us in a double, so a reader that parses JSON numbers as doubles (most do) would see
adjacent slices overlap; relative times keep every nanosecond in a double for days of trace.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mlaprof.errors import MlaprofError, disk_message
from mlaprof.store.rows import count_rows, iter_batches, iter_rows, typed
from mlaprof.store.schema import TABLES

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

_TS = re.compile(r'"@mlaprof-ns:(-?\d+)"')
_DUR = re.compile(r'"@mlaprof-dur:(-?\d+)"')
PID_MLAPROF = 1
_STEP_ARGS = (
    "num_reqs",
    "num_real_reqs",
    "qlen",
    "padded_tokens",
    "graph_mode",
    "backend",
    "timing",
)
_LAYER_ARGS = ("step", "syncs", "splits_used", "splits_deserved")
PID_GPU0 = 10


def _ts(ns: int) -> str:
    """A point in time: written relative to the export's base."""
    return f"@mlaprof-ns:{int(ns)}"


def _dur(ns: int) -> str:
    """A length of time: written as it is (never moved by the base)."""
    return f"@mlaprof-dur:{int(ns)}"


def _rel_us(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


class Lanes:
    """Assigns slices (start, end) to lanes on which they nest properly."""

    def __init__(self) -> None:
        self.stacks: list[list[int]] = []

    def place(self, start: int, end: int) -> int:
        for i, stack in enumerate(self.stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                return i
        self.stacks.append([end])
        return len(self.stacks) - 1


def _laned(
    items: Iterable[tuple[int, int, Any]],
) -> list[tuple[int, int, Any, int]]:
    """(start, end, payload) -> (start, end, payload, lane), longest first at equal starts."""
    lanes = Lanes()
    out = []
    for s, e, p in sorted(items, key=lambda t: (t[0], -t[1])):
        out.append((s, e, p, lanes.place(s, e)))
    return out


class _Sink:
    """Writes each event as it is made (the largest string held is one event's) and counts
    slices, counters and flows."""

    def __init__(self, f: TextIO, base_ns: int = 0) -> None:
        self.f = f
        self.n = 0
        self.base_ns = base_ns  # every timestamp is written relative to it
        self.counts = {"slices": 0, "counters": 0, "flows": 0}

    def slice(self, text: str) -> None:
        """An X event already written as JSON (:func:`_kernel_text`)."""
        self.f.write(("," if self.n else "") + text)
        self.n += 1
        self.counts["slices"] += 1

    def write_many(self, text: str, n: int, kind: str = "slices") -> None:
        """``n`` events of one ``kind`` (X: slices, C: counters) already written as JSON and
        joined by commas."""
        if n:
            self.f.write(("," if self.n else "") + text)
            self.n += n
            self.counts[kind] += n

    def __call__(self, e: dict[str, Any]) -> None:
        self.f.write(("," if self.n else "") + _dump(e, self.base_ns))
        self.n += 1
        ph = e["ph"]
        if ph == "X":
            self.counts["slices"] += 1
        elif ph == "C":
            self.counts["counters"] += 1
        elif ph == "s":
            self.counts["flows"] += 1


class _Tracks:
    """Perfetto processes and threads, named once each: a process per rank's host and per
    rank's GPU, a thread per track (and lane) inside it."""

    def __init__(self, emit: _Sink) -> None:
        self.emit = emit
        self.next_pid = PID_GPU0
        self.tids: dict[tuple[int, str], int] = {}
        self.n_tids: dict[int, int] = defaultdict(int)

    def process(self, name: str, pid: int | None = None) -> int:
        if pid is None:
            pid, self.next_pid = self.next_pid, self.next_pid + 1
        self.emit({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}})
        return pid

    def thread(self, pid: int, label: str) -> int:
        key = (pid, label)
        tid = self.tids.get(key)
        if tid is None:
            self.n_tids[pid] += 1
            tid = self.tids[key] = self.n_tids[pid]
            self.emit({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                       "args": {"name": label}})  # fmt: skip
            self.emit({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                       "args": {"sort_index": tid}})  # fmt: skip
        return tid

    def forget(self, pids: Iterable[int]) -> None:
        """A finished rank's tracks are never named again: their keys are dropped."""
        gone = set(pids)
        self.tids = {k: v for k, v in self.tids.items() if k[0] not in gone}


# a rank's table of at most this many rows is read once and sorted per track in memory; a larger
# one is read twice (is it in start order?) and then laned as it streams past
HOLD_ROWS = 50_000

_KERNEL_ARGS = ("correlation", "step", "layer", "replay", "splits", "graph_id", "graph_node_id")


def stream_trace(run: Run, f: TextIO) -> dict[str, int]:
    """Write the run's trace to ``f`` rank by rank, each event as it is made: memory holds at
    most one rank's rows (see the module's doc), time is linear in the ranks. Every track and flow is keyed by rank: each rank's
    host calls and GPUs are their own processes, and a launch joins the kernels of its own rank
    (correlation ids restart in every process), so each launched kernel has exactly one flow."""
    base = base_ns(run)
    f.write(f'{{"baseTimeNanoseconds":{base},"traceEvents":[')
    emit = _Sink(f, base)
    tracks = _Tracks(emit)
    tracks.process(f"mlaprof {run.name}", PID_MLAPROF)
    flows = 0
    for rank in run.ranks:
        pids = _rank_slices(run, rank, emit, tracks)
        flows = _rank_host_and_kernels(run, rank, emit, tracks, pids, flows)
        tracks.forget(pids.values())
    f.write("]")
    other = {"mlaprof_run": run.name, "source": run.meta.get("source"), "ranks": run.ranks,
             "baseTimeNanoseconds": base}  # fmt: skip
    f.write(f',"displayTimeUnit":"ns","otherData":{_dump(other)}}}')
    return emit.counts


def _scan(
    rows: Callable[[], Iterable[dict[str, Any]]],
    n: int,
    see: Callable[[dict[str, Any]], None] | None = None,
) -> bool:
    """Whether the ``n`` rows are laned as they stream: more than :data:`HOLD_ROWS` of them in
    start order (an import stores them so: one pass to check, each row with a start shown to
    ``see`` on the way). A small table is held and sorted instead (one read, not two; ``see``
    is not called)."""
    if n <= HOLD_ROWS:
        return False
    last, ordered = None, True
    for r in rows():
        s = r["start"]
        if s is None:
            continue
        if see is not None:
            see(r)
        if last is not None and s < last:
            ordered = False
            if see is None:
                break
        last = s
    return ordered


def _spans(
    rows: Callable[[], Iterable[dict[str, Any]]],
    track: Callable[[dict[str, Any]], Any],
    ordered: bool,
) -> Iterator[tuple[Any, int, int, dict[str, Any], int]]:
    """``(track, start, end, row, lane)`` for the rows with a start (``row["start"]``,
    ``row["end"]``), each track laned. Rows in start order are laned as they stream past (held:
    the rows of one start time, longest first); otherwise they are held per track and sorted."""
    if not ordered:
        by: dict[Any, list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
        for r in rows():
            if r["start"] is not None:
                by[track(r)].append((r["start"], r["end"], r))
        for key, items in sorted(by.items(), key=lambda t: str(t[0])):
            for s, e, r, lane in _laned(items):
                yield key, s, e, r, lane
            del items[:]  # a finished track's rows go before the next one's are laned
        return
    lanes: dict[Any, Lanes] = defaultdict(Lanes)
    group: list[dict[str, Any]] = []
    for r in itertools.chain(rows(), [None]):  # None: the end, which flushes the last group
        if r is not None and r["start"] is None:
            continue
        if group and (r is None or r["start"] != group[0]["start"]):
            for g in sorted(group, key=lambda g: -g["end"]):
                key = track(g)
                yield key, g["start"], g["end"], g, lanes[key].place(g["start"], g["end"])
            group = []
        if r is not None:
            group.append(r)


def _timed(rows: Iterable[dict[str, Any]], start: str, dur: str | None = None) -> Iterator[dict]:
    """Rows with ``start`` / ``end`` keys (an unknown end is the start: a zero-length slice)."""
    for r in rows:
        s = r[start]
        if dur is not None:
            e = s + (r[dur] or 0) if s is not None else None
        else:
            e = r["end_ns"] if r["end_ns"] is not None else s
        yield {**r, "start": s, "end": e}


def _rank_slices(run: Run, rank: int, emit: _Sink, tracks: _Tracks) -> dict[Any, int]:
    """One rank's steps and layers (laned tracks of the mlaprof process) and its counters;
    returns the rank's processes made so far (none yet: its host and GPUs come later)."""
    step_t: dict[Any, int] = {}
    for cat, table, args in (("step", "steps", _STEP_ARGS), ("layer", "layers", _LAYER_ARGS)):

        def recs(table: str = table) -> Iterator[dict[str, Any]]:
            return _timed(iter_rows(run, table, rank), "t_start_ns", "duration_ns")

        def emit_row(
            _key: Any, s: int, e: int, r: dict[str, Any], lane: int, cat: str = cat,
            args: tuple[str, ...] = args,
        ) -> None:  # fmt: skip
            track = f"{cat}s rank {rank}" + (f" lane {lane}" if lane else "")
            emit({"ph": "X", "cat": cat, "name": f"{cat} {r[cat]}", "pid": PID_MLAPROF,
                  "tid": tracks.thread(PID_MLAPROF, track), "ts": _ts(s), "dur": _dur(e - s),
                  "args": {c: r[c] for c in args}})  # fmt: skip
            if cat == "step":
                step_t.setdefault(r["step"], s)

        n = count_rows(run, table, rank)
        if cat == "layer" and n > HOLD_ROWS and typed(run, table, rank, _LAYER_COLS):
            if _scan_batches(run, rank, table, "t_start_ns"):
                _stream_layers(run, rank, emit, tracks, emit_row)
                continue
            ordered = False
        else:
            ordered = _scan(recs, n)
        for key, s, e, r, lane in _spans(recs, lambda r: 0, ordered):
            emit_row(key, s, e, r, lane)
    _counters(run, rank, emit, step_t)
    return {}


def _rank_api(
    run: Run,
    rank: int,
    emit: _Sink,
    tracks: _Tracks,
    pids: dict[Any, int],
    wanted: set[int] | None,
) -> dict[int, tuple[int, int, int]]:
    """One rank's host calls on its own host process; returns, per correlation id in ``wanted``
    (the rank's kernels'; None: every id), the first call that carries it (pid, tid, start): the
    launch its kernels' flows start from."""

    def calls() -> Iterator[dict[str, Any]]:
        return _timed(iter_rows(run, "api", rank), "start_ns")

    ordered = _scan(calls, count_rows(run, "api", rank))
    launches: dict[int, tuple[int, int, int]] = {}
    for (apid, atid), s, e, a, lane in _spans(calls, lambda a: (a["pid"], a["tid"]), ordered):
        if "host" not in pids:
            pids["host"] = tracks.process(_host_name(run, rank))
        pid = pids["host"]
        tid = tracks.thread(pid, f"pid {apid} tid {atid}" + (f" lane {lane}" if lane else ""))
        emit({"ph": "X", "cat": a["domain"] or "api", "name": a["function"] or "?", "pid": pid,
              "tid": tid, "ts": _ts(s), "dur": _dur(e - s),
              "args": {"correlation": a["correlation"]}})  # fmt: skip
        c = a["correlation"]
        keep = c is not None and (wanted is None or c in wanted)
        if keep and (c not in launches or s < launches[c][2]):
            launches[c] = (pid, tid, s)
    return launches


def _host_name(run: Run, rank: int) -> str:
    """The rank's host process: its rank, and the host folder and pid an import names."""
    src = next(
        (
            r
            for r in run.meta.get("rank_sources") or []
            if isinstance(r, dict) and r.get("rank") == rank
        ),
        {},
    )
    where = ", ".join(f"{k} {src[k]}" for k in ("host", "pid") if src.get(k) is not None)
    return f"host rank {rank}" + (f" ({where})" if where else "")


def _rank_host_and_kernels(
    run: Run, rank: int, emit: _Sink, tracks: _Tracks, pids: dict[Any, int], flow_id: int
) -> int:
    """One rank's host calls, then its kernels: a process per GPU, a thread per stream and
    lane; one flow from its launch to each kernel whose correlation id a host call of this rank
    carries. Memory: the rank's distinct correlation ids and the tracks' open slices (kernels
    held only when they are not stored in start order)."""
    wanted: set[int] = set()

    def kernels() -> Iterator[dict[str, Any]]:
        return _timed(iter_rows(run, "kernels", rank), "start_ns")

    def see(k: dict[str, Any]) -> None:
        if k["correlation"] is not None:
            wanted.add(k["correlation"])

    n = count_rows(run, "kernels", rank)
    if n > HOLD_ROWS and typed(run, "kernels", rank, ["start_ns", "correlation"]):
        ordered = _scan_batches(run, rank, "kernels", "start_ns", wanted)
    else:
        ordered = _scan(kernels, n, see)
    # a big rank keeps only the launches of its kernels; a small one every call's (no 2nd read)
    launches = _rank_api(run, rank, emit, tracks, pids, wanted if n > HOLD_ROWS else None)
    wanted.clear()

    def emit_row(key: tuple[Any, Any], s: int, e: int, k: dict[str, Any], lane: int) -> None:
        nonlocal flow_id
        dev, stream = key
        if ("gpu", dev) not in pids:
            name = f"GPU {dev if dev is not None else '?'} (rank {rank})"
            pids["gpu", dev] = tracks.process(name)
        pid = pids["gpu", dev]
        tid = tracks.thread(pid, f"stream {stream}" + (f" lane {lane}" if lane else ""))
        text = _kernel_text(k, pid, tid, s, e, emit.base_ns)
        if text is not None:
            emit.slice(text)
        else:
            args = {c: k[c] for c in _KERNEL_ARGS if k[c] is not None}
            args["grid"] = [k["grid_x"], k["grid_y"], k["grid_z"]]
            args["block"] = [k["block_x"], k["block_y"], k["block_z"]]
            emit({"ph": "X", "cat": "kernel", "name": k["name"] or "kernel", "pid": pid,
                  "tid": tid, "ts": _ts(s), "dur": _dur(e - s), "args": args})  # fmt: skip
        launch = launches.get(k["correlation"]) if k["correlation"] is not None else None
        if launch is not None:
            flow_id += 1
            emit({"ph": "s", "cat": "launch", "name": "launch", "id": flow_id,
                  "pid": launch[0], "tid": launch[1], "ts": _ts(launch[2])})  # fmt: skip
            emit({"ph": "f", "bp": "e", "cat": "launch", "name": "launch", "id": flow_id,
                  "pid": pid, "tid": tid, "ts": _ts(s)})  # fmt: skip

    if ordered and typed(run, "kernels", rank, _KERNEL_COLS):
        _stream_kernels(run, rank, emit, tracks, pids, launches, emit_row)
        return flow_id
    for key, s, e, k, lane in _spans(kernels, lambda k: (k["device"], k["stream"]), ordered):
        emit_row(key, s, e, k, lane)
    return flow_id


_KERNEL_COLS = [c for c, _ in TABLES["kernels"]]


def _scan_batches(
    run: Run, rank: int, table: str, start_col: str, wanted: set[int] | None = None
) -> bool:
    """:func:`_scan` of a big rank's typed rows an Arrow batch at a time: whether the rows with
    a start are stored in start order; the correlation ids of those rows go into ``wanted``."""
    import numpy as np
    import pyarrow.compute as pc

    cols = [start_col] + (["correlation"] if wanted is not None else [])
    last, ordered = None, True
    for batch in iter_batches(run, table, rank, cols):
        batch = batch.filter(pc.is_valid(batch.column(start_col)))
        if not batch.num_rows:
            continue
        start = batch.column(start_col).to_numpy()
        if ordered and (np.any(start[1:] < start[:-1]) or (last is not None and start[0] < last)):
            ordered = False
            if wanted is None:
                break
        last = int(start[-1])
        if wanted is not None:
            wanted.update(pc.unique(pc.drop_null(batch.column("correlation"))).to_pylist())
    return ordered


class _Ordered:
    """Rows stored in start order, laned as they stream past (what :func:`_spans` does for
    them), a batch at a time: ``slow`` takes rows one by one (the rows of one start time held,
    then placed longest first); ``fast`` places a whole batch at once where every row would go
    on lane 0 of its track."""

    def __init__(self, emit_row: Callable[[Any, int, int, dict[str, Any], int], None]) -> None:
        self.emit_row = emit_row
        self.lanes: dict[Any, Lanes] = defaultdict(Lanes)
        self.group: list[tuple[Any, dict[str, Any]]] = []  # (track, row) of one start time

    def flush(self) -> None:
        for key, g in sorted(self.group, key=lambda t: -t[1]["end"]):
            self.emit_row(key, g["start"], g["end"], g, self.lanes[key].place(g["start"], g["end"]))
        self.group.clear()

    def slow(self, rows: Iterable[tuple[Any, dict[str, Any]]]) -> None:
        for key, r in rows:
            if self.group and r["start"] != self.group[0][1]["start"]:
                self.flush()
            self.group.append((key, r))

    def fast(self, start: Any, end: Any, keys: list[Any]) -> tuple[list[Any], Any] | None:
        """Whether rows with these starts, ends (numpy int64) and tracks, the batch's all but
        last (``start`` has one more: the next row's), would each be placed alone on lane 0 of
        its track: then (the tracks in order of first use, each row's index into them), and
        the pending rows are written; else None. :meth:`commit` then records their ends."""
        import numpy as np

        # every start its own group: strictly increasing, and after the pending group's
        if np.any(start[1:] <= start[:-1]) or (
            self.group and start[0] <= self.group[0][1]["start"]
        ):
            return None
        self.flush()  # the pending group starts before every row here
        uniq = list(dict.fromkeys(keys))
        code = {k: i for i, k in enumerate(uniq)}
        codes = np.fromiter(map(code.__getitem__, keys), dtype=np.int64, count=len(keys))
        for i, key in enumerate(uniq):
            at = np.flatnonzero(codes == i) if len(uniq) > 1 else slice(None, len(keys))
            s, e = start[at], end[at]
            if np.any(s[1:] < e[:-1]):  # overlaps its track's previous row: another lane
                return None
            stacks = self.lanes[key].stacks if key in self.lanes else []
            if stacks and stacks[0] and stacks[0][0] > s[0]:  # the track's lane 0 still open
                return None
        return uniq, codes

    def commit(self, uniq: list[Any], codes: Any, end: Any) -> None:
        """The lanes after :meth:`fast`'s rows were placed: each track's lane 0 holds its last
        row's end (placing them popped the rest)."""
        import numpy as np

        for i, key in enumerate(uniq):
            last = int(end[np.flatnonzero(codes == i)[-1]]) if len(uniq) > 1 else int(end[-1])
            self.lanes[key].stacks[:1] = [[last]]


def _stream_kernels(
    run: Run,
    rank: int,
    emit: _Sink,
    tracks: _Tracks,
    pids: dict[Any, int],
    launches: dict[int, tuple[int, int, int]],
    emit_row: Callable[[Any, int, int, dict[str, Any], int], None],
) -> None:
    """A rank's kernels stored in start order, an Arrow batch at a time (:class:`_Ordered`):
    a batch whose kernels each go on lane 0 of a track already named, with no flow and no
    marker in a name, is written by :func:`_kernel_texts` (its last row held back, in case the
    next batch's first starts with it); any other goes row by row through ``emit_row``."""
    import pyarrow.compute as pc

    order = _Ordered(emit_row)

    def rows(batch: Any) -> Iterator[tuple[Any, dict[str, Any]]]:
        for r in batch.to_pylist():
            end = r["end_ns"] if r["end_ns"] is not None else r["start_ns"]
            yield (r["device"], r["stream"]), {**r, "start": r["start_ns"], "end": end}

    flow_ids = _int_array(list(launches)) if launches else None
    for batch in iter_batches(run, "kernels", rank, _KERNEL_COLS):
        batch = batch.filter(pc.is_valid(batch.column("start_ns")))
        n = batch.num_rows
        text = _fast_kernels(batch, order, pids, tracks, flow_ids, emit.base_ns) if n > 1 else None
        if text is None:
            order.slow(rows(batch))
            continue
        emit.write_many(text, n - 1)
        order.slow(rows(batch.slice(n - 1)))
    order.flush()


def _int_array(values: list[Any]) -> Any:
    import pyarrow as pa

    return pa.array([v for v in values if type(v) is int], pa.int64())


def _fast_kernels(
    batch: Any, order: _Ordered, pids: dict[Any, int], tracks: _Tracks, flow_ids: Any, base: int
) -> str | None:
    """The X events of all but the last kernel of ``batch`` (starts known) as one text, where
    :meth:`_Ordered.fast` places them on named tracks and none starts a flow or carries a marker
    in its name; None (only the pending rows written) otherwise."""
    import pyarrow.compute as pc

    m = batch.num_rows - 1
    start = batch.column("start_ns").to_numpy()
    end = pc.coalesce(batch.column("end_ns"), batch.column("start_ns")).to_numpy()[:m]
    devs, streams = batch.column("device").to_pylist(), batch.column("stream").to_pylist()
    placed = order.fast(start, end, list(zip(devs[:m], streams[:m], strict=True)))
    if placed is None:
        return None
    uniq, codes = placed
    heads = []
    for dev, stream in uniq:
        pid = pids.get(("gpu", dev))
        tid = tracks.tids.get((pid, f"stream {stream}")) if pid is not None else None
        if tid is None:  # a track named by its first kernel: row by row
            return None
        heads.append(f',"pid":{pid},"tid":{tid},"ts":')
    head = batch.slice(0, m)
    flows = flow_ids is not None and len(flow_ids) > 0
    if flows and pc.any(pc.is_in(head.column("correlation"), value_set=flow_ids)).as_py():
        return None
    names = pc.fill_null(head.column("name"), "kernel")
    if pc.any(pc.match_substring(names, "@mlaprof-")).as_py():
        return None
    order.commit(uniq, codes, end)
    return _kernel_texts(head, names, codes, heads, end, base)


def _stream_layers(
    run: Run, rank: int, emit: _Sink, tracks: _Tracks, emit_row: Callable[..., None]
) -> None:
    """A rank's layers stored in start order, an Arrow batch at a time (:class:`_Ordered`),
    as :func:`_stream_kernels` writes kernels: a batch on lane 0 of the named layer track goes
    as one text (:func:`_layer_texts`), any other row by row through ``emit_row``."""
    import pyarrow.compute as pc

    order = _Ordered(emit_row)
    label = f"layers rank {rank}"

    def rows(batch: Any) -> Iterator[tuple[Any, dict[str, Any]]]:
        for r in batch.to_pylist():
            yield (
                0,
                {**r, "start": r["t_start_ns"], "end": r["t_start_ns"] + (r["duration_ns"] or 0)},
            )

    for batch in iter_batches(run, "layers", rank, _LAYER_COLS):
        batch = batch.filter(pc.is_valid(batch.column("t_start_ns")))
        n, m = batch.num_rows, batch.num_rows - 1
        tid = tracks.tids.get((PID_MLAPROF, label))
        placed = None
        if n > 1 and tid is not None:
            start = batch.column("t_start_ns").to_numpy()
            dur = pc.fill_null(batch.column("duration_ns"), 0).to_numpy()[:m]
            placed = order.fast(start, start[:m] + dur, [0] * m)
        if placed is None:
            order.slow(rows(batch))
            continue
        order.commit(placed[0], placed[1], start[:m] + dur)
        emit.write_many(_layer_texts(batch.slice(0, m), tid, emit.base_ns), m)
        order.slow(rows(batch.slice(m)))
    order.flush()


_LAYER_COLS = [c for c, _ in TABLES["layers"]]


def _layer_texts(batch: Any, tid: int, base: int) -> str:
    """The X event :func:`_rank_slices` writes for each layer of ``batch`` (lane 0, start
    known), joined by commas, built column by column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    start = batch.column("t_start_ns").to_numpy()
    dur = pc.fill_null(batch.column("duration_ns"), 0).to_numpy()
    name = pc.fill_null(batch.column("layer").cast(pa.string()), "None")
    pieces: list[Any] = ['{"ph":"X","cat":"layer","name":"layer ', name,
                         f'","pid":{PID_MLAPROF},"tid":{tid},"ts":', _us_text(start - base),
                         ',"dur":', _us_text(dur), ',"args":{']  # fmt: skip
    for i, c in enumerate(_LAYER_ARGS):
        pieces.append(("," if i else "") + f'"{c}":')
        pieces.append(pc.fill_null(batch.column(c).cast(pa.string()), "null"))
    pieces.append("}}")
    return _joined(pc.binary_join_element_wise(*pieces, ""))


def _layer_counters(batch: Any, tag: str, base: int) -> tuple[str, int]:
    """The "S layer" counter events :func:`_counters` writes for ``batch``'s layers (those with
    a start and S used or deserved), joined by commas, and how many."""
    import pyarrow as pa
    import pyarrow.compute as pc

    used, deserved = batch.column("splits_used"), batch.column("splits_deserved")
    keep = pc.and_(pc.is_valid(batch.column("t_start_ns")),
                   pc.or_(pc.is_valid(used), pc.is_valid(deserved)))  # fmt: skip
    batch = batch.filter(keep)
    if not batch.num_rows:
        return "", 0
    args = pc.binary_join_element_wise(
        pc.binary_join_element_wise('"used":', batch.column("splits_used").cast(pa.string()), ""),
        pc.binary_join_element_wise('"deserved":', batch.column("splits_deserved").cast(pa.string()), ""),
        ",",
        null_handling="skip",
    )  # fmt: skip
    start = batch.column("t_start_ns").to_numpy()
    name = json.dumps(f"S layer{tag}")
    texts = pc.binary_join_element_wise(f'{{"ph":"C","pid":{PID_MLAPROF},"name":{name},"ts":',
                                        _us_text(start - base), ',"args":{', args, "}}", "")  # fmt: skip
    return _joined(texts), batch.num_rows


def _joined(texts: Any) -> str:
    """An Arrow string column's values joined by commas, as one string."""
    import pyarrow as pa
    import pyarrow.compute as pc

    whole = pa.ListArray.from_arrays(pa.array([0, len(texts)], pa.int32()), texts)
    return pc.binary_join(whole, ",")[0].as_py()


def _kernel_texts(batch: Any, names: Any, codes: Any, heads: list[str], end: Any, base: int) -> str:
    """:func:`_kernel_text` of each row of ``batch``, joined by commas, built column by column
    (``heads[codes[i]]``: row i's pid and tid)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mlaprof.exporters.jsontext import json_values

    start = batch.column("start_ns").to_numpy()
    pieces: list[Any] = ['{"ph":"X","cat":"kernel","name":', json_values(names),
                         pa.array(heads, pa.string()).take(pa.array(codes)),
                         _us_text(start - base), ',"dur":', _us_text(end - start), ',"args":{']  # fmt: skip
    for c in _KERNEL_ARGS:
        v = batch.column(c).cast(pa.string())
        pieces.append(pc.fill_null(pc.binary_join_element_wise(f'"{c}":', v, ",", ""), ""))
    for label, dims in (("grid", _DIMS[:3]), ("block", _DIMS[3:])):
        pieces.append(f'"{label}":[' if label == "grid" else '],"block":[')
        for j, c in enumerate(dims):
            if j:
                pieces.append(",")
            pieces.append(pc.fill_null(batch.column(c).cast(pa.string()), "null"))
    pieces.append("]}}")
    return _joined(pc.binary_join_element_wise(*pieces, ""))


def _us_text(ns: Any) -> Any:
    """:func:`_rel_us` of each value of an int64 numpy array, as an Arrow string column."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    a = np.abs(ns)
    whole = pa.array(a // 1000).cast(pa.string())
    frac = pc.utf8_lpad(pa.array(a % 1000).cast(pa.string()), 3, "0")
    sign = pa.array(np.where(ns < 0, "-", ""), pa.string())
    return pc.binary_join_element_wise(sign, whole, ".", frac, "")


def _counters(run: Run, rank: int, emit: _Sink, step_t: dict[Any, int]) -> None:
    """One rank's counter tracks (named with the rank) at each step's start time (steps without
    a time use the step index after the rank's first step)."""
    t0 = min(step_t.values(), default=0)

    def when(step: Any) -> int:
        return step_t[step] if step in step_t else t0 + int(step or 0) * 1000

    tag = f" (rank {rank})"
    for sp in iter_rows(run, "splits", rank):
        args = {k: sp[k] for k in ("used", "deserved") if sp[k] is not None}
        if args:
            emit({"ph": "C", "pid": PID_MLAPROF, "name": f"S {sp['policy']}{tag}",
                  "ts": _ts(when(sp["step"])), "args": args})  # fmt: skip
    # per-layer S (imported traces carry S on their layers, not in a splits table)
    if typed(run, "layers", rank, _LAYER_COLS):
        for batch in iter_batches(run, "layers", rank, _LAYER_COLS):
            emit.write_many(*_layer_counters(batch, tag, emit.base_ns), "counters")
    else:
        for ly in iter_rows(run, "layers", rank):
            args = {
                k: ly[c]
                for k, c in (("used", "splits_used"), ("deserved", "splits_deserved"))
                if ly[c] is not None
            }
            if args and ly["t_start_ns"] is not None:
                emit({"ph": "C", "pid": PID_MLAPROF, "name": f"S layer{tag}",
                      "ts": _ts(ly["t_start_ns"]), "args": args})  # fmt: skip
    # an unknown count is left out of its counter (no sample), never drawn as 0
    for pd_ in iter_rows(run, "padding", rank):
        args = {k: pd_[c] for k, c in (("real", "real_rows"), ("padding", "padding_rows"))
                if pd_[c] is not None}  # fmt: skip
        if args:
            emit({"ph": "C", "pid": PID_MLAPROF, "name": f"padding rows{tag}",
                  "ts": _ts(when(pd_["step"])), "args": args})  # fmt: skip
    for i, m in enumerate(iter_rows(run, "memory", rank)):
        b = m["pool_bytes"] if m["pool_bytes"] is not None else m["driver_bytes"]
        if b is None:
            continue
        args = {"bytes": b}
        if m["capture_size"] is not None:
            args["capture_size"] = m["capture_size"]
        emit({"ph": "C", "pid": PID_MLAPROF,
              "name": f"capture memory {m['graph_mode'] or ''}".strip() + tag,
              "ts": _ts(t0 + i * 1000), "args": args})  # fmt: skip


_DIMS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


def _kernel_text(k: dict[str, Any], pid: int, tid: int, s: Any, e: Any, base: int) -> str | None:
    """A kernel's X event as :func:`_dump` writes it, without ``json.dumps`` and the marker
    passes (they were most of a big export's time); None for a row it does not cover (a value
    not an int, a name that is not text or carries a marker), which goes through :func:`_dump`."""
    name = k["name"] or "kernel"
    if type(name) is not str or "@mlaprof-" in name or type(s) is not int or type(e) is not int:
        return None
    parts = []
    for c in _KERNEL_ARGS:
        v = k[c]
        if v is not None:
            if type(v) is not int:
                return None
            parts.append(f'"{c}":{v}')
    dims = []
    for c in _DIMS:
        v = k[c]
        if v is not None and type(v) is not int:
            return None
        dims.append("null" if v is None else str(v))
    parts.append(f'"grid":[{",".join(dims[:3])}]')
    parts.append(f'"block":[{",".join(dims[3:])}]')
    return (
        f'{{"ph":"X","cat":"kernel","name":{json.dumps(name)},"pid":{pid},"tid":{tid},'
        f'"ts":{_rel_us(s - base)},"dur":{_rel_us(e - s)},"args":{{{",".join(parts)}}}}}'
    )


def _dump(obj: Any, base_ns: int = 0) -> str:
    text = json.dumps(obj, separators=(",", ":"), default=str)
    text = _TS.sub(lambda m: _rel_us(int(m.group(1)) - base_ns), text)
    return _DUR.sub(lambda m: _rel_us(int(m.group(1))), text)


# the timed columns of the tables the export writes (the base is their earliest value)
_TIMED = (("steps", "t_start_ns"), ("layers", "t_start_ns"), ("kernels", "start_ns"),
          ("api", "start_ns"))  # fmt: skip


def base_ns(run: Run) -> int:
    """The run's earliest timestamp over the exported tables (0 for a run without times): the
    base every exported time is relative to."""
    import pandas as pd  # run.query's frames are pandas': loaded already

    lows = ", ".join(f"(SELECT MIN({col}) FROM {table}) AS t{i}"
                     for i, (table, col) in enumerate(_TIMED))  # fmt: skip
    got = run.query(f"SELECT {lows}")
    # column by column: a row read across the columns (``iloc[0]``) is one float64 Series
    # where an empty table's MIN is NaN, and epoch nanoseconds (~1.8e18) lose up to 128 ns there
    firsts = (got[c].iloc[0] for c in got.columns) if len(got) else ()
    return min((int(v) for v in firsts if not pd.isna(v)), default=0)


def export_perfetto(run: Run, out: Path) -> dict[str, int]:
    if out.exists():
        raise MlaprofError(f"{out} already exists; refusing to overwrite")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            counts = stream_trace(run, f)
        os.replace(tmp, out)
    except OSError as e:
        with contextlib.suppress(OSError):  # a read-only folder refuses this too
            tmp.unlink(missing_ok=True)
        raise MlaprofError(f"cannot write {out}: {disk_message(e, out.parent)}") from None
    except BaseException:
        with contextlib.suppress(OSError):  # a stopped export leaves no partial file
            tmp.unlink(missing_ok=True)
        raise
    return counts
