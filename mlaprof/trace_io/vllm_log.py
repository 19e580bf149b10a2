"""vLLM log importer: capture time and memory, estimated graph memory, cudagraph-mode decisions and
downgrades (with the backend named in them), and capture progress bars.

The messages are vLLM's format strings (FACTS section 3); the log prefix (level, date, source) is
ignored, so engine-core and worker lines both match. tqdm progress bars rewrite themselves with
carriage returns; each ``\\r``-separated piece counts as a line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.trace_io.common import ImportSummary, read_text
from mlaprof.trace_io.staging import staged_run

GIB = 1 << 30
_NUM = r"(\d+(?:\.\d+)?)"
CAPTURE_DONE = re.compile(rf"Graph capturing finished in {_NUM} secs?, took {_NUM} GiB")
ESTIMATED = re.compile(rf"Estimated CUDA graph memory: {_NUM} GiB total")
DOWNGRADE = re.compile(
    r"CUDAGraphMode\.(\w+) is not supported with (\S+) backend \(support: ([^)]*)\); "
    r"setting cudagraph_mode=(\w+)"
)
DOWNGRADE_SPEC = re.compile(
    r"CUDAGraphMode\.(\w+) is not supported with spec-decode for attention backend (\S+) "
    r"\(support: ([^)]*)\); setting cudagraph_mode=(\w+)"
)
PROGRESS = re.compile(
    r"Capturing CUDA graphs \(([^,()]+), (\w+)\)(?::\s*(\d+)%[^|]*\|[^|]*\|\s*(\d+)/(\d+))?"
)
_TIME = re.compile(r"\b(\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\b")


@dataclass
class LogFacts:
    events: list[dict[str, Any]] = field(default_factory=list)
    counters: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    captures: list[dict[str, Any]] = field(default_factory=list)
    backend: str | None = None
    graph_mode: str | None = None

    def empty(self) -> bool:
        return not (self.events or self.counters or self.memory or self.captures)


def _gib_bytes(text: str) -> int:
    # "%.2f GiB": keep the logged precision exact (2 decimals) rather than float-rounding
    whole, _, frac = text.partition(".")
    frac = (frac + "00")[:2]
    return (int(whole) * 100 + int(frac)) * GIB // 100


def parse_log(text: str) -> LogFacts:
    facts = LogFacts()
    progress: dict[tuple[str, str], dict[str, Any]] = {}
    current_mode: str | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        for line in raw.split("\r"):
            if not line.strip():
                continue
            tm = _TIME.search(line)
            when = tm.group(1) if tm else None
            base = {"line": lineno, "time": when}
            if m := CAPTURE_DONE.search(line):
                secs, gib = m.group(1), m.group(2)
                b = _gib_bytes(gib)
                ns = round(float(secs) * 1e9)
                facts.memory.append(
                    {"graph_mode": current_mode, "driver_bytes": b, "capture_ns": ns}
                )
                facts.counters += [
                    {"source": "vllm-log", "name": "capture_seconds", "value": float(secs)},
                    {"source": "vllm-log", "name": "capture_memory_bytes", "value": float(b)},
                ]
                facts.events.append(
                    _ev("capture-finished", m.group(0), {**base, "secs": secs, "gib": gib})
                )
            elif m := ESTIMATED.search(line):
                b = _gib_bytes(m.group(1))
                facts.counters.append(
                    {
                        "source": "vllm-log",
                        "name": "estimated_graph_memory_bytes",
                        "value": float(b),
                    }
                )
                facts.events.append(
                    _ev("estimated-graph-memory", m.group(0), {**base, "gib": m.group(1)})
                )
            elif (m := DOWNGRADE_SPEC.search(line)) or (m := DOWNGRADE.search(line)):
                spec = m.re is DOWNGRADE_SPEC
                mode, backend, support, setting = m.groups()
                facts.backend = backend
                facts.graph_mode = setting
                data = {
                    **base,
                    "requested": mode,
                    "backend": backend,
                    "support": support,
                    "setting": setting,
                    "spec_decode": spec,
                }
                facts.events.append(_ev("cudagraph-downgrade", m.group(0), data))
                facts.captures.append(
                    {
                        "graph_mode": mode,
                        "status": "not-attempted",
                        "fallback": setting,
                        "op": backend,
                        "message": m.group(0),
                    }
                )
            elif m := PROGRESS.search(line):
                phase, mode = m.group(1).strip(), m.group(2)
                current_mode = mode
                done = None if m.group(4) is None else int(m.group(4))
                total = None if m.group(5) is None else int(m.group(5))
                st = progress.setdefault((phase, mode), {"phase": phase, "mode": mode, **base})
                if done is not None:
                    st.update(done=done, total=total, line=lineno)
    for st in progress.values():
        done, total = st.get("done"), st.get("total")
        msg = f"Capturing CUDA graphs ({st['phase']}, {st['mode']}): {done}/{total}"
        facts.events.append(_ev("capture-progress", msg, st))
        if done is not None:
            facts.counters.append(
                {
                    "source": "vllm-log",
                    "name": "graphs_captured",
                    "key": f"{st['phase']}, {st['mode']}",
                    "value": float(done),
                }
            )
            facts.captures.append(
                {
                    "graph_mode": st["mode"],
                    "status": "captured" if done == total else "failed",
                    "message": msg,
                }
            )
    return facts


def _ev(kind: str, message: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"source": "vllm-log", "kind": kind, "message": message, "data": json.dumps(data)}


def import_vllm_log(
    path: Path | str, traces: Path | str, name: str | None = None
) -> tuple[Path, ImportSummary]:
    path = Path(path)
    if not path.is_file():
        raise MlaprofError(f"{path} is not a file")
    text = read_text(path, "vLLM log")
    if not text.strip():
        raise MlaprofError(f"{path} is empty")
    facts = parse_log(text)
    if facts.empty():
        raise MlaprofError(
            f"{path}: no vLLM graph-capture or cudagraph-mode lines found (is it a vLLM log?)"
        )
    summary = ImportSummary(source="vllm-log", files=[str(path)])
    meta = {
        "source": "vllm-log",
        "imported_from": str(path.resolve()),
        "backend": facts.backend or "",
        "graph_mode": facts.graph_mode,
    }
    stem = path.name.removesuffix(".gz").removesuffix(".log")
    with staged_run(traces, name or f"vllm-{stem}", meta) as (bulk, final):
        for table in ("events", "counters", "memory", "captures"):
            summary.add(table, bulk.insert_dicts(table, getattr(facts, table)))
    return final, summary
