"""Write the rocprofv3 traces of tests/data/aiter/ (run from the repository root:
``python tests/data/make_aiter_traces.py``; the output is committed, the tests check it matches).

Each trace is a rocprofv3 output folder: ``<pid>_kernel_trace.csv`` (ROCm 7.0 header unless
named ``*_rocm63``) and ``<pid>_hip_api_trace.csv``, built from the REAL kernel names and launch
grids of AITER v0.1.19/v0.1.20 and vLLM 0.32 sources (grids in work-items = blocks x workgroup size, as rocprofv3 writes them).
The arithmetic behind every S is in tests/data/README.md. Standalone on purpose: it imports
nothing from mlaprof, so the importer is tested against an independent description.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

OUT = Path(__file__).resolve().parent / "aiter"
PID = 4242
HEADER_70 = (
    "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,"
    "Correlation_Id,Start_Timestamp,End_Timestamp,LDS_Block_Size,Scratch_Size,VGPR_Count,"
    "Accum_VGPR_Count,SGPR_Count,Workgroup_Size_X,Workgroup_Size_Y,Workgroup_Size_Z,"
    "Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
)
HEADER_63 = (
    "Kind,Agent_Id,Queue_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,"
    "Start_Timestamp,End_Timestamp,Private_Segment_Size,Group_Segment_Size,Workgroup_Size_X,"
    "Workgroup_Size_Y,Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
)
API_HEADER = "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp"

# -- kernel names (AITER v0.1.19/v0.1.20 and vLLM 0.32 sources) ---------------------------------------------------------------
GLUON_S1 = "_mla_gluon"
GLUON_S2 = "_mla_softmax_reducev_kernel"
ASM_S1 = "aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1"
ASM_S1_PS = "aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_ps"
ASM_S1_FLAT = "aiter::mla_dec_stage1_bf16_a16w16_subQ16_mqa16"
ASM_S2 = "_fwd_kernel_stage2_asm"
PS_META = (
    "void aiter::kn_get_mla_metadata_v1_2<MlaMetadataV12Traits<16, 1, true> >"
    "(int const*, int const*, int*, int*, int*, int*, int, int, int)"
)
PS_REDUCE = (
    "void kn_mla_reduce_v1<MlaReduceKernelV1Traits<512, 16, 2>, float, __hip_bfloat16>"
    "(float const*, float const*, int const*, int const*, __hip_bfloat16*, int, int)"
)
# look-alikes: "mla" in the name, not attention
ROPE_CACHE = "_fused_qk_rope_cat_and_cache_mla_kernel"
ROPE_CACHE_PLAIN = "fused_qk_rope_cat_and_cache_mla"
CACHE_WRITE = (
    "void vllm::concat_and_cache_mla_kernel<__hip_bfloat16, __hip_bfloat16, "
    "(vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*, __hip_bfloat16 const*, "
    "__hip_bfloat16*, long const*, int, int, int, int, int, float const*)"
)
RMSNORM = "void aiter::rmsnorm_kernel<__hip_bfloat16, 256>(__hip_bfloat16*, __hip_bfloat16 const*)"
GEMM = "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x1_SN_1LDSB1_GRVW8"
SAMPLE = "void at::native::reduce_kernel<512, 1, at::native::ArgMaxOps<float> >(float*)"

Grid = tuple[int, int, int]


@dataclass
class Trace:
    """Kernels and HIP API calls of one process, on one clock (ns)."""

    t: int = 5_000_000_000_000
    corr: int = 100
    dispatch: int = 0
    kernels: list[tuple] = field(default_factory=list)
    api: list[tuple] = field(default_factory=list)
    kernel_ids: dict[str, int] = field(default_factory=dict)
    pid: int = PID  # one process per rank: rocprofv3 prefixes its files with the pid
    # rocprofv3's Agent_Id: a node's agents numbered CPUs first (2 sockets: GPUs from 2)
    agent: int = 2

    def _kernel(self, name: str, blocks: Grid, wg: Grid, dur: int, corr: int) -> None:
        self.dispatch += 1
        kid = self.kernel_ids.setdefault(name, len(self.kernel_ids) + 1)
        grid = tuple(b * w for b, w in zip(blocks, wg, strict=True))
        self.kernels.append((self.dispatch, kid, name, corr, self.t, self.t + dur, wg, grid))
        self.t += dur + 2_000

    def _call(self, fn: str, corr: int, start: int, dur: int) -> None:
        self.api.append(("HIP_RUNTIME_API_EXT", fn, self.pid, self.pid, corr, start, start + dur))

    def replay(self, seq: list[tuple[str, Grid, Grid, int]], drop_every: int = 0) -> int:
        """One hipGraphLaunch: every kernel of the graph carries the launch's correlation id.
        ``drop_every`` n: the tracer lost every n-th dispatch of this replay (ROCm 7.2.0-7.2.1)."""
        self.corr += 1
        self._call("hipGraphLaunch", self.corr, self.t - 30_000, 12_000)
        for i, (name, blocks, wg, dur) in enumerate(seq):
            if drop_every and i % drop_every == drop_every - 1:
                self.t += dur + 2_000  # it ran; the trace lost it
                continue
            self._kernel(name, blocks, wg, dur, self.corr)
        self.t += 40_000
        return self.corr

    def empty_launch(self) -> None:
        """A graph launch whose kernels are all missing from the trace."""
        self.corr += 1
        self._call("hipGraphLaunch", self.corr, self.t, 12_000)
        self.t += 200_000

    def eager(
        self, name: str, blocks: Grid, wg: Grid, dur: int, fn: str = "hipLaunchKernel"
    ) -> None:
        self.corr += 1
        self._call(fn, self.corr, self.t - 8_000, 5_000)
        self._kernel(name, blocks, wg, dur, self.corr)

    def sync(self, fn: str = "hipStreamSynchronize", dur: int = 9_000) -> None:
        """A host sync: the host waits while the GPU drains, then goes on (GPU idle meanwhile)."""
        self.corr += 1
        self._call(fn, self.corr, self.t, dur)
        self.t += dur + 3_000

    def gap(self, ns: int) -> None:
        self.t += ns

    def write(self, folder: Path, header63: bool = False, api: bool = True) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        lines = [HEADER_63 if header63 else HEADER_70]
        for disp, kid, name, corr, t0, t1, wg, grid in self.kernels:
            common = f'"KERNEL_DISPATCH","Agent {self.agent}",1,'
            if header63:
                lines.append(
                    f'{common}{self.pid},{disp},{kid},"{name}",{corr},{t0},{t1},0,65536,'
                    f"{wg[0]},{wg[1]},{wg[2]},{grid[0]},{grid[1]},{grid[2]}"
                )
            else:
                lines.append(
                    f'{common}0,{self.pid},{disp},{kid},"{name}",{corr},{t0},{t1},65536,0,128,0,96,'
                    f"{wg[0]},{wg[1]},{wg[2]},{grid[0]},{grid[1]},{grid[2]}"
                )
        (folder / f"{self.pid}_kernel_trace.csv").write_text("\n".join(lines) + "\n")
        if api:
            rows = [API_HEADER] + [
                f'"{d}","{fn}",{p},{t},{c},{s},{e}' for d, fn, p, t, c, s, e in sorted(
                    self.api, key=lambda r: (r[5], r[4])
                )
            ]  # fmt: skip
            (folder / f"{self.pid}_hip_api_trace.csv").write_text("\n".join(rows) + "\n")


W256, W512, W64, W128 = (256, 1, 1), (512, 1, 1), (64, 1, 1), (128, 1, 1)
LAYERS = 4


def between_replays(tr: Trace) -> None:
    """Eager work between two graph replays: sampling, and a cache write named like MLA."""
    tr.eager(SAMPLE, (1, 1, 1), W512, 3_000)
    tr.eager(CACHE_WRITE, (60, 1, 1), W256, 2_000)
    tr.gap(150_000)


def gluon(
    s: int, rows: int = 15, qlen: int = 4, heads: int = 8, replays: int = 3,
    dropped: tuple[int, ...] = (), v020: bool = False, empty_after: int = -1,
) -> Trace:  # fmt: skip
    """vLLM + AITER gluon verify (8 heads: Kimi-K2 at TP8) under FULL graphs: grid (B, S, qlen)
    x 256 (v0.1.19; = (B, S, ceil(H/16)*qlen) for H <= 16); stage 2 (B, H, qlen) x 512 only
    when S > 1. ``dropped``: replays that lose every third dispatch in the trace. ``v020``:
    aiter v0.1.20+'s stage 1 grid (B, S, ceil(H/16)*qlen), which differs with > 16 heads."""
    tr = Trace()
    z = -(-heads // 16) * qlen if v020 else qlen
    for r in range(replays):
        seq = []
        for _layer in range(LAYERS):
            seq.append((RMSNORM, (rows * qlen, 1, 1), W256, 2_000))
            seq.append((ROPE_CACHE, (rows * qlen, 1, 1), W256, 3_000))
            seq.append((GLUON_S1, (rows, s, z), W256, 30_000 if s == 1 else 9_000))
            if s > 1:
                seq.append((GLUON_S2, (rows, heads, qlen), W512, 2_500))
            seq.append((GEMM, (8, 4, 1), W256, 6_000))
        tr.replay(seq, drop_every=3 if r in dropped else 0)
        between_replays(tr)
        if r == empty_after:  # a launch whose kernels the tracer lost, between two replays
            tr.empty_launch()
    return tr


def gluon_eager(s: int, rows: int = 8, qlen: int = 4, steps: int = 3) -> Trace:
    """gluon verify run eagerly (no graphs, so no padding rows): each kernel its own launch,
    steps 2 ms apart. S = 1 on 8 rows x qlen 4 is v0.1.19's rule on a short real KV
    (ceil(min_kv/64) = 1: min_kv <= 64), not padding: 256 // 32 = 8 under v0.1.20."""
    tr = Trace()
    for _ in range(steps):
        for _layer in range(LAYERS):
            tr.eager(RMSNORM, (rows * qlen, 1, 1), W256, 2_000)
            tr.eager(GLUON_S1, (rows, s, qlen), W256, 20_000)
            if s > 1:
                tr.eager(GLUON_S2, (rows, 8, qlen), W512, 2_500)
            tr.eager(GEMM, (8, 4, 1), W256, 6_000)
        tr.gap(2_000_000)
    return tr


def asm(rows: int = 15, s: int = 16, heads: int = 16, replays: int = 3) -> Trace:
    """The ASM verify path (16 heads: DeepSeek-V3 at TP8): stage 1 grid (ceil(qlen*gqa/subQ),
    B, S) x 256 with qlen*gqa = 4*16 = 64 rows per workgroup -> x = 1; stage 2 (B, H) x 64."""
    tr = Trace()
    for _ in range(replays):
        seq = []
        for _layer in range(LAYERS):
            seq.append((CACHE_WRITE, (rows * 4, 1, 1), W256, 2_000))
            seq.append((ASM_S1, (1, rows, s), W256, 11_000))
            seq.append((ASM_S2, (rows, heads, 1), W64, 2_000))
            seq.append((GEMM, (8, 4, 1), W256, 6_000))
        tr.replay(seq)
        between_replays(tr)
    return tr


def mtp_drafter(rows: int = 15, steps: int = 3, k: int = 3) -> Trace:
    """DeepSeek-V3 at TP8 with the MTP drafter (deepseek_mtp, k = 3): every verify step is one
    replay of the target's graph (4 MLA layers here; 61 in the real model) on the ASM verify
    kernel (grid (1, B, S=16), qlen 4), followed by k replays of the drafter's own graph: ONE MLA
    layer of the decode kernel ``aiter::mla_dec_stage1_bf16_a16w16_subQ16_mqa16`` (grid
    (1, B, S=4): qlen 1) and its stage 2. Same family (aiter-asm), other variant and layer
    count: the drafter must never read as lost kernels, a variant switch or a verify step."""
    tr = Trace()
    for _ in range(steps):
        seq = []
        for _layer in range(LAYERS):
            seq.append((CACHE_WRITE, (rows * 4, 1, 1), W256, 2_000))
            seq.append((ASM_S1, (1, rows, 16), W256, 400_000))
            seq.append((ASM_S2, (rows, 16, 1), W64, 20_000))
            seq.append((GEMM, (8, 4, 1), W256, 60_000))
        tr.replay(seq)
        for _ in range(k):
            tr.gap(20_000)
            tr.replay([
                (RMSNORM, (rows, 1, 1), W256, 2_000),
                (ASM_S1_FLAT, (1, rows, 4), W256, 30_000),
                (ASM_S2, (rows, 16, 1), W64, 3_000),
                (GEMM, (8, 4, 1), W256, 6_000),
            ])  # fmt: skip
        between_replays(tr)
    return tr


def persistent(small: int = 8, large: int = 40, s_large: int = 6, cus: int = 256) -> Trace:
    """Batches below AITER_MLA_DECODE_PERSISTENT_MAX_BATCH (32) take the persistent kernel: an
    eager metadata kernel in the builder ((1,1,1) x 64), then per layer the _ps kernel ((#CU,
    1, 1) x 256: S is not on the grid) and the reduce ((H, W, tiles) x 128). A batch of 40
    takes the non-persistent kernel (grid (1, 40, 6) x 256) and its stage 2."""
    tr = Trace()
    for step in range(5):
        big = step >= 3
        if not big:
            tr.eager(PS_META, (1, 1, 1), W64, 4_000)
            tr.gap(20_000)
        seq = []
        for _layer in range(LAYERS):
            rows = large if big else small
            seq.append((ROPE_CACHE_PLAIN, (rows * 4, 1, 1), W256, 2_000))
            if big:
                seq.append((ASM_S1, (1, large, s_large), W256, 14_000))
                seq.append((ASM_S2, (large, 16, 1), W64, 3_000))
            else:
                seq.append((ASM_S1_PS, (cus, 1, 1), W256, 9_000))
                seq.append((PS_REDUCE, (16, 2, small * 4 // 4), W128, 2_000))
            seq.append((GEMM, (8, 4, 1), W256, 6_000))
        tr.replay(seq)
        between_replays(tr)
    return tr


def persistent_eager_steps(rows: int = 8, cus: int = 256) -> Trace:
    """Persistent path: a graph replay, two steps back to back that ran without a graph (each
    its eager metadata kernel, then 4 layers of _ps + reduce launched one by one), a replay."""
    tr = Trace()

    def layers() -> list[tuple[str, Grid, Grid, int]]:
        seq = []
        for _layer in range(LAYERS):
            seq.append((ROPE_CACHE_PLAIN, (rows * 4, 1, 1), W256, 2_000))
            seq.append((ASM_S1_PS, (cus, 1, 1), W256, 9_000))
            seq.append((PS_REDUCE, (16, 2, rows), W128, 2_000))
        return seq

    for graph in (True, False, False, True):
        tr.eager(PS_META, (1, 1, 1), W64, 4_000)
        if graph:
            tr.gap(20_000)
            tr.replay(layers())
            between_replays(tr)
        else:
            for name, blocks, wg, dur in layers():
                tr.eager(name, blocks, wg, dur)
    return tr


def eager_syncs(steps: int = 2, rows: int = 32, s: int = 8) -> Trace:
    """The pre-fix flattened verify path run eagerly: every verify token its own row (8
    requests x qlen 4 = 32 rows, qlen 1 kernel), a host sync in every layer before its kernels
    (the `.item()` of the last indptr); steps 2 ms apart."""
    tr = Trace()
    for _ in range(steps):
        for _layer in range(LAYERS):
            tr.eager(RMSNORM, (rows, 1, 1), W256, 2_000)
            tr.sync()
            tr.eager(ASM_S1_FLAT, (1, rows, s), W256, 12_000, "hipModuleLaunchKernel")
            tr.eager(ASM_S2, (rows, 16, 1), W64, 2_000)
            tr.eager(GEMM, (8, 4, 1), W256, 6_000)
        tr.gap(2_000_000)
    return tr


def fleet(out: Path, hosts: int = 2, per_host: int = 4) -> None:
    """A DP2 x TP4 server on two hosts (one folder per host, one process per GPU), the data
    parallel groups serving different batches: host 0's ranks run 15 rows x qlen 4 with the
    v0.1.19 bug (S = 1), host 1's run 6 rows x qlen 4 with S = 8 (256 // 24 = 10 capped by
    its KV: no collapse). The importer orders the ranks by host folder, then pid."""
    for h in range(hosts):
        for i in range(per_host):
            rows, s = (15, 1) if h == 0 else (6, 8)
            tr = gluon(s, rows=rows)
            tr.pid = 5000 + 100 * h + i
            tr.agent = 2 + i  # each rank of a host on its own GPU
            tr.write(out / f"host{h}")


def build(out: Path = OUT) -> list[Path]:
    gluon(1).write(out / "gluon_v0119_bug")
    gluon(4).write(out / "gluon_v0119_fix")
    gluon(1).write(out / "gluon_v0119_bug_rocm63", header63=True, api=False)
    asm().write(out / "asm_16heads")
    persistent().write(out / "persistent_switch")
    eager_syncs().write(out / "eager_syncs")
    dropped = gluon(4, replays=5, dropped=(1, 3), empty_after=2)
    dropped.write(out / "gluon_v0119_fix_dropped")
    persistent_eager_steps().write(out / "persistent_eager_steps")
    fleet(out / "fleet_dp2_tp4")
    # aiter v0.1.20 gluon with 32 heads (AITER called directly: vLLM sends >= 16 heads to ASM):
    # stage 1's z is ceil(32/16)*4 = 8, stage 2's (B, 32, 4) pins qlen 4; S = 256 // (8*4*2) = 4
    gluon(4, rows=8, heads=32, v020=True).write(out / "gluon_v020_32heads")
    gluon_eager(1).write(out / "gluon_eager_short_kv")
    mtp_drafter().write(out / "asm_mtp_drafter")
    # two ranks, one whose tracer lost every third dispatch of two replays: trust is per rank
    lossy, clean = gluon(4, replays=5, dropped=(1, 3)), gluon(4, replays=5)
    lossy.pid, clean.pid = 6000, 6001
    lossy.write(out / "two_ranks_one_lossy")
    clean.write(out / "two_ranks_one_lossy")
    return sorted(p for p in out.rglob("*.csv"))


if __name__ == "__main__":
    for p in build(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print(p)
