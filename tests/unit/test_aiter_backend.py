"""Contract tests of the ``aiter`` backend against a recording fake AITER (tests/aiter_fake.py).

No ROCm here: the fake checks and records the exact call and computes the answer from the
arguments it received, so the numbers only match the torch reference when the marshalling
(4-D q, 1-D page table, [B+1] indptr, flattened ASM rows, page-level indptr) is right.
"""

from __future__ import annotations

import random
import sys
import types

import pytest
import torch

from mlaprof.backends.aiter_backend import AiterBackend, gluon_policy
from mlaprof.backends.base import make_inputs
from mlaprof.backends.registry import get_backend
from mlaprof.backends.torch_ref import TorchReference
from mlaprof.capture_sizes import capture_sizes
from mlaprof.errors import MlaprofError
from mlaprof.integrations import aiter_env
from mlaprof.metadata import batch_shape, build_metadata
from tests import aiter_fake

BF16_REL = 1e-2  # both sides round the same fp32 result to bf16; a wrong row is O(1) off


_SEEDS = random.Random(20261201)  # seeded: a failure reproduces


def _meta(kv_lens, qlen=4, mode="all-rows", page_size=1, graph="FULL", seed=0):
    shape = batch_shape(kv_lens, qlen, graph, capture_sizes(256, qlen - 1, graph))
    return build_metadata(shape, page_size=page_size, min_kv_mode=mode, seed=seed)


def _run(backend, meta, heads, dtype=torch.bfloat16, kv_dtype=None, lse=True):
    seed = _SEEDS.randrange(1 << 30)
    inp = make_inputs(meta, heads, dtype=dtype, seed=seed)
    if kv_dtype is not None:
        inp.kv_c = inp.kv_c.to(kv_dtype)
    b, qlen = meta.num_reqs, meta.qlen
    out = torch.full((b, qlen, heads, 512), float("nan"), dtype=dtype)
    lse_t = torch.full((b, qlen, heads), float("nan")) if lse else None
    backend.forward(inp, meta, out, lse_t)
    return inp, out, lse_t, seed


def _reference(inp, meta, heads, dtype=torch.bfloat16):
    b, qlen = meta.num_reqs, meta.qlen
    ref = torch.full((b, qlen, heads, 512), float("nan"), dtype=dtype)
    ref_lse = torch.full((b, qlen, heads), float("nan"))
    TorchReference().forward(inp, meta, ref, ref_lse)
    return ref, ref_lse


def _assert_close(out, lse, ref, ref_lse, seed):
    assert not torch.isnan(out).any(), f"NaN left in the output (seed {seed})"
    rel = (out.float() - ref.float()).norm() / ref.float().norm()
    assert rel < BF16_REL, f"relative error {rel:.3g} (seed {seed})"
    if lse is not None:
        finite = torch.isfinite(ref_lse)
        assert torch.equal(finite, torch.isfinite(lse)), f"LSE -inf pattern differs (seed {seed})"
        assert torch.allclose(lse[finite], ref_lse[finite], rtol=1e-4, atol=1e-4)


# -- gluon ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["all-rows", "active-rows"])
def test_gluon_exact_call_and_numbers(monkeypatch, mode):
    rec = aiter_fake.install(monkeypatch, version="0.1.19", arch="gfx950")
    meta = _meta([1100, 300, 700], mode=mode)  # 3 real rows padded to 4 (capture size 16)
    assert meta.num_padding == 1
    backend = AiterBackend()
    inp, out, lse, seed = _run(backend, meta, heads=16)

    ((name, args, kw),) = rec.calls
    assert name == "mla_gluon"
    q_nope, q_pe, kv_c, o, page_table, seq_info, sm_scale = args
    assert q_nope is inp.q_nope and q_pe is inp.q_pe and kv_c is inp.kv_c
    assert q_nope.dim() == 4 and tuple(q_nope.shape) == (4, 4, 16, 512)
    assert tuple(q_pe.shape) == (4, 4, 16, 64) and q_nope.dtype == torch.bfloat16
    assert o is out  # bf16 contiguous output is written in place
    assert page_table is meta.kv_indices and page_table.dim() == 1
    assert page_table.dtype == torch.int32
    assert seq_info is meta.kv_indptr and tuple(seq_info.shape) == (meta.num_reqs + 1,)
    assert seq_info.dtype == torch.int32
    assert sm_scale == inp.sm_scale
    assert kw["use_2d_view"] is False and kw["kv_pe_offset"] == 512
    assert kw["return_lse"] is True and kw["k_pe"] is None
    # min_kv_seq_len comes from the builder, in the scenario's mode
    want = meta.min_kv_seq_len_all if mode == "all-rows" else meta.min_kv_seq_len_active
    assert kw["min_kv_seq_len"] == want == (4 if mode == "all-rows" else 300)
    call = backend.last_call
    assert call.min_kv_seq_len == want and call.min_kv_source == mode
    assert call.regime == "bh16bn64" and call.policy == "aiter-gluon-v0.1.19"
    # mlaprof's predicted S equals the fake wrapper's independent formula: collapse vs fix
    assert call.splits == rec.splits[-1] == (1 if mode == "all-rows" else 5)

    ref, ref_lse = _reference(inp, meta, 16)
    _assert_close(out, lse, ref, ref_lse, seed)
    assert torch.all(out[3:] == 0) and torch.all(lse[3:] == float("-inf"))  # the padding row


@pytest.mark.parametrize(
    ("version", "heads", "policy", "splits"),
    [
        ("0.1.19", 16, "aiter-gluon-v0.1.19", 1),
        ("0.1.19.post2", 32, "aiter-gluon-v0.1.19.post2", 1),
        ("0.1.20", 16, "aiter-gluon-v0.1.20", 16),
        ("v0.1.21.dev4+g1234", 48, "aiter-gluon-v0.1.20.post1", 5),  # nearest modelled rule
    ],
)
def test_gluon_split_policy_follows_version(monkeypatch, version, heads, policy, splits):
    rec = aiter_fake.install(monkeypatch, version=version)
    meta = _meta([700, 200, 900])  # all-rows: min_kv = qlen = 4
    backend = AiterBackend(entry="gluon")
    inp, out, lse, seed = _run(backend, meta, heads=heads)
    assert backend.last_call.policy == policy == gluon_policy(backend.env, "bh16bn64")
    assert backend.last_call.splits == rec.splits[-1] == splits
    # a release mlaprof has not read is labelled, never silently the nearest rule
    assert ("not verified" in backend.last_call.aiter_rule) == version.startswith("v0.1.21")
    _assert_close(out, lse, *_reference(inp, meta, heads), seed)


def test_gluon_bh64_and_fp8(monkeypatch):
    rec = aiter_fake.install(monkeypatch, version="0.1.20")
    meta = _meta([900] * 64, qlen=1, graph="NONE")  # bh64 needs B % 64 == 0 and a long min_kv
    backend = AiterBackend(entry="gluon")
    rec.compute = False  # same marshalling as bh16 (checked numerically above); contract only
    inp, out, lse, seed = _run(backend, meta, heads=64, lse=False)
    assert backend.last_call.regime == "bh64" and backend.last_call.policy == "aiter-gluon-bh64"
    assert backend.last_call.splits == rec.splits[-1] == 4  # next_pow2(ceil(256 / 64))
    assert rec.calls[-1][1][0] is inp.q_nope and rec.calls[-1][2]["min_kv_seq_len"] == 900
    rec.compute = True

    meta1 = _meta([500], graph="NONE")  # fp8 KV: bh16bn128
    inp, out, lse, seed = _run(backend, meta1, heads=8, kv_dtype=torch.float8_e4m3fn)
    assert backend.last_call.regime == "bh16bn128"
    assert rec.calls[-1][1][2].dtype == torch.float8_e4m3fn
    inp.kv_c = inp.kv_c.to(torch.bfloat16)  # reference on the same (rounded) values
    _assert_close(out, lse, *_reference(inp, meta1, 8), seed)


@pytest.mark.parametrize(
    ("version", "heads", "kv_lens", "kv_dtype", "policy", "splits"),
    [
        # v0.1.19.post1 ships .post2's mla_gluon.py: bh16 takes H <= 96 (L894). B 4, qlen 4,
        # 2 head blocks, active min_kv 200: min(256 // (4*4*2), ceil(200/64)) = min(8, 4) = 4
        ("0.1.19.post1", 32, [700, 200, 900], None, "aiter-gluon-v0.1.19.post2", 4),
        # fp8 KV takes the same head range (bh16bn128, v0.1.20 L904-916): 256 // (4*4*3) = 5
        ("0.1.20", 48, [700, 200, 900], torch.float8_e4m3fn, "aiter-gluon-v0.1.20", 5),
        # .post2 fp8 (L949-960, B == 1): min(256 // (1*4*3), 500) = 21
        ("0.1.19.post2", 48, [500], torch.float8_e4m3fn, "aiter-gluon-fp8-v0.1.19", 21),
    ],
)
def test_gluon_takes_up_to_96_heads_from_v0119_post1(
    monkeypatch, version, heads, kv_lens, kv_dtype, policy, splits
):
    """The head range of mla_gluon's bh16 regimes, both KV dtypes (aiter ``mla_gluon.py``
    v0.1.19.post1 L894-906, v0.1.20 L904-916): these were refused on the host before."""
    rec = aiter_fake.install(monkeypatch, version=version)
    meta = _meta(kv_lens, mode="active-rows")
    backend = AiterBackend(entry="gluon")
    inp, out, lse, seed = _run(backend, meta, heads=heads, kv_dtype=kv_dtype)
    assert backend.last_call.policy == policy
    assert backend.last_call.splits == rec.splits[-1] == splits
    inp.kv_c = inp.kv_c.to(torch.bfloat16)  # reference on the same (rounded) values
    _assert_close(out, lse, *_reference(inp, meta, heads), seed)


@pytest.mark.parametrize(
    ("version", "arch", "heads", "kwargs", "message"),
    [
        ("0.1.18", "gfx950", 16, {}, "needs aiter >= v0.1.19"),
        ("0.1.19", "gfx942", 16, {}, "requires gfx950"),
        ("0.1.19", "gfx950", 16, {"dtype": torch.float16}, "bf16 query"),
        ("0.1.19", "gfx950", 32, {}, "H <= 16"),
        ("0.1.20", "gfx950", 112, {}, "H <= 96"),
        ("0.1.20", "gfx950", 64, {}, "B % 64 == 0"),
        ("0.1.19", "gfx950", 8, {"kv_dtype": torch.float8_e4m3fn}, "requires B == 1"),
        ("0.1.19", "gfx950", 16, {"page_size": 4}, "page size 1"),
    ],
)
def test_gluon_refusals(monkeypatch, version, arch, heads, kwargs, message):
    rec = aiter_fake.install(monkeypatch, version=version, arch=arch)
    meta = _meta([300, 200, 500], page_size=kwargs.pop("page_size", 1))
    with pytest.raises(MlaprofError, match=message):
        _run(AiterBackend(entry="gluon"), meta, heads=heads, **kwargs)
    assert rec.calls == []  # refused on the host, before any kernel call


def test_gluon_bh64_min_kv_bound_is_raised_not_asserted(monkeypatch):
    rec = aiter_fake.install(monkeypatch, version="0.1.20")
    meta = _meta([100] * 64, qlen=1, graph="NONE")  # S = 4 needs min_kv > 4*(192+4)
    with pytest.raises(MlaprofError, match=r"min_kv_seq_len > S\*\(3\*64\+S\)"):
        _run(AiterBackend(entry="gluon"), meta, heads=64)
    assert rec.calls == []


def test_forward_split_mode(monkeypatch):
    rec = aiter_fake.install(monkeypatch, version="0.1.20", split_override=True)
    meta = _meta([800, 300])
    backend = AiterBackend(entry="gluon", splits="forward")
    inp = make_inputs(meta, 16, dtype=torch.bfloat16, seed=3)
    out = torch.empty(meta.num_reqs, meta.qlen, 16, 512, dtype=torch.bfloat16)
    backend.forward(inp, meta, out, None, num_splits=7)
    assert rec.calls[-1][2]["num_kv_splits"] == 7 and backend.last_call.splits == 7
    with pytest.raises(MlaprofError, match="at most 256"):
        backend.forward(inp, meta, out, None, num_splits=300)

    aiter_fake.install(monkeypatch, version="0.1.19")  # no num_kv_splits parameter
    with pytest.raises(MlaprofError, match="takes no num_kv_splits"):
        AiterBackend(entry="gluon", splits="forward").forward(inp, meta, out, None, num_splits=7)


# -- asm -----------------------------------------------------------------------------------------
def test_asm_exact_call_and_numbers(monkeypatch):
    rec = aiter_fake.install(monkeypatch, version="0.1.20", arch="gfx942")
    meta = _meta([301, 150, 522], page_size=4)  # last pages partly filled
    backend = AiterBackend()  # auto: gfx942 has no gluon, so ASM
    inp, out, lse, seed = _run(backend, meta, heads=16)
    ((name, args, kw),) = rec.calls
    assert name == "mla_decode_fwd"
    q, kv_buffer, o, qo_indptr, kv_indptr, kv_indices, last, max_q = args
    b, qlen = meta.num_reqs, meta.qlen
    assert tuple(q.shape) == (b * qlen, 16, 576)
    assert torch.equal(q[1 * qlen + 2, 3, :512], inp.q_nope[1, 2, 3])  # row-major flattening
    assert torch.equal(q[1 * qlen + 2, 3, 512:], inp.q_pe[1, 2, 3])
    assert tuple(kv_buffer.shape) == (inp.kv_c.shape[0] // 4, 4, 1, 576)
    assert kv_buffer.data_ptr() == inp.kv_c.data_ptr()  # a view, no copy of the KV pool
    assert tuple(o.shape) == (b * qlen, 16, 512) and o.data_ptr() == out.data_ptr()
    assert qo_indptr is meta.qo_indptr and kv_indptr is meta.kv_indptr
    assert kv_indices is meta.kv_indices and last is meta.last_page_len
    assert max_q == qlen
    assert kw["page_size"] == 4 and kw["nhead_kv"] == 1 and kw["num_kv_splits"] is None
    assert kw["sm_scale"] == inp.sm_scale and kw["return_lse"] is True
    call = backend.last_call
    assert call.entry == "asm" and call.policy == "aiter-asm" and call.min_kv_seq_len is None
    ref, ref_lse = _reference(inp, meta, 16)
    _assert_close(out, lse, ref, ref_lse, seed)  # the fake left padding rows NaN


def test_asm_refusals(monkeypatch):
    aiter_fake.install(monkeypatch, version="0.1.20", arch="gfx90a")
    meta = _meta([300, 200])
    with pytest.raises(MlaprofError, match="gluon: .*gfx950.*asm: .*gfx942"):
        _run(AiterBackend(), meta, heads=16)
    aiter_fake.install(monkeypatch, version="0.1.20", arch="gfx942")
    meta8 = _meta([300, 200], qlen=6)
    with pytest.raises(MlaprofError, match="qo_len <= 4"):
        _run(
            AiterBackend(entry="asm"),
            meta8,
            heads=16,
            kv_dtype=torch.float8_e4m3fn,
            dtype=torch.float8_e4m3fn,
        )


# -- environment ---------------------------------------------------------------------------------
def test_aiter_is_imported_lazily_and_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiter", None)  # import aiter -> ImportError
    backend = get_backend("aiter")  # constructing it imports nothing
    assert isinstance(backend, AiterBackend)
    meta = _meta([300])
    inp = make_inputs(meta, 16, dtype=torch.bfloat16)
    out = torch.empty(meta.num_reqs, meta.qlen, 16, 512, dtype=torch.bfloat16)
    with pytest.raises(MlaprofError, match="aiter is not importable.*ROCm"):
        backend.forward(inp, meta, out)
    with pytest.raises(MlaprofError, match="aiter is not importable"):
        backend.prepare()  # what a runner calls before it creates a run folder


def test_rocm_runtime_error_becomes_a_clear_message(monkeypatch):
    class Boom(types.ModuleType):
        def __getattr__(self, name):
            raise RuntimeError("ROCm version file not found")

    monkeypatch.setitem(sys.modules, "aiter", None)
    monkeypatch.setattr(aiter_env.importlib, "import_module", lambda n: Boom(n).missing)
    with pytest.raises(MlaprofError, match="ROCm version file not found"):
        aiter_env.detect()


def test_cpu_tensors_refused_by_the_real_device_rule(monkeypatch):
    aiter_fake.install(monkeypatch)
    monkeypatch.setattr(aiter_env, "DEVICE_TYPE", "cuda")
    with pytest.raises(MlaprofError, match="ROCm GPU; q_nope is on cpu"):
        _run(AiterBackend(), _meta([300]), heads=16)


def test_arch_from_torch_gcn_name(monkeypatch):
    props = types.SimpleNamespace(gcnArchName="gfx942:sramecc+:xnack-", multi_processor_count=304)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    assert aiter_env.gpu_arch() == "gfx942"


def test_version_detection(monkeypatch):
    aiter_fake.install(monkeypatch, version="0.1.19.post2")
    env = aiter_env.detect()
    assert env.version_tuple == (0, 1, 19, 2) and env.arch == "gfx950"
    monkeypatch.setenv(aiter_env.VERSION_ENV, "0.1.18")
    env = aiter_env.detect()
    assert env.version == "0.1.18" and "v0.1.19" in env.why_not_gluon()
    assert aiter_env.parse_version("0.1.7.post2.dev18") == (0, 1, 7, 2)
    assert aiter_env.parse_version("v0.1.20") == (0, 1, 20, 0)
    assert aiter_env.parse_version("main") is None
    assert AiterBackend(env=env).env is env


def test_bad_options():
    with pytest.raises(MlaprofError, match="entry must be one of"):
        AiterBackend(entry="ck")
    with pytest.raises(MlaprofError, match="split mode"):
        AiterBackend(splits="max")


# -- the whole pipeline --------------------------------------------------------------------------
def test_mlaprof_run_pipeline_through_the_aiter_backend(monkeypatch, tmp_path):
    """scenario -> metadata builder -> aiter backend (fake kernels) under the sync checker ->
    run store -> analysis: the padding row's all-rows minimum collapses gluon's splits."""
    import dataclasses

    import mlaprof
    from mlaprof import cpu_runner
    from mlaprof.analysis import analyze
    from mlaprof.scenario import Scenario

    rec = aiter_fake.install(monkeypatch, version="0.1.19")
    bf16_inputs = cpu_runner.make_inputs

    def make_inputs(meta, heads, dtype=torch.float32, device="cpu", seed=0):
        return bf16_inputs(meta, heads, torch.bfloat16, device, seed)  # AITER takes bf16 only

    monkeypatch.setattr(cpu_runner, "make_inputs", make_inputs)
    sc = dataclasses.replace(Scenario(), kv_lens=[500, 300, 260], layers=2, steps=2).validate()
    writer = cpu_runner.start_run(sc, "aiter", "cpu", tmp_path, name="aiter-e2e")
    cpu_runner.run_cpu(sc, "aiter", writer, check_syncs="all")
    writer.finish()
    assert [c[0] for c in rec.calls] == ["mla_gluon"] * 4  # steps x layers
    assert {c[2]["min_kv_seq_len"] for c in rec.calls} == {4}  # all-rows: the padding row's qlen
    run = mlaprof.load(tmp_path / "aiter-e2e")
    assert len(run.steps) == 2 and len(run.layers) == 4
    assert run.syncs.empty  # the marshalling reads no device value back
    s = run.splits[run.splits.policy == "aiter-gluon-v0.1.19"].sort_values("step")
    assert list(s.used) == [1, 1] and list(s.deserved) == [5, 5]
    kinds = {f.kind for f in analyze(run)}
    assert "split-collapse" in kinds
