"""Question 5: what graph capture costs in memory. A scenario run's measured capture memory per
capture size (the driver free-memory delta, with the pool and allocator views as evidence); an
engine log's per rank and server start (never summed across starts; the capture section's is
the last start's ranks' labelled sum, each rank's beside it), with vLLM's own estimate and how
far the two are apart."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.analysis.starts import GIB, gib, start_label
from mlaprof.analysis.typed_json import over_ranks_label
from mlaprof.rank_counts import counted, rank_list
from mlaprof.recording import ATTEMPT

if TYPE_CHECKING:
    from mlaprof.analysis.sections import Capture, EngineStart


def serving_memory(memory: pd.DataFrame) -> pd.DataFrame:
    """Capture-memory rows of the graphs that serve steps (not the instrumented timing twins)."""
    if memory.empty:
        return memory
    return memory[~memory["graph_mode"].fillna("").str.contains("+", regex=False)]


# The one capture-memory measure every view shows, by this name: the drop in the driver's free
# memory across capture (what vLLM logs as "Graph capturing finished ... took X GiB"). The pool and
# allocator views are evidence in the memory finding, never the headline number.
CAPTURE_MEMORY_MEASURE = "driver free-memory delta"


def attempted_memory(memory: pd.DataFrame) -> pd.DataFrame:
    """The rows of failed FULL capture attempts (no graph kept, no bytes measured: their time)."""
    if memory.empty:
        return memory
    return memory[memory["graph_mode"].fillna("").str.endswith(ATTEMPT)]


def captured_sizes(memory: pd.DataFrame) -> list[int]:
    """The capture sizes the capture covered, in order: the serving graphs' sizes, else, where
    no graph was kept, the sizes whose FULL capture was attempted and failed (empty: no capture
    recorded)."""
    rows = serving_memory(memory)
    if rows.empty:
        rows = attempted_memory(memory)
    return [] if rows.empty else sorted({int(v) for v in rows["capture_size"].dropna()})


def capture_sizes(memory: pd.DataFrame) -> int | None:
    """How many capture sizes the capture covered (:func:`captured_sizes`), the one count the
    capture section and the memory finding both say; None where no capture was recorded
    (nothing to count: never a 0 that reads as a measured count)."""
    return len(captured_sizes(memory)) or None


def capture_memory_bytes(memory: pd.DataFrame) -> int | None:
    """The capture memory (:data:`CAPTURE_MEMORY_MEASURE`) of the serving graphs of the ranks
    ``memory`` holds (several ranks': their sum, which :attr:`Capture.memory_bytes` is marked
    and labelled as, each rank's in ``Capture.per_rank``); ``None`` when no row records it
    (unknown, never 0)."""
    memory = serving_memory(memory)
    if memory.empty or not memory["driver_bytes"].notna().any():
        return None
    return int(pd.to_numeric(memory["driver_bytes"], errors="coerce").fillna(0).sum())


def memory_summed(cap: Capture) -> str:
    """What :attr:`Capture.memory_bytes` is where several ranks measured some: their sum, in the
    sections' one wording (:func:`over_ranks_label`); "" for one rank's (or a one-rank run's)."""
    return over_ranks_label("sum", [r.rank for r in cap.per_rank or [] if r.memory_bytes])


def memory_unmeasured(cap: Capture) -> str:
    """The ranks whose own capture memory is unknown where other ranks' make
    :attr:`Capture.memory_bytes`, named after it ("; rank 2: unknown"): a sum over the ranks
    that measured is never read as every rank's; "" where every rank measured, or none did."""
    missing = [r.rank for r in cap.per_rank or [] if r.memory_bytes is None]
    if cap.memory_bytes is None or not missing:
        return ""
    return f"; {rank_list(missing)}: unknown"


def memory_per_rank(cap: Capture) -> str | None:
    """A capture's memory where several ranks measured their own: per rank, never a sum (each
    GPU holds its own graphs): "1.02-1.03 GiB per rank (2 ranks)", the ranks without one named
    after it; None where at most one rank measured (:attr:`Capture.memory_bytes` is its)."""
    per = [r.memory_bytes for r in cap.per_rank or [] if r.memory_bytes]
    if len(per) < 2:
        return None
    lo, hi = human_bytes(min(per)), human_bytes(max(per))
    unit = lo.split()[-1]
    said = (
        lo
        if lo == hi
        else (f"{lo.split()[0]}-{hi}" if hi.endswith(" " + unit) else f"{lo} to {hi}")
    )
    return f"{said} per rank ({len(per)} ranks)" + memory_unmeasured(cap)


# why a failed capture attempt's memory is unknown: the one reason the headline and the
# finding say (the attempt's child process kept no graph, so no bytes were measured)
ATTEMPT_NOT_MEASURED = "not measured: the attempt ran in a probe process and kept no graph"


def memory_unknown_why(memory: pd.DataFrame) -> str | None:
    """Why the run's capture memory is unknown, where its memory table says (a failed
    attempt's rows, no serving graph's); None where it says nothing of it."""
    if serving_memory(memory).empty and not attempted_memory(memory).empty:
        return ATTEMPT_NOT_MEASURED
    return None


def human_bytes(n: float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def capture_memory_findings(
    summary: Capture, memory: pd.DataFrame, captured: bool | None = None
) -> list[Finding]:
    """The capture memory of the serving graphs (information), with the pool and allocator
    views as evidence; none where no capture was measured. ``captured``: whether the capture
    succeeded (:attr:`mlaprof.analysis.claims.Claims.capture_succeeded`; None: read from
    ``summary``): a failed capture's memory is no cost to trim, so it gets no advice."""
    if captured is None:
        captured = summary.status == "captured"
    out: list[Finding] = []
    attempts = attempted_memory(memory)
    # one count of capture sizes, the capture section's (Capture.sizes: capture_sizes)
    sizes = capture_sizes(memory)
    memory = serving_memory(memory)
    if memory.empty and not attempts.empty:  # a failed attempt's time; no bytes were measured
        out.append(
            Finding(
                kind="memory",
                severity="info",
                title=(
                    f"failed capture attempt: capture memory ({CAPTURE_MEMORY_MEASURE}): unknown "
                    f"over {counted(sizes, 'capture size(s)')}"
                ),
                evidence=(
                    f"{ATTEMPT_NOT_MEASURED}; it took "
                    f"{attempts['capture_ns'].fillna(0).sum() / 1e6:.1f} ms"
                ),
                fix="nothing to trim: no graph was kept (see the capture finding); measure "
                "again once the capture succeeds",
            )
        )
    if not memory.empty:
        pool = memory["pool_bytes"].fillna(0).sum()
        alloc = memory["allocator_bytes"].fillna(0).sum()
        driver = memory["driver_bytes"].fillna(0).sum()
        mem = summary.memory_bytes
        # several ranks measured: the amounts add theirs, said so, with each rank's
        per = [r for r in summary.per_rank or [] if r.memory_bytes]
        summed = memory_summed(summary)
        each = ", ".join(f"{rank_list([r.rank])} {human_bytes(r.memory_bytes or 0)}" for r in per)
        out.append(
            Finding(
                kind="memory",
                severity="info",
                title=(
                    ("" if captured else "failed capture attempt: ")
                    + f"capture memory ({CAPTURE_MEMORY_MEASURE}): "
                    f"{'unknown' if mem is None else human_bytes(mem)}{summed} over "
                    f"{counted(sizes, 'capture size(s)')}"
                ),
                evidence=(
                    f"private pool {human_bytes(pool)}, caching allocator {human_bytes(alloc)}, "
                    f"driver free-memory delta {human_bytes(driver)} (what vLLM logs){summed}; "
                    + (f"{CAPTURE_MEMORY_MEASURE} per rank: {each}; " if summed else "")
                    + f"capture took {memory['capture_ns'].fillna(0).sum() / 1e6:.1f} ms"
                ),
                fix="capture fewer sizes or share one pool if memory is tight"
                if captured
                else "nothing to trim: no graph was kept (see the capture finding); measure "
                "again once the capture succeeds",
            )
        )
    return out


# vLLM's estimate is called "far" from the measured capture memory beyond this factor either way
# (vLLM#53013 logged 118.65 GiB estimated for a capture of a few GiB)
ESTIMATE_FACTOR = 2.0


def capture_memory_change(starts: list[EngineStart]) -> str:
    """Capture memory per rank from the first to the last start that logged it (rank by rank)."""
    measured = [st for st in starts if any(m.measured_bytes is not None for m in st.memory)]
    if len(measured) < 2:
        return ""
    a, b = measured[0], measured[-1]
    before = {m.rank: m.measured_bytes for m in a.memory if m.measured_bytes is not None}
    pairs = [
        f"rank {m.rank} {gib(before[m.rank])} -> {gib(m.measured_bytes)}"
        for m in b.memory
        if m.measured_bytes is not None and m.rank in before
    ]
    if not pairs:
        return ""
    return f"; capture memory from start {a.start} to start {b.start}: " + ", ".join(pairs)


def start_memory_findings(st: EngineStart) -> list[Finding]:
    out: list[Finding] = []
    rows = [m for m in st.memory if m.measured_bytes is not None]
    silent = sorted(set(st.ranks) - {m.rank for m in rows})
    world = st.world_size
    missing = ""
    if rows and silent:
        missing = f"; no 'Graph capturing finished' line from {rank_list(silent)}"
    elif rows and world and len(rows) < world:
        missing = f"; only {len(rows)} of the engine's {world} worker ranks logged one"
    if missing:
        missing += " (the log was cut short, or that rank stopped before capture finished)"
    if rows:
        per = "; ".join(
            f"rank {m.rank}: {gib(m.measured_bytes)} in {m.capture_secs:.0f} s"
            + (
                f" (vLLM estimated {gib(m.estimated_bytes)})"
                if m.estimated_bytes is not None
                else ""
            )
            for m in rows
        )
        out.append(
            Finding(
                kind="memory",
                severity="info",
                title=f"{start_label(st)}, {st.final_mode or 'mode not logged'}: graph capture "
                f"memory per rank: {per}",
                evidence="vLLM's 'Graph capturing finished' line per rank (driver free-memory "
                f"delta over all capture sizes of that rank){missing}; {st.provenance}",
                fix="capture fewer sizes (cudagraph_capture_sizes) if KV-cache memory is tight",
                data={"start": st.start, "memory": [asdict(m) for m in rows]},
            )
        )
    for m in st.memory:
        ratio = m.estimate_ratio
        if ratio is None or 1 / ESTIMATE_FACTOR <= ratio <= ESTIMATE_FACTOR:
            continue
        out.append(
            Finding(
                kind="memory",
                severity="warning",
                title=f"{start_label(st)}, rank {m.rank}: vLLM estimated "
                f"{gib(m.estimated_bytes)} of CUDA graph memory but capture took "
                f"{gib(m.measured_bytes)} ({ratio:.2f}x)",
                evidence="'Estimated CUDA graph memory' vs 'Graph capturing finished' of the same "
                f"rank and start (far: beyond {ESTIMATE_FACTOR:g}x either way; vLLM#53013 class); "
                + st.provenance,
                fix="the KV cache was sized with the estimate: too high wastes KV-cache memory, "
                "too low risks OOM; set --kv-cache-memory or VLLM_MEMORY_PROFILER_ESTIMATE_"
                "CUDAGRAPHS=0 with a --gpu-memory-utilization that leaves the measured amount free",
                data={"start": st.start, **asdict(m)},
            )
        )
    return out
