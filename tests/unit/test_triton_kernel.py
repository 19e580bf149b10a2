"""mlaprof's Triton verify kernel against the torch reference, on the CPU via the Triton interpreter.

``triton.jit`` decides at decoration time whether a kernel is interpreted (it reads
``TRITON_INTERPRET``), so the variable is set before the kernel module is imported, and the module
is reloaded if something imported it earlier without it. Sizes are tiny: the interpreter is slow.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")
pytest.importorskip("numpy")
if "mlaprof.kernels.mla_verify" in sys.modules:
    importlib.reload(sys.modules["mlaprof.kernels.mla_verify"])

from mlaprof.backends.base import make_inputs
from mlaprof.backends.registry import get_backend  # noqa: E402
from mlaprof.backends.torch_ref import TorchReference  # noqa: E402
from mlaprof.backends.triton_backend import LaunchConfig, TritonBackend  # noqa: E402
from mlaprof.errors import MlaprofError  # noqa: E402
from mlaprof.metadata import BatchShape, build_metadata  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
REL_TOL = 1e-5  # fp32 everywhere (ieee dots in the interpreter): errors land near 3e-7


def _run(
    kv_lens, qlen, heads, splits, pad=0, with_lse=True, flatten=False, page=1, seed=0, hh=128, **kw
):
    shape = BatchShape(list(kv_lens), qlen, len(kv_lens) + pad, None, "FULL")
    meta = build_metadata(shape, page_size=page, seed=seed, device=DEVICE)
    inp = make_inputs(meta, heads, seed=1000 + seed, device=DEVICE)
    b = meta.num_reqs
    ref = torch.full((b, qlen, heads, 512), float("nan"), device=DEVICE)
    ref_lse = torch.full((b, qlen, heads), float("nan"), device=DEVICE)
    TorchReference().forward(inp, meta, ref, ref_lse)
    out = torch.full_like(ref, float("nan"))
    lse = torch.full_like(ref_lse, float("nan")) if with_lse else None
    # hh: heads per stage-2 program; many is fast in the interpreter, the GPU default is 1
    cfg = LaunchConfig(**{"block_n": 16, "stage2_heads": hh, "block_s": 4, **kw})
    backend = TritonBackend(cfg, flatten=flatten)
    backend.forward(inp, meta, out, lse, num_splits=splits)
    return meta, ref, ref_lse, out, lse


def _check(meta, ref, ref_lse, out, lse):
    assert not out.isnan().any(), "unwritten (NaN-poisoned) output elements"
    err = ((out - ref).norm() / ref.norm()).item()
    assert err < REL_TOL, f"relative error {err:.3g}"
    pad_rows = [i for i, q in enumerate(meta.host_qo_lens) if q == 0]
    if pad_rows:
        assert torch.count_nonzero(out[pad_rows]) == 0
    if lse is not None:
        assert not lse.isnan().any()
        assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
        fin = torch.isfinite(ref_lse)
        assert torch.allclose(lse[fin], ref_lse[fin], rtol=1e-5, atol=1e-5)
        if pad_rows:
            assert bool((lse[pad_rows] == float("-inf")).all())


@pytest.mark.parametrize(
    ("kv_lens", "qlen", "heads", "splits", "pad", "with_lse"),
    [
        ([33], 1, 16, 1, 0, True),  # plain decode, one split
        ([20, 37], 4, 16, 3, 1, True),  # MTP verify, ragged, one padding row
        ([5, 40], 2, 8, 2, 2, True),  # H = 8 (head block masked), two padding rows
        ([12, 30], 3, 8, 8, 0, False),  # S = 8: splits past the short row's length exit
        ([70, 9], 8, 16, 8, 1, False),  # qlen 8 (128 query rows in one program)
        ([24], 1, 128, 2, 0, True),  # H = 128: several head blocks
    ],
)
def test_native_matches_reference(kv_lens, qlen, heads, splits, pad, with_lse):
    _check(*_run(kv_lens, qlen, heads, splits, pad, with_lse, seed=len(kv_lens) + splits))


def test_flattened_variant_matches_reference():
    _check(*_run([5, 40], 2, 8, 8, pad=1, flatten=True, seed=3))


def test_page_size_4():
    _check(*_run([19, 50], 3, 16, 2, page=4, seed=4))


def test_gpu_defaults_one_head_per_stage2_program_and_split_columns():
    _check(*_run([21, 6], 2, 8, 8, pad=1, seed=5, hh=1, dv_split=2, block_n=64, rows=32))


def test_other_launch_layouts():
    # 32-row programs, request-major grid, latent columns split in both stages
    cfg = {"rows": 32, "heads_first": False, "stage2_block_d": 128, "dv_split": 2}
    _check(*_run([29, 11], 4, 16, 3, pad=1, seed=6, **cfg))


def test_qk_in_latent_chunks_with_64_row_programs():
    # the Hopper-oriented layout: q_nope not held, QK^T over 128-wide latent chunks
    _check(*_run([29, 70], 4, 16, 3, pad=1, seed=10, rows=64, qk_chunk=128, num_warps=8))


def test_rope_part_loaded_first():
    _check(*_run([29, 70], 4, 16, 3, pad=1, seed=11, rows=64, rope_first=True))


def test_deterministic_and_independent_of_split_count_within_rounding():
    meta, ref, _, out1, _ = _run([26, 41], 2, 8, 2, seed=7)
    _, _, _, out2, _ = _run([26, 41], 2, 8, 2, seed=7)
    assert torch.equal(out1, out2)
    _, _, _, out3, _ = _run([26, 41], 2, 8, 1, seed=7)
    assert ((out3 - out1).norm() / ref.norm()).item() < REL_TOL


def test_bad_split_count_raises():
    shape = BatchShape([8], 2, 1, None, "FULL")
    meta = build_metadata(shape, device=DEVICE)
    inp = make_inputs(meta, 16, device=DEVICE)
    out = torch.empty(1, 2, 16, 512, device=DEVICE)
    with pytest.raises(MlaprofError, match="num_splits"):
        TritonBackend().forward(inp, meta, out, num_splits=0)


def test_get_backend_returns_capturable_triton():
    b = get_backend("triton")
    assert b.name == "triton" and b.capturable


# -- split count decided on the device (issue 16) ------------------------------------------------
def _device_run(kv_lens, qlen, cap, min_chunk=16, pad=0, seed=0, backend=None, meta_inp=None):
    from mlaprof.backends.triton_backend import TritonBackend as TB

    shape = BatchShape(list(kv_lens), qlen, len(kv_lens) + pad, None, "FULL")
    meta = build_metadata(shape, seed=seed, device=DEVICE)
    inp = make_inputs(meta, 8, seed=2000 + seed, device=DEVICE)
    b = meta.num_reqs
    ref = torch.empty(b, qlen, 8, 512, device=DEVICE)
    ref_lse = torch.empty(b, qlen, 8, device=DEVICE)
    TorchReference().forward(inp, meta, ref, ref_lse)
    cfg = LaunchConfig(block_n=16, stage2_heads=128, block_s=4, split_min_chunk=min_chunk)
    be = backend or TB(cfg, device_splits=True)
    be.workspace.get(b, qlen, 8, cap, torch.device(DEVICE))[1].fill_(float("nan"))
    out = torch.full_like(ref, float("nan"))
    lse = torch.full_like(ref_lse, float("nan"))
    be.forward(inp, meta, out, lse, num_splits=cap)
    return meta, ref, ref_lse, out, lse, be


def test_device_splits_match_reference_and_the_host_mirror():
    from mlaprof.splits.policies import cdiv, device_row_splits

    cap = 8
    meta, ref, ref_lse, out, lse, be = _device_run([3, 64, 300], 2, cap, 32, pad=1, seed=8)
    _check(meta, ref, ref_lse, out, lse)
    part_lse = be.workspace.get(meta.num_reqs, 2, 8, cap, torch.device(DEVICE))[1]
    for b, (seq, n) in enumerate(zip(meta.host_seq_lens, meta.host_qo_lens, strict=True)):
        written = (~part_lse[b, 0, 0].isnan()).nonzero().flatten().tolist()
        if n == 0:
            assert written == []
            continue
        s_b = device_row_splits(seq, cap, 32)
        chunk = cdiv(cdiv(seq, s_b), 16) * 16  # ceil(seq / S) rounded up to a 16-key tile
        assert written == list(range(min(s_b, cdiv(seq, chunk)))), (seq, s_b, written)
    # 3 keys -> 1 split, 64 -> 2 (8 if S were the grid's), 300 -> capped at 8: decided per row
    assert [device_row_splits(s, cap, 32) for s in (3, 64, 300)] == [1, 2, 8]


def test_device_splits_one_launch_config_right_at_dummy_and_real_lengths():
    """What a captured graph needs: the same launch (grid, cap) is right at the dummy run's
    lengths (KV = qlen) and at real lengths; only device buffers differ."""
    cap = 8
    meta, *rest, be = _device_run([2, 2], 2, cap, seed=9)  # the dummy run: KV = qlen
    _check(meta, *rest)
    grid = be.last_launch["stage1"]["grid"]
    meta, *rest, be2 = _device_run([90, 57], 2, cap, seed=9, backend=be)
    _check(meta, *rest)
    assert be2.last_launch["stage1"]["grid"] == grid and be2.last_launch["device_splits"]


def test_host_decided_splits_stay_as_passed():
    """Without device splits every split of the grid holds keys when the row is long enough
    (the policy's S is what runs: the AITER demos need that)."""
    shape = BatchShape([128], 1, 1, None, "FULL")
    meta = build_metadata(shape, seed=1, device=DEVICE)
    inp = make_inputs(meta, 8, seed=1, device=DEVICE)
    cfg = LaunchConfig(block_n=16, stage2_heads=128, block_s=4, split_min_chunk=64)
    be = TritonBackend(cfg)
    be.workspace.get(1, 1, 8, 8, torch.device(DEVICE))[1].fill_(float("nan"))
    be.forward(inp, meta, torch.empty(1, 1, 8, 512, device=DEVICE), num_splits=8)
    part_lse = be.workspace.get(1, 1, 8, 8, torch.device(DEVICE))[1]
    assert int((~part_lse[0, 0, 0].isnan()).sum()) == 8  # device mode would use 2


def test_default_layout_is_64_rows_on_hopper_and_portable_elsewhere():
    from mlaprof.backends.triton_backend import HOPPER_SCHEDULE, default_config, is_hopper

    hop, port = default_config(4, hopper=True), default_config(4)
    assert (hop.rows, hop.num_warps, hop.num_stages, hop.rope_first) == (64, 8, 3, True)
    assert hop.stage2_heads == 4 and port.stage2_heads == 1  # verify's merge: 4 heads a program
    assert (port.rows, port.num_warps) == (32, 4)
    # decode: the Gluon kernel on sm_90 (Triton's 16-row layout its fallback), 16 rows elsewhere
    dec = default_config(1, hopper=True)
    assert dec.gluon_decode and dec.kernel == "auto"
    # sm_90's schedule on both: dynamic tiles spread over the GPCs, the prologue's loads
    # together, stage 2 in one pass; nothing of it elsewhere
    plain = {k: getattr(LaunchConfig(), k) for k in HOPPER_SCHEDULE}
    for cfg in (hop, dec):
        assert all(getattr(cfg, k) == v for k, v in HOPPER_SCHEDULE.items())
    assert HOPPER_SCHEDULE["gluon_dynamic"] and HOPPER_SCHEDULE["stage2_one_pass"]
    assert all(getattr(port, k) == v for k, v in plain.items())
    assert dataclasses.replace(dec, gluon_decode=False, **plain) == default_config(1)
    assert not default_config(1).gluon_decode
    assert default_config(4, flatten=True, hopper=True) == default_config(1)
    assert default_config(1, flatten=True, hopper=True) == default_config(1)
    assert not is_hopper(torch.device("cpu"))


@pytest.mark.parametrize(
    ("kv_lens", "qlen", "splits", "page", "flatten"),
    [
        ([50, 7, 33], 4, 3, 16, False),  # a tile is one page (16 = block_n): one index per tile
        ([70, 19], 2, 2, 32, False),  # two tiles per page; ragged last pages
        ([45], 1, 2, 64, False),  # decode, the page larger than the row
        ([40, 23], 3, 4, 32, True),  # flattened: splits per token, still tile-aligned
    ],
)
def test_pages_of_whole_tiles_match_reference(kv_lens, qlen, splits, page, flatten):
    """Pages holding whole tiles (vLLM's 64-token blocks at block_n 64): the kernel loads one
    page index per tile instead of one per key; ragged rows end inside their last page."""
    _check(*_run(kv_lens, qlen, 16, splits, pad=1, page=page, flatten=flatten, seed=page + qlen))


def test_stage2_after_dynamic_tiles_merges_every_split():
    """Dynamic tiles (stage 1 on sm_90, ``gluon_dynamic``): any split may hold any of the row's
    keys, so stage 2 merges each of the row's splits, an empty one (log2-sum-exp -inf) with
    weight 0. The usual merge stops at the splits its fixed ranges give keys to: here 3 of 4
    (40 keys in ranges of 16), so it would drop split 3."""
    from mlaprof.kernels import mla_verify as k

    b, qlen, h, s, seq = 1, 1, 2, 4, 40
    g = torch.Generator().manual_seed(5)
    part_o = torch.randn(b, qlen, h, s, 512, generator=g).to(DEVICE)
    part_lse = torch.randn(b, qlen, h, s, generator=g).to(DEVICE)
    part_lse[..., 2] = float("-inf")  # took no tile
    part_o[..., 2, :] = 0.0
    w = torch.exp2(part_lse - part_lse.amax(-1, keepdim=True))
    want = (w[..., None] * part_o).sum(-2) / w.sum(-1)[..., None]
    want_lse = (part_lse.amax(-1) + torch.log2(w.sum(-1))) / k.LOG2E
    lens = torch.tensor([seq], dtype=torch.int32, device=DEVICE)
    qo = torch.tensor([qlen], dtype=torch.int32, device=DEVICE)
    for dynamic in (True, False):
        out = torch.full((b, qlen, h, 512), float("nan"), device=DEVICE)
        lse = torch.full((b, qlen, h), float("nan"), device=DEVICE)
        k.mla_verify_stage2[(b, qlen, h * 4)](
            part_o, part_lse, lens, qo, out, lse, s, qlen, h, *out.stride()[:3],
            *part_o.stride()[:3], BLOCK_HH=1, BLOCK_D=128, BLOCK_S=4, ALIGN=16, FLATTEN=False,
            HAS_LSE=True, DYNAMIC=dynamic,
        )  # fmt: skip
        err = ((out - want).norm() / want.norm()).item()
        if dynamic:
            assert err < REL_TOL and torch.allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
        else:  # the fixed-range merge leaves split 3 out
            assert err > 1e-3


@pytest.mark.parametrize(
    ("kv_lens", "qlen", "heads", "splits", "pad", "device"),
    [
        ([20, 37], 4, 16, 3, 1, False),  # verify, ragged, a padding row; split 2 of row 0 empty
        ([33], 1, 16, 4, 0, False),  # decode
        ([3, 64, 300], 2, 8, 4, 1, True),  # S decided on the device, cap 4
    ],
)
def test_stage2_one_pass_matches_reference(kv_lens, qlen, heads, splits, pad, device):
    """Stage 2 in one pass (``stage2_one_pass``, every split in one block): the splits not
    written this launch hold NaN here (the workspace poisoned first) and must not reach the
    output; padding rows get 0 and lse -inf without the branch."""
    cfg = LaunchConfig(block_n=16, stage2_heads=128, block_s=4, stage2_one_pass=True,
                       split_min_chunk=32)  # fmt: skip
    shape = BatchShape(list(kv_lens), qlen, len(kv_lens) + pad, None, "FULL")
    meta = build_metadata(shape, seed=12, device=DEVICE)
    inp = make_inputs(meta, heads, seed=1012, device=DEVICE)
    b = meta.num_reqs
    ref = torch.empty(b, qlen, heads, 512, device=DEVICE)
    ref_lse = torch.empty(b, qlen, heads, device=DEVICE)
    TorchReference().forward(inp, meta, ref, ref_lse)
    be = TritonBackend(cfg, device_splits=device)
    for t in be.workspace.get(b, qlen, heads, splits, torch.device(DEVICE)):
        t.fill_(float("nan"))
    out = torch.full_like(ref, float("nan"))
    lse = torch.full_like(ref_lse, float("nan"))
    be.forward(inp, meta, out, lse, num_splits=splits)
    _check(meta, ref, ref_lse, out, lse)
