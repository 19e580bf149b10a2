"""The vLLM plugin against stand-in vLLM classes (tests/vllm_fake.py): opt-in, idempotent,
rank-aware, one record per engine step, acceptance in the scheduler's own database, and no
tensor operation (so no sync) of its own on the engine's path."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import mlaprof
from mlaprof.errors import MlaprofError
from mlaprof.integrations import vllm_patches, vllm_plugin
from mlaprof.integrations.vllm_names import CG_MODE_EVENT
from mlaprof.integrations.vllm_recorder import (
    ACCEPT_EVENT,
    STEP_EVENT,
    EngineLayout,
    EngineRecorder,
)
from mlaprof.store import create_run
from tests import vllm_fake as vf


@pytest.fixture
def fake_vllm(monkeypatch):
    vf.install(monkeypatch)
    vllm_patches.uninstall()
    monkeypatch.setattr(vllm_plugin, "_recorder", None)
    monkeypatch.setattr(vllm_plugin, "_report", {})
    yield
    vllm_patches.uninstall()


def _recorder(tmp_path, rank=0, name="run", **kw):
    return EngineRecorder(
        lambda role: create_run(tmp_path, name, {"source": "vllm plugin"}, rank=rank, role=role),
        markers=False,
        **kw,
    )


def _steps(run):
    ev = run.events
    return [json.loads(d) for d in ev[ev.kind == STEP_EVENT].sort_values("t_ns").data]


# -- opt-in and idempotence ----------------------------------------------------------------------
def test_inert_unless_enabled(fake_vllm, monkeypatch):
    monkeypatch.delenv(vllm_plugin.ENABLE_ENV, raising=False)
    original = vf.MLACommonMetadataBuilder.build
    vllm_plugin.register()
    assert vllm_patches.installed() == []
    assert vf.MLACommonMetadataBuilder.build is original
    monkeypatch.setenv(vllm_plugin.ENABLE_ENV, "0")
    vllm_plugin.register()
    assert vllm_patches.installed() == []


def test_register_patches_once_and_announces(fake_vllm, monkeypatch, tmp_path, caplog):
    monkeypatch.setenv(vllm_plugin.ENABLE_ENV, "1")
    monkeypatch.setenv(vllm_plugin.TRACES_ENV, str(tmp_path))
    monkeypatch.delenv(vllm_plugin.RUN_ENV, raising=False)
    monkeypatch.setattr(vllm_plugin, "_recorder", None)
    monkeypatch.setattr(vllm_plugin, "_announced", False)
    with caplog.at_level("INFO", logger="vllm.mlaprof"):
        vllm_plugin.register()
        vllm_plugin.register()  # vLLM may load plugins again in the same process
        # a process that records nothing (vLLM's API server) says nothing
        assert not [r for r in caplog.records if "recording this process" in r.message]
        rec = vllm_plugin.recorder()
        rec.writer("")  # its first record opens the run: now it says where
        rec.writer("drafter")  # once per process, not per database
    announced = [r for r in caplog.records if "recording this process into" in r.message]
    assert len(announced) == 1 and "mlaprof tui" in announced[0].message
    assert f"({len(vllm_patches.TARGETS)} vLLM functions wrapped" in announced[0].message
    assert announced[0].name.startswith("vllm.")  # vLLM's own handler prints it
    for w in rec._writers.values():
        w.finish()
    assert len(vllm_patches.installed()) == len(vllm_patches.TARGETS)
    assert set(vllm_plugin.patch_report().values()) == {"already patched"}
    fn = vf.MLACommonMetadataBuilder.build
    assert not hasattr(getattr(fn, vllm_patches.MARK), vllm_patches.MARK)  # wrapped once
    assert vllm_plugin.os.environ[vllm_plugin.RUN_ENV].endswith("-vllm")  # set for the workers
    vllm_patches.uninstall()
    assert vf.MLACommonMetadataBuilder.build is getattr(fn, vllm_patches.MARK)


def test_announces_on_stderr_before_vllm_configures_logging(monkeypatch, capsys):
    monkeypatch.setattr(vllm_plugin.log, "hasHandlers", lambda: False)  # a fresh front end
    vllm_plugin.announce("mlaprof: recording this process into X")
    assert "INFO mlaprof: recording this process into X" in capsys.readouterr().err


def test_signature_mismatch_is_skipped(fake_vllm):
    bad = vllm_patches.PatchTarget(
        vllm_patches.MLA_COMMON_MODULE, "MLACommonMetadataBuilder", "build", ("self", "x"), "build"
    )
    missing = vllm_patches.PatchTarget("vllm.nope", "X", "y", ("self",), "build")
    report = vllm_patches.install(_recorder(None), (bad, missing))
    assert report[bad.qualname].startswith("skipped: expected parameters")
    assert report[missing.qualname].startswith("skipped: ModuleNotFoundError")
    assert vllm_patches.installed() == []


# -- what gets recorded --------------------------------------------------------------------------
def test_cpu_engine_verify_rows_filed_as_prefill(fake_vllm, tmp_path):
    """The CPU MLA backend (common builder, threshold 1) files verify rows as prefills: they are
    recorded as verify rows with that classification noted; drafter builds are counted only."""
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    cfg = vf.CompilationConfig()
    cfg.resolve_cudagraph_mode_and_sizes(vf.AttentionCGSupport.NEVER, "CPUMLABackend", 1)
    runner = vf.GPUModelRunner([vf.MLACommonMetadataBuilder()],
                               drafter=vf.MLACommonMetadataBuilder())  # fmt: skip
    runner.execute([40, 31, 52, 29], [3, 3, 3, 3])
    runner.execute([44, 35, 56, 31], [0, 3, 2, 1])  # vLLM puts decodes first
    rec.close()
    run = mlaprof.load(tmp_path / "run")
    steps = run.steps.sort_values("step")
    assert list(steps.graph_mode) == ["NONE", "NONE"] and set(steps.backend) == {"CPU_MLA"}
    assert list(steps.num_real_reqs) == [4, 4] and list(steps.real_tokens) == [16, 10]
    assert list(steps.qlen) == [4, 4] and list(steps.timing) == ["dispatch-interval"] * 2
    data = _steps(run)
    assert [d["kind"] for d in data] == ["verify", "verify"]
    assert [d["verify_rows"] for d in data] == [4, 3]
    assert [d["verify_draft_tokens"] for d in data] == [12, 6]
    assert [d["classified_decode"] for d in data] == [0, 1]  # the qlen-1 row is a decode
    assert [d["verify_rows_as_prefill"] for d in data] == [4, 3]
    assert data[1]["draft_tokens"] == [0, 3, 2, 1] and data[1]["qo_lens"] == [1, 4, 3, 2]
    assert data[0]["seq_lens_upper_bound"] == [40, 31, 52, 29]
    assert [d["drafter_builds"] for d in data] == [3, 3] and data[0]["target_builds"] == 1
    assert data[0]["heads"] == 8 and data[0]["max_num_seqs"] == 8
    assert data[0]["spec_method"] == "ngram" and data[0]["num_speculative_tokens"] == 3
    (decision,) = [json.loads(d) for d in run.events[run.events.kind == "cudagraph-mode"].data]
    assert decision["resolved"] == "NONE" and decision["min_cg_support"] == "NEVER"
    assert run.status == "finished"


def test_full_graph_padding_and_one_record_per_step(fake_vllm, tmp_path):
    """An AITER-like builder that overrides build() and calls super().build(), two KV-cache
    groups, FULL graphs padding 3 requests to a capture size of 16 tokens: one step each."""
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    builders = [vf.AiterMLAMetadataBuilder(), vf.AiterMLAMetadataBuilder()]
    runner = vf.GPUModelRunner(builders, "ROCM_AITER_MLA", vf.CUDAGraphMode.FULL, [8, 16, 24])
    m = runner.execute([1100, 300, 700], [3, 3, 3])
    assert m[0].num_decodes == 4 and m[0].decode.min_kv_seq_len == 300
    runner.execute([1104, 304, 704], [3, 3, 3])
    rec.close()
    run = mlaprof.load(tmp_path / "run")
    steps = run.steps.sort_values("step")
    assert len(steps) == 2  # two KV-cache groups and a subclass build(): still one per step
    assert list(steps.graph_mode) == ["FULL", "FULL"] and set(steps.backend) == {"ROCM_AITER_MLA"}
    assert list(steps.num_reqs) == [4, 4] and list(steps.num_real_reqs) == [3, 3]
    assert list(steps.padded_tokens) == [16, 16] and list(steps.real_tokens) == [12, 12]
    pad = run.padding.sort_values("step")
    assert list(pad.padding_rows) == [1, 1] and list(pad.capture_size) == [16, 16]
    assert list(pad.padding_tokens) == [4, 4]
    data = _steps(run)
    assert data[0]["target_builds"] == 2 and data[0]["padded_reqs"] == 4
    assert data[0]["min_kv_seq_len"] == 300 and data[0]["use_gluon_verify"] is True
    assert data[0]["verify_rows_as_prefill"] == 0 and data[0]["classified_decode"] == 4
    assert steps.duration_ns.iloc[0] > 0


def test_acceptance_goes_to_the_schedulers_own_database(fake_vllm, tmp_path):
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    for per_step in ([(3, 3), (3, 1)], [(2, 2)], [(3, 0), (1, 1), (3, 3)]):
        stats = vf.SpecDecodingStats()  # the scheduler makes one per step
        for nd, na in per_step:
            stats.observe_draft(nd, na)
    rec.close()
    assert (tmp_path / "run" / "rank0.scheduler.db").exists()
    assert not (tmp_path / "run" / "rank0.db").exists()  # nothing else recorded here
    run = mlaprof.load(tmp_path / "run")
    assert run.databases == [(0, "scheduler")]
    acc = [json.loads(d) for d in run.events[run.events.kind == ACCEPT_EVENT].data]
    assert [a["verify_rows"] for a in acc] == [2, 1, 3]
    assert [a["draft_tokens"] for a in acc] == [6, 2, 7]
    assert [a["accepted_tokens"] for a in acc] == [4, 2, 4]
    assert acc[2]["per_row"] == [[3, 0], [1, 1], [3, 3]]


def test_run_grows_while_the_engine_runs(fake_vllm, tmp_path):
    """The writer thread commits while steps go on: a reader sees the run grow before close."""
    import time

    rec = _recorder(tmp_path, interval=0.01)
    vllm_patches.install(rec)
    runner = vf.GPUModelRunner([vf.MLACommonMetadataBuilder()])
    run_dir = tmp_path / "run"

    def steps_now() -> int:
        try:
            return mlaprof.load(run_dir).count("steps")
        except MlaprofError:  # no committed database yet
            return 0

    seen = []
    for i in range(4):
        runner.execute([40 + i, 50 + i], [3, 3])
        deadline = time.monotonic() + 10
        while steps_now() < i and time.monotonic() < deadline:  # waits, times nothing
            time.sleep(0.01)
        seen.append(steps_now())
    rec.close()
    assert seen == [0, 1, 2, 3]  # a step is written once the next one starts
    assert mlaprof.load(run_dir).count("steps") == 4


@pytest.mark.parametrize("step_ends", [True, False])
def test_last_step_is_written_when_the_engine_goes_idle(fake_vllm, tmp_path, step_ends):
    """A worker killed at shutdown never runs atexit: its last step must not wait for it. With
    the engine's step ends wrapped it is written when its output returns, timed by it; without
    them, after IDLE_STEP_NS of nothing new, untimed (no next dispatch to time it by)."""
    import time

    rec = _recorder(tmp_path, interval=0.01)
    vllm_patches.install(rec)
    assert rec.step_ends  # the fake runner has vLLM 0.32's execute_model / sample_tokens
    runner = vf.GPUModelRunner([vf.MLACommonMetadataBuilder()])
    if step_ends:
        runner.execute_model(([40, 50], [3, 3]))
        runner.sample_tokens(None)
    else:
        rec.step_ends = False  # as on a vLLM whose step methods did not match
        runner.execute([40, 50], [3, 3])
    deadline = time.monotonic() + 10
    while rec.steps_written < 1 and time.monotonic() < deadline:  # waits, times nothing
        time.sleep(0.05)
    rec.drain()  # takes the writer's lock: its commit is done
    steps = mlaprof.load(tmp_path / "run").steps  # before close: what a kill would leave
    assert len(steps) == 1
    assert steps.duration_ns.notna().all() if step_ends else steps.duration_ns.isna().all()
    rec.close()
    assert mlaprof.load(tmp_path / "run").count("steps") == 1  # and not written twice


def test_ranks_share_one_run_folder(fake_vllm, tmp_path):
    for rank in (0, 1):
        rec = _recorder(tmp_path, rank=rank, name="shared")
        vllm_patches.uninstall()
        vllm_patches.install(rec)
        vf.GPUModelRunner([vf.MLACommonMetadataBuilder()]).execute([600 + rank, 900], [3, 3])
        rec.close()
    run = mlaprof.load(tmp_path / "shared")
    assert sorted(run.steps["rank"]) == [0, 1]


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


# -- the EngineCore's scheduler database: named after its engine's first worker ------------------
@pytest.fixture
def served(fake_vllm, monkeypatch, tmp_path):
    """The environment of a `vllm serve` recorded by the plugin (run "served" under tmp_path);
    every process in it starts without RANK / LOCAL_RANK and without torch.distributed."""
    monkeypatch.setenv(vllm_plugin.ENABLE_ENV, "1")
    monkeypatch.setenv(vllm_plugin.TRACES_ENV, str(tmp_path))
    monkeypatch.setenv(vllm_plugin.RUN_ENV, "served")
    for var in ("RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(vllm_plugin, "watch_stop_signals", lambda rec: None)  # pytest's own
    return tmp_path / "served"


def _engine_core(monkeypatch, parallel=None, dp_rank=0, accepted=(3, 3), is_moe=True):
    """One EngineCore process (vLLM spawns each: a fresh plugin and recorder): vLLM builds its
    scheduler (``parallel``: its config's ParallelConfig; None: no scheduler the plugin can
    read), which counts one step of ``len(accepted)`` verified requests of 3 drafts; exits.
    Returns the engine's config as vLLM left it (what its workers are given), else None."""
    vllm_patches.uninstall()
    monkeypatch.setattr(vllm_plugin, "_recorder", None)
    cfg = None
    if parallel is None:  # a scheduler that is no vLLM Scheduler: only its counters are seen
        vllm_plugin.register()
        stats = vf.SpecDecodingStats()
        for a in accepted:
            stats.observe_draft(num_draft_tokens=3, num_accepted_tokens=a)
    else:
        cfg = vf.VllmConfig(parallel_config=parallel)
        sched = vf.run_engine_core(cfg, dp_rank=dp_rank, local_dp_rank=dp_rank, is_moe=is_moe)
        step = None
        for a in accepted:
            step = sched.make_spec_decoding_stats(step, 3, a)
    vllm_plugin.recorder().close()
    return cfg


def _engine_worker(monkeypatch, cfg, rank, resolve_first=False, current=True):
    """One worker process of the engine whose config is ``cfg`` (vLLM hands each worker its
    engine's config), at torch.distributed rank ``rank`` of its engine's world, recorded by the
    plugin: one verify step of 2 requests of 3 drafts each; ``resolve_first``: its first
    record is the cudagraph-mode resolution (as in vLLM, before any runner step), with its
    config current unless ``current`` is false, written before the runner runs."""
    vllm_patches.uninstall()
    monkeypatch.setattr(vllm_plugin, "_recorder", None)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: rank)
    vllm_plugin.register()
    if resolve_first:
        monkeypatch.setattr(vf, "current_vllm_config", cfg if current else None)
        vf.CompilationConfig().resolve_cudagraph_mode_and_sizes(vf.AttentionCGSupport.NEVER, "X")
        monkeypatch.setattr(vf, "current_vllm_config", None)
        vllm_plugin.recorder().flush()  # the writer opens on this record
    runner = vf.GPUModelRunner([vf.MLACommonMetadataBuilder()], vllm_config=cfg)
    runner.execute([600 + rank, 900], [3, 3])
    vllm_plugin.recorder().close()


def _workers(tmp_path, ranks, name="served"):
    """Worker processes of the run, each at its torch.distributed rank: one verify step of 2
    requests of 3 drafts each."""
    for rank in ranks:
        rec = _recorder(tmp_path, rank=rank, name=name)
        vllm_patches.uninstall()
        vllm_patches.install(rec)
        vf.GPUModelRunner([vf.MLACommonMetadataBuilder()]).execute([600 + rank, 900], [3, 3])
        rec.close()


def _scheduler_meta(run, rank):
    meta = run.rank_meta(rank, "scheduler")
    engine = meta.get(vllm_plugin.ENGINE_KEY)
    return meta[vllm_plugin.RANK_SOURCE_KEY], None if engine is None else json.loads(engine)


def test_dp_engines_name_their_scheduler_database_after_their_first_worker(served, monkeypatch):
    """`vllm serve --data-parallel-size 2 --tensor-parallel-size 2` of a MoE model: workers 0-1
    are engine 0's, 2-3 engine 1's (vLLM offsets a worker's rank by data_parallel_rank *
    world_size). The EngineCores have no distributed rank: each would write
    rank0.scheduler.db, the second refused and its acceptance lost. Each takes its engine's
    first worker's rank (0, 2), says so, and the report pairs each with its own workers."""
    for dp_rank, accepted in ((0, (3, 0)), (1, (3, 3))):
        tp2 = vf.ParallelConfig(tensor_parallel_size=2, data_parallel_size=2)
        _engine_core(monkeypatch, tp2, dp_rank, accepted)
    _workers(served.parent, range(4))
    names = sorted(p.name for p in served.glob("*.db"))
    assert names == ["rank0.db", "rank0.scheduler.db", "rank1.db", "rank2.db",
                     "rank2.scheduler.db", "rank3.db"]  # fmt: skip
    with mlaprof.load(served) as run:
        for rank, dp_rank in ((0, 0), (2, 1)):
            assert _scheduler_meta(run, rank) == (vllm_plugin.FROM_ENGINE, {
                "data_parallel_rank": dp_rank, "data_parallel_size": 2, "world_size": 2,
                "first_worker_rank": rank})  # fmt: skip
        s = mlaprof.build_summary(run)
    eng = json.loads(json.dumps(s.to_json()))["engine"]
    got = [(e["rank"], e["paired_rank"], e["accepted_tokens"], e["draft_tokens"])
           for e in eng["per_engine"]]  # fmt: skip
    assert got == [(0, 0, 3, 6), (2, 2, 6, 6)]
    assert [e["scheduler_matches_worker"] for e in eng["per_engine"]] == [True, True]


def test_dense_dp_engines_are_numbered_by_their_data_parallel_index(served, monkeypatch):
    """`vllm serve --data-parallel-size 2 --tensor-parallel-size 2` of a dense model: vLLM makes
    each engine independent (DP size 1, rank 0; only data_parallel_index keeps its DP rank), so
    each engine's workers are ranks 0-1 of its own world and both schedulers read DP rank 0:
    engine 1's would be refused rank0.db and rank0.scheduler.db and record nothing. The plugin
    numbers engine k's ranks from data_parallel_index * world_size (2 for engine 1), its
    scheduler's and its workers' alike, says so in each database, and the report pairs each
    engine's acceptance with its own first worker."""
    cfgs = []
    for dp_rank, accepted in ((0, (3, 0)), (1, (3, 3))):
        tp2 = vf.ParallelConfig(tensor_parallel_size=2, data_parallel_size=2)
        cfg = _engine_core(monkeypatch, tp2, dp_rank, accepted, is_moe=False)
        assert (cfg.parallel_config.data_parallel_size, cfg.parallel_config.data_parallel_rank,
                cfg.parallel_config.data_parallel_index) == (1, 0, dp_rank)  # fmt: skip
        cfgs.append(cfg)
    for cfg in cfgs:  # each engine's workers: ranks 0-1 of its own torch.distributed world
        for rank in range(2):
            _engine_worker(monkeypatch, cfg, rank)
    names = sorted(p.name for p in served.glob("*.db"))
    assert names == ["rank0.db", "rank0.scheduler.db", "rank1.db", "rank2.db",
                     "rank2.scheduler.db", "rank3.db"]  # fmt: skip
    one = {"data_parallel_rank": 0, "data_parallel_size": 1, "world_size": 2}
    with mlaprof.load(served) as run:
        assert _scheduler_meta(run, 0) == (vllm_plugin.FROM_ENGINE, {**one, "first_worker_rank": 0})
        indexed = {**one, "first_worker_rank": 2, "data_parallel_index": 1, "independent": True}
        assert _scheduler_meta(run, 2) == (vllm_plugin.FROM_ENGINE, indexed)
        for rank in range(4):
            meta = run.rank_meta(rank, "")
            engine = meta.get(vllm_plugin.ENGINE_KEY)
            got = (meta[vllm_plugin.RANK_SOURCE_KEY], engine and json.loads(engine))
            assert got == ((vllm_plugin.FROM_TORCH, None) if rank < 2
                           else (vllm_plugin.FROM_ENGINE_INDEX, indexed)), (rank, got)  # fmt: skip
        s = mlaprof.build_summary(run)
    eng = json.loads(json.dumps(s.to_json()))["engine"]
    got = [(e["rank"], e["paired_rank"], e["accepted_tokens"], e["draft_tokens"], e["pairing"])
           for e in eng["per_engine"]]  # fmt: skip
    assert got == [(0, 0, 3, 6, "known"), (2, 2, 6, 6, "known")]
    assert [e["scheduler_matches_worker"] for e in eng["per_engine"]] == [True, True]


def test_a_dense_engines_worker_takes_its_rank_from_its_first_record(served, monkeypatch):
    """A worker's first record is often its cudagraph-mode resolution (no runner seen yet):
    the config vLLM made current around it numbers the worker (rank 3: engine 1's second);
    where no config is readable before the writer opens, the worker keeps its distributed rank
    (today's rule: rank 1, named torch.distributed)."""
    tp2 = vf.ParallelConfig(tensor_parallel_size=2, data_parallel_size=2)
    cfg = _engine_core(monkeypatch, tp2, dp_rank=1, is_moe=False)
    _engine_worker(monkeypatch, cfg, 1, resolve_first=True)
    with mlaprof.load(served) as run:
        assert run.databases == [(2, "scheduler"), (3, "")]
        assert run.rank_meta(3, "")[vllm_plugin.RANK_SOURCE_KEY] == vllm_plugin.FROM_ENGINE_INDEX
        assert len(run.events[run.events.kind == CG_MODE_EVENT]) == 1
    _engine_worker(monkeypatch, cfg, 1, resolve_first=True, current=False)
    with mlaprof.load(served) as run:
        assert run.databases == [(1, ""), (2, "scheduler"), (3, "")]
        assert run.rank_meta(1, "")[vllm_plugin.RANK_SOURCE_KEY] == vllm_plugin.FROM_TORCH


def test_one_engine_without_dp_names_rank_0_as_before(served, monkeypatch):
    _engine_core(monkeypatch, vf.ParallelConfig(tensor_parallel_size=2))
    with mlaprof.load(served) as run:
        assert run.databases == [(0, "scheduler")]
        assert _scheduler_meta(run, 0) == (vllm_plugin.FROM_ENGINE, {
            "data_parallel_rank": 0, "data_parallel_size": 1, "world_size": 2,
            "first_worker_rank": 0})  # fmt: skip


def test_an_engine_core_without_dp_information_keeps_the_process_rule(served, monkeypatch):
    """No scheduler the plugin can read (a custom scheduler class): the process's own rule,
    the environment's rank, else 0, named as such; two of them in one run are still refused."""
    _engine_core(monkeypatch)
    monkeypatch.setenv("LOCAL_RANK", "1")
    _engine_core(monkeypatch)
    _engine_core(monkeypatch, accepted=(1,))  # rank 1 again: refused, recording off
    with mlaprof.load(served) as run:
        assert run.databases == [(0, "scheduler"), (1, "scheduler")]
        assert _scheduler_meta(run, 0) == (vllm_plugin.FROM_DEFAULT, None)
        assert _scheduler_meta(run, 1) == ("LOCAL_RANK", None)
        acc = run.events[run.events.kind == ACCEPT_EVENT]
        assert sorted(json.loads(d)["verify_rows"] for d in acc.data) == [2, 2]  # not the 1


def test_an_engine_core_running_its_worker_keeps_its_distributed_rank(served, monkeypatch):
    """An EngineCore whose worker runs in its own process (one GPU per engine, an external
    launcher) has a torch.distributed rank: that is its worker's, kept."""
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 3)
    _engine_core(monkeypatch, vf.ParallelConfig(data_parallel_size=4), dp_rank=2)
    with mlaprof.load(served) as run:
        assert run.databases == [(3, "scheduler")]
        source, engine = _scheduler_meta(run, 3)
        assert source == vllm_plugin.FROM_TORCH and engine["first_worker_rank"] == 2


def test_a_dense_engine_core_running_its_worker_is_numbered_by_its_index(served, monkeypatch):
    """An independent engine's EngineCore whose worker runs in its process (a uniprocess
    executor) has rank 0 of its own world, as engine 0's has: numbered like its worker, 1."""
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 0)
    for dp_rank in (0, 1):
        _engine_core(monkeypatch, vf.ParallelConfig(data_parallel_size=2), dp_rank, is_moe=False)
    with mlaprof.load(served) as run:
        assert run.databases == [(0, "scheduler"), (1, "scheduler")]
        assert _scheduler_meta(run, 0)[0] == vllm_plugin.FROM_TORCH
        source, engine = _scheduler_meta(run, 1)
        assert source == vllm_plugin.FROM_ENGINE_INDEX and engine["data_parallel_index"] == 1
    # a rank past its engine's world is one vLLM numbered past engine 0 itself: never twice
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 3)
    layout = EngineLayout(0, 1, 2, False, data_parallel_index=1)
    assert vllm_plugin.worker_rank(layout) == (3, vllm_plugin.FROM_TORCH)


def test_engine_layout_only_where_vllm_offsets_by_it():
    from mlaprof.integrations.vllm_recorder import engine_layout

    def layout(**kw):
        return engine_layout(vf.Scheduler(vf.VllmConfig(parallel_config=vf.ParallelConfig(**kw)),
                                          None, None, 16))  # fmt: skip

    assert layout(tensor_parallel_size=4, pipeline_parallel_size=2, data_parallel_size=3,
                  data_parallel_rank=2).first_worker_rank == 16  # fmt: skip
    assert layout(nnodes=2, tensor_parallel_size=8).first_worker_rank == 0
    assert layout(data_parallel_size=2, data_parallel_rank=1,
                  distributed_executor_backend="external_launcher") is None  # fmt: skip
    assert layout(data_parallel_size=2, data_parallel_rank=1, enable_elastic_ep=True) is None
    assert engine_layout(object()) is None

    def independent(index, **kw):  # a dense model's DP engine, as run_engine_core leaves it
        cfg = vf.ParallelConfig(data_parallel_size=2, data_parallel_rank=index, **kw)
        cfg.reconfigure_for_independent_dp_rank()
        return engine_layout(vf.Scheduler(vf.VllmConfig(parallel_config=cfg), None, None, 16))

    one = independent(1, tensor_parallel_size=4, pipeline_parallel_size=2)
    assert (one.independent, one.first_worker_rank) == (True, 8)
    assert one.as_meta() == {"data_parallel_rank": 0, "data_parallel_size": 1, "world_size": 8,
                             "first_worker_rank": 8, "data_parallel_index": 1,
                             "independent": True}  # fmt: skip
    zero = independent(0, tensor_parallel_size=4)  # engine 0: no different from one engine
    assert (zero.independent, zero.first_worker_rank) == (False, 0)
    assert "independent" not in zero.as_meta()
    moe = layout(data_parallel_size=2, data_parallel_rank=1, tensor_parallel_size=2)
    assert (moe.independent, moe.first_worker_rank) == (False, 2)  # vLLM's own offset
    assert "data_parallel_index" not in moe.as_meta()
    assert independent(1, distributed_executor_backend="external_launcher") is None


def test_failing_recorder_never_breaks_the_engine(fake_vllm, tmp_path):
    def broken(role):
        raise OSError("disk full")

    for background in (True, False):
        rec = EngineRecorder(broken, markers=False, background=background)
        vllm_patches.uninstall()
        vllm_patches.install(rec)
        runner = vf.GPUModelRunner([vf.AiterMLAMetadataBuilder()], "ROCM_AITER_MLA")
        m = runner.execute([600, 900], [3, 3])
        assert m[0].decode.min_kv_seq_len == 600  # the engine's result is untouched
        runner.execute([604, 904], [3, 3])
        rec.flush()  # the failure happens where the records are written
        assert rec.disabled
        runner.execute([608, 908], [3, 3])  # and recording stays off quietly
        rec.close()


def test_a_failing_snapshot_switches_recording_off(fake_vllm, tmp_path):
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    b = vf.MLACommonMetadataBuilder()
    cam = vf.batch([40, 50], 4)
    cam.seq_lens_cpu_upper_bound = "not a tensor"  # not what vLLM hands over: the snapshot raises
    assert b.build(0, cam).num_prefills == 2  # the engine's result is untouched
    assert rec.disabled
    rec.close()


# -- no sync, nothing added to the engine's tensor work ---------------------------------------------
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
    runner = vf.GPUModelRunner([vf.AiterMLAMetadataBuilder()], "ROCM_AITER_MLA",
                               vf.CUDAGraphMode.FULL, [16])  # fmt: skip
    builder = runner.builders[0]
    reads: list = []
    _reads(monkeypatch, reads)

    def trace():
        import numpy as np

        reads.clear()
        with OpLog() as ops:
            runner._calc_spec_decode_metadata(np.array([3, 3, 3]), np.array([4, 8, 12]))
            runner._determine_batch_execution_and_padding(12, 3, np.array([4, 4, 4]), 4)
            builder.build(0, cam)
            vf.SpecDecodingStats().observe_draft(3, 2)
        return ops.ops, list(reads)

    plain_ops, plain_reads = trace()
    rec = _recorder(tmp_path, interval=3600)  # the writer thread asleep: the engine's share
    vllm_patches.install(rec)
    wrapped_ops, wrapped_reads = trace()
    assert wrapped_ops == plain_ops and plain_ops  # not one extra aten op: no sync, no kernel

    def split(rs):
        return (
            Counter(n for n, p in rs if p not in host),  # the builder's own reads (new tensors)
            Counter(n for n, p in rs if p in host),
        )

    plain_dev, plain_host = split(plain_reads)
    wrapped_dev, wrapped_host = split(wrapped_reads)
    assert wrapped_dev == plain_dev  # the wrapper reads no tensor but the builder's CPU ones
    assert wrapped_host - plain_host == Counter({"tolist": 2})  # query_start_loc, seq upper bound
    rec.close()


def test_wrapped_build_runs_on_meta_tensors_except_the_host_ones(fake_vllm, tmp_path):
    """Device tensors stay untouched: give the build meta tensors (any value read raises)
    everywhere but the two CPU tensors vLLM documents as host-side."""
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    b = vf.MLACommonMetadataBuilder()
    cam = vf.batch([40, 50], 4)
    cam.query_start_loc = torch.empty(3, dtype=torch.int32, device="meta")
    cam.seq_lens = torch.empty(2, dtype=torch.int32, device="meta")
    with OpLog() as ops:
        b.build(0, cam)
    assert not rec.disabled and "aten._local_scalar_dense.default" not in ops.ops
    rec.close()


def test_markers_name_the_builds(fake_vllm, tmp_path, monkeypatch):
    from mlaprof.integrations import vllm_recorder

    marks = []
    monkeypatch.setattr(vllm_recorder, "_mark", marks.append)
    rec = EngineRecorder(lambda role: create_run(tmp_path, "run", {}, rank=0, role=role),
                         markers=True)  # fmt: skip
    vllm_patches.install(rec)
    runner = vf.GPUModelRunner(
        [vf.MLACommonMetadataBuilder()], drafter=vf.MLACommonMetadataBuilder()
    )
    runner.execute([800, 900], [3, 3])
    runner.execute([804, 904], [3, 3])
    rec.close()
    assert [m.split()[1] for m in marks] == ["build=0", "build=1"]  # drafter builds: no mark


def test_tui_follower_and_analysis_follow_an_engine_run(fake_vllm, tmp_path):
    """What ``mlaprof tui`` reads while an engine runs: steps from the follower, acceptance and
    the shadow AITER view from mlaprof.analysis (the TUI renders its findings)."""
    import time

    from mlaprof.analysis import analyze
    from mlaprof.tui.follower import RunFollower

    rec = _recorder(tmp_path, interval=0.01)
    vllm_patches.install(rec)
    runner = vf.GPUModelRunner([vf.MLACommonMetadataBuilder()])
    follower = RunFollower(tmp_path / "run")
    for i in range(3):
        runner.execute([500 + 4 * i, 700 + 4 * i, 900 + 4 * i], [3, 3, 3])
        stats = vf.SpecDecodingStats()
        for na in (3, 2, 0):
            stats.observe_draft(3, na)
    deadline = time.monotonic() + 10
    while follower.fold.rows.get("steps", 0) < 2:
        follower.poll()  # waits for the writer thread, times nothing
        assert time.monotonic() < deadline
        time.sleep(0.01)
    view = follower.view()  # the provisional summary of the committed rows
    assert view.steps == 2 and view.graph_mode == "NONE"  # the third step is still open
    assert view.provisional and "DISAGREE" not in " ".join(f.evidence for f in view.findings)
    rec.close()
    findings = analyze(mlaprof.load(tmp_path / "run"), shadow={"aiter": "0.1.19"})
    titles = [f.title for f in findings]
    assert any("3 verify steps, 9 verify rows, 15 of 27 draft tokens accepted" in t for t in titles)
    shadow = [t for t in titles if t.startswith("[modelled from recorded batches (AITER 0.1.19")]
    # 3 rows x qlen 4 padded to 16 tokens: one padding row pinned to qlen collapses S
    # (v0.1.19: min(256 // (4 * 4), ceil(min_kv / 64)) = 8 with the fix, 1 with the bug)
    assert any("on 3 of 3 steps: S = 1 used, the fix gives 8" in t for t in shadow), (
        titles
    )  # the one collapse wording (analysis/collapse.py), tagged as modelled
    assert any("freeze S at 1-1 where these rows get 8-8" in t for t in shadow), titles
    pytest.importorskip("plotly", reason="the figure needs the notebook extra")
    from mlaprof.figures import shadow_splits

    fig = shadow_splits(mlaprof.load(tmp_path / "run"), aiter="0.1.19")  # the report's figure
    assert "modelled from recorded batches (AITER 0.1.19 on mi355x)" in fig.layout.title.text
    assert fig.layout.yaxis.title.text == "KV splits S (count)"
    ys = {t.name.split(" (")[0]: list(t.y) for t in fig.data}
    assert ys["S with the padding bug"] == [1, 1, 1] and ys["S with the fix"] == [8, 8, 8]


def _kill_writers(rec):
    """What a force-kill leaves: every database's lock dropped, no finish mark written."""
    for w in rec._writers.values():
        w._con.close()
        w._lock.release()


@pytest.mark.parametrize("drained", [True, False])
def test_an_engine_killed_after_a_clean_drain_reads_finished_drained_not_incomplete(
    fake_vllm, tmp_path, drained
):
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.store import load
    from mlaprof.store.liveness import DRAINED_REASON

    rec = _recorder(tmp_path, background=False)
    vllm_patches.install(rec)
    runner = vf.GPUModelRunner([vf.MLACommonMetadataBuilder()])
    runner.execute([800, 900], [3, 3])
    runner.execute([804, 904], [3, 3])
    if drained:
        rec.drain(final=True)  # the engine went idle: its last step is written
    _kill_writers(rec)  # e.g. vllm serve's shutdown killing the EngineCore
    with load(tmp_path / "run") as run:
        if drained:  # every step it ran is on disk: finished (drained), said so, nothing lost
            assert run.status == "finished" and run.reason == DRAINED_REASON
            assert len(_steps(run)) == 2
            state = build_summary(run).state
            assert state.status == "finished" and state.text.startswith("finished (drained")
        else:  # a step was still open when it died
            assert run.status == "incomplete" and run.reason is None
            assert len(_steps(run)) == 1


def test_a_drained_engine_stopped_by_a_signal_reads_finished_with_the_signal(fake_vllm, tmp_path):
    """SIGTERM after a clean drain (vLLM's shutdown), then the process dies without closing its
    record: finished (drained), and the report names the signal."""
    import signal

    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.integrations.vllm_plugin import watch_stop_signals
    from mlaprof.store import load

    rec = _recorder(tmp_path, background=False)
    vllm_patches.install(rec)
    vf.GPUModelRunner([vf.MLACommonMetadataBuilder()]).execute([800, 900], [3, 3])
    rec.drain(final=True)
    seen = []
    old_int = signal.getsignal(signal.SIGINT)
    old = signal.signal(signal.SIGTERM, lambda n, f: seen.append(n))  # the engine's own handler
    try:
        watch_stop_signals(rec)
        signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)
    assert seen == [signal.SIGTERM]  # the engine's handler still ran, after the record
    _kill_writers(rec)
    with load(tmp_path / "run") as run:
        assert run.status == "finished" and "SIGTERM" in (run.reason or "")
        state = build_summary(run).state
    assert state.text.startswith("finished (drained") and "SIGTERM" in state.text


def test_a_plugin_run_reads_syncs_not_checked(fake_vllm, tmp_path):
    """The plugin watches no region for syncs: its report said "syncs in region: 0 on 0
    layer(s)", which reads as checked and clean."""
    from mlaprof.analysis import summary
    from mlaprof.store import load

    rec = _recorder(tmp_path, background=False)
    vllm_patches.install(rec)
    vf.GPUModelRunner([vf.MLACommonMetadataBuilder()]).execute([800, 900], [3, 3])
    rec.close()

    with load(tmp_path / "run") as run:
        n = summary(run)["sync_counts"]
    assert not n["checked"] and n["watched_steps"] == 0
    assert n["text"].startswith("not checked")


# -- the model runner V2 (vLLM 0.34) ---------------------------------------------------------------
def test_model_runner_v2_records_the_drafters_graphs_apart(fake_vllm, tmp_path):
    """vLLM 0.34: the target's CudaGraphManager.dispatch opens the step (FULL, padded to its
    decode graph's request count); the speculator's own manager dispatches the draft decode,
    and a k with no captured draft graph runs eagerly: recorded per step, and a finding with
    its cost."""
    rec = _recorder(tmp_path)
    report = vllm_patches.install(rec)
    assert report[f"{vllm_patches.V2_GRAPHS_MODULE}.CudaGraphManager.dispatch"] == "patched"
    target = vf.ModelCudaGraphManager([1, 2, 4, 8], qlen=4)
    drafter = vf.SpeculatorCudaGraphManager([1, 2, 4, 8], qlen=1, captured_k=(3,))
    runner = vf.GPUModelRunnerV2([vf.AiterMLAMetadataBuilder()], target, drafter)
    for k in (3, 3, 2):  # a K tier at 2 whose draft graph was never captured
        runner.execute_model(([1100, 300, 700], k), None)
        runner.sample_tokens(None)
    rec.close()
    run = mlaprof.load(tmp_path / "run")
    data = _steps(run)
    # the K tier at 2 verifies 3 tokens a request: the fake target has no graph for them
    assert [d["graph_mode"] for d in data] == ["FULL", "FULL", "NONE"]
    assert [d["padded_reqs"] for d in data] == [4, 4, 3]
    assert data[0]["drafts_from"] == "uniform" and data[0]["verify_rows"] == 3
    assert [d["drafter_graphs"] for d in data] == [[["FULL", 4, 4]], [["FULL", 4, 4]],
                                                   [["NONE", 4, 4]]]  # fmt: skip
    ev = run.events
    eager = ev[ev.kind == "drafter-graph-eager"]
    assert len(eager) == 1 and "3 requests" not in eager.message.iloc[0]
    from mlaprof.analysis.run_summary import analyze

    found = [f for f in analyze(run) if "drafter's draft decode ran outside" in f.title]
    assert len(found) == 1 and "in 1 of 3 engine steps" in found[0].title
    assert "median step" in found[0].evidence and found[0].severity == "warning"


def test_a_drafter_capture_failure_is_recorded_then_raised(fake_vllm, tmp_path):
    rec = _recorder(tmp_path)
    vllm_patches.install(rec)
    drafter = vf.SpeculatorCudaGraphManager([1, 2], qlen=1,
                                            fail="cudaErrorStreamCaptureUnsupported")  # fmt: skip
    with pytest.raises(RuntimeError, match="cudaErrorStreamCaptureUnsupported"):
        drafter.capture(None, "Capturing decode CUDA graphs")
    vf.ModelCudaGraphManager([1, 2], qlen=4).capture(None, "Capturing CUDA graphs")
    rec.close()
    run = mlaprof.load(tmp_path / "run")
    ev = run.events[run.events.kind == "cudagraph-capture"]
    msgs = sorted(ev.message)
    assert msgs[0].startswith("drafter graph capture (Capturing decode CUDA graphs) failed")
    assert msgs[1] == "target model captured 2 graphs (Capturing CUDA graphs)"
    from mlaprof.analysis.run_summary import analyze

    found = [f for f in analyze(run) if "drafter's graph capture failed" in f.title]
    assert len(found) == 1 and found[0].severity == "critical"
    assert "cudaErrorStreamCaptureUnsupported" in found[0].title


def test_a_runner_module_vllm_removed_is_named_gone(fake_vllm, monkeypatch):
    """vLLM 0.34 has no vllm/v1/worker/gpu_model_runner.py: each of its targets is reported
    gone with what the plugin records instead, the rest is patched."""
    import sys

    monkeypatch.delitem(sys.modules, vllm_patches.RUNNER_MODULE)
    report = vllm_patches.install(_recorder(None))
    gone = {k: v for k, v in report.items() if v.startswith("gone:")}
    assert set(gone) == set(vllm_patches.GONE)
    assert all("vLLM 0.34 removed vllm/v1/worker/gpu_model_runner.py" in v for v in gone.values())
    assert report[f"{vllm_patches.V2_RUNNER_MODULE}.GPUModelRunner.execute_model"] == "patched"
