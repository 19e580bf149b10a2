"""KV-split policies: one pure function per published heuristic (AITER v0.1.19/v0.1.20 aiter/mla.py and mla_gluon.py; vLLM 0.32's sources).

Each takes a :class:`SplitInput` and returns S, the number of KV splits the kernel launches with.
``B`` (``num_reqs``) counts padding rows, as the kernels see them. Constants marked UNVERIFIED
in the sources live here, in one place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlaprof.errors import MlaprofError

GLUON_TARGET_CTAS = 256  # aiter gluon bh16/bh64 aim at 256 programs (MI355X CU count)
ASM_SPLIT_OVERHEAD = 84.1  # aiter get_meta_param / get_overhead
# aiter mla.py get_meta_param (v0.1.19, v0.1.20 L572-597): the occupancy term is bs * i, one
# thread group and one workgroup per (request, split)
ASM_TG_FACTOR = 1
ASM_WG_PER_SPLIT = 1
VLLM_TRITON_TOKENS_PER_SPLIT = 512


@dataclass(frozen=True)
class SplitInput:
    num_reqs: int  # rows the kernel sees (padding included)
    qlen: int
    heads: int
    min_kv_seq_len: int  # as passed by the caller (may be polluted by padding rows)
    max_seq_len: int
    total_kv: int  # sum of KV lengths over rows
    units: int  # CUs / SMs of the device
    kv_fp8: bool = False
    # length of the kv_indices buffer the caller passes (a host shape); None: total_kv. vLLM passes
    # its whole persistent buffer (max_num_seqs * max_model_len), and under capture S follows it
    kv_buffer_len: int | None = None
    # the target's GPU architecture (gfx950, ...); the persistent ASM gate reads it
    arch: str | None = None


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def floor_pow2(x: int) -> int:
    """The largest power of 2 not above ``x`` (1 for x <= 1)."""
    return 1 if x <= 1 else 1 << (x.bit_length() - 1)


# -- aiter gluon (mla_gluon) -----------------------------------------------------------------
BH64_HEADS = (64, 128)  # mla_gluon's entry takes bh64 first for these head counts


def gluon_bh16_v0119(x: SplitInput) -> int:
    """v0.1.19: 64 or 128 heads take bh64 first (``mla_gluon.py`` v0.1.19 L879); otherwise
    bh16bn64 (bf16 KV): max(1, min(256 // (B*qlen), ceil(min_kv/64)))."""
    if x.heads in BH64_HEADS:
        return gluon_bh64(x)
    return max(1, min(GLUON_TARGET_CTAS // (x.num_reqs * x.qlen), cdiv(x.min_kv_seq_len, 64)))


def gluon_bh16_v0119_post2(x: SplitInput) -> int:
    """v0.1.19.post2: 64 or 128 heads take bh64 first (``mla_gluon.py`` L892); otherwise the
    bh16 denominator also counts head groups, ceil(H/16)."""
    if x.heads in BH64_HEADS:
        return gluon_bh64(x)
    den = x.num_reqs * x.qlen * cdiv(x.heads, 16)
    return max(1, min(GLUON_TARGET_CTAS // den, cdiv(x.min_kv_seq_len, 64)))


def gluon_fp8_v0119(x: SplitInput) -> int:
    """v0.1.19..v0.1.19.post2 bh16bn128 (fp8 KV): asserts B == 1;
    max(1, min(256 // (B*qlen*ceil(H/16)), min_kv)). v0.1.19 takes H <= 16 (one head block);
    .post1/.post2 take H <= 96 and divide by the head blocks (``mla_gluon.py`` L894, L949-960).
    64 / 128 heads take bh64 first (L879), which asserts bf16 KV."""
    if x.heads in BH64_HEADS:
        raise MlaprofError(
            f"aiter gluon v0.1.19 sends {x.heads} heads to bh64, which asserts bf16 KV"
        )
    if x.num_reqs != 1:
        raise MlaprofError(f"aiter gluon v0.1.19 fp8 (bh16bn128) requires B == 1, got {x.num_reqs}")
    den = x.num_reqs * x.qlen * cdiv(x.heads, 16)
    return max(1, min(GLUON_TARGET_CTAS // den, x.min_kv_seq_len))


def gluon_bh16_v0120(x: SplitInput) -> int:
    """v0.1.20+: 64 or 128 heads take bh64 first (``mla_gluon.py`` L902); otherwise
    max(1, 256 // (B*qlen*ceil(H/16))), independent of min_kv_seq_len."""
    if x.heads in BH64_HEADS:
        return gluon_bh64(x)
    return max(1, GLUON_TARGET_CTAS // (x.num_reqs * x.qlen * cdiv(x.heads, 16)))


# -- which of a row's S splits hold KV (the occupancy model) -------------------------------------
# the gluon kernels' stage 1 cuts one row's KV into S splits; a split left without KV returns at
# once. Two cuts, both with the last split ending at seq:
# - floor: L = seq // S: every split holds KV where seq >= S, else only the last (whatever
#   BLOCK_N). aiter/ops/triton/gluon/mla_gluon.py _mla_gluon v0.1.19 L151-161, v0.1.19.post1 /
#   .post2 L159-174; PR #4582's gfx942/attention/mla.py L75-82 (at bb855e4)
# - block: L = max(BLOCK_N, seq // S): min(S, ceil(seq / L)) splits hold KV. mla_gluon.py
#   v0.1.20 / v0.1.20.post1 L149-156; PR #4758's gfx950/attention/mla.py L155-162 (at b818025)
PARTITION_FLOOR = "floor"
PARTITION_BLOCK = "block"
# vLLM's Triton kernels (vllm/v1/attention/ops/triton_decode_attention.py):
# - ceil: L = ceil(seq / S): ceil(seq / L) splits hold KV. The decode kernels'
#   _fwd_grouped_kernel_stage1 (0.34 L366-368, 0.33 L352-354; no sliding window for MLA)
# - verify: L = ceil(max(ceil(seq / S), MIN_SPLIT_LEN) / SPLIT_ALIGN) * SPLIT_ALIGN, min(S,
#   ceil(seq / L)) splits hold KV (0.34 _verify_split_len L868-877, _fwd_verify_kernel_stage1
#   L1003-1005; MIN_SPLIT_LEN 128 and SPLIT_ALIGN 16 in every config, _VERIFY_BASE_CONFIG L1283-1295)
PARTITION_CEIL = "ceil"
PARTITION_VERIFY = "verify"
PARTITIONS = (PARTITION_FLOOR, PARTITION_BLOCK, PARTITION_CEIL, PARTITION_VERIFY)
VERIFY_MIN_SPLIT_LEN = 128
VERIFY_SPLIT_ALIGN = 16
# BLOCK_N of each mla_gluon regime (v0.1.19 L898, L925; v0.1.20 L925, L952)
GLUON_BLOCK_N = {"bh64": 64, "bh16bn64": 64, "bh16bn128": 128}


def gluon_regime(heads: int, kv_fp8: bool) -> str:
    """mla_gluon's dispatch: H in {64, 128} -> bh64; else bh16bn128 for fp8 KV, bh16bn64 for bf16
    (v0.1.19 L879, v0.1.20 L902-916)."""
    if heads in BH64_HEADS:
        return "bh64"
    return "bh16bn128" if kv_fp8 else "bh16bn64"


def gluon_active_splits(
    seq_len: int, s: int, partition: str = PARTITION_BLOCK, block_n: int = 64
) -> int:
    """How many of S splits hold KV for a row of ``seq_len`` tokens, cut by ``partition`` (the
    kernel release's cut, above) with ``block_n`` KV tokens a block."""
    s = max(1, s)
    if partition == PARTITION_FLOOR:
        return s if seq_len >= s else min(max(0, seq_len), 1)
    seq = max(0, seq_len)
    if partition == PARTITION_CEIL:
        return cdiv(seq, max(1, cdiv(seq, s)))
    if partition == PARTITION_VERIFY:  # block_n: MIN_SPLIT_LEN
        per = cdiv(max(cdiv(seq, s), block_n), VERIFY_SPLIT_ALIGN) * VERIFY_SPLIT_ALIGN
        return min(s, cdiv(seq, per))
    if partition != PARTITION_BLOCK:
        raise MlaprofError(f"unknown KV partition {partition!r} (one of {PARTITIONS})")
    chunk = max(block_n, seq_len // s)
    return min(cdiv(seq, chunk), s)


def gluon_bh64(x: SplitInput) -> int:
    """bh64 (H in {64, 128}): base = 8*ceil(H/64)*qlen*(B/8); S = next_pow2(ceil(256/base));
    the kernel asserts min_kv > S*(3*64 + S) and bf16 KV."""
    if x.kv_fp8:  # mla_gluon.py v0.1.19 L920-922, v0.1.19.post2 L937-939, v0.1.20 L947-949
        raise MlaprofError(f"aiter gluon bh64 ({x.heads} heads) asserts bf16 KV, got fp8 KV")
    if x.num_reqs % 64:
        raise MlaprofError(f"aiter gluon bh64 asserts B % 64 == 0, got B = {x.num_reqs}")
    base = 8 * cdiv(x.heads, 64) * x.qlen * (x.num_reqs / 8)
    s = max(1, next_pow2(math.ceil(GLUON_TARGET_CTAS / base)))
    if x.min_kv_seq_len <= s * (3 * 64 + s):
        raise MlaprofError(
            f"aiter gluon bh64 asserts min_kv_seq_len > S*(3*64+S) = {s * (3 * 64 + s)} "
            f"(S = {s}), got min_kv_seq_len = {x.min_kv_seq_len}"
        )
    return s


# -- aiter ASM (mla_decode_fwd / get_meta_param) ---------------------------------------------
def asm_total_kv(x: SplitInput) -> int:
    """``total_kv = kv_indices.shape[0]``: the buffer's length, not the live KV (AITER v0.1.19/v0.1.20 and vLLM 0.32 sources)."""
    return x.kv_buffer_len if x.kv_buffer_len is not None else x.total_kv


def aiter_asm(x: SplitInput) -> int:
    """pick i in 1..16 maximising (bs_occ*i / (ceil(bs_occ*i/CU)*CU)) * avg_kv/(avg_kv + 84.1*i),
    avg_kv = total_kv / bs with total_kv the kv_indices buffer length."""
    avg_kv = asm_total_kv(x) / x.num_reqs
    bs_occ = x.num_reqs * max(ASM_TG_FACTOR, ASM_WG_PER_SPLIT)
    best, best_score = 1, -1.0
    for i in range(1, 17):
        fill = bs_occ * i / (cdiv(bs_occ * i, x.units) * x.units)
        score = fill * avg_kv / (avg_kv + ASM_SPLIT_OVERHEAD * i)
        if score > best_score + 1e-12:
            best, best_score = i, score
    return best


# ASM fp8 block widths by nhead * max_seqlen_q: aiter ``mla.py`` get_block_n_fp8 (v0.1.19 L189,
# v0.1.20 L345); AITER indexes the dict, so a missing key raises KeyError
ASM_FP8_BLOCK_N = {
    8: 64,
    16: 128,
    24: 128,
    32: 128,
    48: 64,
    64: 64,
    128: 32,
    256: 32,
    384: 32,
    512: 32,
}
# open AITER PR #4713 (unreleased): the verify widths 80/96/112 (16 heads x qlen 5-7) get 64
ASM_FP8_BLOCK_N_PR4713 = {**ASM_FP8_BLOCK_N, 80: 64, 96: 64, 112: 64}
VLLM_ASM_HEAD_MULTIPLE = 16  # vLLM AiterMLAHelper._AITER_MIN_MLA_HEADS


def vllm_asm_heads(heads: int) -> int:
    """The head count AITER's ASM decode sees under vLLM: q and o padded up to a multiple of 16
    (vLLM 0.32 ``rocm_aiter_mla.py`` ``get_actual_mla_num_heads`` L1732-1736, used by
    ``forward_mqa`` L2399-2409; 0.33 L2052-2056). UNVERIFIED: 24 heads stay 24 where vLLM's probe
    finds a native H24 kernel; this model pads them to 32."""
    return cdiv(heads, VLLM_ASM_HEAD_MULTIPLE) * VLLM_ASM_HEAD_MULTIPLE


def asm_fp8_key(x: SplitInput) -> int:
    """get_block_n_fp8's key: ``nhead * max_seqlen_q`` with nhead = o.shape[1], the padded heads."""
    return vllm_asm_heads(x.heads) * x.qlen


def asm_fp8_missing(x: SplitInput, table: dict[int, int] = ASM_FP8_BLOCK_N) -> str | None:
    """Why AITER's fp8 ASM raises for this shape (None: it has a block width)."""
    key = asm_fp8_key(x)
    if key in table:
        return None
    return (
        f"AITER get_block_n_fp8 has no block width for nhead*qlen = {vllm_asm_heads(x.heads)}"
        f"*{x.qlen} = {key} (vLLM pads {x.heads} heads to {vllm_asm_heads(x.heads)}): KeyError in "
        f"aiter/mla.py get_meta_param (keys {sorted(table)})"
    )


def _asm_fp8(x: SplitInput, table: dict[int, int]) -> int:
    why = asm_fp8_missing(x, table)
    if why:
        raise MlaprofError(why)
    bn = table[asm_fp8_key(x)]
    total, bs = asm_total_kv(x), x.num_reqs
    s = min(aiter_asm(x), cdiv(total, bs * bn))
    if s > 1:
        s = min(s, int(abs(total / bs - x.qlen) // bn) + 1)
    return max(1, s)


def aiter_asm_fp8(x: SplitInput) -> int:
    """ASM with fp8 KV: get_meta_param's S, then the fp8 caps: S = min(S, ceil(total_kv/(bs*bn)))
    and, if S > 1, S = min(S, floor(|total_kv/bs - max_seqlen_q| / bn) + 1); bn keyed on the
    padded heads x qlen (:func:`asm_fp8_key`)."""
    return _asm_fp8(x, ASM_FP8_BLOCK_N)


def aiter_asm_fp8_pr4713(x: SplitInput) -> int:
    """:func:`aiter_asm_fp8` with open AITER PR #4713's widths (80/96/112 -> 64): unreleased."""
    return _asm_fp8(x, ASM_FP8_BLOCK_N_PR4713)


# -- aiter persistent ASM (get_mla_metadata_v1, computed on the device) ----------------------
# get_mla_metadata_v1 (aiter/ops/attention.py, v1_2_device.cuh; aiter#4144, v0.1.18+):
# num_clusters = CU * multiplier / nhead_kv, multiplier 1, one latent KV head
PS_CLUSTER_MULTIPLIER = 1
# AITER mla.py _MLA_DECODE_PERSISTENT_MAX_BATCH_DEFAULT (v0.1.19 L228, v0.1.20 L384):
# AITER_MLA_DECODE_PERSISTENT_MAX_BATCH; <= 0 disables the gate
PS_MAX_BATCH = 32
HOST_FALLBACK = "persistent kernel dropped"  # the note every view keys a host-decided S on
# how a record's note begins where the policy's kernel cannot run the step's configuration
# ("not runnable: <why>"): the splits section keeps the why, every view says it in these words
NOT_RUNNABLE = "not runnable"


def persistent_dropped(x: SplitInput) -> Any:
    """AITER's ``_use_persistent_mla_decode`` is False (``aiter/mla.py`` v0.1.20 L401-422,
    applied at L585-597; v0.1.19 L245, L332): gfx950, bf16 q and KV, 16 heads (as vLLM passes
    them: padded), qlen 1 and B >= 32. mla_decode_fwd then drops the persistent kernel and
    get_meta_param picks S on the host. Works on numpy arrays of ``num_reqs``."""
    profile = x.arch == "gfx950" and not x.kv_fp8 and vllm_asm_heads(x.heads) == 16 and x.qlen == 1
    if not profile or PS_MAX_BATCH <= 0:
        return x.num_reqs < 0  # False, shaped like num_reqs
    return x.num_reqs >= PS_MAX_BATCH


def aiter_asm_persistent(x: SplitInput) -> int:
    """Work splits of get_mla_metadata_v1 (max_split_per_batch < 0): num_clusters = CU*mult/1,
    read on the device from the live KV lengths, so a captured graph never freezes it; where
    AITER drops the persistent kernel (:func:`persistent_dropped`), get_meta_param's host S."""
    if persistent_dropped(x):
        return aiter_asm(x)
    return max(1, x.units * PS_CLUSTER_MULTIPLIER)


# open AITER PR #4899 (unreleased): the persistent split count in auto mode
PS_KV_GRANULARITY = 16  # aiter/ops/attention.py get_mla_metadata_v1 kv_granularity (v0.1.20 L1376)
PS_FIXED_OVERHEAD = 16  # v1_2_device.cuh L918: max(1, ceil(16 / page_size)), page size 1


def aiter_asm_persistent_pr4899(x: SplitInput) -> int:
    """Open AITER PR #4899: S = clamp(lrint(1.2 * sum_b sqrt(blocks_b + overhead)), 1,
    num_clusters), blocks_b = ceil(kv_b / 16). The sum is over the live rows; from a
    SplitInput it is taken at the mean row length (exact for equal lengths)."""
    if persistent_dropped(x):
        return aiter_asm(x)
    clusters = max(1, x.units * PS_CLUSTER_MULTIPLIER)
    blocks = cdiv(max(1, round(x.total_kv / max(1, x.num_reqs))), PS_KV_GRANULARITY)
    s = round(1.2 * x.num_reqs * math.sqrt(blocks + PS_FIXED_OVERHEAD))
    return max(1, min(s, clusters))


# -- gluon for gfx942 (open aiter PR #4582, not released) ------------------------------------
def gluon_gfx942_pr4582(x: SplitInput) -> int:
    """The S table of mla_gluon_gfx942 in aiter PR #4582 (open): by qlen and B."""
    b, q = x.num_reqs, x.qlen
    if q == 1:
        if b <= 4:
            return 64
        return 32 if b <= 8 else 16 if b <= 16 else 9
    if q == 4:
        if b == 1:
            return 24
        if b >= 16:
            return 6
        if b >= 8:
            return 10
        # qlen 4 with 1 < B < 8 falls through to the generic rule (_graph_launch_config,
        # gfx942/attention/mla.py L589-600 at bb855e4)
    if b == 1:
        return 16
    return min(64, cdiv(GLUON_TARGET_CTAS, b * q))


# -- vLLM Triton MLA -------------------------------------------------------------------------
def vllm_triton(x: SplitInput) -> int:
    """min(next_pow2(max(1, max_seq_len // 512)), 2 * sm_count)."""
    return min(next_pow2(max(1, x.max_seq_len // VLLM_TRITON_TOKENS_PER_SPLIT)), 2 * x.units)


# -- vLLM 0.34's folded Triton verify (ROCm CDNA3, qlen > 4) -----------------------------------
# vllm/v1/attention/ops/triton_decode_attention.py of vLLM 0.34.0: select_verify_config
# (L1286-1299: 32-row tiles at occupancy 2 up to B*qlen*H = 640 rows, else 64-row tiles at 1),
# _VERIFY_BASE_CONFIG MIN_SPLIT_LEN 128 (L1269-1281), verify_num_kv_splits (L1302-1336, max 8)
TRITON_VERIFY_SMALL_MAX_ROWS = 640
TRITON_VERIFY_MIN_SPLIT_LEN = 128
TRITON_VERIFY_MAX_SPLITS = 8


def vllm_triton_verify(x: SplitInput) -> int:
    """vLLM 0.34 ``verify_num_kv_splits``: as many splits as fill one dispatch round when one
    split of every request fits in it, else the n <= 8 with the least idle tail (within 5% of
    the best, fewest); never past ``cdiv(max_seq_len, 128)`` or 2 x the CU count. Under FULL
    graphs vLLM passes ``max_model_len`` as ``max_seq_len`` (``rocm_aiter_mla.py`` L1943-1950)."""
    small = x.num_reqs * x.qlen * x.heads <= TRITON_VERIFY_SMALL_MAX_ROWS
    block_h, occupancy = (32, 2.0) if small else (64, 1.0)
    programs = max(1, x.num_reqs) * cdiv(x.qlen * x.heads, block_h)
    ideal = cdiv(max(1, x.max_seq_len), TRITON_VERIFY_MIN_SPLIT_LEN)
    slots = max(1, int(occupancy * x.units))
    if programs <= slots:
        n = slots // programs
    else:
        cost = [
            (cdiv(k * programs, slots) / k, k)
            for k in range(1, max(1, min(ideal, TRITON_VERIFY_MAX_SPLITS)) + 1)
        ]
        best = min(c for c, _ in cost)
        n = min(k for c, k in cost if c <= best * 1.05)
    return max(1, min(ideal, n, x.units * 2))


# -- mlaprof's own Triton kernel ---------------------------------------------------------------
MLAPROF_MIN_CHUNK = 256  # fewest KV tokens a split is worth launching for
# where decode also runs the 64-row Gluon stage 1 (mlaprof.backends.triton_backend: sm_90)
WIDE_DECODE_ARCH = "sm_90"


def wide_programs(qlen: int, arch: str | None) -> bool:
    """Whether a stage-1 program of mlaprof's kernel holds a 64-row tile: verify everywhere
    (qlen x H rows), and decode on sm_90, where it runs the Gluon kernel with its heads padded
    to 64 rows."""
    return qlen > 1 or arch == WIDE_DECODE_ARCH


def mlaprof_triton_cap(x: SplitInput) -> int:
    """The KV-length-free part of ``mlaprof_triton``: fill about two waves of the device; where
    a program holds a 64-row tile (``wide_programs``: verify, and decode on sm_90) one wave of
    programs that fill an SM each: the largest power of 2 of splits a row whose programs all
    fit the device at once, measured fastest on an H200 at B = 1, 8, 64 with both launch
    layouts, and for decode on the Gluon kernel on H100s (docs/performance.md). (It was a
    quarter of the two-wave count, the same S except where units / B is a power of 2, which got
    half a wave: B 33 on 132 SMs ran 66 programs, 1.09x the time of 132 on an H100.) With
    device-side splits this is the grid's S."""
    rows = max(1, x.num_reqs)
    if wide_programs(x.qlen, x.arch):
        per_row = floor_pow2(max(1, x.units // rows))
    else:
        per_row = next_pow2(max(1, cdiv(2 * x.units, rows)))
    return max(1, min(per_row, 256))


def device_row_splits(seq_len: int, cap: int, min_chunk: int = MLAPROF_MIN_CHUNK) -> int:
    """S of one row of ``seq_len`` KV tokens: never below ``min_chunk`` tokens a split, at most
    ``cap``. The Triton kernel computes exactly this per row on the device
    (``mla_verify._row_splits``) when the backend runs with ``device_splits``."""
    return max(1, min(cap, next_pow2(max(1, cdiv(seq_len, min_chunk)))))


def mlaprof_triton(x: SplitInput) -> int:
    """``mlaprof_triton_cap``, never below 256 KV tokens a split (the longest row's S when the
    kernel decides S per row on the device)."""
    return device_row_splits(x.max_seq_len, mlaprof_triton_cap(x))


@dataclass(frozen=True)
class Policy:
    name: str
    fn: Callable[[SplitInput], int]
    uses_min_kv: bool  # whether min_kv_seq_len feeds S (so padding rows can collapse it)
    head_group: int  # heads one program handles (for the occupancy model)
    per_token: bool  # programs per query token (True) or per request (False)
    source: str  # the release, tag or PR the rule was read from
    verified: bool = (
        True  # False: a constant or branch of it is UNVERIFIED (its comment says which)
    )
    on_device: bool = False  # S decided on the device at replay: a graph never freezes it
    unreleased: bool = False  # an open PR's rule: opt-in only, never in "all" or a run's set
    # where the kernel falls back to a host-decided S (the persistent gate), per input
    host_fallback: Callable[[SplitInput], Any] | None = None
    # how the kernel cuts a row's KV over the S splits (PARTITIONS: AITER gluon's by the release
    # it was read from, vLLM's Triton kernels'); None: not modelled, counted with the block cut
    # and 64-token blocks
    kv_partition: str | None = None

    def splits(self, x: SplitInput) -> int:
        return int(self.fn(x))

    def decided_on_device(self, x: SplitInput) -> Any:
        """Whether S is decided on the device for this input (arrays welcome)."""
        if not self.on_device:
            return x.num_reqs < 0  # False, shaped like num_reqs
        if self.host_fallback is None:
            return x.num_reqs >= 0  # True, shaped like num_reqs
        return ~_as_bool(self.host_fallback(x))

    def programs(self, rows: int, qlen: int, heads: int, s: int) -> int:
        """Programs (CTAs / workgroups) launched for ``rows`` requests with S splits."""
        per = (qlen if self.per_token else 1) * cdiv(heads, self.head_group)
        return rows * per * s

    def partition(self, heads: int, kv_fp8: bool) -> tuple[str, int]:
        """The rule and BLOCK_N that cut a row's KV over the splits (:func:`gluon_active_splits`)."""
        if self.kv_partition is None:
            return PARTITION_BLOCK, GLUON_BLOCK_N["bh16bn64"]
        if self.kv_partition == PARTITION_CEIL:
            return PARTITION_CEIL, 1
        if self.kv_partition == PARTITION_VERIFY:
            return PARTITION_VERIFY, VERIFY_MIN_SPLIT_LEN
        return self.kv_partition, GLUON_BLOCK_N[gluon_regime(heads, kv_fp8)]

    def active_splits(self, seq_len: int, s: int, heads: int, kv_fp8: bool = False) -> int:
        """How many of S splits hold KV for a row of ``seq_len`` tokens (the rest exit at once)."""
        return gluon_active_splits(seq_len, s, *self.partition(heads, kv_fp8))

    @property
    def provenance(self) -> str:
        tag = " (UNRELEASED: an open PR, opt-in)" if self.unreleased else ""
        return self.source + tag + ("" if self.verified else " (UNVERIFIED)")


def _as_bool(v: Any) -> Any:
    import numpy as np

    return np.asarray(v, dtype=bool)


_V0119 = "aiter v0.1.19 (3135022)"
_ASM_RELEASES = "aiter v0.1.19 (3135022)..v0.1.20.post1 (de07f38)"
_V0120 = "aiter v0.1.20 (fc2e5d5)"
POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy(
            "aiter-gluon-v0.1.19",
            gluon_bh16_v0119,
            True,
            16,
            True,
            f"{_V0119} bh16bn64 (64/128 heads: bh64, mla_gluon.py L879)",
            kv_partition=PARTITION_FLOOR,
        ),
        Policy(
            "aiter-gluon-v0.1.19.post2",
            gluon_bh16_v0119_post2,
            True,
            16,
            True,
            "aiter v0.1.19.post2 bh16bn64",
            kv_partition=PARTITION_FLOOR,
        ),
        Policy(
            "aiter-gluon-fp8-v0.1.19",
            gluon_fp8_v0119,
            True,
            16,
            True,
            f"{_V0119} bh16bn128",
            kv_partition=PARTITION_FLOOR,
        ),
        Policy(
            "aiter-gluon-v0.1.20",
            gluon_bh16_v0120,
            False,
            16,
            True,
            f"{_V0120} bh16",
            kv_partition=PARTITION_BLOCK,
        ),
        Policy(
            "aiter-gluon-v0.1.20.post1",
            gluon_bh16_v0120,
            False,
            16,
            True,
            "aiter v0.1.20.post1 (de07f38): MLA as v0.1.20",
            kv_partition=PARTITION_BLOCK,
        ),
        Policy(
            "aiter-gluon-bh64",
            gluon_bh64,
            False,
            64,
            True,
            f"{_V0119}..v0.1.20 bh64 (H 64/128)",
            # both releases' cuts agree where bh64 runs: its min_kv assert keeps seq // S > 192
            kv_partition=PARTITION_BLOCK,
        ),
        Policy(
            "aiter-gluon-gfx942-pr4582",
            gluon_gfx942_pr4582,
            False,
            16,
            True,
            "aiter open PR #4582 (mla_gluon_gfx942; not released; the graph entry asserts "
            "12 heads and bf16, gfx942/attention/mla.py L621-623 at bb855e4)",
            verified=False,
            unreleased=True,
            kv_partition=PARTITION_FLOOR,
        ),
        Policy(
            "aiter-gluon-v0.1.20-pr4758",
            gluon_bh16_v0120,
            False,
            16,
            True,
            "aiter open PR #4758 (S as v0.1.20; stage-1 grid split-major (S, B, .) when B > 1 "
            "and S % 8 == 0)",
            verified=False,
            unreleased=True,
            kv_partition=PARTITION_BLOCK,
        ),
        Policy(
            "aiter-asm",
            aiter_asm,
            False,
            128,
            False,
            f"{_ASM_RELEASES} mla.py mla_decode_fwd get_meta_param (v0.1.20 L572-597; total_kv "
            "= kv_indices length)",
        ),
        Policy(
            "aiter-asm-fp8",
            aiter_asm_fp8,
            False,
            128,
            False,
            f"{_ASM_RELEASES} mla.py mla_decode_fwd fp8 caps (get_block_n_fp8 v0.1.19 L189, "
            "v0.1.20 L345, keyed on vLLM's 16-padded heads x qlen)",
        ),
        Policy(
            "aiter-asm-fp8-pr4713",
            aiter_asm_fp8_pr4713,
            False,
            128,
            False,
            "aiter open PR #4713 (fp8 widths 80/96/112 -> 64; otherwise as aiter-asm-fp8)",
            verified=False,
            unreleased=True,
        ),
        Policy(
            "aiter-asm-persistent",
            aiter_asm_persistent,
            False,
            128,
            False,
            f"{_ASM_RELEASES} get_mla_metadata_v1 (aiter#4144, in releases since v0.1.18); "
            "dropped for gfx950 bf16 16 heads qlen 1 at B >= 32 (mla.py v0.1.20 L401-422)",
            on_device=True,
            host_fallback=persistent_dropped,
        ),
        Policy(
            "aiter-asm-persistent-pr4899",
            aiter_asm_persistent_pr4899,
            False,
            128,
            False,
            "aiter open PR #4899 (persistent S = clamp(lrint(1.2*sum(sqrt(blocks+16))), 1, "
            "num_clusters), rows at their mean length)",
            verified=False,
            on_device=True,
            unreleased=True,
            host_fallback=persistent_dropped,
        ),
        Policy(
            "vllm-triton",
            vllm_triton,
            False,
            16,
            True,
            "vLLM 0.32.0 triton_mla _compute_num_kv_splits",
            kv_partition=PARTITION_CEIL,
        ),
        Policy(
            "vllm-triton-verify",
            vllm_triton_verify,
            False,
            32,
            True,
            "vLLM 0.34.0 triton_decode_attention.py verify_num_kv_splits (L1302-1336; CDNA3 "
            "verify past qlen 4, rocm_aiter_mla.py L485-506)",
            kv_partition=PARTITION_VERIFY,
        ),
        Policy(
            "mlaprof-triton",
            mlaprof_triton,
            False,
            128,
            False,
            "mlaprof's Triton kernel (this repository)",
            on_device=True,  # with the triton backend each row's S is read from seq_lens
        ),
    )
}

# what "all" and a run's default set mean: the released rules (open PRs are opt-in by name)
RELEASED_POLICIES = tuple(n for n, p in POLICIES.items() if not p.unreleased)


# policies whose mla_gluon entry tries bh64 first for 64 / 128 heads (v0.1.19 L879,
# v0.1.19.post2 L892, v0.1.20 L902)
BH64_FIRST = (
    "aiter-gluon-v0.1.19",
    "aiter-gluon-v0.1.19.post2",
    "aiter-gluon-v0.1.20",
    "aiter-gluon-v0.1.20.post1",
    "aiter-gluon-v0.1.20-pr4758",
)
GFX942_GLUON_HEADS = 12  # PR #4582 mla_gluon_gfx942_graph asserts nhead == 12 (bf16 only)


# the GPU architectures AITER ships its MLA ASM kernels for: their code objects are listed per
# arch in hsa/gfx942/mla/mla_asm.csv and hsa/gfx950/mla/mla_asm.csv (no other arch has an
# hsa/<arch>/mla folder), loaded by mla_decode_fwd and the persistent kernels alike
ASM_MLA_ARCHS = ("gfx942", "gfx950")


def arch_refusal(policy: str, arch: str) -> str | None:
    """Why ``policy``'s AITER kernel does not exist or run on a target of ``arch`` (None where
    it does, and for a policy of vLLM's or mlaprof's kernels): mla_gluon asserts gfx950 (the
    gfx942 gluon of PR #4582 asserts gfx942), and the ASM kernels ship only for
    :data:`ASM_MLA_ARCHS`. The one arch rule :func:`applicable` and the analysis of a recorded
    run (mlaprof.analysis.splits.on_target) both apply."""
    if policy.startswith("aiter-gluon"):
        want = "gfx942" if policy == "aiter-gluon-gfx942-pr4582" else "gfx950"
        if arch == want:
            return None
        kernel, source = (
            ("mla_gluon_gfx942", "aiter PR #4582")
            if policy == "aiter-gluon-gfx942-pr4582"  # its own kernel, not mla_gluon's
            else ("mla_gluon", "aiter mla_gluon.py v0.1.19 L865")
        )
        return f"{kernel} asserts {want} ({source}), the target is {arch}"
    if policy.startswith("aiter-asm") and arch not in ASM_MLA_ARCHS:
        return (
            "AITER's MLA ASM kernels ship only for gfx942 and gfx950 (aiter "
            f"hsa/gfx942/mla/mla_asm.csv, hsa/gfx950/mla/mla_asm.csv), the target is {arch}"
        )
    return None


def applicable(
    policy: str,
    heads: int,
    num_reqs: int,
    qlen: int = 1,
    arch: str | None = None,
    kv_fp8: bool | None = None,
) -> str | None:
    """Why ``policy`` cannot run this shape (None when it can): the kernel's own asserts.
    ``arch``: the target's GPU architecture (AMD gluon kernels assert theirs); ``kv_fp8``:
    the KV cache dtype (None: the policy's own, fp8 for the fp8 policies)."""
    gluon = policy.startswith("aiter-gluon")
    fp8 = ("fp8" in policy) if kv_fp8 is None else kv_fp8
    if arch and (why := arch_refusal(policy, arch)):
        return why
    if policy == "aiter-gluon-gfx942-pr4582":
        if heads != GFX942_GLUON_HEADS or fp8:
            return (
                f"mla_gluon_gfx942 asserts nhead == {GFX942_GLUON_HEADS} and bf16 KV (open PR "
                f"#4582, gfx942/attention/mla.py L621-623), got {heads} heads"
                + (", fp8 KV" if fp8 else "")
            )
        return None
    if (policy in BH64_FIRST or policy == "aiter-gluon-fp8-v0.1.19") and heads in BH64_HEADS:
        if fp8:
            return f"{heads} heads take the bh64 kernel, which asserts bf16 KV"
        return (
            None
            if num_reqs % 64 == 0
            else (
                f"{heads} heads take the bh64 kernel, which asserts B % 64 == 0, got B = {num_reqs}"
            )
        )
    bh16 = gluon and policy != "aiter-gluon-bh64"
    limit = 16 if policy in ("aiter-gluon-v0.1.19", "aiter-gluon-fp8-v0.1.19") else 96
    if bh16 and heads > limit:
        return f"bh16 handles at most {limit} heads in this version, got {heads}"
    if policy == "aiter-gluon-bh64" and heads not in (64, 128):
        return f"bh64 needs 64 or 128 heads, got {heads}"
    if policy == "aiter-gluon-bh64" and fp8:  # mla_gluon.py v0.1.20 L947-949
        return "bh64 asserts bf16 KV, got fp8 KV"
    if policy == "aiter-gluon-bh64" and num_reqs % 64:
        return f"bh64 needs B % 64 == 0, got B = {num_reqs}"
    if policy in ("aiter-asm-fp8", "aiter-asm-fp8-pr4713"):
        table = ASM_FP8_BLOCK_N_PR4713 if policy.endswith("pr4713") else ASM_FP8_BLOCK_N
        x = SplitInput(num_reqs, qlen, heads, 1, 1, 1, 1)
        return asm_fp8_missing(x, table)
    if policy == "aiter-gluon-fp8-v0.1.19" and num_reqs != 1:
        return f"fp8 bh16bn128 in v0.1.19 asserts B == 1, got B = {num_reqs}"
    return None


def is_collapsed(used: Any, deserved: Any) -> Any:
    """The collapse rule every view uses: at most half the splits the real rows deserve."""
    return used * 2 <= deserved


def collapsed_known(used: float | None, deserved: float | None) -> bool:
    """:func:`is_collapsed` on one pair of recorded values: an unknown value (None, NaN) or an S
    of 0 (no split count: a policy that gave none) is never a collapse."""
    if used is None or deserved is None or used != used or deserved != deserved:
        return False
    return bool(used > 0 and deserved > 0 and is_collapsed(used, deserved))


def over_split(used: Any, deserved: Any) -> Any:
    """The over-splitting rule every view uses, the mirror of :func:`is_collapsed`: at least
    twice the splits the real rows deserve (vLLM's Triton MLA sizes S from max_model_len at
    capture: 256 splits frozen for rows that deserve 16). Each extra split is a program that
    re-reads its rows' queries and adds a partial to the stage-2 reduction."""
    return (deserved > 0) & (used >= 2 * deserved)


def host_fallback_note(policy: str) -> str:
    """The note a cell or step carries where AITER drops the persistent kernel (the views key
    on :data:`HOST_FALLBACK`)."""
    return (
        f"{HOST_FALLBACK} (AITER mla.py _use_persistent_mla_decode: gfx950 bf16 16 heads qlen 1, "
        f"B >= {PS_MAX_BATCH}): get_meta_param decides S on the host, frozen into a graph"
    )


# policies whose S a FULL graph sizes from max_model_len, not from the dummy run's KV
# (vLLM 0.32 triton_mla.py; vLLM 0.34 rocm_aiter_mla.py L1943-1950)
FROZEN_FROM_MAX_MODEL_LEN = ("vllm-triton", "vllm-triton-verify")
# policies whose metadata builder sizes S from max_model_len on every step of an engine with FULL
# graphs, its eager and PIECEWISE steps too (vLLM 0.34 rocm_aiter_mla.py L1943-1950:
# cudagraph_mode.has_full_cudagraphs()); vLLM's Triton MLA reads the batch's max_seq_len there
BUILT_FROM_MAX_MODEL_LEN = ("vllm-triton-verify",)


def dummy_run_input(
    policy: str,
    num_reqs: Any,
    qlen: int,
    heads: int,
    units: int,
    max_model_len: int,
    **extra: Any,
) -> SplitInput:
    """What a FULL graph is captured with: vLLM's dummy run gives every row qlen KV tokens;
    vLLM's Triton MLA sizes its splits from max_model_len at capture instead. ``num_reqs`` may
    be a numpy array (the what-if grid builds one input for many cells); ``extra``: further
    SplitInput fields, unchanged between capture and replay."""
    dummy_max = max_model_len if policy in FROZEN_FROM_MAX_MODEL_LEN else qlen
    return SplitInput(
        num_reqs=num_reqs,
        qlen=qlen,
        heads=heads,
        min_kv_seq_len=qlen,
        max_seq_len=dummy_max,
        total_kv=num_reqs * qlen,
        units=units,
        **extra,
    )
