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
ASM_TG_FACTOR = 1  # UNVERIFIED: thread groups per request in aiter's ASM MLA
ASM_WG_PER_SPLIT = 1  # UNVERIFIED: workgroups per split in aiter's ASM MLA
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


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


# -- aiter gluon (mla_gluon) -----------------------------------------------------------------
def gluon_bh16_v0119(x: SplitInput) -> int:
    """v0.1.19 bh16bn64 (bf16 KV): max(1, min(256 // (B*qlen), ceil(min_kv/64)))."""
    return max(1, min(GLUON_TARGET_CTAS // (x.num_reqs * x.qlen), cdiv(x.min_kv_seq_len, 64)))


BH64_HEADS = (64, 128)  # mla_gluon's entry takes bh64 first for these head counts


def gluon_bh16_v0119_post2(x: SplitInput) -> int:
    """v0.1.19.post2: 64 or 128 heads take bh64 first (``mla_gluon.py`` L892); otherwise the
    bh16 denominator also counts head groups, ceil(H/16)."""
    if x.heads in BH64_HEADS:
        return gluon_bh64(x)
    den = x.num_reqs * x.qlen * cdiv(x.heads, 16)
    return max(1, min(GLUON_TARGET_CTAS // den, cdiv(x.min_kv_seq_len, 64)))


def gluon_fp8_v0119(x: SplitInput) -> int:
    """v0.1.19 bh16bn128 (fp8 KV): asserts B == 1; max(1, min(256 // (B*qlen), min_kv))."""
    if x.num_reqs != 1:
        raise MlaprofError(f"aiter gluon v0.1.19 fp8 (bh16bn128) requires B == 1, got {x.num_reqs}")
    return max(1, min(GLUON_TARGET_CTAS // (x.num_reqs * x.qlen), x.min_kv_seq_len))


def gluon_bh16_v0120(x: SplitInput) -> int:
    """v0.1.20+: 64 or 128 heads take bh64 first (``mla_gluon.py`` L902); otherwise
    max(1, 256 // (B*qlen*ceil(H/16))), independent of min_kv_seq_len."""
    if x.heads in BH64_HEADS:
        return gluon_bh64(x)
    return max(1, GLUON_TARGET_CTAS // (x.num_reqs * x.qlen * cdiv(x.heads, 16)))


def gluon_active_splits(seq_len: int, s: int) -> int:
    """v0.1.20: a row of ``seq_len`` uses L = max(64, seq//S) per split, min(ceil(seq/L), S) splits."""
    chunk = max(64, seq_len // s)
    return min(cdiv(seq_len, chunk), s)


def gluon_bh64(x: SplitInput) -> int:
    """bh64 (H in {64, 128}): base = 8*ceil(H/64)*qlen*(B/8); S = next_pow2(ceil(256/base));
    the kernel asserts min_kv > S*(3*64 + S)."""
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
# v0.1.20 L345)
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


def aiter_asm_fp8(x: SplitInput) -> int:
    """ASM with fp8 KV: get_meta_param's S, then the fp8 caps: S = min(S, ceil(total_kv/(bs*bn)))
    and, if S > 1, S = min(S, floor(|total_kv/bs - max_seqlen_q| / bn) + 1)."""
    key = x.heads * x.qlen
    if key not in ASM_FP8_BLOCK_N:
        raise MlaprofError(
            f"aiter ASM fp8 has no block width for nhead*qlen = {key} "
            f"(get_block_n_fp8 keys: {sorted(ASM_FP8_BLOCK_N)})"
        )
    bn = ASM_FP8_BLOCK_N[key]
    total, bs = asm_total_kv(x), x.num_reqs
    s = min(aiter_asm(x), cdiv(total, bs * bn))
    if s > 1:
        s = min(s, int(abs(total / bs - x.qlen) // bn) + 1)
    return max(1, s)


# -- aiter persistent ASM (get_mla_metadata_v1, computed on the device) ----------------------
PS_CLUSTER_MULTIPLIER = 1  # UNVERIFIED: num_clusters = CU * multiplier / nhead_kv


def aiter_asm_persistent(x: SplitInput) -> int:
    """Work splits of get_mla_metadata_v1 (max_split_per_batch < 0): num_clusters = CU*mult/1.
    Runs on the device from the live KV lengths, so a captured graph never freezes it."""
    return max(1, x.units * PS_CLUSTER_MULTIPLIER)


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
        # UNVERIFIED: the PR's table gives no entry for qlen 4, 1 < B < 8; the generic rule stands in
    if b == 1:
        return 16
    return min(64, cdiv(GLUON_TARGET_CTAS, b * q))


# -- vLLM Triton MLA -------------------------------------------------------------------------
def vllm_triton(x: SplitInput) -> int:
    """min(next_pow2(max(1, max_seq_len // 512)), 2 * sm_count)."""
    return min(next_pow2(max(1, x.max_seq_len // VLLM_TRITON_TOKENS_PER_SPLIT)), 2 * x.units)


# -- mlaprof's own Triton kernel ---------------------------------------------------------------
MLAPROF_MIN_CHUNK = 256  # fewest KV tokens a split is worth launching for
VERIFY_SPLIT_DIVISOR = 4  # verify programs hold qlen x H rows: fewer splits than decode


def mlaprof_triton_cap(x: SplitInput) -> int:
    """The KV-length-free part of ``mlaprof_triton``: fill about two waves of the device; for
    verify (qlen > 1) each program already holds qlen x H rows, and a quarter of the splits
    measured fastest on an H200 at B = 1, 8, 64 with both launch layouts (docs/performance.md).
    With device-side splits this is the grid's S."""
    per_row = next_pow2(max(1, cdiv(2 * x.units, max(1, x.num_reqs))))
    if x.qlen > 1:
        per_row = max(1, per_row // VERIFY_SPLIT_DIVISOR)
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

    def splits(self, x: SplitInput) -> int:
        return int(self.fn(x))

    def programs(self, rows: int, qlen: int, heads: int, s: int) -> int:
        """Programs (CTAs / workgroups) launched for ``rows`` requests with S splits."""
        per = (qlen if self.per_token else 1) * cdiv(heads, self.head_group)
        return rows * per * s

    @property
    def provenance(self) -> str:
        return self.source + ("" if self.verified else " (UNVERIFIED)")


_V0119 = "aiter v0.1.19 (3135022)"
_V0120 = "aiter v0.1.20 (fc2e5d5)"
POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("aiter-gluon-v0.1.19", gluon_bh16_v0119, True, 16, True, f"{_V0119} bh16bn64"),
        Policy(
            "aiter-gluon-v0.1.19.post2",
            gluon_bh16_v0119_post2,
            True,
            16,
            True,
            "aiter v0.1.19.post2 bh16bn64",
        ),
        Policy("aiter-gluon-fp8-v0.1.19", gluon_fp8_v0119, True, 16, True, f"{_V0119} bh16bn128"),
        Policy("aiter-gluon-v0.1.20", gluon_bh16_v0120, False, 16, True, f"{_V0120} bh16"),
        Policy(
            "aiter-gluon-v0.1.20.post1",
            gluon_bh16_v0120,
            False,
            16,
            True,
            "aiter v0.1.20.post1 (de07f38): MLA as v0.1.20",
        ),
        Policy(
            "aiter-gluon-bh64", gluon_bh64, False, 64, True, f"{_V0119}..v0.1.20 bh64 (H 64/128)"
        ),
        Policy(
            "aiter-gluon-gfx942-pr4582",
            gluon_gfx942_pr4582,
            False,
            16,
            True,
            "aiter open PR #4582 (mla_gluon_gfx942; not released)",
            verified=False,
        ),
        Policy(
            "aiter-asm",
            aiter_asm,
            False,
            128,
            False,
            "aiter mla_decode_fwd get_meta_param (total_kv = kv_indices length; tg/wg factors)",
            verified=False,
        ),
        Policy(
            "aiter-asm-fp8",
            aiter_asm_fp8,
            False,
            128,
            False,
            "aiter mla_decode_fwd fp8 caps (get_block_n_fp8 values)",
            verified=False,
        ),
        Policy(
            "aiter-asm-persistent",
            aiter_asm_persistent,
            False,
            128,
            False,
            "aiter get_mla_metadata_v1 (aiter#4144, v0.1.18+; cluster multiplier)",
            verified=False,
            on_device=True,
        ),
        Policy(
            "vllm-triton",
            vllm_triton,
            False,
            16,
            True,
            "vLLM 0.32.0 triton_mla _compute_num_kv_splits",
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

GLUON_POLICIES = tuple(n for n in POLICIES if n.startswith("aiter-gluon"))


# policies whose mla_gluon entry tries bh64 first for 64 / 128 heads (v0.1.19.post2 L892,
# v0.1.20 L902); plain v0.1.19 serves at most 16 heads on bh16
BH64_FIRST = ("aiter-gluon-v0.1.19.post2", "aiter-gluon-v0.1.20", "aiter-gluon-v0.1.20.post1")


def applicable(
    policy: str, heads: int, num_reqs: int, qlen: int = 1, arch: str | None = None
) -> str | None:
    """Why ``policy`` cannot run this shape (None when it can): the kernel's own asserts.
    ``arch``: the target's GPU architecture (AMD gluon kernels assert theirs)."""
    gluon = policy.startswith("aiter-gluon")
    if gluon and arch and arch.startswith("gfx"):
        pr = policy == "aiter-gluon-gfx942-pr4582"  # its own kernel, not mla_gluon's
        want, kernel, source = ("gfx942", "mla_gluon_gfx942", "aiter PR #4582") if pr else (
            "gfx950", "mla_gluon", "aiter mla_gluon.py")  # fmt: skip
        if arch != want:
            return f"{kernel} asserts {want} ({source}), the target is {arch}"
    if policy in BH64_FIRST and heads in BH64_HEADS:
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
    if policy == "aiter-gluon-bh64" and num_reqs % 64:
        return f"bh64 needs B % 64 == 0, got B = {num_reqs}"
    if policy == "aiter-gluon-gfx942-pr4582" and heads > 16:
        return f"mla_gluon_gfx942 serves small-head models, got {heads} heads"
    if policy == "aiter-asm-fp8" and heads * qlen not in ASM_FP8_BLOCK_N:
        return f"no fp8 ASM block width for nhead*qlen = {heads * qlen}"
    if policy == "aiter-gluon-fp8-v0.1.19" and num_reqs != 1:
        return f"fp8 bh16bn128 in v0.1.19 asserts B == 1, got B = {num_reqs}"
    return None


def is_collapsed(used: Any, deserved: Any) -> Any:
    """The collapse rule every view uses: at most half the splits the real rows deserve."""
    return used * 2 <= deserved


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
    dummy_max = max_model_len if policy == "vllm-triton" else qlen
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
