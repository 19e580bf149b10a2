"""The split policies of :mod:`mlaprof.splits.policies`, evaluated on numpy arrays.

Each vectorised twin takes the same :class:`SplitInput`, with arrays in its fields, and returns
S per element, 0 where the kernel would refuse the shape (an assert in the real kernel). The
what-if grid evaluates thousands of cells at once through these; a policy without a twin (a new
version added to ``POLICIES``) is evaluated by its scalar function on each distinct input, so
it is slower but never missing. ``tests/unit/test_whatif.py`` checks every twin against its scalar
policy on random inputs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.splits import policies as p
from mlaprof.splits.policies import Policy, SplitInput

Array = np.ndarray


def _i(v: object) -> Array:
    return np.asarray(v, dtype=np.int64)


def cdiv(a: object, b: object) -> Array:
    return -(-_i(a) // _i(b))


def next_pow2(x: object) -> Array:
    x = _i(x)
    out = np.ones_like(x)
    big = x > 1
    # 1 << bit_length(x - 1), exact on integers (no floating-point log)
    v = x[big] - 1
    bits = np.zeros_like(v)
    while (v > 0).any():
        bits += v > 0
        v = v >> 1
    out[big] = np.left_shift(1, bits)
    return out


def floor_pow2(x: object) -> Array:
    """The largest power of 2 not above ``x`` (1 for x <= 1), exact on integers."""
    x = _i(x)
    return np.where(x <= 1, 1, next_pow2(x + 1) // 2)


def _gluon_v0119(x: SplitInput) -> Array:
    if x.heads in p.BH64_HEADS:  # the entry takes bh64 first (v0.1.19 L879)
        return _gluon_bh64(x)
    den = _i(x.num_reqs) * x.qlen
    return np.maximum(1, np.minimum(p.GLUON_TARGET_CTAS // den, cdiv(x.min_kv_seq_len, 64)))


def _gluon_v0119_post2(x: SplitInput) -> Array:
    if x.heads in p.BH64_HEADS:  # the entry takes bh64 first
        return _gluon_bh64(x)
    den = _i(x.num_reqs) * x.qlen * cdiv(x.heads, 16)
    return np.maximum(1, np.minimum(p.GLUON_TARGET_CTAS // den, cdiv(x.min_kv_seq_len, 64)))


def _gluon_fp8_v0119(x: SplitInput) -> Array:
    b = _i(x.num_reqs)
    if x.heads in p.BH64_HEADS:  # bh64 first, which asserts bf16 KV
        return np.zeros(b.shape, np.int64)
    den = b * x.qlen * cdiv(x.heads, 16)  # head blocks: 1 in v0.1.19, up to 6 in .post1/.post2
    s = np.maximum(1, np.minimum(p.GLUON_TARGET_CTAS // den, _i(x.min_kv_seq_len)))
    return np.where(b == 1, s, 0)  # the kernel asserts B == 1


def _gluon_v0120(x: SplitInput) -> Array:
    if x.heads in p.BH64_HEADS:  # the entry takes bh64 first
        return _gluon_bh64(x)
    den = _i(x.num_reqs) * x.qlen * cdiv(x.heads, 16)
    return np.maximum(1, p.GLUON_TARGET_CTAS // den)


def _gluon_bh64(x: SplitInput) -> Array:
    # same float operations, in the same order, as the scalar policy
    base = 8 * cdiv(x.heads, 64) * x.qlen * (_i(x.num_reqs) / 8)
    s = np.maximum(1, next_pow2(np.ceil(p.GLUON_TARGET_CTAS / base).astype(np.int64)))
    ok = (_i(x.min_kv_seq_len) > s * (3 * 64 + s)) & (_i(x.num_reqs) % 64 == 0)
    ok &= ~np.asarray(x.kv_fp8, dtype=bool)  # bh64 asserts bf16 KV
    return np.where(ok, s, 0)  # the kernel's asserts


def _asm_total_kv(x: SplitInput) -> Array:
    """p.asm_total_kv: the kv_indices buffer's length where the caller passes one."""
    return _i(x.total_kv if x.kv_buffer_len is None else x.kv_buffer_len)


def _aiter_asm(x: SplitInput) -> Array:
    b = _i(x.num_reqs)
    avg_kv = _asm_total_kv(x) / b
    bs_occ = b * max(p.ASM_TG_FACTOR, p.ASM_WG_PER_SPLIT)
    best = np.ones_like(b)
    best_score = np.full(b.shape, -1.0)
    for i in range(1, 17):
        fill = bs_occ * i / (cdiv(bs_occ * i, x.units) * x.units)
        score = fill * avg_kv / (avg_kv + p.ASM_SPLIT_OVERHEAD * i)
        better = score > best_score + 1e-12
        best = np.where(better, i, best)
        best_score = np.where(better, score, best_score)
    return best


def _asm_fp8(x: SplitInput, table: dict[int, int]) -> Array:
    bn = table.get(p.asm_fp8_key(x))  # keyed on vLLM's padded heads x qlen
    b = _i(x.num_reqs)
    if bn is None:  # no block width: KeyError in AITER
        return np.zeros(b.shape, np.int64)
    total = _asm_total_kv(x)
    s = np.minimum(_aiter_asm(x), cdiv(total, b * bn))
    capped = (np.abs(total / b - x.qlen) // bn).astype(np.int64) + 1
    s = np.where(s > 1, np.minimum(s, capped), s)
    return np.maximum(1, s)


def _aiter_asm_fp8(x: SplitInput) -> Array:
    return _asm_fp8(x, p.ASM_FP8_BLOCK_N)


def _aiter_asm_fp8_pr4713(x: SplitInput) -> Array:
    return _asm_fp8(x, p.ASM_FP8_BLOCK_N_PR4713)


def _aiter_asm_persistent(x: SplitInput) -> Array:
    clusters = np.maximum(1, _i(x.units) * p.PS_CLUSTER_MULTIPLIER)
    return np.where(p.persistent_dropped(x), _aiter_asm(x), clusters)


def _aiter_asm_persistent_pr4899(x: SplitInput) -> Array:
    b = _i(x.num_reqs)
    clusters = np.maximum(1, _i(x.units) * p.PS_CLUSTER_MULTIPLIER)
    mean = np.maximum(1, np.round(_i(x.total_kv) / np.maximum(1, b)).astype(np.int64))
    blocks = cdiv(mean, p.PS_KV_GRANULARITY)
    s = np.round(1.2 * b * np.sqrt(blocks + p.PS_FIXED_OVERHEAD)).astype(np.int64)
    ps = np.maximum(1, np.minimum(s, clusters))
    return np.where(p.persistent_dropped(x), _aiter_asm(x), ps)


def _vllm_triton(x: SplitInput) -> Array:
    s = next_pow2(np.maximum(1, _i(x.max_seq_len) // p.VLLM_TRITON_TOKENS_PER_SPLIT))
    return np.minimum(s, 2 * _i(x.units))


def _mlaprof_triton(x: SplitInput) -> Array:
    rows = np.maximum(1, _i(x.num_reqs))
    if p.wide_programs(x.qlen, x.arch):  # one wave of 64-row programs
        per_row = floor_pow2(np.maximum(1, _i(x.units) // rows))
    else:  # about two waves
        per_row = next_pow2(np.maximum(1, cdiv(2 * _i(x.units), rows)))
    cap = np.maximum(1, np.minimum(per_row, 256))  # p.mlaprof_triton_cap
    # p.device_row_splits of the longest row
    rows = next_pow2(np.maximum(1, cdiv(x.max_seq_len, p.MLAPROF_MIN_CHUNK)))
    return np.maximum(1, np.minimum(cap, rows))


# scalar policy function -> its numpy twin (keyed by function, so a renamed entry still matches)
TWINS: dict[Callable[[SplitInput], int], Callable[[SplitInput], Array]] = {
    p.gluon_bh16_v0119: _gluon_v0119,
    p.gluon_bh16_v0119_post2: _gluon_v0119_post2,
    p.gluon_fp8_v0119: _gluon_fp8_v0119,
    p.gluon_bh16_v0120: _gluon_v0120,
    p.gluon_bh64: _gluon_bh64,
    p.aiter_asm: _aiter_asm,
    p.aiter_asm_fp8: _aiter_asm_fp8,
    p.aiter_asm_fp8_pr4713: _aiter_asm_fp8_pr4713,
    p.aiter_asm_persistent: _aiter_asm_persistent,
    p.aiter_asm_persistent_pr4899: _aiter_asm_persistent_pr4899,
    p.vllm_triton: _vllm_triton,
    p.mlaprof_triton: _mlaprof_triton,
}


_FIELDS = ("num_reqs", "min_kv_seq_len", "max_seq_len", "total_kv", "units")


def _scalar(policy: Policy, x: SplitInput, n: int) -> Array:
    """Fallback: the scalar policy on each distinct input (0 where it raises)."""
    table = np.stack([np.broadcast_to(_i(getattr(x, f)), (n,)) for f in _FIELDS], axis=1)
    uniq, inverse = np.unique(table, axis=0, return_inverse=True)
    vals = np.zeros(len(uniq), dtype=np.int64)
    for k, (b, mn, mx, tot, units) in enumerate(uniq.tolist()):
        try:
            vals[k] = policy.splits(
                SplitInput(
                    b, x.qlen, x.heads, mn, mx, tot, units, x.kv_fp8, x.kv_buffer_len, x.arch
                )  # fmt: skip
            )
        except MlaprofError:
            vals[k] = 0
    return vals[inverse.reshape(-1)]


def splits(policy: Policy, x: SplitInput) -> Array:
    """S for every element of ``x`` (qlen and heads scalars, the other fields 1-D arrays or
    scalars), 0 where the kernel refuses the shape."""
    n = int(np.prod(np.broadcast(*(np.asarray(getattr(x, f)) for f in _FIELDS)).shape))
    twin = TWINS.get(policy.fn)
    if twin is None:
        return _scalar(policy, x, n)
    return np.broadcast_to(twin(x), (n,)).astype(np.int64)


def active_splits(
    seq_len: object, s: object, partition: str = p.PARTITION_BLOCK, block_n: int = 64
) -> Array:
    """:func:`mlaprof.splits.policies.gluon_active_splits` on arrays: the splits of S that hold
    KV for a row of ``seq_len`` tokens. floor (mla_gluon.py v0.1.19 L151-161, .post1/.post2
    L159-174): L = seq // S, all S where seq >= S, else the last; block (v0.1.20 L149-156):
    L = max(BLOCK_N, seq // S), min(S, ceil(seq / L))."""
    seq, s = _i(seq_len), np.maximum(1, _i(s))
    if partition == p.PARTITION_FLOOR:
        return np.where(seq >= s, s, np.minimum(np.maximum(seq, 0), 1))
    pos = np.maximum(seq, 0)
    if partition == p.PARTITION_CEIL:  # vLLM's Triton decode: L = ceil(seq / S)
        return cdiv(pos, np.maximum(1, cdiv(pos, s)))
    if partition == p.PARTITION_VERIFY:  # vLLM 0.34's Triton verify (block_n: MIN_SPLIT_LEN)
        a = p.VERIFY_SPLIT_ALIGN
        per = cdiv(np.maximum(cdiv(pos, s), block_n), a) * a
        return np.minimum(s, cdiv(pos, per))
    if partition != p.PARTITION_BLOCK:
        raise MlaprofError(f"unknown KV partition {partition!r} (one of {p.PARTITIONS})")
    chunk = np.maximum(block_n, seq // s)
    return np.minimum(cdiv(pos, chunk), s)
