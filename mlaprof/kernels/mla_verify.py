"""mlaprof's Triton MLA verify kernel: 4-D MTP split-KV attention over a flat latent KV pool.

Layout (the ``mla_gluon`` 4-D contract): q_nope ``[B, qlen, H, 512]``, q_pe ``[B, qlen, H, 64]``,
kv ``[N, 576]`` (latent 512 + rope 64; the value is the latent part), rows addressed by
``kv_indptr [B+1]`` / ``kv_indices`` (pages of ``PAGE`` slots), ``seq_lens [B]``, ``qo_lens [B]``.

Stage 1 runs one program per (request, head block, split). It holds all ``qlen x BLOCK_H`` query
rows of its request at once, so each KV tile is read from memory once for every verify token
(the point of the native 4-D entry). Query position i of a row with KV length L and query length
n sees keys j < L - n + i + 1 (the causal bound, applied in-kernel). Splits that start past L
exit at once; padding rows (n == 0) exit at once in stage 1 and are written as out 0 / lse -inf
by stage 2. Stage 2 merges the partial results of the splits that hold keys for the row.

``FLATTEN`` selects the pre-fix approach for comparison: one program per verify token, each
token a separate decode row with its own KV length, so the KV is re-read once per token.

All offsets into q, kv and the partial buffers are computed in 64-bit, so pools of more than
2^31 elements are addressed correctly.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _row_splits(seq, num_splits, MIN_CHUNK: tl.constexpr, DEVICE_SPLITS: tl.constexpr):
    """Splits a row of ``seq`` KV tokens uses. Host-decided: ``num_splits``. Decided on the device:
    ``min(num_splits, next_pow2(ceil(seq / MIN_CHUNK)))``, so ``num_splits`` is only the grid's
    cap and a graph captured at any KV length replays right at every other (the same in both
    stages; the host mirror is ``mlaprof.splits.policies.mlaprof_triton``)."""
    if DEVICE_SPLITS:
        v = tl.maximum((seq + MIN_CHUNK - 1) // MIN_CHUNK, 1) - 1
        v = v | (v >> 1)  # next power of two: smear the top bit down, add one
        v = v | (v >> 2)
        v = v | (v >> 4)
        v = v | (v >> 8)
        v = v | (v >> 16)
        return tl.maximum(tl.minimum(v + 1, num_splits), 1)
    else:
        return num_splits


@triton.jit
def _split_chunk(seq, num_splits, ALIGN: tl.constexpr):
    """KV tokens per split: ceil(seq / S) rounded up to a tile (the same formula in both stages)."""
    per = (seq + num_splits - 1) // num_splits
    return ((per + ALIGN - 1) // ALIGN) * ALIGN


@triton.jit
def mla_verify_stage1(
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
    QP: tl.constexpr,  # query positions per program (next_pow2(qlen), or 1 when flattened)
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PAGE: tl.constexpr,
    FLATTEN: tl.constexpr,
    DOT_PREC: tl.constexpr,
    HEADS_FIRST: tl.constexpr,  # grid axis 0 = head block: programs sharing KV launch together
    DV_SPLIT: tl.constexpr,  # programs sharing one (row, head block, split), each 512/DV_SPLIT
    DEVICE_SPLITS: tl.constexpr = False,  # each row picks its S on the device (num_splits: cap)
    MIN_CHUNK: tl.constexpr = 256,  # fewest KV tokens a device-decided split gets
    QK_CHUNK: tl.constexpr = 0,  # > 0: q_nope not held; QK^T over latent chunks of this width
    ROPE_FIRST: tl.constexpr = False,  # load a tile's rope part before its latent part
):
    D_NOPE: tl.constexpr = 512
    D_PE: tl.constexpr = 64
    M: tl.constexpr = QP * BLOCK_H
    DV: tl.constexpr = D_NOPE // DV_SPLIT
    if HEADS_FIRST:
        hb = tl.program_id(0) // DV_SPLIT
        dv = tl.program_id(0) % DV_SPLIT
        pid0 = tl.program_id(1)
    else:
        pid0 = tl.program_id(0)
        hb = tl.program_id(1) // DV_SPLIT
        dv = tl.program_id(1) % DV_SPLIT
    split = tl.program_id(2)
    if FLATTEN:
        b = pid0 // qlen
        q0 = pid0 % qlen
    else:
        b = pid0
        q0 = 0
    seq = tl.load(seq_lens + b)
    n = tl.load(qo_lens + b)
    if n == 0:  # padding row: stage 2 writes its defined values
        return
    if FLATTEN:
        if q0 >= n:
            return
        seq_split = seq - n + q0 + 1  # this token's own KV length
    else:
        seq_split = seq
    row_splits = _row_splits(seq, num_splits, MIN_CHUNK, DEVICE_SPLITS)
    chunk = _split_chunk(seq_split, row_splits, BLOCK_N)
    lo = split * chunk
    hi = tl.minimum(lo + chunk, seq_split)
    # split past this row's length; also every split >= row_splits (chunk * row_splits >= seq)
    if lo >= hi:
        return

    rows = tl.arange(0, M)
    qi = q0 + rows // BLOCK_H  # query position of each row
    h = hb * BLOCK_H + rows % BLOCK_H
    row_ok = (qi < qlen) & (qi < n) & (h < H)
    bound = tl.where(row_ok, seq - n + qi + 1, 0)  # keys visible to each row

    b64 = b.to(tl.int64)
    q_row = b64 * stride_qb + qi.to(tl.int64) * stride_qt + h.to(tl.int64) * stride_qh
    r_row = b64 * stride_rb + qi.to(tl.int64) * stride_rt + h.to(tl.int64) * stride_rh
    d_nope = tl.arange(0, D_NOPE)
    d_pe = tl.arange(0, D_PE)
    if QK_CHUNK == 0:  # the whole q tile in registers (fits for 32-row programs)
        qn = tl.load(q_nope + q_row[:, None] + d_nope[None, :], mask=row_ok[:, None], other=0.0)
    qp = tl.load(q_pe + r_row[:, None] + d_pe[None, :], mask=row_ok[:, None], other=0.0)

    kv_start = tl.load(kv_indptr + b).to(tl.int64)
    m_i = tl.full([M], float("-inf"), tl.float32)
    l_i = tl.zeros([M], tl.float32)
    acc = tl.zeros([M, DV], tl.float32)
    d_v = dv * DV + tl.arange(0, DV)  # latent columns this program accumulates
    offs_n = tl.arange(0, BLOCK_N)
    for start in range(lo, hi, BLOCK_N):
        j = start + offs_n
        j_ok = j < hi
        if PAGE == 1:
            slot = tl.load(kv_indices + kv_start + j, mask=j_ok, other=0).to(tl.int64)
        elif PAGE % BLOCK_N == 0:  # tiles start at multiples of BLOCK_N: one page per tile
            page = tl.load(kv_indices + kv_start + start // PAGE).to(tl.int64)
            slot = page * PAGE + (j % PAGE)
        else:
            page = tl.load(kv_indices + kv_start + j // PAGE, mask=j_ok, other=0).to(tl.int64)
            slot = page * PAGE + (j % PAGE)
        k_row = slot * stride_kv
        if QK_CHUNK == 0:
            # the order of the two loads steers Triton's schedule: measured on the H200, the
            # 16/32-row layouts 6-7% faster latent first, the 64-row layout 4-5% faster rope first
            if ROPE_FIRST:
                kp = tl.load(
                    kv + k_row[:, None] + D_NOPE + d_pe[None, :], mask=j_ok[:, None], other=0.0
                )
                kn = tl.load(kv + k_row[:, None] + d_nope[None, :], mask=j_ok[:, None], other=0.0)
            else:
                kn = tl.load(kv + k_row[:, None] + d_nope[None, :], mask=j_ok[:, None], other=0.0)
                kp = tl.load(
                    kv + k_row[:, None] + D_NOPE + d_pe[None, :], mask=j_ok[:, None], other=0.0
                )
            s = tl.dot(qn, tl.trans(kn), input_precision=DOT_PREC)
            s = tl.dot(qp, tl.trans(kp), acc=s, input_precision=DOT_PREC)
        else:  # 64-row programs: q chunks re-read (L1/L2) per tile instead of held (registers)
            kp = tl.load(
                kv + k_row[:, None] + D_NOPE + d_pe[None, :], mask=j_ok[:, None], other=0.0
            )
            s = tl.dot(qp, tl.trans(kp), input_precision=DOT_PREC)
            for c in tl.static_range(0, D_NOPE, QK_CHUNK):
                dk = c + tl.arange(0, QK_CHUNK)
                qc = tl.load(q_nope + q_row[:, None] + dk[None, :], mask=row_ok[:, None], other=0.0)
                kc = tl.load(kv + k_row[:, None] + dk[None, :], mask=j_ok[:, None], other=0.0)
                s = tl.dot(qc, tl.trans(kc), acc=s, input_precision=DOT_PREC)
            kn = tl.load(kv + k_row[:, None] + d_nope[None, :], mask=j_ok[:, None], other=0.0)
        s = s * qk_scale
        visible = (j[None, :] < bound[:, None]) & j_ok[None, :]
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no key yet
        p = tl.math.exp2(s - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if DV_SPLIT == 1:
            vn = kn
        else:  # the same cache lines again (L1/L2), a column slice of the latent
            vn = tl.load(kv + k_row[:, None] + d_v[None, :], mask=j_ok[:, None], other=0.0)
        acc = tl.dot(p.to(kn.dtype), vn, acc=acc, input_precision=DOT_PREC)
        m_i = m_new

    has_keys = l_i > 0.0
    o = acc / tl.where(has_keys, l_i, 1.0)[:, None]
    lse2 = tl.where(has_keys, m_i + tl.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))
    base = b64 * stride_pb + qi.to(tl.int64) * stride_pt + h.to(tl.int64) * stride_ph
    p_row = base + split.to(tl.int64) * D_NOPE
    tl.store(part_o + p_row[:, None] + d_v[None, :], o, mask=row_ok[:, None])
    # the scalar test is broadcast to a vector compare: newer interpreters reject int masks
    tl.store(part_lse + base // D_NOPE + split, lse2, mask=row_ok & ((rows * 0 + dv) == 0))


@triton.jit
def _merge_one_pass(part_o, part_lse, out, lse_out, seq, n, qi, num_splits, h_ok, d, lse_ok, o_off,
                    lse_off, p_row, BLOCK_S: tl.constexpr, ALIGN: tl.constexpr,
                    FLATTEN: tl.constexpr, HAS_LSE: tl.constexpr, DEVICE_SPLITS: tl.constexpr,
                    MIN_CHUNK: tl.constexpr, DYNAMIC: tl.constexpr):  # fmt: skip
    """Stage 2's merge when one block holds every split of the grid: every partial of the
    grid is loaded first (the workspace holds them all; splits not written this launch hold
    anything, NaN too) and masked once the lengths say which hold keys; padding rows and
    positions past a row's queries get out 0 / lse -inf through the same masks, no branch."""
    D: tl.constexpr = 512
    sp = tl.arange(0, BLOCK_S)
    in_grid = h_ok[:, None] & (sp < num_splits)[None, :]
    l_row = p_row // D
    lp_all = tl.load(part_lse + l_row[:, None] + sp[None, :], mask=in_grid, other=float("-inf"))
    po_off = p_row[:, None, None] + sp.to(tl.int64)[None, :, None] * D + d[None, None, :]
    po_all = tl.load(part_o + po_off, mask=in_grid[:, :, None], other=0.0)
    bound = seq - n + qi + 1
    row_splits = _row_splits(seq, num_splits, MIN_CHUNK, DEVICE_SPLITS)
    chunk = _split_chunk(bound if FLATTEN else seq, row_splits, ALIGN)
    n_valid = tl.minimum(row_splits, (bound + chunk - 1) // chunk)
    if DYNAMIC:
        n_valid = tl.where(seq > 0, row_splits, 0)
    n_valid = tl.where(qi < n, n_valid, 0)  # padding row or past the row's queries: nothing
    ok = in_grid & (sp < n_valid)[None, :]
    lp = tl.where(ok, lp_all, float("-inf"))
    m = tl.max(lp, 1)
    m = tl.where(m == float("-inf"), 0.0, m)
    w = tl.where(ok, tl.math.exp2(lp - m[:, None]), 0.0)
    acc = tl.sum(tl.where(ok[:, :, None], w[:, :, None] * po_all, 0.0), 1)
    total = tl.sum(w, 1)
    has = total > 0.0
    o = acc / tl.where(has, total, 1.0)[:, None]
    tl.store(out + o_off[:, None] + d[None, :], o.to(out.dtype.element_ty), mask=h_ok[:, None])
    if HAS_LSE:
        lse = tl.where(has, (m + tl.log2(tl.where(has, total, 1.0))) / 1.4426950408889634,
                       float("-inf"))  # fmt: skip
        tl.store(lse_out + lse_off, lse, mask=lse_ok)


@triton.jit
def mla_verify_stage2(
    part_o,
    part_lse,
    seq_lens,
    qo_lens,
    out,
    lse_out,
    num_splits,
    qlen,
    H,
    stride_ob,
    stride_ot,
    stride_oh,
    stride_pb,
    stride_pt,
    stride_ph,
    BLOCK_HH: tl.constexpr,  # heads per program
    BLOCK_D: tl.constexpr,  # latent columns per program (512 // BLOCK_D programs per row)
    BLOCK_S: tl.constexpr,  # splits merged per iteration
    ALIGN: tl.constexpr,  # stage 1's BLOCK_N (splits are tile-aligned)
    FLATTEN: tl.constexpr,
    HAS_LSE: tl.constexpr,
    DEVICE_SPLITS: tl.constexpr = False,
    MIN_CHUNK: tl.constexpr = 256,
    DYNAMIC: tl.constexpr = False,  # stage 1 took tiles dynamically: every split holds a partial
    ONE_PASS: tl.constexpr = False,  # num_splits <= BLOCK_S: every load issued at once, no branch
):
    """One program per (request, query position, head block): merge the splits holding keys.
    ``DYNAMIC``: stage 1's programs took any of the row's tiles (``mla_verify_gluon``'s dynamic
    tiles), so each of the row's splits wrote a partial, those without a visible key with
    log2-sum-exp -inf (weight 0 here). ``ONE_PASS`` (all of the grid's splits in one block):
    the partials are loaded beside the lengths, before those are known, and masked after, with
    no branch: one memory latency before the merge instead of three."""
    D: tl.constexpr = 512
    ND: tl.constexpr = D // BLOCK_D
    b = tl.program_id(0)
    qi = tl.program_id(1)
    hb = tl.program_id(2) // ND
    dc = tl.program_id(2) % ND
    h = hb * BLOCK_HH + tl.arange(0, BLOCK_HH)
    h_ok = h < H
    seq = tl.load(seq_lens + b)
    n = tl.load(qo_lens + b)
    d = dc * BLOCK_D + tl.arange(0, BLOCK_D)
    lse_ok = h_ok & ((h * 0 + dc) == 0)  # one column chunk writes the row's lse (a bool vector)
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    o_off = b64 * stride_ob + qi.to(tl.int64) * stride_ot + h64 * stride_oh
    lse_off = (b64 * qlen + qi) * H + h64
    if ONE_PASS:
        _merge_one_pass(part_o, part_lse, out, lse_out, seq, n, qi, num_splits, h_ok, d, lse_ok,
                        o_off, lse_off, b64 * stride_pb + qi.to(tl.int64) * stride_pt + h64 * stride_ph,
                        BLOCK_S, ALIGN, FLATTEN, HAS_LSE, DEVICE_SPLITS, MIN_CHUNK, DYNAMIC)  # fmt: skip
        return
    if qi >= n:  # padding row or position past the row's queries: defined values
        zero = tl.zeros([BLOCK_HH, BLOCK_D], tl.float32).to(out.dtype.element_ty)
        tl.store(out + o_off[:, None] + d[None, :], zero, mask=h_ok[:, None])
        if HAS_LSE:
            tl.store(lse_out + lse_off, tl.full([BLOCK_HH], float("-inf"), tl.float32), mask=lse_ok)
        return
    bound = seq - n + qi + 1
    seq_split = bound if FLATTEN else seq
    row_splits = _row_splits(seq, num_splits, MIN_CHUNK, DEVICE_SPLITS)
    chunk = _split_chunk(seq_split, row_splits, ALIGN)
    n_valid = tl.minimum(row_splits, (bound + chunk - 1) // chunk)  # splits holding keys for it
    if DYNAMIC:
        n_valid = tl.where(seq > 0, row_splits, 0)
    # device-decided S: loop over the grid's splits, masked, as the host-decided kernel does
    # (a loop bound computed from seq compiled to a slower merge at B = 1 on the H200)
    n_loop = num_splits if DEVICE_SPLITS else n_valid
    p_row = b64 * stride_pb + qi.to(tl.int64) * stride_pt + h64 * stride_ph  # [BLOCK_HH]
    l_row = p_row // D
    # pass 1: the maximum partial lse over valid splits
    m_vec = tl.full([BLOCK_HH, BLOCK_S], float("-inf"), tl.float32)
    for s0 in range(0, n_loop, BLOCK_S):
        sp = s0 + tl.arange(0, BLOCK_S)
        ok = h_ok[:, None] & (sp < n_valid)[None, :]
        lp = tl.load(part_lse + l_row[:, None] + sp[None, :], mask=ok, other=float("-inf"))
        m_vec = tl.maximum(m_vec, lp)
    m = tl.max(m_vec, 1)
    m = tl.where(h_ok, m, 0.0)
    # pass 2: weighted sum (each split's partial output is already normalised)
    acc = tl.zeros([BLOCK_HH, BLOCK_D], tl.float32)
    w_vec = tl.zeros([BLOCK_HH, BLOCK_S], tl.float32)
    for s0 in range(0, n_loop, BLOCK_S):
        sp = s0 + tl.arange(0, BLOCK_S)
        ok = h_ok[:, None] & (sp < n_valid)[None, :]
        lp = tl.load(part_lse + l_row[:, None] + sp[None, :], mask=ok, other=float("-inf"))
        w = tl.where(ok, tl.math.exp2(lp - m[:, None]), 0.0)
        po_off = p_row[:, None, None] + sp.to(tl.int64)[None, :, None] * D + d[None, None, :]
        po = tl.load(part_o + po_off, mask=ok[:, :, None], other=0.0)
        acc += tl.sum(w[:, :, None] * po, 1)
        w_vec += w
    total = tl.sum(w_vec, 1)
    total = tl.where(h_ok, total, 1.0)
    tl.store(
        out + o_off[:, None] + d[None, :],
        (acc / total[:, None]).to(out.dtype.element_ty),
        mask=h_ok[:, None],
    )
    if HAS_LSE:
        tl.store(lse_out + lse_off, (m + tl.log2(total)) / 1.4426950408889634, mask=lse_ok)


def next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def block_h_for(qlen: int, heads: int, flatten: bool, rows: int = 64) -> int:
    """Heads per program: aim at ``rows`` query rows (qlen x heads); tl.dot needs >= 16 rows."""
    qp = 1 if flatten else next_pow2(qlen)
    return max(16 // qp if qp < 16 else 1, min(next_pow2(heads), max(1, rows // qp)))
