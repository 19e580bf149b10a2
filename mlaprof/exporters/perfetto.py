"""Export a run as a Chrome JSON trace that Perfetto UI (and chrome://tracing) loads.

Tracks: one process per GPU with a thread per stream, host API/marker threads, and an "mlaprof"
process with step and per-layer slices. Perfetto needs the slices of one track to nest, so every
track is split into lanes: a slice goes on the first lane where it either starts after the open
slices end or fits inside the innermost open one. Counter tracks: S used / S deserved per step,
padding rows, capture memory. Flow arrows join each launch call to the kernels it launched (by
correlation id; a graph launch fans out to all its kernels).

Timestamps are microseconds written with three decimals, so the nanoseconds are exact.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mlaprof.errors import MlaprofError, disk_message
from mlaprof.store.rows import rows

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

_TS = re.compile(r'"@mlaprof-ns:(-?\d+)"')
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
PID_HOST = 2
PID_GPU0 = 10


def _ts(ns: int) -> str:
    return f"@mlaprof-ns:{int(ns)}"


def _us(m: re.Match[str]) -> str:
    ns = int(m.group(1))
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


def build_trace(run: Run) -> dict[str, Any]:
    kernels = [k for k in rows(run, "kernels") if k["start_ns"] is not None]
    api = [a for a in rows(run, "api") if a["start_ns"] is not None]
    steps = rows(run, "steps")
    layers = rows(run, "layers")
    ev: list[dict[str, Any]] = []
    threads: dict[tuple[int, str], int] = {}

    def tid_for(pid: int, label: str) -> int:
        key = (pid, label)
        if key not in threads:
            threads[key] = len([k for k in threads if k[0] == pid]) + 1
            ev.append(
                {
                    "ph": "M",
                    "pid": pid,
                    "tid": threads[key],
                    "name": "thread_name",
                    "args": {"name": label},
                }
            )
            ev.append(
                {
                    "ph": "M",
                    "pid": pid,
                    "tid": threads[key],
                    "name": "thread_sort_index",
                    "args": {"sort_index": threads[key]},
                }
            )
        return threads[key]

    def proc(pid: int, name: str) -> None:
        ev.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}})

    proc(PID_MLAPROF, f"mlaprof {run.name}")
    # kernels: one process per device, one thread per stream and lane
    by_track: dict[tuple[Any, Any], list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
    for k in kernels:
        end = k["end_ns"] if k["end_ns"] is not None else k["start_ns"]
        by_track[(k["rank"], k["device"]), k["stream"]].append((k["start_ns"], end, k))
    gpu_pid: dict[tuple[Any, Any], int] = {}
    kernel_pos: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # corr -> (pid,tid,ts)
    for (dev_key, stream), items in sorted(by_track.items(), key=lambda t: str(t[0])):
        if dev_key not in gpu_pid:
            gpu_pid[dev_key] = PID_GPU0 + len(gpu_pid)
            rank, dev = dev_key
            proc(gpu_pid[dev_key], f"GPU {dev if dev is not None else '?'} (rank {rank})")
        pid = gpu_pid[dev_key]
        for s, e, k, lane in _laned(items):
            tid = tid_for(pid, f"stream {stream}" + (f" lane {lane}" if lane else ""))
            args = {
                c: k[c]
                for c in (
                    "correlation",
                    "step",
                    "layer",
                    "replay",
                    "splits",
                    "graph_id",
                    "graph_node_id",
                )
                if k[c] is not None
            }
            args["grid"] = [k["grid_x"], k["grid_y"], k["grid_z"]]
            args["block"] = [k["block_x"], k["block_y"], k["block_z"]]
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": k["name"] or "kernel",
                    "pid": pid,
                    "tid": tid,
                    "ts": _ts(s),
                    "dur": _ts(e - s),
                    "args": args,
                }
            )
            if k["correlation"] is not None:
                kernel_pos[k["correlation"]].append((pid, tid, s))
    # host API calls and markers
    if api:
        proc(PID_HOST, "host")
    flow_id = 0
    by_thread: dict[Any, list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
    for a in api:
        end = a["end_ns"] if a["end_ns"] is not None else a["start_ns"]
        by_thread[(a["pid"], a["tid"])].append((a["start_ns"], end, a))
    for (apid, atid), items in sorted(by_thread.items(), key=lambda t: str(t[0])):
        for s, e, a, lane in _laned(items):
            tid = tid_for(PID_HOST, f"pid {apid} tid {atid}" + (f" lane {lane}" if lane else ""))
            ev.append(
                {
                    "ph": "X",
                    "cat": a["domain"] or "api",
                    "name": a["function"] or "?",
                    "pid": PID_HOST,
                    "tid": tid,
                    "ts": _ts(s),
                    "dur": _ts(e - s),
                    "args": {"correlation": a["correlation"]},
                }
            )
            for kpid, ktid, kts in kernel_pos.get(a["correlation"], []) if a["correlation"] else []:
                flow_id += 1
                ev.append(
                    {
                        "ph": "s",
                        "cat": "launch",
                        "name": "launch",
                        "id": flow_id,
                        "pid": PID_HOST,
                        "tid": tid,
                        "ts": _ts(s),
                    }
                )
                ev.append(
                    {
                        "ph": "f",
                        "bp": "e",
                        "cat": "launch",
                        "name": "launch",
                        "id": flow_id,
                        "pid": kpid,
                        "tid": ktid,
                        "ts": _ts(kts),
                    }
                )
    # steps and per-layer slices, each kind on its own laned tracks
    step_t = {
        (st["rank"], st["step"]): st["t_start_ns"] for st in steps if st["t_start_ns"] is not None
    }
    for cat, recs, args in (("step", steps, _STEP_ARGS), ("layer", layers, _LAYER_ARGS)):
        items = [
            (r["t_start_ns"], r["t_start_ns"] + (r["duration_ns"] or 0), r)
            for r in recs
            if r["t_start_ns"] is not None
        ]
        for s, e, r, lane in _laned(items):
            track = f"{cat}s rank {r['rank']}" + (f" lane {lane}" if lane else "")
            ev.append(
                {
                    "ph": "X",
                    "cat": cat,
                    "name": f"{cat} {r[cat]}",
                    "pid": PID_MLAPROF,
                    "tid": tid_for(PID_MLAPROF, track),
                    "ts": _ts(s),
                    "dur": _ts(e - s),
                    "args": {c: r[c] for c in args},
                }
            )
    _counters(run, ev, step_t, kernels)
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {"mlaprof_run": run.name, "source": run.meta.get("source")},
    }


def _counters(
    run: Run,
    ev: list[dict[str, Any]],
    step_t: dict[tuple[int, int], int],
    kernels: list[dict[str, Any]],
) -> None:
    """Counter tracks at each step's start time (steps without a time use the step index)."""
    t0 = min(step_t.values(), default=min((k["start_ns"] for k in kernels), default=0))

    def when(rank: int, step: Any) -> int:
        if (rank, step) in step_t:
            return step_t[(rank, step)]
        return t0 + int(step or 0) * 1000

    for sp in rows(run, "splits"):
        args = {}
        if sp["used"] is not None:
            args["used"] = sp["used"]
        if sp["deserved"] is not None:
            args["deserved"] = sp["deserved"]
        if args:
            ev.append(
                {
                    "ph": "C",
                    "pid": PID_MLAPROF,
                    "name": f"S {sp['policy']}",
                    "ts": _ts(when(sp["rank"], sp["step"])),
                    "args": args,
                }
            )
    # per-layer S (imported traces carry S on their layers, not in a splits table)
    for ly in rows(run, "layers"):
        args = {
            k: ly[c]
            for k, c in (("used", "splits_used"), ("deserved", "splits_deserved"))
            if ly[c] is not None
        }
        if args and ly["t_start_ns"] is not None:
            ev.append(
                {
                    "ph": "C",
                    "pid": PID_MLAPROF,
                    "name": f"S layer (rank {ly['rank']})",
                    "ts": _ts(ly["t_start_ns"]),
                    "args": args,
                }
            )
    for pd_ in rows(run, "padding"):
        ev.append(
            {
                "ph": "C",
                "pid": PID_MLAPROF,
                "name": "padding rows",
                "ts": _ts(when(pd_["rank"], pd_["step"])),
                "args": {"real": pd_["real_rows"] or 0, "padding": pd_["padding_rows"] or 0},
            }
        )
    for i, m in enumerate(rows(run, "memory")):
        b = m["pool_bytes"] if m["pool_bytes"] is not None else m["driver_bytes"]
        if b is None:
            continue
        ev.append(
            {
                "ph": "C",
                "pid": PID_MLAPROF,
                "name": f"capture memory {m['graph_mode'] or ''}".strip(),
                "ts": _ts(t0 + i * 1000),
                "args": {"bytes": b, "capture_size": m["capture_size"] or 0},
            }
        )


def _dump(obj: Any) -> str:
    return _TS.sub(_us, json.dumps(obj, separators=(",", ":"), default=str))


def write_trace(f: TextIO, trace: dict[str, Any]) -> None:
    """The trace as JSON, one event at a time: the largest string held is one event's, never
    the whole file (a trace of 10 MB kernel names used to need gigabytes)."""
    f.write('{"traceEvents":[')
    for i, e in enumerate(trace["traceEvents"]):
        if i:
            f.write(",")
        f.write(_dump(e))
    f.write("]")
    for k, v in trace.items():
        if k != "traceEvents":
            f.write(f",{json.dumps(k)}:{_dump(v)}")
    f.write("}")


def export_perfetto(run: Run, out: Path) -> dict[str, int]:
    if out.exists():
        raise MlaprofError(f"{out} already exists; refusing to overwrite")
    trace = build_trace(run)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            write_trace(f, trace)
        os.replace(tmp, out)
    except OSError as e:
        with contextlib.suppress(OSError):  # a read-only folder refuses this too
            tmp.unlink(missing_ok=True)
        raise MlaprofError(f"cannot write {out}: {disk_message(e, out.parent)}") from None
    evs = trace["traceEvents"]
    return {
        "slices": sum(1 for e in evs if e["ph"] == "X"),
        "counters": sum(1 for e in evs if e["ph"] == "C"),
        "flows": sum(1 for e in evs if e["ph"] == "s"),
    }
