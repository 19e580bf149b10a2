"""The vLLM plugin's patch points against vLLM 0.34.0's source (read with ``ast`` from its unpacked
wheel, ``tests/vllm_src.py``; vLLM 0.34 cannot be installed here): every target the plugin wraps
exists in 0.34 where the plugin expects it, with the leading parameters its wrapper passes on, or
is listed as gone with what the plugin records instead; and what the wrappers read of 0.34's
model runner V2 (manager classes, the speculator's capture passing its progress description on)
is there."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mlaprof.integrations import vllm_patches
from tests.vllm_src import source

V = source("0.34.0")


def module_file(module: str) -> Path | None:
    rel = Path(*module.split(".")[1:])
    for p in (V / rel.with_suffix(".py"), V / rel / "__init__.py"):
        if p.exists():
            return p
    return None


def classes(path: Path) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)}


def params(fn: ast.FunctionDef) -> tuple[str, ...]:
    a = fn.args
    return tuple(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs])


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for n in cls.body:
        if isinstance(n, ast.FunctionDef) and n.name == name:
            return n
    return None


@pytest.mark.parametrize("t", vllm_patches.TARGETS, ids=lambda t: t.qualname)
def test_each_patch_point_is_in_034_or_named_gone(t: vllm_patches.PatchTarget) -> None:
    path = module_file(t.module)
    if t.qualname in vllm_patches.GONE:
        assert path is None, f"{t.module} is back in 0.34: {t.qualname} is not gone"
        return
    assert path is not None, f"{t.module} is not in vLLM 0.34 (and not listed in GONE)"
    cls = classes(path).get(t.cls)
    assert cls is not None, f"{t.cls} is not in {path.relative_to(V.parent)}"
    fn = method(cls, t.method)
    assert fn is not None, f"{t.cls}.{t.method} is not defined in 0.34"
    got = params(fn)[: len(t.params)]
    assert got == t.params, f"{t.qualname}: 0.34 has {params(fn)}, the wrapper expects {t.params}"


def test_every_gone_target_is_a_target():
    names = {t.qualname for t in vllm_patches.TARGETS}
    assert set(vllm_patches.GONE) <= names
    assert not (V / "v1/worker/gpu_model_runner.py").exists()


def test_the_v2_managers_the_recorder_tells_apart():
    """manager_role keys on ModelCudaGraphManager (the target's, model_runner.py L801) and
    SpeculatorCudaGraphManager (the speculator's); both subclass CudaGraphManager and their
    capture hands its progress description to the wrapped base capture."""
    graphs = classes(V / "v1/worker/gpu/cudagraph_utils.py")
    spec = classes(V / "v1/worker/gpu/spec_decode/autoregressive/cudagraph_utils.py")
    for cls in (graphs["ModelCudaGraphManager"], spec["SpeculatorCudaGraphManager"]):
        assert [ast.unparse(b) for b in cls.bases] == ["CudaGraphManager"]
        cap = method(cls, "capture")
        calls = [ast.unparse(n) for n in ast.walk(cap) if isinstance(n, ast.Call)]
        assert "super().capture(create_forward_fn, progress_bar_desc)" in calls
    runner = (V / "v1/worker/gpu/model_runner.py").read_text()
    assert "self.cudagraph_manager = ModelCudaGraphManager(" in runner
    speculator = (V / "v1/worker/gpu/spec_decode/autoregressive/speculator.py").read_text()
    assert "self.decode_cudagraph_manager = SpeculatorCudaGraphManager(" in speculator
    assert "decode_cudagraph_manager.specialize_spec_tokens(" in speculator


def test_the_v2_descriptor_fields_the_recorder_reads():
    desc = classes(V / "v1/worker/gpu/cudagraph_utils.py")["BatchExecutionDescriptor"]
    fields = {n.target.id for n in desc.body if isinstance(n, ast.AnnAssign)}
    assert {"cg_mode", "num_tokens", "num_reqs", "uniform_token_count"} <= fields
    mgr = classes(V / "v1/worker/gpu/cudagraph_utils.py")["CudaGraphManager"]
    init = ast.unparse(method(mgr, "__init__"))
    for attr in (
        "self.max_num_reqs =",
        "self.vllm_config =",
        "self.graphs:",
        "self._capture_descs:",
    ):
        assert attr in init, attr


def test_what_names_the_engine_cores_scheduler_database():
    """The scheduler database's rank (vllm_recorder.engine_layout, vllm_plugin.scheduler_rank)
    rests on this in 0.34: run_engine_core puts a MoE engine's DP rank into its ParallelConfig
    before building the engine (any other engine is made independent, DP size 1);
    EngineCore.__init__ loads the plugins, then builds the scheduler by keyword with that
    config, which the Scheduler keeps; a worker's global rank is offset by
    data_parallel_rank * world_size exactly where engine_layout says (several engines or nodes,
    no external launcher, no elastic EP), world_size the engine's PP x TP x PCP."""
    core = classes(V / "v1/engine/core.py")
    run = ast.unparse(method(core["EngineCoreProc"], "run_engine_core"))
    moe = "if data_parallel and vllm_config.model_config.is_moe:\n"
    sets = "parallel_config.data_parallel_rank = dp_rank\n"
    assert run.index(moe) < run.index(sets) < run.index("DPEngineCoreProc(*args, **kwargs)")
    assert "parallel_config.reconfigure_for_independent_dp_rank()" in run
    init = ast.unparse(method(core["EngineCore"], "__init__"))
    assert init.index("load_general_plugins()") < init.index("Scheduler(vllm_config=vllm_config,")
    sched = classes(V / "v1/core/sched/scheduler.py")["Scheduler"]
    assert "self.vllm_config = vllm_config" in ast.unparse(method(sched, "__init__"))
    tree = ast.parse((V / "distributed/parallel_state.py").read_text())
    (dist,) = [n for n in tree.body
               if isinstance(n, ast.FunctionDef) and n.name == "init_distributed_environment"]  # fmt: skip
    text = ast.unparse(dist)
    gate = (
        "if config is not None and config.parallel_config.distributed_executor_backend != "
        "'external_launcher' and (config.parallel_config.nnodes > 1 or "
        "config.parallel_config.data_parallel_size > 1) and (not enable_elastic_ep):"
    )
    assert text.index(gate) < text.index("rank = parallel_config.data_parallel_rank * world_size")
    post = ast.unparse(method(classes(V / "config/parallel.py")["ParallelConfig"], "__post_init__"))
    assert (
        "self.world_size = self.pipeline_parallel_size * self.tensor_parallel_size * "
        "self.prefill_context_parallel_size"
    ) in post
    worker = (V / "v1/worker/gpu_worker.py").read_text()
    assert "init_distributed_environment(\n        parallel_config.world_size,\n" in worker
