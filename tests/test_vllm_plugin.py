"""The vLLM plugin against stand-in vLLM classes (tests/vllm_fake.py): opt-in, idempotent,
rank-aware, records the right values, and adds no tensor operation (so no sync) of its own."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import mlaprof
from mlaprof.integrations import vllm_patches, vllm_plugin
from mlaprof.integrations.vllm_recorder import EngineRecorder
from mlaprof.scenario import DEVICES
from mlaprof.store import create_run
from tests import vllm_fake as vf

MI355X = DEVICES["mi355x"]


@pytest.fixture
def fake_vllm(monkeypatch):
    vf.install(monkeypatch)
    vllm_patches.uninstall()
    monkeypatch.setattr(vllm_plugin, "_recorder", None)
    monkeypatch.setattr(vllm_plugin, "_report", {})
    yield
    vllm_patches.uninstall()


def _recorder(tmp_path, rank=0, name="run"):
    return EngineRecorder(
        lambda: create_run(tmp_path, name, {"source": "test"}, rank=rank),
        device=lambda: MI355X,
        gluon_policies=lambda: ["aiter-gluon-v0.1.19"],
    )


# -- opt-in and idempotence ----------------------------------------------------------------------
def test_inert_unless_enabled(fake_vllm, monkeypatch):
    monkeypatch.delenv(vllm_plugin.ENABLE_ENV, raising=False)
    original = vf.AiterMLAMetadataBuilder.build
    vllm_plugin.register()
    assert vllm_patches.installed() == []
    assert vf.AiterMLAMetadataBuilder.build is original
    monkeypatch.setenv(vllm_plugin.ENABLE_ENV, "0")
    vllm_plugin.register()
    assert vllm_patches.installed() == []


def test_register_patches_once(fake_vllm, monkeypatch, tmp_path):
    monkeypatch.setenv(vllm_plugin.ENABLE_ENV, "1")
    monkeypatch.setenv(vllm_plugin.TRACES_ENV, str(tmp_path))
    monkeypatch.delenv(vllm_plugin.RUN_ENV, raising=False)
    vllm_plugin.register()
    first = {t.qualname: getattr(vf, t.cls).__dict__[t.method] for t in vllm_patches.TARGETS}
    assert set(vllm_plugin.patch_report().values()) == {"patched"}
    assert len(vllm_patches.installed()) == len(vllm_patches.TARGETS)
    vllm_plugin.register()  # vLLM may load plugins again in the same process
    again = {t.qualname: getattr(vf, t.cls).__dict__[t.method] for t in vllm_patches.TARGETS}
    assert again == first
    assert set(vllm_plugin.patch_report().values()) == {"already patched"}
    # wrapped exactly once: the original sits one level down
    fn = vf.AiterMLAMetadataBuilder.build
    assert not hasattr(getattr(fn, vllm_patches.MARK), vllm_patches.MARK)
    assert vllm_plugin.os.environ[vllm_plugin.RUN_ENV].endswith("-vllm")  # set for the workers
    # inherited methods are shadowed on the subclass and restored by deletion
    assert "build_for_cudagraph_capture" in vf.TritonMLAMetadataBuilder.__dict__
    vllm_patches.uninstall()
    assert "build_for_cudagraph_capture" not in vf.TritonMLAMetadataBuilder.__dict__
    assert vf.AiterMLAMetadataBuilder.build is getattr(fn, vllm_patches.MARK)


def test_signature_mismatch_is_skipped(fake_vllm):
    bad = vllm_patches.PatchTarget(
        vllm_patches.AITER_MODULE, "AiterMLAImpl", "forward_mqa", ("self", "query"), "forward"
    )
    missing = vllm_patches.PatchTarget("vllm.nope", "X", "y", ("self",), "forward")
    report = vllm_patches.install(_recorder(None), (bad, missing))
    assert report[bad.qualname].startswith("skipped: expected parameters")
    assert report[missing.qualname].startswith("skipped: ModuleNotFoundError")
    assert vllm_patches.installed() == []


# -- what gets recorded --------------------------------------------------------------------------
def _run_engine(rec, min_over="active"):
    vllm_patches.install(rec)
    cfg = vf.CompilationConfig()
    cfg.resolve_cudagraph_mode_and_sizes(vf.AttentionCGSupport.UNIFORM_BATCH, "AiterMLABackend", 4)
    builder, impl = vf.AiterMLAMetadataBuilder(min_over=min_over), vf.AiterMLAImpl()
    # capture-time dummy run: 4 requests x qlen 4, KV length = qlen
    vf.CONTEXT.append(vf.ForwardContext(vf.CUDAGraphMode.FULL, vf.BatchDescriptor(16)))
    m = builder.build_for_cudagraph_capture(vf.batch([4, 4, 4, 4], 4))
    for _ in range(3):
        impl.forward_mqa(None, None, m, None)
    vf.CONTEXT.pop()
    # step: 3 real requests padded to a FULL graph of 4, replayed (no Python forward)
    builder.build(0, vf.batch([1100, 300, 700], 4, padded_reqs=4))
    # step: PIECEWISE (attention eager), no padding
    vf.CONTEXT.append(vf.ForwardContext(vf.CUDAGraphMode.PIECEWISE, vf.BatchDescriptor(12)))
    m = builder.build(0, vf.batch([1102, 302, 702], 4))
    impl.forward_mqa(None, None, m, None)
    vf.CONTEXT.pop()
    rec.close()


def test_records_steps_padding_splits_and_decisions(fake_vllm, tmp_path):
    rec = _recorder(tmp_path)
    _run_engine(rec)
    run = mlaprof.load(tmp_path / "run")
    steps = run.steps.sort_values("step")
    assert list(steps.graph_mode) == ["FULL", "FULL", "PIECEWISE"]
    assert list(steps.timing) == ["capture", "build-interval", "build-interval"]
    assert list(steps.num_reqs) == [4, 4, 3] and list(steps.num_real_reqs) == [4, 3, 3]
    assert list(steps.padded_tokens) == [16, 16, 12] and list(steps.real_tokens) == [16, 12, 12]
    assert list(steps.qlen) == [4, 4, 4] and set(steps.backend) == {"ROCM_AITER_MLA"}
    assert steps.duration_ns.iloc[1] > 0 and math.isnan(steps.duration_ns.iloc[0])
    pad = run.padding.sort_values("step")
    assert list(pad.padding_rows) == [0, 1, 0] and list(pad.capture_size.fillna(-1)) == [16, 16, -1]
    assert pad.padding_tokens.iloc[1] == 4
    assert pad.kv_bytes_padding.iloc[1] == 4 * 576 * 2  # one row pinned to qlen
    splits = run.splits.sort_values("step")
    assert set(splits.policy) == {"aiter-gluon-v0.1.19"}
    # v0.1.19 bh16bn64: S = max(1, min(256 // (B*qlen), ceil(min_kv / 64)))
    assert list(splits.used) == [1, min(16, math.ceil(300 / 64)), min(21, math.ceil(302 / 64))]
    assert list(splits.min_kv_used) == [4, 300, 302]
    ev = run.events
    builds = ev[ev.kind.isin(["mla-build", "capture-build"])].sort_values("t_ns")
    data = [json.loads(d) for d in builds.data]
    assert [d["min_kv_seq_len"] for d in data] == [4, 300, 302]
    assert [d["min_kv_source"] for d in data] == ["active-rows"] * 3
    assert data[1]["qo_lens"] == [4, 4, 4, 0] and data[1]["path"] == "gluon-verify"
    assert data[0]["runtime_tokens"] == 16 and data[0]["forward_calls"] == 3
    assert data[2]["graph_mode"] == "PIECEWISE" and data[1]["graph_mode"] is None
    (decision,) = [json.loads(d) for d in ev[ev.kind == "cudagraph-mode"].data]
    assert decision["requested"] == "FULL_AND_PIECEWISE"
    assert decision["resolved"] == "FULL_DECODE_ONLY"
    assert decision["min_cg_support"] == "UNIFORM_BATCH" and decision["min_cg_support_value"] == 2
    msg = ev[ev.kind == "cudagraph-mode"].message.iloc[0]
    assert "setting cudagraph_mode=FULL_DECODE_ONLY" in msg
    assert "UNIFORM_BATCH" in ev[ev.kind == "cudagraph-support"].message.iloc[0]
    assert run.status == "finished"


def test_all_rows_minimum_is_reported_as_the_bug(fake_vllm, tmp_path):
    rec = _recorder(tmp_path)
    _run_engine(rec, min_over="all")
    run = mlaprof.load(tmp_path / "run")
    builds = run.events[run.events.kind == "mla-build"].sort_values("t_ns")
    data = [json.loads(d) for d in builds.data]
    assert data[0]["min_kv_seq_len"] == 4 and data[0]["min_kv_source"] == "all-rows"
    s = run.splits.sort_values("step").iloc[1]
    assert (s.used, s.deserved) == (1, 5)  # collapsed by the padding row


def test_triton_builder_and_missing_host_lengths(fake_vllm, tmp_path):
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    b = vf.TritonMLAMetadataBuilder()
    b.build(0, vf.batch([5000, 9000], 4))
    b.build(0, vf.batch([5002, 9002], 4, upper_bound=False))
    rec.close()
    run = mlaprof.load(tmp_path / "run")
    s = run.splits
    assert list(s.policy) == ["vllm-triton"] and s.used.iloc[0] == 32  # next_pow2(9000 // 512 = 17)
    assert len(run.steps) == 2 and len(run.padding) == 2 and len(s) == 1
    data = json.loads(run.events[run.events.kind == "mla-build"].data.iloc[1])
    assert "no host sequence lengths" in data["notes"][0] and data["path"] == "triton"


def test_ranks_share_one_run_folder(fake_vllm, tmp_path):
    for rank in (0, 1):
        rec = _recorder(tmp_path, rank=rank, name="shared")
        vllm_patches.uninstall()
        vllm_patches.install(rec)
        b = vf.AiterMLAMetadataBuilder()
        b.build(0, vf.batch([600 + rank, 900], 4))
        rec.close()
    run = mlaprof.load(tmp_path / "shared")
    assert sorted(run.steps["rank"]) == [0, 1]
    assert sorted((tmp_path / "shared").glob("rank*.db")) == [
        tmp_path / "shared" / "rank0.db",
        tmp_path / "shared" / "rank1.db",
    ]


def test_rank_detection(monkeypatch):
    for var in ("RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert vllm_plugin.current_rank() == 0
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert vllm_plugin.current_rank() == 2
    monkeypatch.setenv("RANK", "5")
    assert vllm_plugin.current_rank() == 5
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 7)
    assert vllm_plugin.current_rank() == 7


def test_failing_recorder_never_breaks_the_engine(fake_vllm, tmp_path):
    def broken():
        raise OSError("disk full")

    rec = EngineRecorder(broken, device=lambda: MI355X, gluon_policies=lambda: [])
    vllm_patches.install(rec)
    b = vf.AiterMLAMetadataBuilder()
    m = b.build(0, vf.batch([600, 900], 4))
    assert m.decode.min_kv_seq_len == 600  # the engine's result is untouched
    rec.drain()  # the failure happens on the writer thread
    assert rec.disabled
    b.build(0, vf.batch([602, 902], 4))  # and recording stays off quietly
    rec.close()
    for background in (False,):  # the same in the foreground
        rec = EngineRecorder(broken, device=lambda: MI355X, background=background)
        vllm_patches.uninstall()
        vllm_patches.install(rec)
        assert b.build(0, vf.batch([600, 900], 4)).decode.min_kv_seq_len == 600
        assert rec.disabled


# -- no sync, nothing inside the captured region -------------------------------------------------
class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _reads(monkeypatch, log):
    """Count value reads (item/tolist/cpu/numpy) per tensor: invisible to dispatch for tolist."""
    for name in ("item", "tolist", "cpu", "numpy"):
        orig = getattr(torch.Tensor, name)

        def wrapped(self, *a, _orig=orig, _name=name, **kw):
            log.append((_name, self.data_ptr()))
            return _orig(self, *a, **kw)

        monkeypatch.setattr(torch.Tensor, name, wrapped)


def test_wrappers_add_no_tensor_op_and_read_only_host_tensors(fake_vllm, tmp_path, monkeypatch):
    cam = vf.batch([1100, 300, 700], 4, padded_reqs=4)
    host = {cam.query_start_loc_cpu.data_ptr(), cam.seq_lens_cpu_upper_bound.data_ptr()}
    builder, impl = vf.AiterMLAMetadataBuilder(), vf.AiterMLAImpl()
    reads: list = []
    _reads(monkeypatch, reads)

    def trace():
        reads.clear()
        with OpLog() as ops:
            m = builder.build(0, cam)
            impl.forward_mqa(None, None, m, None)
            impl.forward_mqa(None, None, m, None)
        return ops.ops, list(reads)

    plain_ops, plain_reads = trace()
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    vf.CONTEXT.append(vf.ForwardContext(vf.CUDAGraphMode.PIECEWISE))
    wrapped_ops, wrapped_reads = trace()
    assert wrapped_ops == plain_ops  # not one extra aten op: no sync, no allocation, no kernel

    def split(rs):
        return (
            Counter(n for n, p in rs if p not in host),  # the builder's own reads (new tensors)
            Counter(n for n, p in rs if p in host),
        )

    plain_dev, plain_host = split(plain_reads)
    wrapped_dev, wrapped_host = split(wrapped_reads)
    assert wrapped_dev == plain_dev  # the wrapper reads no tensor but the builder's CPU ones
    extra = wrapped_host - plain_host
    assert extra == Counter({"tolist": 2})  # query_start_loc_cpu + seq_lens_cpu_upper_bound
    rec.close()


def test_forward_wrapper_never_reads_device_tensors(fake_vllm, tmp_path):
    """forward_mqa runs inside the captured region: give it tensors whose data cannot be read."""
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    builder, impl = vf.AiterMLAMetadataBuilder(), vf.AiterMLAImpl()
    m = builder.build(0, vf.batch([600, 900], 4))
    q = torch.empty(8, 16, 576, device="meta")  # any value read of a meta tensor raises
    kv = torch.empty(100, 576, device="meta")
    with OpLog() as ops:
        out, _ = impl.forward_mqa(q, kv, m, None)
    assert out is q and ops.ops == [] and not rec.disabled
    rec.close()


def test_markers_name_the_recorded_steps(fake_vllm, tmp_path, monkeypatch):
    from mlaprof.integrations import vllm_recorder

    marks = []
    monkeypatch.setattr(vllm_recorder, "_mark", marks.append)
    rec = EngineRecorder(
        lambda: create_run(tmp_path, "run", {}, rank=0),
        device=lambda: MI355X,
        gluon_policies=lambda: ["aiter-gluon-v0.1.20"],
        markers=True,
    )
    vllm_patches.install(rec)
    target, draft = vf.AiterMLAMetadataBuilder(), vf.TritonMLAMetadataBuilder()
    target.build(0, vf.batch([800, 900], 4))  # two builders interleave (e.g. target and draft)
    draft.build(0, vf.batch([801, 901], 1))
    target.build(0, vf.batch([802, 902], 4))
    rec.close()
    assert [m.split()[1] for m in marks] == ["step=0", "step=1", "step=2"]
    steps = mlaprof.load(tmp_path / "run").steps.sort_values("step")
    assert list(steps.backend) == ["ROCM_AITER_MLA", "TRITON_MLA", "ROCM_AITER_MLA"]
    assert list(steps.qlen) == [4, 1, 4]
