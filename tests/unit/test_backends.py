"""The torch reference against an independent float64 oracle, and legacy-flat against the
reference: fresh random inputs, NaN-poisoned outputs, padding rows included."""

import math
import zlib

import pytest
import torch

from mlaprof.backends.base import make_inputs
from mlaprof.backends.registry import get_backend
from mlaprof.errors import MlaprofError
from mlaprof.metadata import BatchShape, build_metadata


def naive(inp, meta):
    """Token by token, key by key, in float64: the definition of the MTP verify."""
    q = torch.cat([inp.q_nope, inp.q_pe], -1).double()
    kv = inp.kv_c.double()
    b_, qlen, h, _ = q.shape
    out = torch.zeros(b_, qlen, h, 512, dtype=torch.float64)
    lse = torch.full((b_, qlen, h), -math.inf, dtype=torch.float64)
    ps = meta.page_size
    for b in range(b_):
        seq, n = meta.host_seq_lens[b], meta.host_qo_lens[b]
        pages = meta.kv_indices[meta.host_kv_indptr[b] : meta.host_kv_indptr[b + 1]].tolist()
        slots = [p * ps + o for p in pages for o in range(ps)][:seq]
        for i in range(n):
            visible = slots[: seq - n + i + 1]
            k = kv[visible]
            s = (q[b, i] @ k.T) * inp.sm_scale  # [H, L]
            lse[b, i] = torch.logsumexp(s, -1)
            out[b, i] = torch.softmax(s, -1) @ k[:, :512]
    return out, lse


def run(backend, inp, meta, heads):
    out = torch.full((meta.num_reqs, meta.qlen, heads, 512), float("nan"))
    lse = torch.full((meta.num_reqs, meta.qlen, heads), float("nan"))
    get_backend(backend).forward(inp, meta, out, lse)
    return out, lse


CASES = [
    # kv lens, padding rows, qlen, heads, page size
    ([37, 5, 64], 1, 4, 16, 1),
    ([9], 0, 1, 8, 1),
    ([100, 3, 80, 41], 2, 3, 8, 1),
    ([8, 20], 1, 8, 4, 1),
    ([33, 70], 1, 2, 16, 16),
]


@pytest.mark.parametrize("kv, pad, qlen, heads, page", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_reference_matches_naive_oracle(kv, pad, qlen, heads, page, seed):
    shape = BatchShape(kv, qlen, len(kv) + pad, None, "FULL")
    meta = build_metadata(shape, page_size=page, seed=seed)
    inp = make_inputs(meta, heads, seed=100 + seed)
    out, lse = run("torch", inp, meta, heads)
    ref_o, ref_l = naive(inp, meta)
    assert not out.isnan().any() and not lse.isnan().any()  # every element written
    rel = (out.double() - ref_o).norm() / ref_o.norm()
    assert rel < 1e-5
    finite = ref_l.isfinite()
    assert torch.equal(finite, lse.isfinite())
    assert torch.allclose(lse.double()[finite], ref_l[finite], rtol=1e-5, atol=1e-5)
    assert (out[len(kv) :] == 0).all()  # padding rows: zeros and -inf


@pytest.mark.parametrize("kv, pad, qlen, heads, page", CASES)
def test_legacy_flat_equals_reference(kv, pad, qlen, heads, page):
    shape = BatchShape(kv, qlen, len(kv) + pad, None, "FULL")
    meta = build_metadata(shape, page_size=page, seed=7)
    inp = make_inputs(meta, heads, seed=zlib.crc32(repr((kv, pad, qlen, heads, page)).encode()))
    ref_o, ref_l = run("torch", inp, meta, heads)
    out, lse = run("legacy-flat", inp, meta, heads)
    assert not out.isnan().any() and not lse.isnan().any()
    assert (out - ref_o).norm() / ref_o.norm() < 1e-5
    assert torch.equal(lse.isfinite(), ref_l.isfinite())
    fin = ref_l.isfinite()
    assert torch.allclose(lse[fin], ref_l[fin], rtol=1e-5, atol=1e-5)


def test_shape_checks_raise():
    meta = build_metadata(BatchShape([10], 2, 1, None, "FULL"))
    inp = make_inputs(meta, 4)
    with pytest.raises(MlaprofError, match="out must be"):
        get_backend("torch").forward(inp, meta, torch.empty(1, 2, 4, 500))
    with pytest.raises(MlaprofError, match="unknown backend"):
        get_backend("cuda-magic")
