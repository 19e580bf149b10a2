"""Verify stage 1 for NVIDIA Hopper (sm_90) in Gluon: the same contract as
``mla_verify.mla_verify_stage1`` (4-D q, paged KV, host- or device-decided S, partial output and
log2-sum-exp per split), written for the register budget the Triton kernel could not meet.

One program per (head block, request, split), two warpgroups (8 warps), 64 query rows
(``QP x BLOCK_H``: every verify token of the request times a head block):

- q (latent 512 + rope 64) is copied into shared memory once; both products read it from there
  (``wgmma`` with the A operand in shared memory), so no q tile lives in registers;
- KV tiles of ``BLOCK_N`` keys are gathered row by row (page size 1 is a gather: TMA's tiled copy
  needs contiguous rows, and Hopper has no TMA gather) with ``cp.async`` straight into
  ``NUM_BUF`` swizzled shared buffers, ``NUM_BUF - 1`` tiles ahead of the one being computed;
  the page indices of the next tile are loaded one iteration early, so no load sits on the
  critical path;
- ``S = q K^T`` is one ``wgmma`` over both warpgroups (warps [4, 2]: each warpgroup computes half
  the key columns, nothing twice); the softmax row statistics are reduced across the two;
  ``P`` goes to shared memory and ``P V`` gives each warpgroup half the 512 output columns
  (64 x 256 fp32: 128 registers a thread), so the accumulator never spills.

``mla_verify_stage1_hopper_tma`` is the same program for pages that hold whole tiles (vLLM's
64-token blocks on Hopper, ``PAGE % BLOCK_N == 0``): a tile is ``BLOCK_N`` consecutive pool rows,
so the copy engine (TMA) fetches it from a descriptor, one mbarrier per buffer; no thread
computes a KV address or issues a copy. On an H200 that is 1.18x faster than the row gather at
(8, 131072, qlen 4) (``bench/results/verify_vs_flashmla_h200.json``).

``mla_verify_stage1_hopper_roles`` (the default on sm_90) gives the warpgroups roles instead:
warpgroup 0 computes ``S`` over the whole tile (one 64-wide ``wgmma``: q is read from shared
memory once per tile, not by both warpgroups) and the softmax within its own warps, then hands
P and each row's rescale to warpgroup 1 through shared memory and mbarriers; both compute
``P V`` on their 256 columns; a loader (a TMA warp, or a ``cp.async`` warpgroup at pages
smaller than a tile) refills a buffer once both have released it. Its compute alone is 21-27%
shorter than the fused kernels' at B >= 8 (``bench/results/verify_vs_flashmla_h100.json``).
``mla_verify_stage1_hopper_ws`` is the fused loop with a loader warp (measured no faster).

Stage 2 (the merge) is ``mla_verify.mla_verify_stage2`` unchanged, with ``ALIGN = BLOCK_N``.
Rows past a request's queries or past H are computed on clamped (valid) addresses and never
stored; keys past a split's end load a valid row and are masked to -inf. All global offsets
are 64-bit (pools of more than 2^31 elements).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

# the TMA load's name: async_copy_global_to_shared up to Triton 3.6, async_load later
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

ROWS = 64  # query rows per program: one wgmma M
NUM_WARPS = 8  # two warpgroups
# registers of the loader warp (mla_verify_stage1_hopper_ws): TMA issues little; the row gather
# holds a step's addresses (the compute warpgroups give up registers for it: 192 then)
LOADER_REGS = 40
ROLES_PV_REGS = 192  # the roles kernel's P V warpgroup beside a TMA loader warp
GATHER_LOADER_REGS = 112
# the roles kernel's gather loader (a warpgroup: this tile's rows and the next's) and, beside
# it, the P V warpgroup (64 x 256 fp32 accumulator)
ROLES_GATHER_LOADER_REGS = 96
ROLES_GATHER_PV_REGS = 176


@gluon.jit
def _row_splits(seq, num_splits, MIN_CHUNK: gl.constexpr, DEVICE_SPLITS: gl.constexpr):
    """The Triton kernel's rule (``mla_verify._row_splits``), restated for Gluon."""
    if DEVICE_SPLITS:
        v = gl.maximum((seq + MIN_CHUNK - 1) // MIN_CHUNK, 1) - 1
        v = v | (v >> 1)
        v = v | (v >> 2)
        v = v | (v >> 4)
        v = v | (v >> 8)
        v = v | (v >> 16)
        return gl.maximum(gl.minimum(v + 1, num_splits), 1)
    else:
        return num_splits


@gluon.jit
def _slots(
    kv_indices, kv_start, j0, hi, BLOCK_N: gl.constexpr, PAGE: gl.constexpr, layout: gl.constexpr
):
    """Pool rows of keys j0 .. j0 + BLOCK_N (clamped to the split's last key: always valid)."""
    j = gl.minimum(j0 + gl.arange(0, BLOCK_N, layout=layout), hi - 1)
    if PAGE == 1:
        return gl.load(kv_indices + kv_start + j).to(gl.int64)
    else:
        page = gl.load(kv_indices + kv_start + j // PAGE).to(gl.int64)
        return page * PAGE + (j % PAGE)


@gluon.jit
def _issue(kn_buf, kp_buf, kv, slot_n, slot_p, stride_kv, ld_n: gl.constexpr, ld_p: gl.constexpr):
    """cp.async one KV tile (latent part and rope part) into its shared buffers."""
    cols_n = gl.arange(0, 512, layout=gl.SliceLayout(0, ld_n))
    cols_p = gl.arange(0, 64, layout=gl.SliceLayout(0, ld_p))
    cp.async_copy_global_to_shared(kn_buf, kv + (slot_n * stride_kv)[:, None] + cols_n[None, :])
    cp.async_copy_global_to_shared(
        kp_buf, kv + (slot_p * stride_kv + 512)[:, None] + cols_p[None, :]
    )


@gluon.jit
def _qk(qn_smem, qp_smem, kn, kp, s_zero):
    """S = q K^T for one tile, issued (async): one wgmma over both warpgroups, each half the keys."""
    s = warpgroup_mma(qn_smem, kn.permute((1, 0)), s_zero, use_acc=False, is_async=True)
    return warpgroup_mma(qp_smem, kp.permute((1, 0)), s, is_async=True)


@gluon.jit
def _softmax(s, m_i, l_i, qk_scale, bound, keys, j0, hi, row_s: gl.constexpr, row_o: gl.constexpr,
             LAZY_SUM: gl.constexpr = False):  # fmt: skip
    """The online softmax of one tile: P (unnormalised), the rescale of earlier tiles, new stats.
    Row statistics live in O's row layout; the conversions to and from S's are trivial (the
    same rows per thread), the two reductions cross the warpgroups."""
    j = j0 + keys
    visible = (j[None, :] < bound[:, None]) & (j < hi)[None, :]
    s = gl.where(visible, s * qk_scale, float("-inf"))
    m_new = gl.maximum(m_i, gl.convert_layout(gl.max(s, axis=1), row_o))
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no key yet
    p = gl.exp2(s - gl.convert_layout(m_safe, row_s)[:, None])
    alpha = gl.exp2(m_i - m_safe)
    if LAZY_SUM:  # l_i is [M, BLOCK_N] partial sums, each thread its own keys: no reduction
        l_i = l_i * gl.convert_layout(alpha, row_s)[:, None] + p
    else:
        l_i = l_i * alpha + gl.convert_layout(gl.sum(p, axis=1), row_o)
    return p, alpha, l_i, m_new


@gluon.jit
def _store_partials(acc, m_i, l_i, part_o, part_lse, b64, split, hb, n, qlen, H,
                    stride_pb, stride_pt, stride_ph, BLOCK_H: gl.constexpr, M: gl.constexpr,
                    row_o: gl.constexpr, o_layout: gl.constexpr):  # fmt: skip
    """The split's normalised partial output and its log2-sum-exp, rows past n or H not stored."""
    D_NOPE: gl.constexpr = 512
    has_keys = l_i > 0.0
    o = acc / gl.where(has_keys, l_i, 1.0)[:, None]
    lse2 = gl.where(has_keys, m_i + gl.log2(gl.where(has_keys, l_i, 1.0)), float("-inf"))
    ro = gl.arange(0, M, layout=row_o)
    qi_o = ro // BLOCK_H
    h_o = hb * BLOCK_H + ro % BLOCK_H
    ok_o = (qi_o < qlen) & (qi_o < n) & (h_o < H)
    base = b64 * stride_pb + qi_o.to(gl.int64) * stride_pt + h_o.to(gl.int64) * stride_ph
    cols_o = gl.arange(0, D_NOPE, layout=gl.SliceLayout(0, o_layout))
    p_off = base + split.to(gl.int64) * D_NOPE
    mask_o = ok_o[:, None] & (cols_o < D_NOPE)[None, :]
    gl.store(part_o + p_off[:, None] + cols_o[None, :], o, mask=mask_o)
    gl.store(part_lse + base // D_NOPE + split, lse2, mask=ok_o)


@gluon.jit
def mla_verify_stage1_hopper(
    q_nope,
    q_pe,
    kv,
    kv_indptr,
    kv_indices,
    seq_lens,
    qo_lens,
    part_o,  # fp32 [B, qlen, H, S, 512]
    part_lse,  # fp32 [B, qlen, H, S]
    qk_scale,  # sm_scale * log2(e)
    num_splits,
    qlen,
    H,
    stride_qb,
    stride_qt,
    stride_qh,
    stride_rb,
    stride_rt,
    stride_rh,
    stride_pb,
    stride_pt,
    stride_ph,
    stride_kv,
    QP: gl.constexpr,  # query positions per program (next_pow2(qlen))
    BLOCK_H: gl.constexpr,  # heads per program; QP * BLOCK_H == 64
    BLOCK_N: gl.constexpr,  # keys per tile
    PAGE: gl.constexpr,
    NUM_BUF: gl.constexpr,  # shared KV buffers (NUM_BUF - 1 tiles in flight)
    DEVICE_SPLITS: gl.constexpr = False,
    MIN_CHUNK: gl.constexpr = 256,
    OVERLAP: gl.constexpr = False,  # issue S of tile t before waiting for P V of tile t - 1
    LAZY_SUM: gl.constexpr = False,  # row sums reduced once at the end, not per tile
    PHASES: gl.constexpr = 3,  # benchmarks only: 1 = loads alone, 2 = compute alone (wrong output)
    PREFETCH: gl.constexpr = 0,  # tiles past the cp.async window also prefetched into L2 (0: none)
    EARLY_ISSUE: gl.constexpr = False,  # refill a buffer once freed, before awaiting the tile
):
    D_NOPE: gl.constexpr = 512
    D_PE: gl.constexpr = 64
    M: gl.constexpr = QP * BLOCK_H
    gl.static_assert(M == 64)
    dtype: gl.constexpr = kv.dtype.element_ty

    # register layouts: loads (16-byte vectors along the row), S (keys split over the two
    # warpgroups), O (512 columns split over the two warpgroups)
    ld_n: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [8, 1], [1, 0])
    ld_p: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [8, 1], [1, 0])
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, BLOCK_N // 2, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, 256, 16]
    )
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    hb = gl.program_id(0)
    b = gl.program_id(1)
    split = gl.program_id(2)
    seq = gl.load(seq_lens + b)
    n = gl.load(qo_lens + b)
    if n == 0:  # padding row: stage 2 writes its defined values
        return
    row_splits = _row_splits(seq, num_splits, MIN_CHUNK, DEVICE_SPLITS)
    per = (seq + row_splits - 1) // row_splits
    chunk = ((per + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
    lo = split * chunk
    hi = gl.minimum(lo + chunk, seq)
    if lo >= hi:  # past the row's length (also every split >= row_splits)
        return

    qn_smem = gl.allocate_shared_memory(
        dtype, [M, D_NOPE], gl.NVMMASharedLayout.get_default_for([M, D_NOPE], dtype)
    )
    qp_smem = gl.allocate_shared_memory(
        dtype, [M, D_PE], gl.NVMMASharedLayout.get_default_for([M, D_PE], dtype)
    )
    kn_smem = gl.allocate_shared_memory(
        dtype,
        [NUM_BUF, BLOCK_N, D_NOPE],
        gl.NVMMASharedLayout.get_default_for([BLOCK_N, D_NOPE], dtype),
    )
    kp_smem = gl.allocate_shared_memory(
        dtype,
        [NUM_BUF, BLOCK_N, D_PE],
        gl.NVMMASharedLayout.get_default_for([BLOCK_N, D_PE], dtype),
    )
    p_smem = gl.allocate_shared_memory(
        dtype, [M, BLOCK_N], gl.NVMMASharedLayout.get_default_for([M, BLOCK_N], dtype)
    )

    b64 = b.to(gl.int64)
    # q rows (clamped to valid addresses; rows past n or H are never stored)
    rq_n = gl.arange(0, M, layout=gl.SliceLayout(1, ld_n))
    qi_n = gl.minimum(rq_n // BLOCK_H, qlen - 1).to(gl.int64)
    h_n = gl.minimum(hb * BLOCK_H + rq_n % BLOCK_H, H - 1).to(gl.int64)
    rq_p = gl.arange(0, M, layout=gl.SliceLayout(1, ld_p))
    qi_p = gl.minimum(rq_p // BLOCK_H, qlen - 1).to(gl.int64)
    h_p = gl.minimum(hb * BLOCK_H + rq_p % BLOCK_H, H - 1).to(gl.int64)
    q_off = b64 * stride_qb + qi_n * stride_qt + h_n * stride_qh
    r_off = b64 * stride_rb + qi_p * stride_rt + h_p * stride_rh
    cols_n = gl.arange(0, D_NOPE, layout=gl.SliceLayout(0, ld_n))
    cols_p = gl.arange(0, D_PE, layout=gl.SliceLayout(0, ld_p))
    cp.async_copy_global_to_shared(qn_smem, q_nope + q_off[:, None] + cols_n[None, :])
    cp.async_copy_global_to_shared(qp_smem, q_pe + r_off[:, None] + cols_p[None, :])
    cp.commit_group()

    kv_start = gl.load(kv_indptr + b).to(gl.int64)
    sl_n: gl.constexpr = gl.SliceLayout(1, ld_n)
    sl_p: gl.constexpr = gl.SliceLayout(1, ld_p)
    for t in gl.static_range(NUM_BUF - 1):  # prologue: the first NUM_BUF - 1 tiles in flight
        j0 = lo + t * BLOCK_N
        _issue(
            kn_smem.index(t),
            kp_smem.index(t),
            kv,
            _slots(kv_indices, kv_start, j0, hi, BLOCK_N, PAGE, sl_n),
            _slots(kv_indices, kv_start, j0, hi, BLOCK_N, PAGE, sl_p),
            stride_kv,
            ld_n,
            ld_p,
        )
        cp.commit_group()
    j_next = lo + (NUM_BUF - 1) * BLOCK_N
    nx_n = _slots(kv_indices, kv_start, j_next, hi, BLOCK_N, PAGE, sl_n)
    nx_p = _slots(kv_indices, kv_start, j_next, hi, BLOCK_N, PAGE, sl_p)
    n_tiles = (hi - lo + BLOCK_N - 1) // BLOCK_N
    sl_f: gl.constexpr = gl.SliceLayout(1, ld_p)
    for t in gl.static_range(NUM_BUF - 1, NUM_BUF - 1 + PREFETCH):  # the next tiles into L2
        pf = _slots(kv_indices, kv_start, lo + t * BLOCK_N, hi, BLOCK_N, PAGE, sl_f)
        _l2_prefetch_rows(kv, pf, stride_kv, t < n_tiles)
    pf = _slots(
        kv_indices, kv_start, lo + (NUM_BUF - 1 + PREFETCH) * BLOCK_N, hi, BLOCK_N, PAGE, sl_f
    )

    # rows: query position and head, and the keys each row sees (the causal bound)
    rs = gl.arange(0, M, layout=row_s)
    qi_s = rs // BLOCK_H
    h_s = hb * BLOCK_H + rs % BLOCK_H
    ok_s = (qi_s < qlen) & (qi_s < n) & (h_s < H)
    bound = gl.where(ok_s, seq - n + qi_s + 1, 0)
    keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))

    m_i = gl.full([M], float("-inf"), gl.float32, layout=row_o)
    l_i = gl.zeros([M], gl.float32, layout=row_o)
    acc = gl.zeros([M, D_NOPE], gl.float32, layout=o_layout)
    if LAZY_SUM:
        l_i = gl.zeros([M, BLOCK_N], gl.float32, layout=s_layout)
    s_zero = gl.zeros([M, BLOCK_N], gl.float32, layout=s_layout)
    if OVERLAP:
        acc = warpgroup_mma_init(acc)  # the loop carries P V's pending result
        # S of tile t is issued before the wait for P V of tile t - 1: the tensor cores stay busy
        # across the loop's barrier, the buffer refill and the index loads
        for t in range(n_tiles):
            cp.wait_group(NUM_BUF - 2)  # this thread's copies of tile t (and q) have landed
            fence_async_shared()  # cp.async writes -> wgmma reads (async proxy)
            gl.thread_barrier()  # everyone's copies of tile t landed
            buf = t % NUM_BUF
            kn = kn_smem.index(buf)
            s = _qk(qn_smem, qp_smem, kn, kp_smem.index(buf), s_zero)
            # P V of tile t - 1 done (wgmma groups retire in order; S's two are the newest)
            acc = warpgroup_mma_wait(num_outstanding=2, deps=(acc,))
            gl.thread_barrier()  # both warpgroups are done with tile t - 1's buffer and P
            nb = (t + NUM_BUF - 1) % NUM_BUF
            _issue(kn_smem.index(nb), kp_smem.index(nb), kv, nx_n, nx_p, stride_kv, ld_n, ld_p)
            cp.commit_group()
            j_next = lo + (t + NUM_BUF) * BLOCK_N
            nx_n = _slots(kv_indices, kv_start, j_next, hi, BLOCK_N, PAGE, sl_n)
            nx_p = _slots(kv_indices, kv_start, j_next, hi, BLOCK_N, PAGE, sl_p)
            s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
            p, alpha, l_i, m_i = _softmax(
                s, m_i, l_i, qk_scale, bound, keys, lo + t * BLOCK_N, hi, row_s, row_o
            )
            p_smem.store(p.to(dtype))
            fence_async_shared()
            gl.thread_barrier()  # both warpgroups' halves of P are written
            acc = warpgroup_mma(p_smem, kn, acc * alpha[:, None], is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    else:
        for t in range(n_tiles):
            if not EARLY_ISSUE:
                cp.wait_group(NUM_BUF - 2)  # this thread's copies of tile t (and q) have landed
                fence_async_shared()  # cp.async writes -> wgmma reads (async proxy)
                gl.thread_barrier()  # everyone's copies landed; tile t - 1's buffer is free
            nb = (t + NUM_BUF - 1) % NUM_BUF
            if PHASES & 1:
                _issue(kn_smem.index(nb), kp_smem.index(nb), kv, nx_n, nx_p, stride_kv, ld_n, ld_p)
            cp.commit_group()
            j_next = lo + (t + NUM_BUF) * BLOCK_N  # indices one tile early: off the critical path
            nx_n = _slots(kv_indices, kv_start, j_next, hi, BLOCK_N, PAGE, sl_n)
            nx_p = _slots(kv_indices, kv_start, j_next, hi, BLOCK_N, PAGE, sl_p)
            if PREFETCH > 0:  # tile t + NUM_BUF - 1 + PREFETCH (its indices loaded last tile)
                _l2_prefetch_rows(kv, pf, stride_kv, t + NUM_BUF - 1 + PREFETCH < n_tiles)
                j_pf = lo + (t + NUM_BUF + PREFETCH) * BLOCK_N
                pf = _slots(kv_indices, kv_start, j_pf, hi, BLOCK_N, PAGE, sl_f)
            if EARLY_ISSUE:  # the next tile is already in flight while this one is awaited
                cp.wait_group(NUM_BUF - 1)
                fence_async_shared()
                gl.thread_barrier()  # everyone's copies of tile t landed
            buf = t % NUM_BUF
            kn = kn_smem.index(buf)
            if PHASES & 2:
                s = _qk(qn_smem, qp_smem, kn, kp_smem.index(buf), s_zero)
                s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
                p, alpha, l_i, m_i = _softmax(
                    s, m_i, l_i, qk_scale, bound, keys, lo + t * BLOCK_N, hi, row_s, row_o, LAZY_SUM
                )
                p_smem.store(p.to(dtype))
                fence_async_shared()
                gl.thread_barrier()  # both warpgroups' halves of P are written
                acc = warpgroup_mma(p_smem, kn, acc * alpha[:, None], is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            if EARLY_ISSUE:
                gl.thread_barrier()  # both warpgroups are done with tile t: its buffer is free
    cp.wait_group(0)  # the clamped copies issued past the last tile
    if LAZY_SUM:
        l_i = gl.convert_layout(gl.sum(l_i, axis=1), row_o)

    _store_partials(acc, m_i, l_i, part_o, part_lse, b64, split, hb, n, qlen, H,
                    stride_pb, stride_pt, stride_ph, BLOCK_H, M, row_o, o_layout)  # fmt: skip


@gluon.jit
def _zero_tail(kn, keep, ld: gl.constexpr):
    """Zero the latent rows of a tile past the row's last key: a page's unused slots may hold
    anything (NaN too), and P = 0 times NaN is NaN in P V. Run at most once per row."""
    for c in gl.static_range(0, 512, 64):
        sub = kn.slice(c, 64, dim=1)
        v = sub.load(ld)
        sub.store(gl.where(keep[:, None], v, gl.zeros_like(v)))


@gluon.jit
def _l2_prefetch(kv, row, stride_kv, go, BLOCK_N: gl.constexpr):
    """One thread asks the copy engine to bring tile rows ``row .. row + BLOCK_N`` of the pool
    into L2 (``cp.async.bulk.prefetch.L2``: one instruction, no registers, no shared memory), so
    more of the KV stream is in flight than the two shared buffers hold."""
    one: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    addr = (kv + row.to(gl.int64) * stride_kv).to(gl.int64)
    nbytes = (stride_kv * (BLOCK_N * 2)).to(gl.int32)
    a = gl.full([1], 0, gl.int64, one) + addr
    gl.inline_asm_elementwise(
        "{ .reg .pred p, q; .reg .u32 t; mov.u32 t, %tid.x; setp.ne.s32 q, $3, 0; "
        "setp.eq.and.u32 p, t, 0, q; @p cp.async.bulk.prefetch.L2.global [$1], $2; "
        "mov.u32 $0, 0; }",
        "=r,l,r,r",
        [
            a,
            gl.full([1], 0, gl.int32, one) + nbytes,
            gl.full([1], 0, gl.int32, one) + go.to(gl.int32),
        ],
        dtype=gl.int32,
        is_pure=False,
        pack=1,
    )


@gluon.jit
def _l2_prefetch_rows(kv, slots, stride_kv, go):
    """Each pool row of ``slots`` (one 1152-byte KV row) prefetched into L2 by one lane of the
    warp holding it (``cp.async.bulk.prefetch.L2``): the page-1 gather's tile after next."""
    addr = (kv + slots * stride_kv).to(gl.int64)
    nbytes = (stride_kv * 2).to(gl.int32)
    gl.inline_asm_elementwise(
        "{ .reg .pred p, q; .reg .u32 t; mov.u32 t, %laneid; setp.ne.s32 q, $3, 0; "
        "setp.eq.and.u32 p, t, 0, q; @p cp.async.bulk.prefetch.L2.global [$1], $2; "
        "mov.u32 $0, 0; }",
        "=r,l,r,r",
        [
            addr,
            gl.zeros_like(slots).to(gl.int32) + nbytes,
            gl.zeros_like(slots).to(gl.int32) + go.to(gl.int32),
        ],
        dtype=gl.int32,
        is_pure=False,
        pack=1,
    )


@gluon.jit
def _tma_tile(kn_desc, kp_desc, row, bars, buf, kn_buf, kp_buf, go,
              BLOCK_N: gl.constexpr, CHUNKS: gl.constexpr, LOADS: gl.constexpr = True):  # fmt: skip
    """TMA one KV tile into buffer ``buf``. ``CHUNKS == 1``: one latent and one rope copy on one
    mbarrier. ``CHUNKS`` 3 or 9: the tile's nine ``[BLOCK_N, 64]`` boxes (eight latent slices,
    then the rope) in ``CHUNKS`` groups, each group on its own mbarrier, so ``S = q K^T``
    starts on the first group that lands. ``LOADS`` False (benchmarks: the compute alone, wrong
    output): every mbarrier completes with no copy."""
    if not LOADS:
        for c in gl.static_range(CHUNKS):
            mbarrier.expect(bars.index(buf * CHUNKS + c), 0, pred=go)
    elif CHUNKS == 1:
        mbarrier.expect(bars.index(buf), BLOCK_N * 576 * 2, pred=go)
        _tma_load(kn_desc, [row, 0], bars.index(buf), kn_buf, pred=go)
        _tma_load(kp_desc, [row, 512], bars.index(buf), kp_buf, pred=go)
    else:
        PER: gl.constexpr = 9 // CHUNKS
        for c in gl.static_range(CHUNKS):
            bar = bars.index(buf * CHUNKS + c)
            mbarrier.expect(bar, PER * BLOCK_N * 64 * 2, pred=go)
            for k in gl.static_range(c * PER, (c + 1) * PER):
                if k == 8:
                    _tma_load(kp_desc, [row, 512], bar, kp_buf, pred=go)
                else:
                    _tma_load(kp_desc, [row, k * 64], bar, kn_buf.slice(k * 64, 64, dim=1), pred=go)


@gluon.jit
def _tma_wait(bars, buf, phase, CHUNKS: gl.constexpr):
    """Wait until every copy of the tile in buffer ``buf`` has landed."""
    for c in gl.static_range(CHUNKS):
        mbarrier.wait(bars.index(buf * CHUNKS + c), phase)


@gluon.jit
def _qk_chunked(qn_smem, qp_smem, kn, kp, s_zero, bars, buf, phase, CHUNKS: gl.constexpr):
    """S = q K^T issued box by box, each group's ``wgmma`` as soon as its boxes have landed:
    the tile's arrival overlaps its first products."""
    PER: gl.constexpr = 9 // CHUNKS
    s = s_zero
    for c in gl.static_range(CHUNKS):
        mbarrier.wait(bars.index(buf * CHUNKS + c), phase)
        for k in gl.static_range(c * PER, (c + 1) * PER):
            if k == 8:
                s = warpgroup_mma(qp_smem, kp.permute((1, 0)), s, is_async=True)
            else:
                s = warpgroup_mma(qn_smem.slice(k * 64, 64, dim=1),
                                  kn.slice(k * 64, 64, dim=1).permute((1, 0)), s,
                                  use_acc=k > 0, is_async=True)  # fmt: skip
    return s


@gluon.jit
def mla_verify_stage1_hopper_tma(
    q_nope,
    q_pe,
    kv,  # the pool [N, 576] itself: the L2 prefetch's addresses
    kn_desc,  # TMA descriptor over kv [N, 576]: blocks [BLOCK_N, 512] (latent)
    kp_desc,  # the same pool: blocks [BLOCK_N, 64] at column 512 (rope)
    kv_indptr,
    kv_indices,
    seq_lens,
    qo_lens,
    part_o,
    part_lse,
    qk_scale,
    num_splits,
    qlen,
    H,
    stride_qb,
    stride_qt,
    stride_qh,
    stride_rb,
    stride_rt,
    stride_rh,
    stride_pb,
    stride_pt,
    stride_ph,
    stride_kv,
    QP: gl.constexpr,
    BLOCK_H: gl.constexpr,
    BLOCK_N: gl.constexpr,  # keys per tile; PAGE % BLOCK_N == 0, so a tile is contiguous rows
    PAGE: gl.constexpr,
    NUM_BUF: gl.constexpr,
    DEVICE_SPLITS: gl.constexpr = False,
    MIN_CHUNK: gl.constexpr = 256,
    PREFETCH: gl.constexpr = 0,  # tiles past the TMA window also prefetched into L2 (0: none)
    EARLY_ISSUE: gl.constexpr = False,  # refill a buffer once freed, before awaiting the tile
    CHUNKS: gl.constexpr = 1,  # 3 or 9: mbarriers per tile, S starts on the first that lands
    LOADS: gl.constexpr = True,  # benchmarks only: False = no KV copies (compute alone)
):
    """Stage 1 for pages of ``PAGE >= BLOCK_N`` slots (vLLM's 64-token blocks on Hopper): each
    tile is ``BLOCK_N`` consecutive pool rows, fetched by the tensor-memory accelerator (TMA)
    into the same swizzled buffers, completion tracked by one mbarrier per buffer. No thread
    computes a KV address or issues a copy; the compute is the cp.async kernel's."""
    D_NOPE: gl.constexpr = 512
    D_PE: gl.constexpr = 64
    M: gl.constexpr = QP * BLOCK_H
    gl.static_assert(M == 64)
    gl.static_assert(PAGE % BLOCK_N == 0)
    dtype: gl.constexpr = q_nope.dtype.element_ty

    ld_n: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [8, 1], [1, 0])
    ld_p: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [8, 1], [1, 0])
    ld_c: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [8, 1], [1, 0])  # [BLOCK_N, 64] chunks
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, BLOCK_N // 2, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, 256, 16]
    )
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    hb = gl.program_id(0)
    b = gl.program_id(1)
    split = gl.program_id(2)
    seq = gl.load(seq_lens + b)
    n = gl.load(qo_lens + b)
    if n == 0:
        return
    row_splits = _row_splits(seq, num_splits, MIN_CHUNK, DEVICE_SPLITS)
    per = (seq + row_splits - 1) // row_splits
    chunk = ((per + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
    lo = split * chunk
    hi = gl.minimum(lo + chunk, seq)
    if lo >= hi:
        return

    qn_smem = gl.allocate_shared_memory(
        dtype, [M, D_NOPE], gl.NVMMASharedLayout.get_default_for([M, D_NOPE], dtype)
    )
    qp_smem = gl.allocate_shared_memory(
        dtype, [M, D_PE], gl.NVMMASharedLayout.get_default_for([M, D_PE], dtype)
    )
    kn_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, D_NOPE], kn_desc.layout)
    kp_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, D_PE], kp_desc.layout)
    p_smem = gl.allocate_shared_memory(
        dtype, [M, BLOCK_N], gl.NVMMASharedLayout.get_default_for([M, BLOCK_N], dtype)
    )
    gl.static_assert((CHUNKS == 1) | (CHUNKS == 3) | (CHUNKS == 9))
    bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF * CHUNKS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_BUF * CHUNKS):
        mbarrier.init(bars.index(i), count=1)

    b64 = b.to(gl.int64)
    rq_n = gl.arange(0, M, layout=gl.SliceLayout(1, ld_n))
    qi_n = gl.minimum(rq_n // BLOCK_H, qlen - 1).to(gl.int64)
    h_n = gl.minimum(hb * BLOCK_H + rq_n % BLOCK_H, H - 1).to(gl.int64)
    rq_p = gl.arange(0, M, layout=gl.SliceLayout(1, ld_p))
    qi_p = gl.minimum(rq_p // BLOCK_H, qlen - 1).to(gl.int64)
    h_p = gl.minimum(hb * BLOCK_H + rq_p % BLOCK_H, H - 1).to(gl.int64)
    q_off = b64 * stride_qb + qi_n * stride_qt + h_n * stride_qh
    r_off = b64 * stride_rb + qi_p * stride_rt + h_p * stride_rh
    cols_n = gl.arange(0, D_NOPE, layout=gl.SliceLayout(0, ld_n))
    cols_p = gl.arange(0, D_PE, layout=gl.SliceLayout(0, ld_p))
    cp.async_copy_global_to_shared(qn_smem, q_nope + q_off[:, None] + cols_n[None, :])
    cp.async_copy_global_to_shared(qp_smem, q_pe + r_off[:, None] + cols_p[None, :])
    cp.commit_group()

    kv_start = gl.load(kv_indptr + b).to(gl.int64)
    n_tiles = (hi - lo + BLOCK_N - 1) // BLOCK_N
    fence_async_shared()  # the barriers' init, before the copy engine signals them
    for t in gl.static_range(NUM_BUF - 1):  # prologue: tiles 0 .. NUM_BUF - 2 in flight
        j0 = lo + t * BLOCK_N
        row = gl.load(kv_indices + kv_start + j0 // PAGE).to(gl.int32) * PAGE + j0 % PAGE
        _tma_tile(kn_desc, kp_desc, row, bars, t, kn_smem.index(t), kp_smem.index(t),
                  t < n_tiles, BLOCK_N, CHUNKS, LOADS)  # fmt: skip
    for t in gl.static_range(NUM_BUF - 1, NUM_BUF - 1 + PREFETCH):  # and the next into L2
        j0 = gl.minimum(lo + t * BLOCK_N, hi - 1)
        row = gl.load(kv_indices + kv_start + j0 // PAGE).to(gl.int32) * PAGE + j0 % PAGE
        _l2_prefetch(kv, row, stride_kv, t < n_tiles, BLOCK_N)
    j_next = lo + (NUM_BUF - 1) * BLOCK_N
    pg_next = gl.load(kv_indices + kv_start + gl.minimum(j_next, hi - 1) // PAGE)
    j_pf = gl.minimum(j_next + PREFETCH * BLOCK_N, hi - 1)
    pg_pf = gl.load(kv_indices + kv_start + j_pf // PAGE)

    rs = gl.arange(0, M, layout=row_s)
    qi_s = rs // BLOCK_H
    h_s = hb * BLOCK_H + rs % BLOCK_H
    ok_s = (qi_s < qlen) & (qi_s < n) & (h_s < H)
    bound = gl.where(ok_s, seq - n + qi_s + 1, 0)
    keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    tail_keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, ld_c))

    m_i = gl.full([M], float("-inf"), gl.float32, layout=row_o)
    l_i = gl.zeros([M, BLOCK_N], gl.float32, layout=s_layout)  # per-thread sums, reduced once
    acc = gl.zeros([M, D_NOPE], gl.float32, layout=o_layout)
    s_zero = gl.zeros([M, BLOCK_N], gl.float32, layout=s_layout)
    cp.wait_group(0)  # q landed (this thread's copies)
    fence_async_shared()
    gl.thread_barrier()  # everyone's q copies landed
    for t in range(n_tiles):
        buf = t % NUM_BUF
        phase = (t // NUM_BUF) & 1
        if not EARLY_ISSUE:
            if CHUNKS == 1:
                _tma_wait(bars, buf, phase, CHUNKS)
            gl.thread_barrier()  # both warpgroups are done with tile t - 1 (its buffer is free)
        nb = (t + NUM_BUF - 1) % NUM_BUF
        row = pg_next.to(gl.int32) * PAGE + j_next % PAGE
        _tma_tile(kn_desc, kp_desc, row, bars, nb, kn_smem.index(nb), kp_smem.index(nb),
                  t + NUM_BUF - 1 < n_tiles, BLOCK_N, CHUNKS, LOADS)  # fmt: skip
        if PREFETCH > 0:
            _l2_prefetch(kv, pg_pf.to(gl.int32) * PAGE + j_pf % PAGE, stride_kv,
                         t + NUM_BUF - 1 + PREFETCH < n_tiles, BLOCK_N)  # fmt: skip
        j_next += BLOCK_N  # the next page index one tile early: off the critical path
        pg_next = gl.load(kv_indices + kv_start + gl.minimum(j_next, hi - 1) // PAGE)
        if PREFETCH > 0:
            j_pf = gl.minimum(j_next + PREFETCH * BLOCK_N, hi - 1)
            pg_pf = gl.load(kv_indices + kv_start + j_pf // PAGE)
        if EARLY_ISSUE and CHUNKS == 1:  # the next tile is in flight while this one is awaited
            _tma_wait(bars, buf, phase, CHUNKS)
        j0 = lo + t * BLOCK_N
        kn = kn_smem.index(buf)
        if j0 + BLOCK_N > seq:  # the row's last tile holds slots past its length
            _tma_wait(bars, buf, phase, CHUNKS)
            _zero_tail(kn, j0 + tail_keys < seq, ld_c)
            fence_async_shared()
            gl.thread_barrier()
        if CHUNKS == 1:
            s = _qk(qn_smem, qp_smem, kn, kp_smem.index(buf), s_zero)
        else:  # each slice's product issued once it has landed
            s = _qk_chunked(
                qn_smem, qp_smem, kn, kp_smem.index(buf), s_zero, bars, buf, phase, CHUNKS
            )
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        p, alpha, l_i, m_i = _softmax(
            s, m_i, l_i, qk_scale, bound, keys, j0, hi, row_s, row_o, True
        )
        p_smem.store(p.to(dtype))
        fence_async_shared()
        gl.thread_barrier()  # both warpgroups' halves of P are written
        acc = warpgroup_mma(p_smem, kn, acc * alpha[:, None], is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        if EARLY_ISSUE:
            gl.thread_barrier()  # both warpgroups are done with tile t: its buffer is free
    for i in gl.static_range(NUM_BUF * CHUNKS):
        mbarrier.invalidate(bars.index(i))
    l_i = gl.convert_layout(gl.sum(l_i, axis=1), row_o)
    _store_partials(acc, m_i, l_i, part_o, part_lse, b64, split, hb, n, qlen, H,
                    stride_pb, stride_pt, stride_ph, BLOCK_H, M, row_o, o_layout)  # fmt: skip


def block_h_for(qlen: int) -> int:
    """Heads per program: 64 query rows (a wgmma M) of ``next_pow2(qlen)`` positions."""
    qp = 1 if qlen <= 1 else 1 << (qlen - 1).bit_length()
    if qp > ROWS:
        raise ValueError(f"the Hopper verify kernel holds at most {ROWS} query positions")
    return ROWS // qp


def kv_descriptors(kv, block_n: int) -> tuple:
    """Host-side TMA descriptors over the pool ``kv [N, 576]``: latent tiles ``[block_n, 512]``
    and rope tiles ``[block_n, 64]``, in the swizzled layouts the kernel's buffers use."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    dt = gl.bfloat16 if kv.dtype == torch.bfloat16 else gl.float16
    lay_n = gl.NVMMASharedLayout.get_default_for([block_n, 512], dt)
    lay_p = gl.NVMMASharedLayout.get_default_for([block_n, 64], dt)
    return (
        TensorDescriptor.from_tensor(kv, [block_n, 512], lay_n),
        TensorDescriptor.from_tensor(kv, [block_n, 64], lay_p),
    )


@gluon.jit
def _ws_loader(kn_desc, kp_desc, kv_indices, kv_start, lo, n_tiles, kn_smem, kp_smem, full, empty,
               BLOCK_N: gl.constexpr, PAGE: gl.constexpr, NUM_BUF: gl.constexpr,
               CHUNKS: gl.constexpr, LOADS: gl.constexpr,
               IDX_AHEAD: gl.constexpr = False):  # fmt: skip
    """The loader warp: TMA each tile into the next free buffer, as soon as the compute warps
    have released it (``empty``); nothing else, so no CTA-wide barrier sits on its path.
    ``IDX_AHEAD``: the page index of tile t + 1 is loaded before the wait for tile t's buffer,
    so no index load sits between a buffer's release and its refill."""
    if IDX_AHEAD:
        row = gl.load(kv_indices + kv_start + lo // PAGE).to(gl.int32) * PAGE + lo % PAGE
        for t in range(n_tiles):
            buf = t % NUM_BUF
            j1 = lo + gl.minimum(t + 1, n_tiles - 1) * BLOCK_N  # clamped: always a valid page
            row_next = gl.load(kv_indices + kv_start + j1 // PAGE).to(gl.int32) * PAGE + j1 % PAGE
            if t >= NUM_BUF:
                mbarrier.wait(empty.index(buf), ((t // NUM_BUF) - 1) & 1)
            _tma_tile(kn_desc, kp_desc, row, full, buf, kn_smem.index(buf), kp_smem.index(buf),
                      True, BLOCK_N, CHUNKS, LOADS)  # fmt: skip
            row = row_next
    else:
        for t in range(n_tiles):
            buf = t % NUM_BUF
            if t >= NUM_BUF:  # the buffer's previous tile (t - NUM_BUF) has been consumed
                mbarrier.wait(empty.index(buf), ((t // NUM_BUF) - 1) & 1)
            j0 = lo + t * BLOCK_N
            row = gl.load(kv_indices + kv_start + j0 // PAGE).to(gl.int32) * PAGE + j0 % PAGE
            _tma_tile(kn_desc, kp_desc, row, full, buf, kn_smem.index(buf), kp_smem.index(buf),
                      True, BLOCK_N, CHUNKS, LOADS)  # fmt: skip


# Dynamic tiles (``mla_verify_stage1_hopper_roles`` with ``counters``): the programs of one
# (request, head block) row take its tiles from a shared counter, one tile at a time, instead of
# each streaming its own fixed range; a program on a slower SM takes fewer tiles, so the row's
# programs end together (with fixed ranges, on an H100 at (8, 131072, qlen 1), their ends spread
# over 10% of the kernel's time). Each program's partial covers the tiles it took, any of the
# row's (the online softmax does not need them in order); stage 2 merges every program's. The
# last program of the row to finish resets the row's counters, so a graph replays right.
@gluon.jit
def _grab(ctr):
    """Take the next tile of a row: lane 0 adds 1 to the row's counter; the old value comes
    back in lane 0 only (``_lane0`` hands it to the warp where it is used, so the atomic's
    latency overlaps the work between)."""
    one: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    a = gl.full([1], 0, gl.int64, one) + ctr.to(gl.int64)
    return gl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 l, o; mov.u32 l, %laneid; setp.eq.u32 p, l, 0; "
        "mov.u32 o, 1; mov.u32 $0, 0; @p atom.relaxed.gpu.global.add.u32 $0, [$1], o; }",
        "=r,l", [a], dtype=gl.int32, is_pure=False, pack=1)  # fmt: skip


@gluon.jit
def _lane0(v):
    """Lane 0's value of ``v`` in every lane of the warp, as a scalar."""
    r = gl.inline_asm_elementwise("shfl.sync.idx.b32 $0, $1, 0, 0x1f, 0xffffffff;", "=r,r", [v],
                                  dtype=gl.int32, is_pure=False, pack=1)  # fmt: skip
    return gl.max(r, axis=0)


@gluon.jit
def _finish_row(ctr, last, pending):
    """This program took its last tile of the row: lane 0 counts it done (acq_rel: after every
    grab of its own); the row's last program (``last`` done before it) sets both counters
    back to 0 for the next launch. ``pending``: the grab still in flight, awaited first."""
    one: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    a = gl.full([1], 0, gl.int64, one) + ctr.to(gl.int64)
    d = gl.full([1], 0, gl.int64, one) + (ctr + 1).to(gl.int64)
    n = gl.full([1], 0, gl.int32, one) + last
    gl.inline_asm_elementwise(
        "{ .reg .pred p, q; .reg .u32 l, o, z, v; mov.u32 l, %laneid; mov.u32 v, $4; "
        "setp.eq.u32 p, l, 0; mov.u32 o, 1; mov.u32 z, 0; mov.u32 $0, 0; "
        "@p atom.acq_rel.gpu.global.add.u32 $0, [$2], o; setp.eq.and.u32 q, $0, $3, p; "
        "@q st.relaxed.gpu.global.u32 [$1], z; @q st.relaxed.gpu.global.u32 [$2], z; }",
        "=r,l,l,r,r", [a, d, n, pending], dtype=gl.int32, is_pure=False, pack=1)  # fmt: skip


@gluon.jit
def _page_row(kv_indices, kv_start, j0, PAGE: gl.constexpr):
    """The pool row of key ``j0`` (a tile's first key: pages hold whole tiles)."""
    return gl.load(kv_indices + kv_start + j0 // PAGE).to(gl.int32) * PAGE + j0 % PAGE


@gluon.jit
def _dyn_loader(kn_desc, kp_desc, kv_indices, kv_start, seq, ctr, parts, kn_smem, kp_smem, jsm,
                full, empty, BLOCK_N: gl.constexpr, PAGE: gl.constexpr,
                NUM_BUF: gl.constexpr):  # fmt: skip
    """The TMA loader warp with dynamic tiles: grabs tiles of its row two ahead (the grab and
    the page index of the next tile are in flight while a buffer is awaited), writes each
    buffer's first key into ``jsm`` before its copy, then -1 once the row has no tile left."""
    one: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    tiles = (seq + BLOCK_N - 1) // BLOCK_N
    cur = _lane0(_grab(ctr))
    raw = _grab(ctr)  # the tile after (lane 0), awaited one iteration later
    row = _page_row(kv_indices, kv_start, gl.minimum(cur, tiles - 1) * BLOCK_N, PAGE)
    t = 0
    while cur < tiles:
        buf = t % NUM_BUF
        nxt = _lane0(raw)
        raw = _grab(ctr)
        row_next = _page_row(kv_indices, kv_start, gl.minimum(nxt, tiles - 1) * BLOCK_N, PAGE)
        if t >= NUM_BUF:  # the buffer's previous tile (t - NUM_BUF) has been consumed
            mbarrier.wait(empty.index(buf), ((t // NUM_BUF) - 1) & 1)
        jsm.index(buf).store(gl.full([1], 0, gl.int32, one) + cur * BLOCK_N)
        _tma_tile(kn_desc, kp_desc, row, full, buf, kn_smem.index(buf), kp_smem.index(buf),
                  True, BLOCK_N, 1, True)  # fmt: skip
        cur = nxt
        row = row_next
        t += 1
    buf = t % NUM_BUF
    if t >= NUM_BUF:
        mbarrier.wait(empty.index(buf), ((t // NUM_BUF) - 1) & 1)
    jsm.index(buf).store(gl.full([1], -1, gl.int32, one))  # no tile left: the roles end
    mbarrier.arrive(full.index(buf))
    _finish_row(ctr, parts - 1, raw)


@gluon.jit
def _ws_gather_loader(kv, kv_indices, kv_start, lo, hi, n_tiles, stride_kv, kn_smem, kp_smem, full,
                      empty, BLOCK_N: gl.constexpr, PAGE: gl.constexpr, NUM_BUF: gl.constexpr,
                      SUB: gl.constexpr, LOAD_WARPS: gl.constexpr = 1):  # fmt: skip
    """The loader warp(s) for pages of any size (AITER's page 1): each tile gathered row by row
    with ``cp.async``, ``SUB`` rows at a time; every lane arrives on the tile's ``full`` mbarrier
    (initialised to the loader's thread count) once its own copies have landed
    (``cp.async.mbarrier.arrive``), so no thread waits on a copy."""
    ld_n: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [LOAD_WARPS, 1], [1, 0])
    ld_p: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [LOAD_WARPS, 1], [1, 0])
    sl_n: gl.constexpr = gl.SliceLayout(1, ld_n)
    sl_p: gl.constexpr = gl.SliceLayout(1, ld_p)
    cols_n = gl.arange(0, 512, layout=gl.SliceLayout(0, ld_n))
    cols_p = gl.arange(0, 64, layout=gl.SliceLayout(0, ld_p))
    for t in range(n_tiles):
        buf = t % NUM_BUF
        if t >= NUM_BUF:  # the buffer's previous tile (t - NUM_BUF) has been consumed
            mbarrier.wait(empty.index(buf), ((t // NUM_BUF) - 1) & 1)
        j0 = lo + t * BLOCK_N
        for r in gl.static_range(0, BLOCK_N, SUB):
            slot_n = _slots(kv_indices, kv_start, j0 + r, hi, SUB, PAGE, sl_n)
            slot_p = _slots(kv_indices, kv_start, j0 + r, hi, SUB, PAGE, sl_p)
            cp.async_copy_global_to_shared(
                kn_smem.index(buf).slice(r, SUB, dim=0),
                kv + (slot_n * stride_kv)[:, None] + cols_n[None, :],
            )
            cp.async_copy_global_to_shared(
                kp_smem.index(buf).slice(r, SUB, dim=0),
                kv + (slot_p * stride_kv + 512)[:, None] + cols_p[None, :],
            )
        cp.mbarrier_arrive(full.index(buf), increment_count=False)


@gluon.jit
def _rows(kv_indices, kv_start, j0, hi, BLOCK_N: gl.constexpr, PAGE: gl.constexpr,
          layout: gl.constexpr):  # fmt: skip
    """``_slots`` as int32 pool rows (half the registers; widened where the address is made)."""
    j = gl.minimum(j0 + gl.arange(0, BLOCK_N, layout=layout), hi - 1)
    if PAGE == 1:
        return gl.load(kv_indices + kv_start + j)
    else:
        return gl.load(kv_indices + kv_start + j // PAGE) * PAGE + (j % PAGE)


@gluon.jit
def _gather_loader_ahead(kv, kv_indices, kv_start, lo, hi, n_tiles, stride_kv, kn_smem, kp_smem,
                         full, empty, BLOCK_N: gl.constexpr, PAGE: gl.constexpr,
                         NUM_BUF: gl.constexpr, LOAD_WARPS: gl.constexpr,
                         LOADS: gl.constexpr = True):  # fmt: skip
    """A loader warpgroup gathering whole tiles with ``cp.async``: the pool rows of tile t + 1
    are loaded before tile t's copies are issued, so no copy waits on an index load; each
    thread arrives on the tile's ``full`` mbarrier once its copies have landed."""
    ld_n: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [LOAD_WARPS, 1], [1, 0])
    ld_p: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [LOAD_WARPS, 1], [1, 0])
    sl_n: gl.constexpr = gl.SliceLayout(1, ld_n)
    sl_p: gl.constexpr = gl.SliceLayout(1, ld_p)
    cols_n = gl.arange(0, 512, layout=gl.SliceLayout(0, ld_n))
    cols_p = gl.arange(0, 64, layout=gl.SliceLayout(0, ld_p))
    rows_n = _rows(kv_indices, kv_start, lo, hi, BLOCK_N, PAGE, sl_n)
    rows_p = _rows(kv_indices, kv_start, lo, hi, BLOCK_N, PAGE, sl_p)
    for t in range(n_tiles):
        buf = t % NUM_BUF
        j_next = lo + (t + 1) * BLOCK_N  # clamped past the split's end: always valid
        next_n = _rows(kv_indices, kv_start, j_next, hi, BLOCK_N, PAGE, sl_n)
        next_p = _rows(kv_indices, kv_start, j_next, hi, BLOCK_N, PAGE, sl_p)
        if t >= NUM_BUF:  # the buffer's previous tile (t - NUM_BUF) has been consumed
            mbarrier.wait(empty.index(buf), ((t // NUM_BUF) - 1) & 1)
        if LOADS:
            cp.async_copy_global_to_shared(
                kn_smem.index(buf),
                kv + (rows_n.to(gl.int64) * stride_kv)[:, None] + cols_n[None, :],
            )
            cp.async_copy_global_to_shared(
                kp_smem.index(buf),
                kv + (rows_p.to(gl.int64) * stride_kv + 512)[:, None] + cols_p[None, :],
            )
            cp.mbarrier_arrive(full.index(buf), increment_count=False)
        else:  # benchmarks: the compute alone (one arrival standing for every loader thread)
            mbarrier.arrive(full.index(buf), count=32 * LOAD_WARPS)
        rows_n = next_n
        rows_p = next_p


@gluon.jit
def _ws_compute(qn_smem, qp_smem, kn_smem, kp_smem, p_smem, full, empty, qk_scale, seq, n, lo, hi,
                n_tiles, hb, qlen, H, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr,
                NUM_BUF: gl.constexpr, CHUNKS: gl.constexpr, GATHER: gl.constexpr):  # fmt: skip
    """The two compute warpgroups: for each tile, S = q K^T (chunk by chunk as the slices land),
    the online softmax, P V; then the tile's buffer goes back to the loader."""
    M: gl.constexpr = 64
    dtype: gl.constexpr = qn_smem.dtype
    ld_c: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [8, 1], [1, 0])
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, BLOCK_N // 2, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, 256, 16]
    )
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    rs = gl.arange(0, M, layout=row_s)
    qi_s = rs // BLOCK_H
    h_s = hb * BLOCK_H + rs % BLOCK_H
    ok_s = (qi_s < qlen) & (qi_s < n) & (h_s < H)
    bound = gl.where(ok_s, seq - n + qi_s + 1, 0)
    keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    tail_keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, ld_c))
    m_i = gl.full([M], float("-inf"), gl.float32, layout=row_o)
    l_i = gl.zeros([M, BLOCK_N], gl.float32, layout=s_layout)  # per-thread sums, reduced once
    acc = gl.zeros([M, 512], gl.float32, layout=o_layout)
    s_zero = gl.zeros([M, BLOCK_N], gl.float32, layout=s_layout)
    for t in range(n_tiles):
        buf = t % NUM_BUF
        phase = (t // NUM_BUF) & 1
        j0 = lo + t * BLOCK_N
        kn = kn_smem.index(buf)
        if GATHER:  # rows gathered by cp.async (clamped to valid keys): no tail to clear
            mbarrier.wait(full.index(buf), phase)
            fence_async_shared()  # the loader's cp.async writes -> this warp's wgmma reads
        elif j0 + BLOCK_N > seq:  # the row's last tile holds slots past its length
            _tma_wait(full, buf, phase, CHUNKS)
            _zero_tail(kn, j0 + tail_keys < seq, ld_c)
            fence_async_shared()
            gl.thread_barrier()
        if CHUNKS == 1:
            mbarrier.wait(full.index(buf), phase)
            s = _qk(qn_smem, qp_smem, kn, kp_smem.index(buf), s_zero)
        else:
            s = _qk_chunked(
                qn_smem, qp_smem, kn, kp_smem.index(buf), s_zero, full, buf, phase, CHUNKS
            )
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        p, alpha, l_i, m_i = _softmax(
            s, m_i, l_i, qk_scale, bound, keys, j0, hi, row_s, row_o, True
        )
        p_smem.store(p.to(dtype))
        fence_async_shared()
        gl.thread_barrier()  # both warpgroups' halves of P are written
        acc = warpgroup_mma(p_smem, kn, acc * alpha[:, None], is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        gl.thread_barrier()  # both warpgroups are done with the tile and with P
        mbarrier.arrive(empty.index(buf))
    return acc, m_i, l_i


@gluon.jit
def mla_verify_stage1_hopper_ws(
    q_nope,
    q_pe,
    kv,
    kn_desc,
    kp_desc,
    kv_indptr,
    kv_indices,
    seq_lens,
    qo_lens,
    part_o,
    part_lse,
    qk_scale,
    num_splits,
    qlen,
    H,
    stride_qb,
    stride_qt,
    stride_qh,
    stride_rb,
    stride_rt,
    stride_rh,
    stride_pb,
    stride_pt,
    stride_ph,
    stride_kv,
    QP: gl.constexpr,
    BLOCK_H: gl.constexpr,
    BLOCK_N: gl.constexpr,
    PAGE: gl.constexpr,
    NUM_BUF: gl.constexpr,
    DEVICE_SPLITS: gl.constexpr = False,
    MIN_CHUNK: gl.constexpr = 256,
    CHUNKS: gl.constexpr = 1,
    LOADER_REGS: gl.constexpr = 40,
    LOADS: gl.constexpr = True,  # benchmarks only: False = no KV copies (compute alone)
    GATHER: gl.constexpr = False,  # rows gathered by cp.async (any page size; no descriptors)
    SUB: gl.constexpr = 8,  # rows per gather step of the loader warp
):
    """``mla_verify_stage1_hopper_tma`` split into warp roles: one loader warp issues the TMA
    copies (released buffers come back through ``empty`` mbarriers), the two warpgroups only
    wait on ``full`` mbarriers and compute. No CTA-wide barrier guards a copy, and the copy of
    tile t + NUM_BUF starts the moment tile t is consumed."""
    D_NOPE: gl.constexpr = 512
    D_PE: gl.constexpr = 64
    M: gl.constexpr = QP * BLOCK_H
    gl.static_assert(M == 64)
    gl.static_assert(GATHER | (PAGE % BLOCK_N == 0))
    gl.static_assert((CHUNKS == 1) | (CHUNKS == 3) | (CHUNKS == 9))
    dtype: gl.constexpr = q_nope.dtype.element_ty
    ld_n: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [8, 1], [1, 0])
    ld_p: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [8, 1], [1, 0])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, 256, 16]
    )
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    hb = gl.program_id(0)
    b = gl.program_id(1)
    split = gl.program_id(2)
    seq = gl.load(seq_lens + b)
    n = gl.load(qo_lens + b)
    if n == 0:
        return
    row_splits = _row_splits(seq, num_splits, MIN_CHUNK, DEVICE_SPLITS)
    per = (seq + row_splits - 1) // row_splits
    chunk = ((per + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
    lo = split * chunk
    hi = gl.minimum(lo + chunk, seq)
    if lo >= hi:
        return

    qn_smem = gl.allocate_shared_memory(
        dtype, [M, D_NOPE], gl.NVMMASharedLayout.get_default_for([M, D_NOPE], dtype)
    )
    qp_smem = gl.allocate_shared_memory(
        dtype, [M, D_PE], gl.NVMMASharedLayout.get_default_for([M, D_PE], dtype)
    )
    # the same swizzled layouts as kv_descriptors' blocks
    kn_smem = gl.allocate_shared_memory(
        dtype,
        [NUM_BUF, BLOCK_N, D_NOPE],
        gl.NVMMASharedLayout.get_default_for([BLOCK_N, D_NOPE], dtype),
    )
    kp_smem = gl.allocate_shared_memory(
        dtype,
        [NUM_BUF, BLOCK_N, D_PE],
        gl.NVMMASharedLayout.get_default_for([BLOCK_N, D_PE], dtype),
    )
    p_smem = gl.allocate_shared_memory(
        dtype, [M, BLOCK_N], gl.NVMMASharedLayout.get_default_for([M, BLOCK_N], dtype)
    )
    gl.static_assert((not GATHER) | (CHUNKS == 1))
    full = gl.allocate_shared_memory(gl.int64, [NUM_BUF * CHUNKS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_BUF * CHUNKS):
        mbarrier.init(full.index(i), count=32 if GATHER else 1)  # gather: each loader lane
    for i in gl.static_range(NUM_BUF):
        mbarrier.init(empty.index(i), count=1)

    b64 = b.to(gl.int64)
    rq_n = gl.arange(0, M, layout=gl.SliceLayout(1, ld_n))
    qi_n = gl.minimum(rq_n // BLOCK_H, qlen - 1).to(gl.int64)
    h_n = gl.minimum(hb * BLOCK_H + rq_n % BLOCK_H, H - 1).to(gl.int64)
    rq_p = gl.arange(0, M, layout=gl.SliceLayout(1, ld_p))
    qi_p = gl.minimum(rq_p // BLOCK_H, qlen - 1).to(gl.int64)
    h_p = gl.minimum(hb * BLOCK_H + rq_p % BLOCK_H, H - 1).to(gl.int64)
    q_off = b64 * stride_qb + qi_n * stride_qt + h_n * stride_qh
    r_off = b64 * stride_rb + qi_p * stride_rt + h_p * stride_rh
    cols_n = gl.arange(0, D_NOPE, layout=gl.SliceLayout(0, ld_n))
    cols_p = gl.arange(0, D_PE, layout=gl.SliceLayout(0, ld_p))
    cp.async_copy_global_to_shared(qn_smem, q_nope + q_off[:, None] + cols_n[None, :])
    cp.async_copy_global_to_shared(qp_smem, q_pe + r_off[:, None] + cols_p[None, :])
    cp.commit_group()
    cp.wait_group(0)
    fence_async_shared()  # q and the barriers' init, before wgmma and the copy engine use them
    gl.thread_barrier()

    kv_start = gl.load(kv_indptr + b).to(gl.int64)
    n_tiles = (hi - lo + BLOCK_N - 1) // BLOCK_N
    if GATHER:
        acc, m_i, l_i = gl.warp_specialize(
            [
                (_ws_compute, (qn_smem, qp_smem, kn_smem, kp_smem, p_smem, full, empty, qk_scale,
                               seq, n, lo, hi, n_tiles, hb, qlen, H, BLOCK_H, BLOCK_N, NUM_BUF,
                               CHUNKS, GATHER)),
                (_ws_gather_loader, (kv, kv_indices, kv_start, lo, hi, n_tiles, stride_kv,
                                     kn_smem, kp_smem, full, empty, BLOCK_N, PAGE, NUM_BUF, SUB)),
            ],
            [1],
            [LOADER_REGS],
        )  # fmt: skip
    else:
        acc, m_i, l_i = gl.warp_specialize(
            [
                (_ws_compute, (qn_smem, qp_smem, kn_smem, kp_smem, p_smem, full, empty, qk_scale,
                               seq, n, lo, hi, n_tiles, hb, qlen, H, BLOCK_H, BLOCK_N, NUM_BUF,
                               CHUNKS, GATHER)),
                (_ws_loader, (kn_desc, kp_desc, kv_indices, kv_start, lo, n_tiles, kn_smem,
                              kp_smem, full, empty, BLOCK_N, PAGE, NUM_BUF, CHUNKS, LOADS)),
            ],
            [1],
            [LOADER_REGS],
        )  # fmt: skip
    l_i = gl.convert_layout(gl.sum(l_i, axis=1), row_o)
    _store_partials(acc, m_i, l_i, part_o, part_lse, b64, split, hb, n, qlen, H,
                    stride_pb, stride_pt, stride_ph, BLOCK_H, M, row_o, o_layout)  # fmt: skip


@gluon.jit
def _stamp(stamps, base, slot: gl.constexpr):
    """Benchmarks only: the GPU's global timer (ns) into ``stamps[base + slot]`` and, at the
    start, the SM id into ``stamps[base + 2]``: when each program ran, and where."""
    one: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    z = gl.full([1], 0, gl.int32, one)
    t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [z], dtype=gl.int64,
                                  is_pure=False, pack=1)  # fmt: skip
    at = gl.arange(0, 1, layout=one)
    gl.store(stamps + base + slot + at, t)
    if slot == 0:
        sm = gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [z], dtype=gl.int32,
                                       is_pure=False, pack=1)  # fmt: skip
        gl.store(stamps + base + 2 + at, sm.to(gl.int64))


# -- warpgroup roles: one warpgroup computes S and the softmax, both compute P V ----------------
# The fused kernel splits S = q K^T over the two warpgroups (32 keys each): both read all of q
# from shared memory for every tile, and the row max crosses the warpgroups (two CTA barriers).
# Here warpgroup 0 computes S for all 64 keys (a 64-wide wgmma reads q once per tile: a third
# less shared-memory traffic), the softmax within its own warps (no exchange), and P V for
# output columns 0..255; warpgroup 1 computes P V for columns 256..511 while warpgroup 0 moves
# on to the next tile's S. They hand P (and each row's rescale) over through shared memory and
# mbarriers; a loader warp fetches tiles by TMA.


@gluon.jit
def _tile_start(jsm, buf, WARPS: gl.constexpr):
    """The first key of the tile in buffer ``buf`` as the loader wrote it (dynamic tiles)."""
    one: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    return gl.max(jsm.index(buf).load(one), axis=0)


@gluon.jit
def _roles_tile0(t, j0, qn_smem, qp_smem, kn_smem, kp_smem, p_smem, a_smem, empty, pready, pfree,
                 qk_scale, seq, hi, bound, keys, tail_keys, s_zero, m_i, l_i, acc,
                 NUM_BUF: gl.constexpr, GATHER: gl.constexpr, P_REG: gl.constexpr,
                 ld_c: gl.constexpr, row_o: gl.constexpr, o_layout: gl.constexpr):  # fmt: skip
    """Warpgroup 0's work on tile ``t`` (keys ``j0 ..``), its buffer already landed: S, the
    online softmax, P and the rescale out to warpgroup 1, its P V; the buffer released."""
    HALF: gl.constexpr = 256
    BLOCK_N: gl.constexpr = kn_smem.shape[1]
    dtype: gl.constexpr = qn_smem.dtype
    buf = t % NUM_BUF
    kn = kn_smem.index(buf)
    if GATHER:  # rows gathered by cp.async (clamped to valid keys): no tail to clear
        fence_async_shared()  # the loader's cp.async writes -> this warpgroup's wgmma
    elif j0 + BLOCK_N > seq:  # the row's last tile holds slots past its length
        _zero_tail(kn, j0 + tail_keys < seq, ld_c)
        fence_async_shared()
        gl.thread_barrier()
    s = _qk(qn_smem, qp_smem, kn, kp_smem.index(buf), s_zero)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
    j = j0 + keys
    visible = (j[None, :] < bound[:, None]) & (j < hi)[None, :]
    s = gl.where(visible, s * qk_scale, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1))
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no key yet
    p = gl.exp2(s - m_safe[:, None])
    alpha = gl.exp2(m_i - m_safe)
    l_i = l_i * alpha + gl.sum(p, axis=1)
    m_i = m_new
    pb = p.to(dtype)
    if P_REG:  # P V from P in registers, issued before P goes out to warpgroup 1
        p_op = gl.convert_layout(pb, gl.DotOperandLayout(0, o_layout, 2))
        acc = warpgroup_mma(p_op, kn.slice(0, HALF, dim=1),
                            acc * gl.convert_layout(alpha, row_o)[:, None], is_async=True)  # fmt: skip
    if t > 0:  # warpgroup 1 is done with the previous P and rescale
        mbarrier.wait(pfree, (t - 1) & 1)
    p_smem.store(pb)
    a_smem.store(alpha)
    fence_async_shared()  # P (generic writes) -> both warpgroups' wgmma reads
    gl.thread_barrier()  # all of this warpgroup's P and rescale written
    mbarrier.arrive(pready)
    if not P_REG:
        acc = warpgroup_mma(p_smem, kn.slice(0, HALF, dim=1),
                            acc * gl.convert_layout(alpha, row_o)[:, None], is_async=True)  # fmt: skip
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    gl.thread_barrier()  # this warpgroup is done reading the tile
    mbarrier.arrive(empty.index(buf))
    return m_i, l_i, acc


@gluon.jit
def _roles_qk_softmax(qn_smem, qp_smem, kn_smem, kp_smem, p_smem, a_smem, l_smem, full, empty,
                      pready, pfree, lready, qk_scale, seq, n, lo, hi, n_tiles, hb, qlen, H,
                      part_o, part_lse, b64, split, stride_pb, stride_pt, stride_ph,
                      BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr,
                      GATHER: gl.constexpr, P_REG: gl.constexpr = False,
                      EARLY_Q: gl.constexpr = False, jsm=None):  # fmt: skip
    """Warpgroup 0: S, the online softmax, P V for columns 0..255, then its half of the output
    and the log2-sum-exp. ``P_REG``: its P V takes P from registers, issued before P is
    written out for warpgroup 1. ``EARLY_Q``: q's copies (this warpgroup's cp.async) are
    awaited here, not before the roles start, so the loader's first tiles overlap them.
    ``jsm`` (dynamic tiles): each buffer's first key, written by the loader; -1 ends the loop."""
    M: gl.constexpr = 64
    if EARLY_Q:  # only this warpgroup reads q (warpgroup 1's P V takes P and V)
        cp.wait_group(0)
        fence_async_shared()
        gl.thread_barrier()
    HALF: gl.constexpr = 256
    ld_c: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HALF, 16]
    )
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    rs = gl.arange(0, M, layout=row_s)
    qi_s = rs // BLOCK_H
    h_s = hb * BLOCK_H + rs % BLOCK_H
    ok_s = (qi_s < qlen) & (qi_s < n) & (h_s < H)
    bound = gl.where(ok_s, seq - n + qi_s + 1, 0)
    keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    tail_keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, ld_c))
    m_i = gl.full([M], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.zeros([M], gl.float32, layout=row_s)
    acc = gl.zeros([M, HALF], gl.float32, layout=o_layout)
    s_zero = gl.zeros([M, BLOCK_N], gl.float32, layout=s_layout)
    if jsm is not None:  # dynamic tiles: the loader says which keys each buffer holds
        t = 0
        mbarrier.wait(full.index(0), 0)
        j0 = _tile_start(jsm, 0, 4)
        while j0 >= 0:
            m_i, l_i, acc = _roles_tile0(t, j0, qn_smem, qp_smem, kn_smem, kp_smem, p_smem, a_smem,
                                         empty, pready, pfree, qk_scale, seq, hi, bound, keys,
                                         tail_keys, s_zero, m_i, l_i, acc, NUM_BUF, GATHER, P_REG,
                                         ld_c, row_o, o_layout)  # fmt: skip
            t += 1
            mbarrier.wait(full.index(t % NUM_BUF), (t // NUM_BUF) & 1)
            j0 = _tile_start(jsm, t % NUM_BUF, 4)
    else:
        for t in range(n_tiles):
            mbarrier.wait(full.index(t % NUM_BUF), (t // NUM_BUF) & 1)
            m_i, l_i, acc = _roles_tile0(t, lo + t * BLOCK_N, qn_smem, qp_smem, kn_smem, kp_smem,
                                         p_smem, a_smem, empty, pready, pfree, qk_scale, seq, hi,
                                         bound, keys, tail_keys, s_zero, m_i, l_i, acc, NUM_BUF,
                                         GATHER, P_REG, ld_c, row_o, o_layout)  # fmt: skip
    l_smem.store(l_i)
    gl.thread_barrier()
    mbarrier.arrive(lready)
    _store_half(acc, gl.convert_layout(m_i, row_o), gl.convert_layout(l_i, row_o), part_o,
                part_lse, b64, split, hb, n, qlen, H, stride_pb, stride_pt, stride_ph, BLOCK_H,
                0, True, o_layout)  # fmt: skip


@gluon.jit
def _roles_tile1(t, kn_smem, p_smem, a_smem, empty, pready, pfree, acc, NUM_BUF: gl.constexpr,
                 GATHER: gl.constexpr, row_o: gl.constexpr):  # fmt: skip
    """Warpgroup 1's work on tile ``t``, its buffer landed: P V on columns 256..511 with
    warpgroup 0's P and rescale; P and the buffer released."""
    HALF: gl.constexpr = 256
    buf = t % NUM_BUF
    if GATHER:
        fence_async_shared()  # the loader's cp.async writes -> this warpgroup's wgmma
    mbarrier.wait(pready, t & 1)
    alpha = a_smem.load(row_o)
    acc = warpgroup_mma(p_smem, kn_smem.index(buf).slice(HALF, HALF, dim=1),
                        acc * alpha[:, None], is_async=True)  # fmt: skip
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    gl.thread_barrier()  # this warpgroup is done reading P, the rescale and the tile
    mbarrier.arrive(pfree)
    mbarrier.arrive(empty.index(buf))
    return acc


@gluon.jit
def _roles_pv(kn_smem, p_smem, a_smem, l_smem, full, empty, pready, pfree, lready, n_tiles, hb,
              n, qlen, H, part_o, part_lse, b64, split, stride_pb, stride_pt, stride_ph,
              BLOCK_H: gl.constexpr, NUM_BUF: gl.constexpr, GATHER: gl.constexpr,
              jsm=None):  # fmt: skip
    """Warpgroup 1: P V for columns 256..511 with warpgroup 0's P and rescale, then its half of
    the output (normalised by warpgroup 0's row sums). ``jsm``: dynamic tiles (see warpgroup
    0), the loop ends on the loader's -1."""
    M: gl.constexpr = 64
    HALF: gl.constexpr = 256
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HALF, 16]
    )
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    acc = gl.zeros([M, HALF], gl.float32, layout=o_layout)
    if jsm is not None:
        t = 0
        mbarrier.wait(full.index(0), 0)
        j0 = _tile_start(jsm, 0, 4)
        while j0 >= 0:
            acc = _roles_tile1(t, kn_smem, p_smem, a_smem, empty, pready, pfree, acc, NUM_BUF,
                               GATHER, row_o)  # fmt: skip
            t += 1
            mbarrier.wait(full.index(t % NUM_BUF), (t // NUM_BUF) & 1)
            j0 = _tile_start(jsm, t % NUM_BUF, 4)
    else:
        for t in range(n_tiles):
            # the tile landed (and is zeroed: warpgroup 0 signals pready after)
            mbarrier.wait(full.index(t % NUM_BUF), (t // NUM_BUF) & 1)
            acc = _roles_tile1(t, kn_smem, p_smem, a_smem, empty, pready, pfree, acc, NUM_BUF,
                               GATHER, row_o)  # fmt: skip
    mbarrier.wait(lready, 0)
    l_i = l_smem.load(row_o)
    _store_half(acc, l_i, l_i, part_o, part_lse, b64, split, hb, n, qlen, H, stride_pb,
                stride_pt, stride_ph, BLOCK_H, HALF, False, o_layout)  # fmt: skip


@gluon.jit
def _store_half(acc, m_i, l_i, part_o, part_lse, b64, split, hb, n, qlen, H, stride_pb, stride_pt,
                stride_ph, BLOCK_H: gl.constexpr, COL0: gl.constexpr, WITH_LSE: gl.constexpr,
                o_layout: gl.constexpr):  # fmt: skip
    """``_store_partials`` for one warpgroup's 256 output columns (from ``COL0``); the
    log2-sum-exp by the warpgroup that holds the row max."""
    D_NOPE: gl.constexpr = 512
    M: gl.constexpr = 64
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    has_keys = l_i > 0.0
    o = acc / gl.where(has_keys, l_i, 1.0)[:, None]
    ro = gl.arange(0, M, layout=row_o)
    qi_o = ro // BLOCK_H
    h_o = hb * BLOCK_H + ro % BLOCK_H
    ok_o = (qi_o < qlen) & (qi_o < n) & (h_o < H)
    base = b64 * stride_pb + qi_o.to(gl.int64) * stride_pt + h_o.to(gl.int64) * stride_ph
    cols = COL0 + gl.arange(0, 256, layout=gl.SliceLayout(0, o_layout))
    p_off = base + split.to(gl.int64) * D_NOPE
    gl.store(
        part_o + p_off[:, None] + cols[None, :], o, mask=ok_o[:, None] & (cols < D_NOPE)[None, :]
    )
    if WITH_LSE:
        lse2 = gl.where(has_keys, m_i + gl.log2(gl.where(has_keys, l_i, 1.0)), float("-inf"))
        gl.store(part_lse + base // D_NOPE + split, lse2, mask=ok_o)


@gluon.jit
def mla_verify_stage1_hopper_roles(
    q_nope,
    q_pe,
    kv,
    kn_desc,
    kp_desc,
    kv_indptr,
    kv_indices,
    seq_lens,
    qo_lens,
    part_o,
    part_lse,
    qk_scale,
    num_splits,
    qlen,
    H,
    stride_qb,
    stride_qt,
    stride_qh,
    stride_rb,
    stride_rt,
    stride_rh,
    stride_pb,
    stride_pt,
    stride_ph,
    stride_kv,
    QP: gl.constexpr,
    BLOCK_H: gl.constexpr,
    BLOCK_N: gl.constexpr,
    PAGE: gl.constexpr,
    NUM_BUF: gl.constexpr,
    DEVICE_SPLITS: gl.constexpr = False,
    MIN_CHUNK: gl.constexpr = 256,
    LOADS: gl.constexpr = True,  # benchmarks only: False = no KV copies (compute alone)
    PV_REGS: gl.constexpr = 192,
    LOADER_REGS: gl.constexpr = 40,
    GATHER: gl.constexpr = False,  # a loader warpgroup gathers rows by cp.async (any page size)
    P_REG: gl.constexpr = False,  # warpgroup 0's P V takes P from registers
    EARLY_Q: gl.constexpr = False,  # KV offset loaded first, q awaited by warpgroup 0 alone
    IDX_AHEAD: gl.constexpr = False,  # TMA loader: the next tile's page index loaded early
    stamps=None,  # benchmarks only: int64 [programs, 4] (start ns, end ns, SM id) per program
    # dynamic tiles (TMA loader only): int32, 32 per (request, head block) row, zero before the
    # first launch and left zero by every launch (see _dyn_loader)
    counters=None,
    # dynamic tiles: a row's programs launch next to each other (the linear program id is
    # row-major over (request, split)), so the GPU's block scheduler spreads each row over its
    # GPCs instead of giving a row's programs to the same few (rows ended 10 us apart)
    SPREAD_ROWS: gl.constexpr = False,
):
    """Stage 1 with warpgroup roles (see above): the default partition (4 warps) is warpgroup
    0, the workers warpgroup 1 and the loader (one warp issuing TMA at pages of whole tiles; a
    warpgroup gathering rows with cp.async where ``GATHER``). With ``counters`` the programs
    of a row take its tiles dynamically (``_dyn_loader``): each of the row's ``row_splits``
    programs writes a partial, empty ones with log2-sum-exp -inf."""
    D_NOPE: gl.constexpr = 512
    D_PE: gl.constexpr = 64
    M: gl.constexpr = QP * BLOCK_H
    gl.static_assert(M == 64)
    gl.static_assert(GATHER | (PAGE % BLOCK_N == 0))
    dtype: gl.constexpr = q_nope.dtype.element_ty
    ld_n: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [4, 1], [1, 0])
    ld_p: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])

    hb = gl.program_id(0)
    b = gl.program_id(1)
    split = gl.program_id(2)
    if SPREAD_ROWS and counters is not None:
        lin = gl.program_id(1) + gl.num_programs(1) * gl.program_id(2)  # the launch order
        b = lin // gl.num_programs(2)
        split = lin % gl.num_programs(2)
    cta = (split * gl.num_programs(1) + b) * gl.num_programs(0) + hb
    if stamps is not None:
        _stamp(stamps, cta * 4, 0)
    seq = gl.load(seq_lens + b)
    n = gl.load(qo_lens + b)
    if EARLY_Q:  # issued beside the lengths: one memory latency less before the first tile
        kv_start = gl.load(kv_indptr + b).to(gl.int64)
    if n == 0:
        return
    row_splits = _row_splits(seq, num_splits, MIN_CHUNK, DEVICE_SPLITS)
    if counters is not None:  # every program of the row takes part, none has a fixed range
        gl.static_assert(not GATHER)
        gl.static_assert(LOADS)
        if split >= row_splits:
            return
        lo = 0
        hi = seq
    else:
        per = (seq + row_splits - 1) // row_splits
        chunk = ((per + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
        lo = split * chunk
        hi = gl.minimum(lo + chunk, seq)
        if lo >= hi:
            return

    qn_smem = gl.allocate_shared_memory(
        dtype, [M, D_NOPE], gl.NVMMASharedLayout.get_default_for([M, D_NOPE], dtype)
    )
    qp_smem = gl.allocate_shared_memory(
        dtype, [M, D_PE], gl.NVMMASharedLayout.get_default_for([M, D_PE], dtype)
    )
    kn_smem = gl.allocate_shared_memory(
        dtype,
        [NUM_BUF, BLOCK_N, D_NOPE],
        gl.NVMMASharedLayout.get_default_for([BLOCK_N, D_NOPE], dtype),
    )
    kp_smem = gl.allocate_shared_memory(
        dtype,
        [NUM_BUF, BLOCK_N, D_PE],
        gl.NVMMASharedLayout.get_default_for([BLOCK_N, D_PE], dtype),
    )
    p_smem = gl.allocate_shared_memory(
        dtype, [M, BLOCK_N], gl.NVMMASharedLayout.get_default_for([M, BLOCK_N], dtype)
    )
    vec: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    a_smem = gl.allocate_shared_memory(gl.float32, [M], vec)  # each row's rescale of a tile
    l_smem = gl.allocate_shared_memory(gl.float32, [M], vec)  # the final row sums
    bar: gl.constexpr = mbarrier.MBarrierLayout()
    full = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], bar)
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], bar)
    pready = gl.allocate_shared_memory(gl.int64, [1], bar)
    pfree = gl.allocate_shared_memory(gl.int64, [1], bar)
    lready = gl.allocate_shared_memory(gl.int64, [1], bar)
    jsm = None
    if counters is not None:  # each buffer's first key, from the loader
        jsm = gl.allocate_shared_memory(gl.int32, [NUM_BUF, 1],
                                        gl.SwizzledSharedLayout(1, 1, 1, [0]))  # fmt: skip
    for i in gl.static_range(NUM_BUF):
        mbarrier.init(full.index(i), count=128 if GATHER else 1)  # gather: each loader thread
        mbarrier.init(empty.index(i), count=2)  # one arrival per computing warpgroup
    mbarrier.init(pready, count=1)
    mbarrier.init(pfree, count=1)
    mbarrier.init(lready, count=1)

    b64 = b.to(gl.int64)
    rq_n = gl.arange(0, M, layout=gl.SliceLayout(1, ld_n))
    qi_n = gl.minimum(rq_n // BLOCK_H, qlen - 1).to(gl.int64)
    h_n = gl.minimum(hb * BLOCK_H + rq_n % BLOCK_H, H - 1).to(gl.int64)
    rq_p = gl.arange(0, M, layout=gl.SliceLayout(1, ld_p))
    qi_p = gl.minimum(rq_p // BLOCK_H, qlen - 1).to(gl.int64)
    h_p = gl.minimum(hb * BLOCK_H + rq_p % BLOCK_H, H - 1).to(gl.int64)
    q_off = b64 * stride_qb + qi_n * stride_qt + h_n * stride_qh
    r_off = b64 * stride_rb + qi_p * stride_rt + h_p * stride_rh
    cols_n = gl.arange(0, D_NOPE, layout=gl.SliceLayout(0, ld_n))
    cols_p = gl.arange(0, D_PE, layout=gl.SliceLayout(0, ld_p))
    cp.async_copy_global_to_shared(qn_smem, q_nope + q_off[:, None] + cols_n[None, :])
    cp.async_copy_global_to_shared(qp_smem, q_pe + r_off[:, None] + cols_p[None, :])
    cp.commit_group()
    if not EARLY_Q:
        cp.wait_group(0)
    fence_async_shared()  # q and the barriers' init, before wgmma and the copy engine use them
    gl.thread_barrier()

    if not EARLY_Q:
        kv_start = gl.load(kv_indptr + b).to(gl.int64)
    n_tiles = (hi - lo + BLOCK_N - 1) // BLOCK_N
    if GATHER:
        gl.warp_specialize(
            [
                (_roles_qk_softmax, (qn_smem, qp_smem, kn_smem, kp_smem, p_smem, a_smem, l_smem,
                                     full, empty, pready, pfree, lready, qk_scale, seq, n, lo,
                                     hi, n_tiles, hb, qlen, H, part_o, part_lse, b64, split,
                                     stride_pb, stride_pt, stride_ph, BLOCK_H, BLOCK_N, NUM_BUF,
                                     GATHER, P_REG, EARLY_Q)),
                (_roles_pv, (kn_smem, p_smem, a_smem, l_smem, full, empty, pready, pfree, lready,
                             n_tiles, hb, n, qlen, H, part_o, part_lse, b64, split, stride_pb,
                             stride_pt, stride_ph, BLOCK_H, NUM_BUF, GATHER)),
                (_gather_loader_ahead, (kv, kv_indices, kv_start, lo, hi, n_tiles, stride_kv,
                                        kn_smem, kp_smem, full, empty, BLOCK_N, PAGE, NUM_BUF,
                                        4, LOADS)),
            ],
            [4, 4],
            [PV_REGS, LOADER_REGS],
        )  # fmt: skip
    elif counters is not None:
        ctr = counters + (b * gl.num_programs(0) + hb) * 32  # a row's own 128-byte line
        gl.warp_specialize(
            [
                (_roles_qk_softmax, (qn_smem, qp_smem, kn_smem, kp_smem, p_smem, a_smem, l_smem,
                                     full, empty, pready, pfree, lready, qk_scale, seq, n, lo,
                                     hi, n_tiles, hb, qlen, H, part_o, part_lse, b64, split,
                                     stride_pb, stride_pt, stride_ph, BLOCK_H, BLOCK_N, NUM_BUF,
                                     GATHER, P_REG, EARLY_Q, jsm)),
                (_roles_pv, (kn_smem, p_smem, a_smem, l_smem, full, empty, pready, pfree, lready,
                             n_tiles, hb, n, qlen, H, part_o, part_lse, b64, split, stride_pb,
                             stride_pt, stride_ph, BLOCK_H, NUM_BUF, GATHER, jsm)),
                (_dyn_loader, (kn_desc, kp_desc, kv_indices, kv_start, seq, ctr, row_splits,
                               kn_smem, kp_smem, jsm, full, empty, BLOCK_N, PAGE, NUM_BUF)),
            ],
            [4, 1],
            [PV_REGS, LOADER_REGS],
        )  # fmt: skip
    else:
        gl.warp_specialize(
            [
                (_roles_qk_softmax, (qn_smem, qp_smem, kn_smem, kp_smem, p_smem, a_smem, l_smem,
                                     full, empty, pready, pfree, lready, qk_scale, seq, n, lo,
                                     hi, n_tiles, hb, qlen, H, part_o, part_lse, b64, split,
                                     stride_pb, stride_pt, stride_ph, BLOCK_H, BLOCK_N, NUM_BUF,
                                     GATHER, P_REG, EARLY_Q)),
                (_roles_pv, (kn_smem, p_smem, a_smem, l_smem, full, empty, pready, pfree, lready,
                             n_tiles, hb, n, qlen, H, part_o, part_lse, b64, split, stride_pb,
                             stride_pt, stride_ph, BLOCK_H, NUM_BUF, GATHER)),
                (_ws_loader, (kn_desc, kp_desc, kv_indices, kv_start, lo, n_tiles, kn_smem,
                              kp_smem, full, empty, BLOCK_N, PAGE, NUM_BUF, 1, LOADS, IDX_AHEAD)),
            ],
            [4, 1],
            [PV_REGS, LOADER_REGS],
        )  # fmt: skip
    if stamps is not None:  # every role done, its stores issued
        _stamp(stamps, cta * 4, 1)
