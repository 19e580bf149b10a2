"""Traces shaped as vLLM runs them, for the step model: what one process did (kernels, HIP API
calls, roctx ranges) and what ``mlaprof report`` must answer for it.

Standalone on purpose (it imports nothing from mlaprof): the importer is tested against an
independent description. Kernel names and grids are those of tests/data/make_aiter_traces.py
(AITER gluon v0.1.19: stage 1 grid (B, S, qlen) x 256, stage 2 (B, H, qlen) x 512). A step as vLLM
0.32 runs it (``v1/worker/gpu_model_runner.py``): input preparation, the model forward (one FULL
graph launch; PIECEWISE graph pieces with attention launched eagerly between them; or every
kernel launched on its own), the rejection sampler (``v1/sample/rejection_sampler.py``: argmax,
``rejection_greedy_sample_kernel``), a speculative drafter's passes (each ending in an argmax,
``v1/spec_decode/llm_base_proposer.py``), then the host reads the sampled tokens back
(``hipMemcpyAsync`` + ``hipStreamSynchronize``). Correlation ids as rocprofv3 gives them:
every host call takes the next id, a kernel carries its launch call's id, every kernel of a graph
launch the ``hipGraphLaunch``'s. One clock for host and GPU (ns), the GPU following the host.

:func:`write_csv` writes a shape as rocprofv3 7.x CSVs (``<pid>_kernel_trace.csv``,
``<pid>_hip_api_trace.csv``, ``<pid>_marker_api_trace.csv``: one row per range at its pop,
Function = the message); :func:`write` writes it in any format of the conformance corpus
(tests/conformance: rocpd schemas, rocprofv3 JSON, CSV layouts) through that corpus's writers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GLUON_S1 = "_mla_gluon"
GLUON_S2 = "_mla_softmax_reducev_kernel"
ROPE_CACHE = "_fused_qk_rope_cat_and_cache_mla_kernel"
RMSNORM = "void aiter::rmsnorm_kernel<__hip_bfloat16, 256>(__hip_bfloat16*, __hip_bfloat16 const*)"
GEMM = "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x1_SN_1LDSB1_GRVW8"
MOE = "void aiter::fused_moe_kernel<__hip_bfloat16>(__hip_bfloat16*)"
EMBED = "void at::native::index_select_kernel<c10::BFloat16, long>(c10::BFloat16*)"
PREP = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<long> >(int)"
PREFILL = "flash_fwd_kernel<Flash_fwd_kernel_traits<192, 64, 128, 4, false, false, bf16> >"
ARGMAX = "void at::native::reduce_kernel<512, 1, at::native::ArgMaxOps<float> >(float*)"
REJECT = "rejection_greedy_sample_kernel"
W256, W512 = (256, 1, 1), (512, 1, 1)
HEADS = 8  # Kimi-K2 at TP8: vLLM sends gluon verify fewer than 16 heads

KERNEL_HEADER = (
    "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,"
    "Correlation_Id,Start_Timestamp,End_Timestamp,LDS_Block_Size,Scratch_Size,VGPR_Count,"
    "Accum_VGPR_Count,SGPR_Count,Workgroup_Size_X,Workgroup_Size_Y,Workgroup_Size_Z,"
    "Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
)
API_HEADER = "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp"
HIP = "HIP_RUNTIME_API_EXT"
RANGE = "MARKER_CORE_RANGE_API"

Blocks = tuple[int, int, int]
Seq = list[tuple[str, Blocks, tuple[int, int, int], int]]


@dataclass
class Kernel:
    name: str
    grid: tuple[int, int, int]  # work-items
    block: tuple[int, int, int]
    start: int
    end: int
    corr: int
    graph_exec: int = 0  # the graph a launch replays (0: launched on its own)


@dataclass
class Call:
    domain: str
    name: str  # the operation, or a range's message
    corr: int
    start: int
    end: int


@dataclass
class Process:
    """One rank's process: its kernels, API calls and ranges, on one clock."""

    pid: int = 4242
    agent: int = 2
    host: str = ""  # the folder rocprofv3 wrote this process's files into
    t: int = 7_000_000_000_000
    corr: int = 0
    kernels: list[Kernel] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    ranges: list[Call] = field(default_factory=list)
    _open: list[tuple[str, int, int]] = field(default_factory=list)

    def _call(self, name: str, dur: int, domain: str = HIP) -> int:
        self.corr += 1
        self.calls.append(Call(domain, name, self.corr, self.t, self.t + dur))
        self.t += dur + 500
        return self.corr

    def _run(self, name: str, blocks: Blocks, wg: tuple[int, int, int], dur: int, corr: int,
             graph: int = 0) -> None:  # fmt: skip
        grid = (blocks[0] * wg[0], blocks[1] * wg[1], blocks[2] * wg[2])
        self.kernels.append(Kernel(name, grid, wg, self.t, self.t + dur, corr, graph))
        self.t += dur + 1_000

    def eager(self, name: str, blocks: Blocks, wg: tuple[int, int, int], dur: int) -> None:
        self._run(name, blocks, wg, dur, self._call("hipLaunchKernel", 4_000))

    def graph(self, exec_id: int, seq: Seq) -> None:
        corr = self._call("hipGraphLaunch", 9_000)
        for name, blocks, wg, dur in seq:
            self._run(name, blocks, wg, dur, corr, exec_id)

    def sync(self, dur: int = 20_000) -> None:
        self._call("hipMemcpyAsync", 3_000)
        self._call("hipStreamSynchronize", dur)

    def pause(self, ns: int) -> None:
        self.t += ns

    def push(self, message: str) -> None:
        self.corr += 1
        self._open.append((message, self.corr, self.t))
        self.t += 300

    def pop(self) -> None:
        message, corr, start = self._open.pop()
        self.ranges.append(Call(RANGE, message, corr, start, self.t))
        self.t += 300


@dataclass
class Shape:
    name: str
    processes: list[Process]
    expected: dict[str, Any]
    notes: str = ""


# -- the pieces of a step -----------------------------------------------------------------------
def attention(rows: int, s: int, qlen: int) -> Seq:
    seq: Seq = [
        (ROPE_CACHE, (rows * qlen, 1, 1), W256, 3_000),
        (GLUON_S1, (rows, s, qlen), W256, 9_000),
    ]
    if s > 1:
        seq.append((GLUON_S2, (rows, HEADS, qlen), W512, 2_500))
    return seq


def around_attention(rows: int, qlen: int) -> Seq:
    """The layer's work after its attention and the next layer's before it (a PIECEWISE piece)."""
    return [
        (GEMM, (8, 4, 1), W256, 6_000),
        (MOE, (rows * qlen, 8, 1), W256, 12_000),
        (RMSNORM, (rows * qlen, 1, 1), W256, 2_000),
        (GEMM, (8, 4, 1), W256, 5_000),
    ]


def full_forward(rows: int, s: int, qlen: int, layers: int) -> Seq:
    seq: Seq = [(EMBED, (rows * qlen, 1, 1), W256, 2_000)]
    for _ in range(layers):
        seq += [(RMSNORM, (rows * qlen, 1, 1), W256, 2_000), (GEMM, (8, 4, 1), W256, 5_000)]
        seq += attention(rows, s, qlen)
        seq += [(GEMM, (8, 4, 1), W256, 6_000), (MOE, (rows * qlen, 8, 1), W256, 12_000)]
    return seq + [(RMSNORM, (rows * qlen, 1, 1), W256, 2_000), (GEMM, (32, 4, 1), W256, 20_000)]


def prepare(p: Process, rows: int) -> None:
    p.eager(PREP, (rows, 1, 1), W256, 2_000)


def sample(p: Process, rows: int, gap: int = 150_000) -> None:
    p.eager(ARGMAX, (rows * 4, 1, 1), W512, 4_000)
    p.eager(REJECT, (rows, 1, 1), (1, 1, 1), 3_000)
    p.sync(20_000 if gap else 2_000)  # the GPU is still busy, or already idle
    p.pause(gap)  # the scheduler's turn between steps (async scheduling: none)


def step_full(p: Process, rows: int, s: int, qlen: int, layers: int, exec_id: int = 0x7F01) -> None:
    prepare(p, rows)
    p.graph(exec_id, full_forward(rows, s, qlen, layers))
    sample(p, rows)


def step_piecewise(p: Process, rows: int, s: int, qlen: int, layers: int, prefill: bool = False,
                   piece_base: int = 0x7E00, gap: int = 150_000) -> None:  # fmt: skip
    """``layers`` + 1 graph pieces with each layer's attention launched eagerly between them;
    ``prefill``: a chunked-prefill batch, whose prefill tokens run the prefill kernel too."""
    prepare(p, rows)
    p.graph(piece_base, [(EMBED, (rows * qlen, 1, 1), W256, 2_000),
                         (RMSNORM, (rows * qlen, 1, 1), W256, 2_000), (GEMM, (8, 4, 1), W256, 5_000)])  # fmt: skip
    for i in range(layers):
        for name, blocks, wg, dur in attention(rows, s, qlen):
            p.eager(name, blocks, wg, dur)
        if prefill:
            p.eager(PREFILL, (64, HEADS, 1), (256, 1, 1), 40_000)
        last = i == layers - 1
        p.graph(piece_base + 1 + i, around_attention(rows, qlen)[:2] + (
            [(RMSNORM, (rows * qlen, 1, 1), W256, 2_000), (GEMM, (32, 4, 1), W256, 20_000)]
            if last else around_attention(rows, qlen)[2:]))  # fmt: skip
    sample(p, rows, gap)


def step_eager(p: Process, rows: int, s: int, qlen: int, layers: int, prefill: bool = False,
               pause_after: int = -1, ranges: bool = False, closing: bool = True) -> None:  # fmt: skip
    """Every kernel launched on its own; ``pause_after``: the host pauses 5 ms after that layer
    (a Python GC pause, a log flush); ``ranges``: roctx ranges around the step and each layer."""
    if closing:
        prepare(p, rows)
    p.eager(EMBED, (rows * qlen, 1, 1), W256, 2_000)
    for i in range(layers):
        if ranges:
            p.push(f"layer {i}")
        p.eager(RMSNORM, (rows * qlen, 1, 1), W256, 2_000)
        for name, blocks, wg, dur in attention(rows, s, qlen):
            p.eager(name, blocks, wg, dur)
        if prefill:
            p.eager(PREFILL, (64, HEADS, 1), (256, 1, 1), 40_000)
        p.eager(GEMM, (8, 4, 1), W256, 6_000)
        if ranges:
            p.pop()
        if i == pause_after:
            p.pause(5_000_000)
    p.eager(GEMM, (32, 4, 1), W256, 20_000)
    if closing:
        sample(p, rows)
    else:
        p.pause(150_000)


# -- the shapes ---------------------------------------------------------------------------------
LAYERS = 8


def piecewise_qlen4(gap: int = 150_000) -> Shape:
    """PIECEWISE at qlen 4: 6 steps, each 9 graph pieces with the 8 layers' attention launched
    eagerly between them (54 graph launches). No padding rows under PIECEWISE (vLLM 0.32
    ``gpu_model_runner.py``: ``pad_attn = cudagraph_mode == CUDAGraphMode.FULL``): 6 real rows,
    S = 10 (v0.1.19 / v0.1.20 cap 256 // (6 x 4) = 10: no collapse). ``gap``: host time
    between a step's end-of-step sync and the next step."""
    p = Process()
    for _ in range(6):
        step_piecewise(p, rows=6, s=10, qlen=4, layers=LAYERS, gap=gap)
    return Shape("piecewise_qlen4", [p], {
        "steps": 6, "capture": ["PIECEWISE"] * 6, "layers": [LAYERS] * 6, "S": [10] * 6,
        "status": "piecewise", "graph_launches": 54, "source": "step-closing-kernels",
        "edge_partial": 0, "trust": "reliable", "syncs": 0,
    })  # fmt: skip


def mixed_prefill() -> Shape:
    """FULL_AND_PIECEWISE with chunked prefill mixed into decode: decode steps replay the FULL
    graph (8 padded rows, S = 8), two mixed prefill-decode steps run PIECEWISE, two steps too
    big for any capture size run eagerly, back to back, then decode again."""
    p = Process()
    caps = []
    for kind in ("full", "full", "piece", "piece", "eager", "eager", "full", "full"):
        if kind == "full":
            step_full(p, rows=8, s=8, qlen=4, layers=LAYERS)
            caps.append("FULL")
        elif kind == "piece":
            step_piecewise(p, rows=6, s=10, qlen=4, layers=LAYERS, prefill=True)
            caps.append("PIECEWISE")
        else:
            step_eager(p, rows=6, s=10, qlen=4, layers=LAYERS, prefill=True)
            caps.append("eager")
    return Shape("mixed_prefill", [p], {
        "steps": 8, "capture": caps, "layers": [LAYERS] * 8, "S": [8, 8, 10, 10, 10, 10, 8, 8],
        "status": "mixed", "source": "step-closing-kernels", "edge_partial": 0,
        "trust": "reliable", "syncs": 0,
    })  # fmt: skip


def cut_window() -> Shape:
    """A collection window that opens in the middle of a FULL replay and closes in the middle of
    another: 8 replays ran, the first lost its first half (and its launch call: before the
    window), the last its second half. 6 whole steps, 2 partial steps at the edges, no loss."""
    p = Process()
    for _ in range(8):
        step_full(p, rows=8, s=8, qlen=4, layers=LAYERS)
    graph_corr = sorted({k.corr for k in p.kernels if k.graph_exec})
    first, last = graph_corr[0], graph_corr[-1]
    k_first = [k for k in p.kernels if k.corr == first]
    k_last = [k for k in p.kernels if k.corr == last]
    t_open = k_first[len(k_first) // 2].start  # the window opens here ...
    t_close = k_last[len(k_last) // 2].start  # ... and closes here
    p.kernels = [k for k in p.kernels if t_open <= k.start < t_close]
    p.calls = [c for c in p.calls if t_open <= c.start < t_close]
    return Shape("cut_window", [p], {
        "steps": 6, "capture": ["FULL"] * 6, "layers": [LAYERS] * 6, "S": [8] * 6,
        "status": "replayed", "edge_partial": 2, "trust": "reliable", "syncs": 0,
        "short_replays": 0,
    })  # fmt: skip


def mtp_first_pass() -> Shape:
    """DeepSeek MTP (``deepseek_mtp``, 3 speculative tokens): after each FULL replay of the
    target's 8-layer graph and its rejection sampler, the drafter's first pass runs the target's
    kernel, rows and qlen (4) in its own one-layer graph, then two more passes at qlen 1 in a
    second one-layer graph, each pass ending in an argmax."""
    p = Process()
    rows = 8

    def one_layer(qlen: int, s: int) -> Seq:
        return [(RMSNORM, (rows * qlen, 1, 1), W256, 2_000), (GEMM, (8, 4, 1), W256, 5_000),
                *attention(rows, s, qlen), (GEMM, (8, 4, 1), W256, 6_000)]  # fmt: skip

    for _ in range(6):
        prepare(p, rows)
        p.graph(0x7F01, full_forward(rows, 8, 4, LAYERS))
        p.eager(ARGMAX, (rows * 4, 1, 1), W512, 4_000)
        p.eager(REJECT, (rows, 1, 1), (1, 1, 1), 3_000)
        p.graph(0x7F10, one_layer(4, 8))
        p.eager(ARGMAX, (rows, 1, 1), W512, 3_000)
        for _ in range(2):
            p.graph(0x7F11, one_layer(1, 16))
            p.eager(ARGMAX, (rows, 1, 1), W512, 3_000)
        p.sync()
        p.pause(150_000)
    return Shape("mtp_first_pass", [p], {
        "steps": 6, "capture": ["FULL"] * 6, "layers": [LAYERS] * 6, "S": [8] * 6,
        "status": "replayed", "edge_partial": 0, "trust": "reliable", "syncs": 0,
        "drafter_steps": 18, "short_replays": 0,
    })  # fmt: skip


def eager_pause_roctx() -> Shape:
    """An eager run (mlaprof's own benchmark loop: no sampler) with roctx ranges around every
    step and layer, and a 5 ms host pause inside step 3 after its layer 3: the ranges keep the
    step whole."""
    p = Process()
    for i in range(6):
        p.push(f"step {i}")
        step_eager(p, rows=6, s=10, qlen=4, layers=LAYERS, pause_after=3 if i == 3 else -1,
                   ranges=True, closing=False)  # fmt: skip
        p.pop()
    return Shape("eager_pause_roctx", [p], {
        "steps": 6, "capture": ["eager"] * 6, "layers": [LAYERS] * 6, "S": [10] * 6,
        "status": "eager", "source": "roctx-ranges", "edge_partial": 0, "trust": "reliable",
        "syncs": 0,
    })  # fmt: skip


def dp2_tp8(gpus: int = 8) -> Shape:
    """DP2 x TP8 on two hosts (8 GPUs each, one process per GPU): vLLM pads every DP rank to the
    same token count, so all 16 ranks run the same batch rows; nothing in the trace says which
    ranks share a DP group."""
    procs = []
    for h in range(2):
        for g in range(gpus):
            p = Process(pid=9000 + 100 * h + g, agent=2 + g, host=f"host{h}")
            for _ in range(3):
                step_full(p, rows=8, s=8, qlen=4, layers=4)
            procs.append(p)
    return Shape(f"dp2_tp{gpus}", procs, {
        "steps": 3, "capture": ["FULL"] * 3, "layers": [4] * 3, "S": [8] * 3,
        "status": "replayed", "edge_partial": 0, "trust": "reliable", "syncs": 0,
        "ranks": 2 * gpus, "dp_groups": None,
    })  # fmt: skip


def dp2_tp2() -> Shape:
    """The same fleet on two GPUs a host: the processes-to-ranks mapping of every format, on a
    fleet small enough to import in each (dp2_tp8's 16 ranks are imported from the CSV)."""
    return dp2_tp8(gpus=2)


SHAPES = (piecewise_qlen4, mixed_prefill, cut_window, mtp_first_pass, eager_pause_roctx, dp2_tp8)
# every shape in every format, but the 16-rank fleet in one format (each of its imports and
# reports costs ~1 s of CPU); the others read it as the 4-rank dp2_tp2
SHAPES_PER_FORMAT = (*SHAPES[:-1], dp2_tp2)


# -- rocprofv3 CSV ------------------------------------------------------------------------------
def write_csv(shape: Shape, out: Path) -> Path:
    """The shape as rocprofv3 7.x CSV files, one set per process (host folders as given)."""
    folder = out / shape.name
    for p in shape.processes:
        d = folder / p.host if p.host else folder
        d.mkdir(parents=True, exist_ok=True)
        ids: dict[str, int] = {}
        rows = [KERNEL_HEADER]
        for i, k in enumerate(p.kernels, 1):
            kid = ids.setdefault(k.name, len(ids) + 1)
            rows.append(
                f'"KERNEL_DISPATCH","Agent {p.agent}",1,0,{p.pid},{i},{kid},"{k.name}",{k.corr},'
                f"{k.start},{k.end},65536,0,128,0,96,{k.block[0]},{k.block[1]},{k.block[2]},"
                f"{k.grid[0]},{k.grid[1]},{k.grid[2]}"
            )
        (d / f"{p.pid}_kernel_trace.csv").write_text("\n".join(rows) + "\n")
        api = [API_HEADER] + [
            f'"{c.domain}","{c.name}",{p.pid},{p.pid},{c.corr},{c.start},{c.end}'
            for c in sorted(p.calls, key=lambda c: (c.start, c.corr))
        ]
        (d / f"{p.pid}_hip_api_trace.csv").write_text("\n".join(api) + "\n")
        if p.ranges:  # one row per range, written at its pop
            mk = [API_HEADER] + [
                f'"{c.domain}","{c.name}",{p.pid},{p.pid},{c.corr},{c.start},{c.end}'
                for c in sorted(p.ranges, key=lambda c: c.end)
            ]
            (d / f"{p.pid}_marker_api_trace.csv").write_text("\n".join(mk) + "\n")
    return folder


# -- every format of the conformance corpus -------------------------------------------------------
def to_conformance(p: Process, name: str) -> Any:
    """One process as the conformance corpus's abstract trace (its writers render it)."""
    from tests.conformance import model

    tr = model.Trace(name, pid=p.pid, tid=p.pid, agent=p.agent, host=p.host or "node0")
    node: dict[int, int] = {}
    spans: dict[int, list[int]] = {}
    for i, k in enumerate(p.kernels, 1):
        gn = 0
        if k.graph_exec:
            gn = node[k.corr] = node.get(k.corr, 0) + 1
            sp = spans.setdefault(k.corr, [k.start, k.end, 0, k.graph_exec])
            sp[1], sp[2] = max(sp[1], k.end), sp[2] + 1
        tr.kernels.append(model.Kernel(k.name, k.grid, k.block, k.start, k.end, k.corr, i,
                                       k.graph_exec, gn))  # fmt: skip
    tr.apis = [model.Api(c.name, c.corr, c.start, c.end) for c in p.calls]
    tr.markers = [model.Marker(c.name, c.corr, c.start, c.end) for c in p.ranges]
    tr.launches = [
        model.GraphLaunch(sp[3], corr, sp[0], sp[1], sp[2]) for corr, sp in spans.items()
    ]
    syms = tr.symbols()
    for k in tr.kernels:
        k.kernel_id = syms[k.name]
    return tr


def write(shape: Shape, fmt: str, out: Path) -> Path:
    """The shape in ``fmt``: ``csv`` (:func:`write_csv`) or a name of the conformance corpus's
    ``FORMATS``; returns the folder to import."""
    if fmt == "csv":
        return write_csv(shape, out)
    from tests.conformance import FORMATS

    folder = out / shape.name
    for p in shape.processes:
        FORMATS[fmt](to_conformance(p, shape.name), folder)
    return folder
