"""PyTorch profiler (Kineto) trace importer: ``.json`` or ``.json.gz`` Chrome traces.

Under CUDA/HIP graph replay Kineto records one ``cat: "kernel"`` event per kernel node, all
correlated (``args.correlation``) to the ``cudaGraphLaunch`` / ``hipGraphLaunch`` runtime event;
newer CUDA adds ``graph id`` / ``graph node id``. Each graph launch is one replay (numbered by
launch time); the n-th MLA kernel of a replay is layer n. Grids are in blocks. Timestamps are
microseconds with a fractional part: parsed as decimals, so nanoseconds are exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.importers.annotate import NULL, KernelColumns, store_kernels
from mlaprof.importers.common import ImportSummary, parse_json, read_text, to_int, us_to_ns
from mlaprof.importers.kernels import KernelMatcher
from mlaprof.importers.rocprof_csv import _TRANSFER_COLS, KERNEL_COLS
from mlaprof.portable import portable_path
from mlaprof.store import validate
from mlaprof.store.staging import staged_run

KERNEL_CATS = {"kernel", "gpu_kernel"}
MEMCPY_CATS = {"gpu_memcpy", "gpu_memset"}
API_CATS = {"cuda_runtime", "cuda_driver", "hip_runtime", "user_annotation", "cpu_op"}
KCOLS = (*KERNEL_COLS, "replay")


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


def _times(ev: Mapping[str, Any], base: int, where: str) -> tuple[int, int]:
    if "ts" not in ev:
        raise MlaprofError(f"{where}: event {str(ev.get('name'))[:60]!r} has no 'ts'")
    start = us_to_ns(ev["ts"], f"{where} ts") + base
    dur = us_to_ns(ev.get("dur", 0), f"{where} dur")
    if dur < 0:
        raise MlaprofError(f"{where}: negative duration")
    return start, start + dur


def parse(path: Path, text: str) -> dict[str, Any]:
    doc = parse_json(path, text, parse_float=Decimal)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, Mapping) or "traceEvents" not in doc:
        raise MlaprofError(f"{path}: not a Kineto/Chrome trace (no 'traceEvents')")
    if not isinstance(doc["traceEvents"], list):
        raise MlaprofError(f"{path}: 'traceEvents' is not a list")
    return dict(doc)


def load_events(
    path: Path, doc: Mapping[str, Any]
) -> tuple[list[list[Any]], list[list[Any]], list[list[Any]], int]:
    """(kernel rows, api rows, transfer rows, number of graph launches)."""
    base_v = doc.get("baseTimeNanoseconds", 0)
    base = to_int(base_v, "baseTimeNanoseconds") or 0
    kernels: list[tuple[int, list[Any]]] = []
    launches: list[tuple[int, int]] = []  # (start, correlation)
    api: list[list[Any]] = []
    xfer: list[list[Any]] = []
    for i, ev in enumerate(doc["traceEvents"]):
        where = f"{path} event {i}"
        if not isinstance(ev, Mapping):
            raise MlaprofError(f"{where}: not an object")
        if ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        args = ev.get("args") or {}
        if not isinstance(args, Mapping):
            raise MlaprofError(f"{where}: 'args' is not an object")
        name = ev.get("name")
        if cat in KERNEL_CATS:
            if name is None:
                raise MlaprofError(f"{where}: kernel event without a name")
            start, end = _times(ev, base, where)
            grid = _dim3(args.get("grid"), "grid")
            block = _dim3(args.get("block"), "block")
            row = [
                str(name),
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
            kernels.append((i, row))
        elif cat in MEMCPY_CATS:
            start, end = _times(ev, base, where)
            xfer.append(
                [
                    "MEMORY_COPY" if cat == "gpu_memcpy" else "MEMORY_SET",
                    str(name),
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
            start, end = _times(ev, base, where)
            corr = to_int(args.get("correlation"), f"{where} correlation")
            if "graphlaunch" in str(name).lower() and corr is not None:
                launches.append((start, corr))
            api.append(
                [
                    cat,
                    str(name),
                    _maybe_int(ev.get("pid")),
                    _maybe_int(ev.get("tid")),
                    corr,
                    start,
                    end,
                ]
            )
    replay_of = {corr: r for r, (_, corr) in enumerate(sorted(launches))}
    krows = []
    for _, row in sorted(kernels, key=lambda t: (t[1][1], t[0])):
        row[-1] = replay_of.get(row[5])
        krows.append(row)
    return krows, api, xfer, len(launches)


@validate.boundary
def import_kineto(
    path: Path | str,
    traces: Path | str,
    name: str | None = None,
    matcher: KernelMatcher | None = None,
) -> tuple[Path, ImportSummary]:
    path = Path(path)
    if not path.is_file():
        raise MlaprofError(f"{path} is not a file")
    doc = parse(path, read_text(path, "Kineto JSON trace"))
    own = doc.get("otherData") if isinstance(doc, dict) else None
    if isinstance(own, dict) and own.get("mlaprof_run") is not None:
        run = str(own["mlaprof_run"])[:200]
        raise MlaprofError(
            f"{path} is mlaprof's own Perfetto export of run {run!r}, not a PyTorch profiler "
            f"trace (its lanes are mlaprof's, so it would import as eager kernels): open the run "
            f"itself (mlaprof report {run}), or carry it over as rocpd (mlaprof export {run} "
            "--format rocpd, then mlaprof import rocprof FILE)"
        )
    krows, api, xfer, n_launch = load_events(path, doc)
    if not krows and not api:
        raise MlaprofError(f"{path}: no kernel or runtime events found")
    summary = ImportSummary(source="kineto")
    meta = {
        "source": "kineto",
        "kind": "trace",
        "imported_from": portable_path(str(path.resolve())),
        "grid_units": "blocks",
        "device": _device_name(doc),
    }
    stem = path.name.removesuffix(".gz").removesuffix(".json")
    with staged_run(traces, name or f"kineto-{stem}", meta, unique=name is None) as (bulk, final):
        bulk.reading(path)
        acols = ("domain", "function", "pid", "tid", "correlation", "start_ns", "end_ns")
        summary.add("api", bulk.insert("api", acols, api))
        summary.add("transfers", bulk.insert("transfers", _TRANSFER_COLS, xfer))
        if krows:
            kc = KernelColumns.from_rows(KCOLS, [v for row in krows for v in row])
            validate.kernel_columns(kc, str(path))
            replay = kc.ints.pop("replay")
            mask = kc.masks.pop("replay", None)
            if mask is not None:
                replay[mask] = NULL
            store_kernels(bulk, kc, matcher or KernelMatcher(), summary, False, replay)
        summary.files.append(str(path))
        if n_launch and not summary.replays:
            summary.notes.append(f"{n_launch} graph launches, none with a recognised MLA kernel")
    return final, summary


def _device_name(doc: Mapping[str, Any]) -> str | None:
    props = doc.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], Mapping):
        n = props[0].get("name")
        return None if n is None else str(n)
    return None
