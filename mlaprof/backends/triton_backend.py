"""The ``triton`` verify backend: mlaprof's split-KV 4-D MTP kernel (``mlaprof.kernels.mla_verify``).

Graph-capturable: no host sync, no data-dependent allocation. The split partials live in a
workspace sized from host-known values (B, qlen, H, S); it is allocated on the first (eager) call
of a shape, which a capture runner makes before capturing, and reused afterwards.

With ``device_splits`` the kernels decide each row's split count on the device from ``seq_lens``
(``num_splits`` is then only the grid's cap, a function of the capture size): a graph captured with
the dummy run's KV lengths replays with the right S at every length.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from mlaprof.backends.base import VerifyInputs, check_shapes
from mlaprof.errors import MissingExtraError, MlaprofError
from mlaprof.scenario import LATENT
from mlaprof.splits.policies import MLAPROF_MIN_CHUNK, WIDE_DECODE_ARCH

if TYPE_CHECKING:
    from mlaprof.metadata import VerifyMetadata

MAX_SPLITS = 1024


def _kernels() -> Any:
    try:
        from mlaprof.kernels import mla_verify
    except ImportError as e:  # triton absent (or broken)
        raise MissingExtraError("the triton backend", "triton", str(e)) from None
    return mla_verify


_GLUON: list[Any] = []  # the Gluon module once imported, or None when this Triton has no Gluon


def _gluon_kernels() -> Any:
    """The sm_90 Gluon stage 1, imported on first use (only ever on a Hopper GPU); None where the
    installed Triton has no ``triton.experimental.gluon`` with the Hopper ops (then the Triton
    kernel runs)."""
    if not _GLUON:
        try:
            from mlaprof.kernels import mla_verify_gluon
        except ImportError:
            mla_verify_gluon = None
        _GLUON.append(mla_verify_gluon)
    return _GLUON[0]


@dataclass(frozen=True)
class LaunchConfig:
    """Launch parameters; the defaults are the best measured on an H200 (bench/gpu_suite.py)."""

    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 2
    block_s: int = 32  # splits merged per iteration in stage 2
    stage2_heads: int = 1  # heads per stage-2 program (the interpreter likes many)
    stage2_block_d: int = 128  # latent columns per stage-2 program (smaller: more programs)
    stage2_warps: int = 4
    # stage 2 where one block holds every split (S <= block_s): all loads issued at once
    stage2_one_pass: bool = False
    rows: int = 64  # query rows (qlen x heads) one stage-1 program holds
    heads_first: bool = True  # head blocks of one split launch next to each other (L2 reuse)
    dv_split: int = 1  # programs per (row, head block, split), each over 512/dv_split columns
    # fewest KV tokens a device-decided split gets (the policy's; smaller only in tests)
    split_min_chunk: int = MLAPROF_MIN_CHUNK
    qk_chunk: int = 0  # > 0: QK^T over latent chunks, q re-read per tile (64-row programs)
    rope_first: bool = False  # load order inside a KV tile (steers Triton's schedule)
    # stage 1 for verify: "auto" (the Gluon kernel where use_gluon() allows it: sm_90), "triton",
    # or "gluon" (sm_90 only; an error elsewhere)
    kernel: str = "auto"
    gluon_block_n: int = 64  # keys per tile of the Gluon kernel (also stage 2's alignment)
    gluon_buffers: int = 2  # shared KV buffers of the Gluon kernel (buffers - 1 tiles in flight)
    gluon_overlap: bool = False  # issue S of tile t before waiting for P V of tile t - 1
    gluon_lazy_sum: bool = True  # softmax row sums per thread, reduced once after the last tile
    gluon_phases: int = 3  # benchmarks only: 1 = loads alone, 2 = compute alone (wrong output)
    # pages of whole tiles (page size a multiple of gluon_block_n, e.g. vLLM's 64-token blocks):
    # KV tiles fetched by TMA (mla_verify_stage1_hopper_tma) instead of the cp.async gather
    gluon_tma: bool = True
    gluon_decode: bool = False  # qlen 1 also on the Gluon kernel (64 rows: heads padded to 64)
    gluon_l2_prefetch: int = 0  # tiles past the shared buffers' window prefetched into L2
    # refill the buffer freed by tile t - 1 before awaiting tile t (two tiles in flight while
    # a tile is awaited; one CTA-wide barrier more per tile in the cp.async gather)
    gluon_early_issue: bool = False
    # TMA tiles only: mbarriers per tile (1; 3 or 9: S = q K^T starts on the first group of
    # 64-column boxes that lands)
    gluon_chunks: int = 1
    # warp roles (mla_verify_stage1_hopper_ws): a loader warp fetches the tiles (TMA, or the
    # cp.async row gather where pages are smaller than a tile), the two warpgroups only compute;
    # buffers go back to the loader through mbarriers, no CTA-wide barrier guards a copy
    gluon_ws: bool = False
    # warpgroup roles (mla_verify_stage1_hopper_roles): warpgroup 0 computes S over the whole
    # tile and the softmax, both compute P V; a loader warp fetches the tiles by TMA where pages
    # hold whole tiles, a loader warpgroup gathers rows by cp.async elsewhere. "all", "tma"
    # (pages of whole tiles only; the fused kernels elsewhere) or "off"; taken only with the
    # default loop (roles_kernel). The default for its compute alone, 21-27% shorter than the
    # fused kernels' at B >= 8 (the H200's gap was compute); measured on H100s only, where both
    # are memory-bound (bench/results/verify_vs_flashmla_h100.json)
    gluon_roles: str = "all"
    gluon_p_regs: bool = True  # roles kernel: warpgroup 0's P V takes P from registers
    # roles kernel, TMA loader: the KV offset loaded beside the lengths and q awaited by
    # warpgroup 0 alone (the loader's first tiles overlap q's copy); measured at page 64 only
    gluon_early_q: bool = False
    # roles kernel, TMA loader: the next tile's page index loaded before the buffer frees
    gluon_idx_ahead: bool = False
    # roles kernel, TMA loader: the programs of a (request, head block) row take its tiles from
    # a counter on the device instead of fixed ranges (the row's programs end together; the
    # last resets the counter, so graphs replay right); stage 2 merges every split's partial
    gluon_dynamic: bool = False
    # dynamic tiles only up to this many splits a row (all of a row's programs share one
    # counter: at 128 a row, B 1, the balance won is less than that costs)
    gluon_dynamic_max_splits: int = 64
    # dynamic tiles: a row's programs launch next to each other (spread over the GPCs). Off:
    # measured correct on an H100 and no faster (ratio 0.999-1.000 at B 8 and 64, rows' end
    # times no closer; bench/results/verify_gluon_spread_h100.json)
    gluon_spread_rows: bool = False


def default_config(qlen: int, flatten: bool = False, hopper: bool = False) -> LaunchConfig:
    """Verify (qlen > 1, native) holds qlen x heads query rows per program. On sm_90 stage 1 is
    the Gluon kernel (``kernel="auto"``: 64 rows, tiles of 64 keys, 2 shared buffers); the
    Triton fields here are its fallback where Gluon is missing, the 64-row layout with 8 warps
    and a 3-stage KV pipeline (Triton emits wgmma for it, 255 registers, 2 spilled). Elsewhere
    (AMD, the CPU interpreter) the portable 32-row layout. Flattened verify holds one query
    position (16 rows) and runs the Triton kernel; so does decode, but on sm_90, where it runs
    the Gluon kernel too (its heads padded to 64 rows, with one wave of such programs: the split
    policy's ``wide_programs``), Triton's 16-row layout being the fallback. Verify's stage 2 on
    sm_90 merges 4 heads a program: it merges qlen x heads rows (4x decode's), and one head a
    program made the whole verify 0.5-3.8% longer at every verify shape of
    ``bench/verify_vs_flashmla.py`` on an H100 (bench/results/verify_vs_flashmla_h100_s2.json).
    On sm_90 both also take ``HOPPER_SCHEDULE``: dynamic tiles at pages of whole tiles and up
    to 64 splits a row (a row's programs end together; with fixed ranges their ends spread
    over 10% of decode's time at (8, 131072) on an H100, ``bench/decode_gap.py``), the
    prologue's loads issued together and the next page index loaded early (TMA loader), and
    stage 2 in one pass where one block holds every split
    (``bench/results/decode_gap_h100_dynamic*.json``)."""
    if qlen > 1 and not flatten:
        if hopper:
            return LaunchConfig(
                rows=64, num_warps=8, num_stages=3, rope_first=True, stage2_heads=4,
                **HOPPER_SCHEDULE,
            )  # fmt: skip
        return LaunchConfig(rows=32)
    if hopper and not flatten:
        return LaunchConfig(gluon_decode=True, **HOPPER_SCHEDULE)
    return LaunchConfig()


# the sm_90 defaults' schedule, each measured beside FlashMLA at the five shapes of
# bench/verify_vs_flashmla.py on an H100 (bench/results/decode_gap_h100_dynamic*.json)
HOPPER_SCHEDULE: dict[str, Any] = {
    "gluon_dynamic": True,
    "gluon_early_q": True,
    "gluon_idx_ahead": True,
    "stage2_one_pass": True,
}


GLUON_MAX_QP = 64  # query positions (next_pow2(qlen)) the Gluon kernel's 64 rows hold


def gluon_unsupported(
    cfg: LaunchConfig, hopper: bool, qlen: int, flatten: bool, tensors: tuple[torch.Tensor, ...]
) -> str | None:
    """Why the Gluon stage 1 cannot take this call (None: it can). It is written for sm_90
    (wgmma, cp.async into swizzled shared memory), 16-bit q and KV, 16-byte aligned rows."""
    if not hopper:
        return "not an sm_90 GPU"
    if flatten or (qlen <= 1 and not cfg.gluon_decode):
        return "decode or flattened verify (one query position per program)"
    if (1 << (qlen - 1).bit_length()) > GLUON_MAX_QP:
        return f"qlen {qlen} is over {GLUON_MAX_QP}"
    dt = tensors[0].dtype
    if dt not in (torch.bfloat16, torch.float16) or any(t.dtype != dt for t in tensors):
        return "q and KV must share a 16-bit dtype"
    for t in tensors:
        if t.data_ptr() % 16 or any(st % 16 for st in t.stride()[:-1]):
            return "rows must be 16-byte aligned"
    if cfg.gluon_block_n not in (16, 32, 64) or not 2 <= cfg.gluon_buffers <= 8:
        return "gluon_block_n must be 16, 32 or 64 and gluon_buffers 2..8"
    if cfg.gluon_phases not in (1, 2, 3) or (cfg.gluon_overlap and cfg.gluon_phases != 3):
        return "gluon_phases must be 1, 2 or 3 (3 with gluon_overlap)"
    if cfg.gluon_overlap and cfg.gluon_lazy_sum:
        return "gluon_overlap takes gluon_lazy_sum=False"
    if cfg.gluon_l2_prefetch < 0:
        return "gluon_l2_prefetch must be >= 0"
    if cfg.gluon_chunks not in (1, 3, 9):
        return "gluon_chunks must be 1, 3 or 9"
    if cfg.gluon_roles not in ("off", "tma", "all"):
        return "gluon_roles must be off, tma or all"
    if cfg.gluon_ws and (cfg.gluon_overlap or not cfg.gluon_lazy_sum or cfg.gluon_l2_prefetch
                         or cfg.gluon_phases == 1):  # fmt: skip
        return "gluon_ws takes the default loop (lazy sums; no overlap, L2 prefetch or loads alone)"
    return None


def tma_pages(cfg: LaunchConfig, page_size: int) -> bool:
    """Whether the Gluon kernel fetches KV tiles by TMA: asked for, every tile is
    ``gluon_block_n`` consecutive slots of one page (tiles start at multiples of the tile), and
    the default loop (the overlapped, eager-sum and loads-alone loops exist in the gather
    kernel only, which takes any page size; the compute alone, ``gluon_phases=2``, in both)."""
    return (
        cfg.gluon_tma
        and page_size % cfg.gluon_block_n == 0
        and not cfg.gluon_overlap
        and cfg.gluon_lazy_sum
        and cfg.gluon_phases in (2, 3)
    )


def roles_kernel(cfg: LaunchConfig, page_size: int) -> bool:
    """Whether stage 1 runs the warpgroup-roles kernel: asked for at these pages (``tma``: pages
    of whole tiles; ``all``) and the default loop otherwise (the other kernels' options, such
    as chunk mbarriers, early refill or more buffers, keep their own kernels)."""
    plain = (
        not cfg.gluon_ws
        and not cfg.gluon_overlap
        and cfg.gluon_lazy_sum
        and cfg.gluon_phases in (2, 3)
        and not cfg.gluon_l2_prefetch
        and cfg.gluon_buffers == 2
        and cfg.gluon_block_n == 64
        and cfg.gluon_chunks == 1
        and not cfg.gluon_early_issue
    )
    if not plain or cfg.gluon_roles == "off":
        return False
    return cfg.gluon_roles == "all" or tma_pages(cfg, page_size)


def use_gluon(
    cfg: LaunchConfig, hopper: bool, qlen: int, flatten: bool, tensors: tuple[torch.Tensor, ...]
) -> bool:
    """The kernel choice: ``auto`` takes Gluon wherever it is supported and importable;
    ``gluon`` insists (an error naming the reason otherwise); ``triton`` never."""
    if cfg.kernel not in ("auto", "triton", "gluon"):
        raise MlaprofError(f"kernel must be auto, triton or gluon, got {cfg.kernel!r}")
    if cfg.kernel == "triton":
        return False
    why = gluon_unsupported(cfg, hopper, qlen, flatten, tensors)
    if why is None and _gluon_kernels() is None:
        why = "this Triton has no Gluon (triton.experimental.gluon)"
    if why is not None and cfg.kernel == "gluon":
        raise MlaprofError(f"triton backend: the Gluon kernel cannot run here: {why}")
    return why is None


def split_arch(device: torch.device) -> str | None:
    """The architecture the split policy is told for this GPU: ``sm_90`` where decode runs the
    64-row Gluon kernel (a Hopper GPU whose Triton has Gluon: ``wide_programs``), else None."""
    if is_hopper(device) and _gluon_kernels() is not None:
        return WIDE_DECODE_ARCH
    return None


def is_hopper(device: torch.device) -> bool:
    """An NVIDIA compute capability 9.0 GPU (ROCm's MI300 also reports a major version of 9)."""
    return (
        device.type == "cuda"
        and torch.version.hip is None
        and torch.cuda.get_device_capability(device) == (9, 0)
    )


class Workspace:
    """Partial-result buffers, grown (never shrunk) to the largest (B, qlen, H, S) asked for."""

    def __init__(self) -> None:
        self.o: torch.Tensor | None = None
        self.lse: torch.Tensor | None = None
        self.ctr: torch.Tensor | None = None  # dynamic tiles' counters: zero between launches
        self.allocations = 0

    def counters(self, rows: int, device: torch.device) -> torch.Tensor:
        """Zeroed int32 counters, 32 (a 128-byte line) per (request, head block) row; the
        kernels leave them zero, so they are zeroed once, at allocation (never in a capture)."""
        need = rows * 32
        if self.ctr is None or self.ctr.numel() < need or self.ctr.device != device:
            if _capturing(device):
                raise MlaprofError(
                    f"triton backend: counters for {rows} rows must be reserved before graph "
                    "capture (run the shape once eagerly or call reserve())"
                )
            self.ctr = torch.zeros(need, dtype=torch.int32, device=device)
            self.allocations += 1
        return self.ctr

    def get(
        self, b: int, qlen: int, h: int, s: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        need = b * qlen * h * s
        if self.lse is None or self.lse.numel() < need or self.lse.device != device:
            if _capturing(device):
                raise MlaprofError(
                    f"triton backend: workspace for B={b} qlen={qlen} H={h} S={s} must be "
                    "reserved before graph capture (run the shape once eagerly or call reserve())"
                )
            self.o = torch.empty(need * LATENT, dtype=torch.float32, device=device)
            self.lse = torch.empty(need, dtype=torch.float32, device=device)
            self.allocations += 1
        if self.o is None:
            raise MlaprofError("triton backend: workspace lost its output buffer")
        return (
            self.o[: need * LATENT].view(b, qlen, h, s, LATENT),
            self.lse[:need].view(b, qlen, h, s),
        )


def check_runnable(device_type: str) -> None:
    """On the CPU the kernels run only through Triton's interpreter; say so instead of failing
    inside Triton's driver lookup."""
    if device_type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise MlaprofError(
            "the triton backend needs a GPU (--device cuda); on the CPU it runs only through "
            "Triton's interpreter: set TRITON_INTERPRET=1 (slow, small shapes)"
        )


def _resources(compiled: Any) -> dict[str, int]:
    """Registers and spills of a compiled kernel where Triton reports them (not interpreted)."""
    out = {}
    for key, attr in (("registers", "n_regs"), ("spills", "n_spills")):
        v = getattr(compiled, attr, None)
        if isinstance(v, int):
            out[key] = v
    return out


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _stage1_args(inp: VerifyInputs, meta: Any, part_o, part_lse, s: int) -> tuple:
    """The positional arguments both stage-1 kernels take (the same contract)."""
    qn, qp, kv = inp.q_nope, inp.q_pe, inp.kv_c
    return (
        qn, qp, kv, meta.kv_indptr, meta.kv_indices, meta.seq_lens, meta.qo_lens, part_o, part_lse,
        float(inp.sm_scale) * _kernels().LOG2E, s, qn.shape[1], qn.shape[2],
        *qn.stride()[:3], *qp.stride()[:3], *part_o.stride()[:3], kv.stride(0),
    )  # fmt: skip


class TritonBackend:
    name = "triton"
    capturable = True

    def __init__(
        self, config: LaunchConfig | None = None, flatten: bool = False, device_splits: bool = False
    ) -> None:
        self.config = config
        self.flatten = flatten
        self.device_splits = device_splits  # S per row decided in-kernel; num_splits is the cap
        self.workspace = Workspace()
        self.last_launch: dict[str, Any] = {}
        self.compiled: tuple[Any, Any] = (None, None)
        self._dynamic = False  # the last stage 1 took its tiles dynamically
        self._is_hopper: bool | None = None
        self.skip_stage2 = False
        self.skip_stage1 = False  # benchmarking stage 2 alone (on the partials already there)
        # benchmarks only: int64 [programs, 4] the roles kernel fills with each program's
        # start and end (global timer, ns) and SM id
        self.stamps: torch.Tensor | None = None
        _kernels()  # fail early with the install hint

    def _hopper(self, t: torch.Tensor) -> bool:
        if self._is_hopper is None:  # once per backend: forward runs in capture loops
            self._is_hopper = is_hopper(t.device)
        return self._is_hopper

    def reserve(self, b: int, qlen: int, h: int, s: int, device: torch.device | str) -> None:
        """Allocate the workspace for a shape ahead of capture."""
        self.workspace.get(b, qlen, h, s, torch.device(device))
        self.workspace.counters(b * h, torch.device(device))  # head blocks <= heads

    def forward(
        self,
        inp: VerifyInputs,
        meta: VerifyMetadata,
        out: torch.Tensor,
        lse: torch.Tensor | None = None,
        num_splits: int = 1,
        flatten: bool | None = None,
    ) -> None:
        check_shapes(inp, meta, out, lse)
        k = _kernels()
        flat = self.flatten if flatten is None else flatten
        s = int(num_splits)
        cfg = self.config or default_config(inp.q_nope.shape[1], flat, self._hopper(inp.q_nope))
        if LATENT % cfg.stage2_block_d or LATENT % cfg.dv_split or cfg.rows < 16:
            raise MlaprofError(
                "triton backend: stage2_block_d and dv_split must divide 512, rows be >= 16"
            )
        if cfg.split_min_chunk < 1:
            raise MlaprofError(f"split_min_chunk must be >= 1, got {cfg.split_min_chunk}")
        if cfg.qk_chunk and (cfg.qk_chunk < 16 or LATENT % cfg.qk_chunk or cfg.dv_split != 1):
            raise MlaprofError("qk_chunk must divide 512, be >= 16, and take dv_split 1")
        if not 1 <= s <= MAX_SPLITS:
            raise MlaprofError(f"num_splits must be in 1..{MAX_SPLITS}, got {num_splits}")
        qn, qp, kv = inp.q_nope, inp.q_pe, inp.kv_c
        for name, t in (("q_nope", qn), ("q_pe", qp), ("kv_c", kv), ("out", out)):
            if t.stride(-1) != 1:
                raise MlaprofError(f"triton backend: {name} must be contiguous in its last dim")
        if lse is not None and (lse.dtype != torch.float32 or not lse.is_contiguous()):
            raise MlaprofError("triton backend: lse must be a contiguous float32 tensor")
        check_runnable(qn.device.type)
        b, qlen, h, _ = qn.shape
        part_o, part_lse = self.workspace.get(b, qlen, h, s, qn.device)
        gluon = use_gluon(cfg, self._hopper(qn), qlen, flat, (qn, qp, kv))
        if self.skip_stage1:  # benchmarking stage 2 alone (on the last stage 1's partials)
            launch = (None, None, cfg.gluon_block_n if gluon else cfg.block_n, 0)
            self._c1 = None
        elif gluon:
            launch = self._launch_gluon(inp, meta, part_o, part_lse, s, cfg)
        else:
            self._dynamic = False
            launch = self._launch_triton(k, inp, meta, part_o, part_lse, s, cfg, flat)
        grid1, block_h, align, warps = launch
        c1 = self._c1
        hh = min(k.next_pow2(h), cfg.stage2_heads)
        nd = LATENT // cfg.stage2_block_d
        grid2 = (b, qlen, -(-h // hh) * nd)
        self.compiled = (c1, None)  # Triton's handles (registers, PTX) for benchmarks
        if self.skip_stage2:  # benchmarking stage 1 alone
            self.last_launch = {"stage1": {"grid": grid1, "splits": s, **_resources(c1)}}
            return
        c2 = k.mla_verify_stage2[grid2](
            part_o,
            part_lse,
            meta.seq_lens,
            meta.qo_lens,
            out,
            lse if lse is not None else part_lse,
            s,
            qlen,
            h,
            out.stride(0),
            out.stride(1),
            out.stride(2),
            part_o.stride(0),
            part_o.stride(1),
            part_o.stride(2),
            BLOCK_HH=hh,
            BLOCK_D=cfg.stage2_block_d,
            BLOCK_S=min(cfg.block_s, k.next_pow2(s)),
            ALIGN=align,
            FLATTEN=flat,
            HAS_LSE=lse is not None,
            DEVICE_SPLITS=self.device_splits,
            MIN_CHUNK=cfg.split_min_chunk,
            DYNAMIC=self._dynamic,
            ONE_PASS=cfg.stage2_one_pass and s <= cfg.block_s,
            num_warps=cfg.stage2_warps,
        )
        self.compiled = (c1, c2)
        self.last_launch = {
            "stage1": {
                "kernel": "gluon" if gluon else "triton",
                "grid": grid1,
                "block": (32 * warps, 1, 1),
                "splits": s,
                **_resources(c1),
            },
            "stage2": {
                "grid": grid2,
                "block": (32 * cfg.stage2_warps, 1, 1),
                "splits": s,
                **_resources(c2),
            },
            "block_h": block_h,
            "flatten": flat,
            "device_splits": self.device_splits,  # then "splits" is the grid's cap
            "dynamic_tiles": self._dynamic,
        }

    def _launch_gluon(self, inp, meta, part_o, part_lse, s, cfg) -> tuple[tuple, int, int, int]:
        """Stage 1 on sm_90: the Gluon kernel (mlaprof.kernels.mla_verify_gluon)."""
        g = _gluon_kernels()
        b, qlen, h, _ = inp.q_nope.shape
        block_h = g.block_h_for(qlen)
        grid1 = (-(-h // block_h), b, s)
        # what both sm_90 stage-1 kernels take; each adds its own pipeline options
        common = dict(
            QP=g.ROWS // block_h,
            BLOCK_H=block_h,
            BLOCK_N=cfg.gluon_block_n,
            PAGE=meta.page_size,
            NUM_BUF=cfg.gluon_buffers,
            DEVICE_SPLITS=self.device_splits,
            MIN_CHUNK=cfg.split_min_chunk,
            PREFETCH=cfg.gluon_l2_prefetch,
            num_warps=g.NUM_WARPS,
        )
        args = _stage1_args(inp, meta, part_o, part_lse, s)
        tma = tma_pages(cfg, meta.page_size)
        self._dynamic = False
        if roles_kernel(cfg, meta.page_size):  # warpgroup 0, the default partition: 4 warps
            del common["PREFETCH"]
            common["num_warps"] = 4
            descs = g.kv_descriptors(inp.kv_c, cfg.gluon_block_n) if tma else (None, None)
            # dynamic tiles: the TMA loader with KV copies (not the compute-alone probe)
            self._dynamic = (
                cfg.gluon_dynamic
                and tma
                and cfg.gluon_phases == 3
                and s <= cfg.gluon_dynamic_max_splits
            )
            ctr = (
                self.workspace.counters(b * grid1[0], inp.q_nope.device) if self._dynamic else None
            )
            self._c1 = g.mla_verify_stage1_hopper_roles[grid1](
                *args[:3], *descs, *args[3:], **common, LOADS=cfg.gluon_phases == 3,
                GATHER=not tma, LOADER_REGS=g.LOADER_REGS if tma else g.ROLES_GATHER_LOADER_REGS,
                PV_REGS=g.ROLES_PV_REGS if tma else g.ROLES_GATHER_PV_REGS,
                P_REG=cfg.gluon_p_regs, EARLY_Q=cfg.gluon_early_q and tma,
                IDX_AHEAD=cfg.gluon_idx_ahead and tma, stamps=self.stamps, counters=ctr,
                SPREAD_ROWS=cfg.gluon_spread_rows,
            )  # fmt: skip
            return grid1, block_h, cfg.gluon_block_n, g.NUM_WARPS + 4
        if cfg.gluon_ws:  # the loader warp in its own partition (a warpgroup's slot)
            del common["PREFETCH"]
            descs = g.kv_descriptors(inp.kv_c, cfg.gluon_block_n) if tma else (None, None)
            self._c1 = g.mla_verify_stage1_hopper_ws[grid1](
                *args[:3], *descs, *args[3:], **common, CHUNKS=cfg.gluon_chunks if tma else 1,
                LOADS=cfg.gluon_phases == 3, GATHER=not tma,
                LOADER_REGS=g.LOADER_REGS if tma else g.GATHER_LOADER_REGS,
            )  # fmt: skip
            return grid1, block_h, cfg.gluon_block_n, g.NUM_WARPS + 4
        if tma:
            kn_desc, kp_desc = g.kv_descriptors(inp.kv_c, cfg.gluon_block_n)
            self._c1 = g.mla_verify_stage1_hopper_tma[grid1](
                *args[:3], kn_desc, kp_desc, *args[3:], **common,
                EARLY_ISSUE=cfg.gluon_early_issue, CHUNKS=cfg.gluon_chunks,
                LOADS=cfg.gluon_phases == 3,
            )  # fmt: skip
            return grid1, block_h, cfg.gluon_block_n, g.NUM_WARPS
        self._c1 = g.mla_verify_stage1_hopper[grid1](
            *args, **common,
            OVERLAP=cfg.gluon_overlap,
            LAZY_SUM=cfg.gluon_lazy_sum,
            PHASES=cfg.gluon_phases,
            EARLY_ISSUE=cfg.gluon_early_issue and not cfg.gluon_overlap,
        )  # fmt: skip
        return grid1, block_h, cfg.gluon_block_n, g.NUM_WARPS

    def _launch_triton(
        self, k, inp, meta, part_o, part_lse, s, cfg, flat
    ) -> tuple[tuple, int, int, int]:
        """Stage 1 everywhere else: the Triton kernel (mlaprof.kernels.mla_verify)."""
        b, qlen, h, _ = inp.q_nope.shape
        block_h = k.block_h_for(qlen, h, flat, cfg.rows)
        qp_rows = 1 if flat else k.next_pow2(qlen)
        rows_axis, hb_axis = (b * qlen if flat else b), -(-h // block_h) * cfg.dv_split
        grid1 = (hb_axis, rows_axis, s) if cfg.heads_first else (rows_axis, hb_axis, s)
        prec = "ieee" if inp.kv_c.dtype == torch.float32 else "tf32"
        self._c1 = k.mla_verify_stage1[grid1](
            *_stage1_args(inp, meta, part_o, part_lse, s),
            QP=qp_rows,
            BLOCK_H=block_h,
            BLOCK_N=cfg.block_n,
            PAGE=meta.page_size,
            FLATTEN=flat,
            DOT_PREC=prec,
            HEADS_FIRST=cfg.heads_first,
            DV_SPLIT=cfg.dv_split,
            DEVICE_SPLITS=self.device_splits,
            MIN_CHUNK=cfg.split_min_chunk,
            QK_CHUNK=cfg.qk_chunk,
            ROPE_FIRST=cfg.rope_first,
            num_warps=cfg.num_warps,
            num_stages=cfg.num_stages,
        )
        return grid1, block_h, cfg.block_n, cfg.num_warps
