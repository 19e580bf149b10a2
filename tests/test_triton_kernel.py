"""mlaprof's Triton verify kernel against the torch reference, on the CPU via the Triton interpreter.

``triton.jit`` decides at decoration time whether a kernel is interpreted (it reads
``TRITON_INTERPRET``), so the variable is set before the kernel module is imported, and the module
is reloaded if something imported it earlier without it. Sizes are tiny: the interpreter is slow.
"""

from __future__ import annotations

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
