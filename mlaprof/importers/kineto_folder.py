"""Which file of a PyTorch-profiler folder is which rank (vLLM 0.32's torch profiler, or any
``tensorboard_trace_handler`` folder).

torch writes ``{worker_name}.{time_ns}.pt.trace.json`` (``.gz`` with ``use_gzip``), default
worker name ``{hostname}_{pid}`` (torch 2.13 ``torch/profiler/profiler.py``
``tensorboard_trace_handler``). vLLM 0.32 names each worker's trace
``[{prefix}_]dp{d}_pp{p}_tp{t}_dcp{c}_ep{e}_rank{global_rank}`` (``vllm/distributed/utils.py``
``get_worker_rank_suffix`` L685-723, ``rank{N}`` alone before the parallel groups exist; set in
``vllm/v1/worker/gpu_worker.py`` L1386-1404) and the API server's CPU-only front-end trace
``[{prefix}_]{hostname}_{pid}.async_llm`` (``vllm/v1/engine/async_llm.py`` L227-232,
L1122-1126); beside them ``{worker_name}.profiler_out.txt`` tables
(``vllm/profiler/wrapper.py`` ``_write_profiler_table``). One start/stop of the profiler is one
file per worker: several sessions give several files of the same rank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import counted

_TAIL = r"\.(?P<ns>\d+)\.pt\.trace\.json(?:\.gz)?$"
WORKER = re.compile(r"(?:^|_)rank(?P<rank>\d+)" + _TAIL)
FRONTEND = re.compile(r"\.async_llm" + _TAIL)
TRACE = re.compile(r"^(?P<worker>.+?)" + _TAIL)


@dataclass
class TraceFile:
    path: Path
    role: str  # "worker" (a vLLM worker rank), "frontend" (vLLM's API server), "trace"
    rank: int | None  # from the name; None where the name does not say
    ns: int | None  # the time_ns torch put in the name (orders one rank's sessions)
    worker: str  # the worker name part of the file name


def classify(path: Path) -> TraceFile:
    name = path.name
    if m := FRONTEND.search(name):
        return TraceFile(path, "frontend", None, int(m.group("ns")), name[: m.start()])
    if m := WORKER.search(name):
        return TraceFile(
            path, "worker", int(m.group("rank")), int(m.group("ns")), name[: m.start("ns") - 1]
        )
    if m := TRACE.match(name):
        return TraceFile(path, "trace", None, int(m.group("ns")), m.group("worker"))
    stem = name.removesuffix(".gz").removesuffix(".json")
    return TraceFile(path, "trace", None, None, stem)


def folder_files(folder: Path) -> tuple[list[TraceFile], list[Path]]:
    """(the trace files of ``folder``, the other files in it). ``*.pt.trace.json[.gz]`` where
    there are any, else every ``*.json[.gz]``; sub-folders are not read."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    pt = [p for p in files if re.search(r"\.pt\.trace\.json(?:\.gz)?$", p.name)]
    traces = pt or [p for p in files if re.search(r"\.json(?:\.gz)?$", p.name)]
    others = [p for p in files if p not in traces]
    if not traces:
        raise MlaprofError(
            f"{folder}: no PyTorch profiler traces in it (*.pt.trace.json or *.json, "
            "optionally .gz)"
        )
    return [classify(p) for p in traces], others


def distributed_rank(doc: Mapping[str, Any]) -> int | None:
    """``distributedInfo.rank`` that Kineto writes once torch.distributed is initialised."""
    info = doc.get("distributedInfo")
    if isinstance(info, Mapping) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    return None


def assign_ranks(
    files: list[tuple[TraceFile, int | None]],
) -> tuple[dict[int, list[TraceFile]], list[str]]:
    """Ranks for the (file, distributedInfo rank) pairs of the non-front-end traces: the rank in
    the file name, else the trace's ``distributedInfo``, else one rank per worker name in name
    order (said in a note). A file whose name and ``distributedInfo`` disagree is an error."""
    notes: list[str] = []
    out: dict[int, list[TraceFile]] = {}
    unnamed: dict[str, list[TraceFile]] = {}
    for tf, dist in files:
        if tf.rank is not None and dist is not None and tf.rank != dist:
            raise MlaprofError(
                f"{tf.path.name}: its name says rank {tf.rank}, its distributedInfo rank {dist}"
            )
        rank = tf.rank if tf.rank is not None else dist
        if rank is None:
            unnamed.setdefault(tf.worker, []).append(tf)
        else:
            out.setdefault(rank, []).append(tf)
    if unnamed:
        free = (r for r in range(len(out) + len(unnamed) + 1) if r not in out)
        for worker in sorted(unnamed):
            rank = next(free)
            out[rank] = unnamed[worker]
        if len(unnamed) > 1 or out.keys() - {0}:
            notes.append(
                f"{counted(len(unnamed), 'worker name(s)')} without a rank in the file name or "
                f"distributedInfo ({', '.join(sorted(unnamed)[:4])}): numbered as ranks in name order"
            )
    for fs in out.values():
        fs.sort(key=lambda tf: (tf.ns or 0, tf.path.name))
    return dict(sorted(out.items())), notes
