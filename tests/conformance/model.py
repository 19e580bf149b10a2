"""The abstract trace every conformance writer renders: what one profiled process did (kernel
dispatches with their grids and launch correlation, host API calls, roctx ranges and marks) and
what an importer must read back from it.

A shape (``shapes.py``) builds a :class:`Trace` through a :class:`Builder`, which hands out
correlation ids and timestamps the way rocprofv3 does: every traced host call (HIP API call,
roctx range or mark) takes the next *internal* correlation id of its process, and each kernel
dispatch carries the internal id of the call that launched it -- all kernels of a graph launch
share the ``hipGraphLaunch`` call's id. The *external* id is 0 unless kernel rename or external
correlation is on (rocprofiler-sdk ``source/lib/output/generateRocpd.cpp``: ``stack_id`` takes
``corr_id.internal``, ``correlation_id`` takes ``corr_id.external.value``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

HIP_KIND = "HIP_RUNTIME_API_EXT"  # the kind rocprofv3's HIP API records carry
RANGE_KIND = "MARKER_CORE_RANGE_API"  # roctx ranges and marks (rocprofv3 7.x)
RANGE_OP = "roctxThreadRangeA"  # roctxRangePushA/Pop (rocprofiler-sdk range_marker.def.cpp)
MARK_OP = "roctxMarkA"


@dataclass
class Kernel:
    name: str
    grid: tuple[int, int, int]  # work-items, as rocprofv3 records them
    block: tuple[int, int, int]
    start: int
    end: int
    corr: int  # internal correlation id of the launching call
    dispatch_id: int
    graph_exec: int = 0  # schema >= 3.0.2: the graph exec handle (0 outside a graph)
    graph_node: int = 0
    kernel_id: int = 0  # symbol id, filled by the builder
    external: int = 0


@dataclass
class Api:
    name: str  # the operation, e.g. hipGraphLaunch
    corr: int
    start: int
    end: int
    kind: str = HIP_KIND


@dataclass
class Marker:
    message: str
    corr: int
    start: int
    end: int  # == start for a roctxMarkA

    @property
    def is_mark(self) -> bool:
        return self.start == self.end


@dataclass
class GraphLaunch:
    exec_id: int
    corr: int
    start: int
    end: int
    kernels: int


@dataclass
class Expected:
    """What the importer must report for the trace (per process/rank)."""

    steps: int
    graph_steps: int
    eager_steps: int
    layers: int  # MLA layers per step
    S: int  # KV splits on the stage-1 grid
    api_calls: int  # HIP runtime calls in the trace
    graph_launches: int
    markers: list[str] = field(default_factory=list)  # range and mark messages, trace order
    kernels: int = 0
    syncs: int = 0  # host syncs inside eager MLA layers (graph replays hold none)


@dataclass
class Trace:
    name: str
    pid: int = 4242
    tid: int = 4242
    agent: int = 2  # the GPU's node id (rocpd agent id = absolute index)
    # the GPU agent's name and marketing name as its agent records hold them (agent_info.csv,
    # rocpd_info_agent, the JSON's agents); arch None: the agent records name no GPU
    arch: str | None = "gfx942"
    product: str | None = "AMD Instinct MI300X"
    host: str = "node0"
    kernels: list[Kernel] = field(default_factory=list)
    apis: list[Api] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    launches: list[GraphLaunch] = field(default_factory=list)
    expected: Expected | None = None
    t0: int = 1_750_000_000_000_000_000

    def symbols(self) -> dict[str, int]:
        """Kernel name -> symbol id (rocprofv3 numbers symbols from 1 as code objects load)."""
        out: dict[str, int] = {}
        for k in self.kernels:
            out.setdefault(k.name, len(out) + 1)
        return out

    @property
    def t_end(self) -> int:
        ends = [k.end for k in self.kernels] + [a.end for a in self.apis]
        ends += [m.end for m in self.markers]
        return max(ends, default=self.t0)


class Builder:
    """Correlation ids, dispatch ids and a clock for one process's trace."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.t = trace.t0
        self._corr = 0
        self._dispatch = 0
        self._exec = 0x7F00_0000

    def corr(self) -> int:
        self._corr += 1
        return self._corr

    def advance(self, ns: int) -> int:
        self.t += ns
        return self.t

    def api(self, name: str, dur: int = 2_000, kind: str = HIP_KIND) -> Api:
        a = Api(name, self.corr(), self.t, self.t + dur, kind)
        self.t += dur + 500
        self.trace.apis.append(a)
        return a

    def kernel(
        self,
        name: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        corr: int,
        dur: int = 5_000,
        graph: tuple[int, int] = (0, 0),
    ) -> Kernel:
        self._dispatch += 1
        k = Kernel(name, grid, block, self.t, self.t + dur, corr, self._dispatch, *graph)
        self.t += dur + 300
        self.trace.kernels.append(k)
        return k

    def graph_exec(self) -> int:
        self._exec += 0x100
        return self._exec

    def push(self, message: str) -> Marker:
        m = Marker(message, self.corr(), self.t, self.t)
        self.t += 200
        return m

    def pop(self, m: Marker) -> None:
        """The range ends now: rocprofv3 writes it at pop time (one record per range)."""
        m.end = self.t
        self.t += 200
        self.trace.markers.append(m)

    def mark(self, message: str) -> Marker:
        m = Marker(message, self.corr(), self.t, self.t)
        self.t += 200
        self.trace.markers.append(m)
        return m

    def finish(self) -> Trace:
        syms = self.trace.symbols()
        for k in self.trace.kernels:
            k.kernel_id = syms[k.name]
        return self.trace
