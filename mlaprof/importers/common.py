"""Small helpers shared by the importers: exact integer parsing, file sniffing, summaries."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.store.validate import finite, int64

# rocprofv3 7.x writes a CSV's agent as "<label> <index>" (rocprofiler-sdk
# source/lib/output/metadata.cpp create_agent_index): label "Agent" with the node id
# (--agent-index absolute) or the logical node id (relative, the default); with
# --agent-index type-relative the agent's type ("GPU", "CPU", "UNK") with its index among the
# node's agents of that type. 6.3 wrote the bare node id.
_AGENT = re.compile(r"^\s*(?:(agent|gpu|cpu|unk)\s*)?(-?\d+)\s*$", re.IGNORECASE)
NODE_IDS = "node"  # "Agent N" or N: a node or logical node id (the file does not say which)
TYPE_IDS = "type"  # "GPU N": the N-th GPU of the node (--agent-index type-relative)
MIXED_IDS = "mixed"  # both forms in one rank's kernel files: no id can be read either way


def to_int(value: Any, what: str = "value") -> int | None:
    """An exact integer from a CSV/JSON field: ``"123"``, ``123``, ``""`` (None). Never via float."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return int64(value, what)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")) or not value.is_integer():
            raise MlaprofError(f"{what} {value!r} is not an integer")
        return int64(int(value), what)
    s = str(value).strip()
    if not s:
        return None
    if len(s) > 40:  # int64 has 19 digits; never hand int() a 5,000-digit string
        raise MlaprofError(f"{what} {s[:20]!r}... ({len(s)} characters) is not a 64-bit integer")
    try:
        return int64(int(s), what)
    except ValueError:
        pass
    try:
        d = Decimal(s)
    except InvalidOperation:
        raise MlaprofError(f"{what} {s[:40]!r} is not an integer") from None
    if not d.is_finite() or d != d.to_integral_value():
        raise MlaprofError(f"{what} {s[:40]!r} is not an integer")
    if d.adjusted() > 19:  # "1e999999" would build a million-digit int
        raise MlaprofError(f"{what} {s[:40]!r} does not fit a 64-bit integer")
    return int64(int(d), what)


def to_float(value: Any, what: str = "value") -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return finite(float(value), what)
    except (TypeError, ValueError, OverflowError):
        raise MlaprofError(f"{what} {str(value)[:40]!r} is not a number") from None


def agent_ref(value: Any) -> tuple[str, int] | None:
    """A kernel record's agent as written: (:data:`NODE_IDS`, N) for ``"Agent N"`` or ``N``,
    (:data:`TYPE_IDS`, N) for ``"GPU N"``, (``"cpu"`` or ``"unk"``, N) for a type-relative
    agent that is no GPU; None for an empty field."""
    if value is None:
        return None
    if isinstance(value, int):
        return NODE_IDS, value
    s = str(value)
    if not s.strip():
        return None
    m = _AGENT.match(s)
    if not m:
        raise MlaprofError(
            f"agent id {s[:40]!r} is neither a number nor 'Agent N' / 'GPU N' (rocprofv3's forms)"
        )
    if len(m.group(2).lstrip("-")) > 18:  # past int64 (and Python's int-digits limit)
        raise MlaprofError(f"agent id {s[:40]!r}... does not fit a 64-bit integer")
    label = (m.group(1) or "agent").lower()
    kind = {"agent": NODE_IDS, "gpu": TYPE_IDS}.get(label, label)
    return kind, int(m.group(2))


def agent_number(ref: tuple[str, int] | None) -> int | None:
    """The device number of an agent as :func:`agent_ref` read it: a node id's, or a GPU's
    index among the node's GPUs (which of the two, the ref says); None for no agent or a
    type-relative agent that is no GPU (``"CPU 0"``: no kernel's device)."""
    return ref[1] if ref is not None and ref[0] in (NODE_IDS, TYPE_IDS) else None


def agent_index(value: Any) -> int | None:
    """``"Agent 4"`` -> 4, ``4`` -> 4, ``"GPU 1"`` -> 1, ``""`` or ``"CPU 0"`` -> None
    (:func:`agent_number` of :func:`agent_ref`)."""
    return agent_number(agent_ref(value))


def agent_ids_of(kinds: Any) -> str:
    """How a rank's kernel records number their agents, from the forms they were written in
    (:func:`agent_ref`'s first items): :data:`TYPE_IDS` where every one is type-relative,
    :data:`NODE_IDS` where none is (or none is written), :data:`MIXED_IDS` where both are."""
    typed = {k != NODE_IDS for k in kinds}
    if typed == {True}:
        return TYPE_IDS
    return MIXED_IDS if typed == {True, False} else NODE_IDS


def us_to_ns(value: Any, what: str = "timestamp") -> int:
    """Microseconds (Chrome/Kineto JSON, possibly fractional) to exact integer nanoseconds."""
    if isinstance(value, bool) or value is None:
        raise MlaprofError(f"{what} is missing")
    if isinstance(value, int):
        return int64(value * 1000, what)
    if isinstance(value, Decimal) and value.adjusted() > 30:
        raise MlaprofError(f"{what} {str(value)[:40]!r} does not fit a 64-bit nanosecond count")
    try:
        d = value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        raise MlaprofError(f"{what} {str(value)[:40]!r} is not a number") from None
    if not d.is_finite():
        raise MlaprofError(f"{what} {value!r} is not finite")
    if d.adjusted() > 30:
        raise MlaprofError(f"{what} {str(value)[:40]!r} does not fit a 64-bit nanosecond count")
    return int64(int((d * 1000).to_integral_value()), what)


def parse_json(path: Path, text: str, **kwargs: Any) -> Any:
    """``json.loads`` whose every failure is one message naming the file."""
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as e:
        raise MlaprofError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise MlaprofError(f"{path}: JSON nested too deeply") from None
    except ValueError as e:  # e.g. a number over Python's int-digits limit
        raise MlaprofError(f"{path}: not valid JSON ({str(e)[:120]})") from None


def read_text(path: Path, what: str) -> str:
    """A text file's content (``.gz`` inflated a chunk at a time within its limit:
    :mod:`mlaprof.importers.inputs`); binary or undecodable input is an error."""
    from mlaprof.importers.inputs import read_text as read

    return read(path, what)


@dataclass
class ImportSummary:
    """What an import produced, for the one-screen summary the CLI prints."""

    source: str
    files: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    mla_kernels: int = 0
    replays: int = 0  # steps that are graph replays holding MLA kernels
    eager_steps: int = 0  # steps of MLA kernels launched one by one
    patterns: list[dict[str, Any]] = field(default_factory=list)  # kernel-table rows matched
    checks: dict[str, Any] = field(default_factory=dict)  # evidence the analysis reads
    layers: int = 0

    def add(self, table: str, n: int) -> None:
        self.rows[table] = self.rows.get(table, 0) + n


def trim_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``): a streamed
    read frees thousands of small per-batch arrays that the heap would otherwise keep, a few
    hundred MB on a 10M-dispatch trace, in the arena of the thread that read it. Not where the
    process's threads share one arena (an import command's,
    :func:`mlaprof.library_env.one_malloc_arena`): the next allocations, of any thread, reuse
    those pages there, and handing them back only makes the next rank fault them in again.
    No-op off glibc."""
    from mlaprof import library_env

    if library_env.one_arena():
        return
    trim = library_env.libc_function("malloc_trim")
    if trim is not None:
        trim(0)


def release_arrow_memory() -> None:
    """Hand the memory Arrow's allocator kept from an import back to the system. Its pool keeps
    freed blocks for reuse: after a fleet import nothing is allocated in it, yet the process
    held 0.77 GB, which a report in the same process (a notebook, the dashboard) then added
    to. No-op where pyarrow was never loaded."""
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()


@dataclass(frozen=True)
class GpuAgent:
    """One GPU agent as rocprofv3 records it (agent_info.csv, rocpd_info_agent, the JSON's
    ``agents``): the ids its kernel records may name it by, and its names."""

    ids: frozenset[int]  # node id and logical node id (a CSV's Agent_Id may be either)
    arch: str | None  # ``name``: the gfx target, e.g. gfx942
    product: str | None  # ``product_name`` (marketing name), else ``model_name``
    # its index among the node's GPUs (``logical_node_type_id``: a type-relative "GPU N");
    # None where the records do not give it
    gpu_index: int | None = None

    @property
    def device(self) -> str | None:
        """``gfx942 (AMD Instinct MI300X)``; the arch alone, or the product alone where only
        one is written; None where neither is."""
        if self.arch and self.product and self.product != self.arch:
            return f"{self.arch} ({self.product})"
        return self.arch or self.product


def gpu_agent(
    ids: Any, name: Any, product: Any, model: Any, gpu_index: int | None = None
) -> GpuAgent:
    def text(v: Any) -> str | None:
        s = "" if v is None else str(v).strip()
        return s or None

    return GpuAgent(
        frozenset(i for i in ids if i is not None),
        text(name),
        text(product) or text(model),
        gpu_index,
    )


def kernel_device(agent_ids: Any, agents: list[GpuAgent], numbered: str = NODE_IDS) -> str | None:
    """The device a rank's kernels ran on: the GPU agent(s) its kernel records name (``agent_ids``,
    the distinct ids), as the trace's own agent records name them. ``numbered``: how the
    records number agents (:func:`agent_ids_of`): by node id, or type-relative ("GPU N" is the
    agent whose ``gpu_index`` is N). None (unknown, never a default) where the trace has no
    agent records, or a kernel's agent is not among them or is ambiguous (two GPU agents of
    different names answer to its id), or the records mix both numberings."""
    if numbered not in (NODE_IDS, TYPE_IDS):
        return None
    names: set[str] = set()
    for a in agent_ids:
        if numbered == TYPE_IDS:
            got = {g.device for g in agents if g.gpu_index is not None and g.gpu_index == a}
        else:
            got = {g.device for g in agents if a in g.ids}
        if len(got) != 1 or None in got:
            return None
        names |= {str(n) for n in got}
    return " + ".join(sorted(names)) or None


def run_device(by_rank: dict[int, str | None]) -> str | None:
    """The run's device from each rank's: the one name where every rank states the same, else
    each name with its ranks (never merged into one); None where no rank states one."""
    from mlaprof.rank_counts import rank_list

    names = set(by_rank.values())
    if names <= {None}:
        return None
    if len(names) == 1:
        return next(iter(names))
    ranks_of: dict[str | None, list[int]] = {}
    for r, n in sorted(by_rank.items()):
        ranks_of.setdefault(n, []).append(r)
    return "; ".join(f"{rank_list(rs)}: {n or 'not stated'}" for n, rs in ranks_of.items())
