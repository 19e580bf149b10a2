"""mlaprof's vLLM 0.34 rules against vLLM 0.34.0's own functions, executed on the CPU.

vLLM 0.34 ships CUDA wheels only and cannot be installed here, so its pure functions are compiled
out of the unpacked wheel (``tests/vllm_src.py``; downloaded into ``~/.cache`` by
``scripts/vllm_wheels.sh`` when missing) and run on generated cases against mlaprof's model:

- capture sizes: ``VllmConfig._set_cudagraph_sizes`` / ``_split_cudagraph_capture_sizes`` /
  ``get_draft_decode_cudagraph_request_sizes`` (``vllm/config/vllm.py``) and the grids of
  ``vllm/config/compilation.py``, against :func:`mlaprof.capture_sizes.capture_plan`;
- dispatch: ``CudaGraphManager._init_candidates`` and ``dispatch``
  (``vllm/v1/worker/gpu/cudagraph_utils.py``), against ``CapturePlan.dispatch``;
- the Triton verify's split count (``verify_num_kv_splits``,
  ``vllm/v1/attention/ops/triton_decode_attention.py``) against the ``vllm-triton-verify`` policy;
- routing: ``AiterMLAHelper.use_gluon_verify`` / ``use_gluon_decode``,
  ``_asm_causal_verify_unsupported`` and the ``use_triton_verify`` and ``use_persistent_metadata``
  expressions of ``AiterMLAMetadataBuilder._build_decode`` (``rocm_aiter_mla.py``), against
  :func:`mlaprof.splits.routing.verify_route` for ``0.34.0``.

What is faked: the platform probes (``current_platform``, ``get_cdna_version``, the gluon build
probe, the small-head mode env var), vLLM's logger and ``triton.cdiv``; the configs are plain
namespaces with the fields those functions read.
"""

from __future__ import annotations

import enum
import itertools
import math
import random
import sys
import types
from collections import defaultdict
from dataclasses import dataclass, replace
from itertools import groupby, product
from pathlib import Path
from typing import Any

import pytest

from mlaprof.capture_sizes import capture_plan, capture_sizes
from mlaprof.splits.policies import SplitInput, vllm_triton_verify
from mlaprof.splits.routing import RouteConfig, verify_route
from tests.vllm_src import RecordingLogger, evaluate, expression, load, source

V = source("0.34.0")
COMPILATION = V / "config/compilation.py"
CONFIG = V / "config/vllm.py"
GRAPHS = V / "v1/worker/gpu/cudagraph_utils.py"
AITER_MLA = V / "v1/attention/backends/mla/rocm_aiter_mla.py"
TRITON_DECODE = V / "v1/attention/ops/triton_decode_attention.py"
BIG = 1 << 40  # mlaprof's "max_num_batched_tokens not limiting"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _base_ns() -> dict[str, Any]:
    ns: dict[str, Any] = {
        "bisect": __import__("bisect"), "math": math, "enum": enum, "cdiv": cdiv,
        "logger": RecordingLogger(), "Iterable": Any, "Mapping": Any, "Callable": Any,
        "product": product, "groupby": groupby, "defaultdict": defaultdict,
        "replace": replace, "dataclass": dataclass, "itertools": itertools, "Any": Any,
    }  # fmt: skip
    load(COMPILATION, ["CUDAGraphMode", "decode_cudagraph_capture_shapes",
                       "decode_cudagraph_capture_max_tokens", "_walk_grid",
                       "prefill_cudagraph_capture_grid", "varlen_decode_cudagraph_capture_grid",
                       "decode_cudagraph_capture_grid"], ns)  # fmt: skip
    return ns


@pytest.fixture(scope="module")
def ns(request: pytest.FixtureRequest) -> dict[str, Any]:
    ns = _base_ns()
    load(CONFIG, ["VllmConfig._set_cudagraph_sizes", "VllmConfig._split_cudagraph_capture_sizes",
                  "VllmConfig.get_decode_cudagraph_query_lens",
                  "VllmConfig.get_draft_decode_cudagraph_request_sizes",
                  "VllmConfig.get_varlen_decode_cudagraph_token_sizes"], ns)  # fmt: skip
    load(GRAPHS, ["BatchExecutionDescriptor", "_is_compatible",
                  "CudaGraphManager._init_candidates", "CudaGraphManager.dispatch"], ns)  # fmt: skip
    # `from vllm.platforms import current_platform` inside the functions: not SM100
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_device_capability_family=lambda c: False)
    mp = pytest.MonkeyPatch()
    mp.setitem(sys.modules, "vllm.platforms", platforms)
    if "vllm" not in sys.modules:
        mp.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    request.addfinalizer(mp.undo)
    return ns


def _bind(obj: Any, holder: Any, *names: str) -> None:
    for n in names:
        setattr(obj, n, types.MethodType(getattr(holder, n), obj))


def vllm_sizes(ns: dict[str, Any], mns: int, k: int, explicit: list[int] | None,
               mnt: int | None, method: str | None,
               mode_name: str = "FULL_AND_PIECEWISE",
               decode_reqs: list[int] | None = None) -> Any:  # fmt: skip
    """vLLM 0.34's resolved compilation config for these engine settings (``decode_reqs``: a
    ``decode_cudagraph_capture_request_sizes`` list, as plan-capture's flag sets it)."""
    mode = ns["CUDAGraphMode"][mode_name]
    cc = types.SimpleNamespace(
        cudagraph_mode=mode, max_cudagraph_capture_size=None,
        cudagraph_capture_sizes=list(explicit) if explicit else None,
        prefill_cudagraph_capture_token_sizes=None, max_prefill_cudagraph_capture_tokens=None,
        decode_cudagraph_capture_request_sizes=decode_reqs,
        max_decode_cudagraph_capture_requests=None,
        max_decode_cudagraph_capture_tokens=None, post_init_cudagraph_sizes=lambda: None,
    )  # fmt: skip
    spec = None
    if k:
        spec = types.SimpleNamespace(
            method=method, enable_adaptive_verification=False,
            uses_dynamic_speculative_decoding=lambda: False,
            use_multi_module_mtp=lambda: False, use_gemma4_mtp=lambda: False,
        )  # fmt: skip
    cfg = types.SimpleNamespace(
        model_config=types.SimpleNamespace(enforce_eager=False), compilation_config=cc,
        scheduler_config=types.SimpleNamespace(max_num_seqs=mns,
                                               max_num_batched_tokens=mnt or BIG),
        speculative_config=spec, num_speculative_tokens=k, uniform_decode_query_len=1 + k,
        performance_mode="balanced",
    )  # fmt: skip
    _bind(cfg, ns["VllmConfig"], "_set_cudagraph_sizes", "_split_cudagraph_capture_sizes",
          "get_decode_cudagraph_query_lens", "get_draft_decode_cudagraph_request_sizes",
          "get_varlen_decode_cudagraph_token_sizes")  # fmt: skip
    log = ns["logger"] = RecordingLogger()  # this call's lines only
    cfg._set_cudagraph_sizes()
    cfg.log = log.lines
    return cfg


def vllm_manager(ns: dict[str, Any], cfg: Any) -> Any:
    """vLLM 0.34's CudaGraphManager tables for a resolved config (no LoRA, no DBO)."""
    q = cfg.uniform_decode_query_len
    mns = cfg.scheduler_config.max_num_seqs
    cfg.cache_config = types.SimpleNamespace(use_kda_recoverssm=False)
    m = types.SimpleNamespace(
        cudagraph_mode=cfg.compilation_config.cudagraph_mode, compilation_config=cfg.compilation_config,
        decode_request_sizes=None, max_num_reqs=mns, vllm_config=cfg, varlen_decode=False,
        decode_max_reqs={q: mns}, decode_query_len=q, lora_capture_cases=[0],
        _maybe_ubatch_twin=lambda d: None, _capture_descs={}, _decode_descs={}, _candidates={},
        _resolve_effective_loras=lambda n: n, _graphs_captured=True,
    )  # fmt: skip
    _bind(m, ns["CudaGraphManager"], "_init_candidates", "dispatch")
    m._init_candidates()
    return m


def _cases(n: int, seed: int) -> list[tuple[int, int, list[int] | None, int | None, str]]:
    rng = random.Random(seed)
    out = [(6, 1, [40], None, "ngram"), (8, 3, [60], None, "mtp"), (8, 7, [8, 96], None, "mtp"),
           (256, 3, None, None, "mtp"), (256, 0, None, None, "ngram")]  # fmt: skip
    for _ in range(n):
        mns = rng.choice([1, 2, 3, 5, 6, 8, 16, 24, 48, 64, 100, 128, 256, 300, 512, 1024])
        k = rng.choice([0, 1, 2, 3, 4, 5, 7, 15])
        explicit = None
        if rng.random() < 0.35:
            explicit = sorted(rng.sample(range(1, 700), rng.randint(1, 6)))
        mnt = None if rng.random() < 0.6 else rng.randint(mns, mns * (1 + k) * 3 + 64)
        out.append((mns, k, explicit, mnt, rng.choice(["mtp", "eagle", "ngram", "eagle3"])))
    return out


CASES = _cases(300, 34)


@pytest.mark.parametrize("chunk", range(6))
def test_capture_sizes_are_vllm_034s(ns: dict[str, Any], chunk: int) -> None:
    for mns, k, explicit, mnt, method in CASES[chunk::6]:
        cfg = vllm_sizes(ns, mns, k, explicit, mnt, method)
        cc = cfg.compilation_config
        plan = capture_plan("vllm-0.34", mns, k, explicit, mnt, method)
        case = (mns, k, explicit, mnt, method)
        assert plan.tokens == cc.cudagraph_capture_sizes, case
        assert plan.mode == cc.cudagraph_mode.name, case
        # vLLM's lines about the list (its deprecation notice aside: every explicit list gets it)
        logged = [(lv, m) for lv, m in cfg.log if "are deprecated" not in m]
        assert plan.log == logged, case
        assert plan.piecewise == cc.prefill_cudagraph_capture_token_sizes, case
        assert plan.draft == [
            n for n, _ in ns["decode_cudagraph_capture_shapes"](
                cfg.get_draft_decode_cudagraph_request_sizes(), {1: mns},
                min(mnt or BIG, BIG))
        ], case  # fmt: skip


@pytest.mark.parametrize("chunk", range(6))
def test_dispatch_is_vllm_034s(ns: dict[str, Any], chunk: int) -> None:
    """Every batch size 1..max_num_seqs: the graph mode, its token count and the rows."""
    for mns, k, explicit, mnt, method in CASES[chunk::6]:
        q = 1 + k
        mgr = vllm_manager(ns, vllm_sizes(ns, mns, k, explicit, mnt, method))
        plan = capture_plan("vllm-0.34", mns, k, explicit, mnt, method)
        for b in range(1, mns + 1):
            desc = mgr.dispatch(b, b * q, q, 0, q)
            want = (desc.cg_mode.name, desc.num_reqs or b)
            d = plan.dispatch(b)
            size = desc.num_tokens if desc.cg_mode.name != "NONE" else None
            assert (d.mode, d.rows) == want and d.size == size, (mns, k, explicit, mnt, b)


def test_the_issue_cells_are_vllm_034s(ns: dict[str, Any]) -> None:
    """Size 40 at qlen 2 and 6 seqs runs FULL on 6 rows in a 12-token graph in vLLM 0.34."""
    mgr = vllm_manager(ns, vllm_sizes(ns, 6, 1, [40], None, "ngram"))
    desc = mgr.dispatch(5, 10, 2, 0, 2)
    assert (desc.cg_mode.name, desc.num_reqs, desc.num_tokens) == ("FULL", 6, 12)
    d = capture_plan("vllm-0.34", 6, 1, [40]).dispatch(5)
    assert (d.mode, d.rows, d.size) == ("FULL", 6, 12)


def test_every_size_above_max_num_batched_tokens_runs_eager_as_in_034(ns: dict[str, Any]) -> None:
    """Every explicit size above max_num_batched_tokens: vLLM 0.34 keeps none, logs the
    override and "No CUDA graph capture sizes are left" (``config/vllm.py`` L2532-2545,
    L2733-2737), sets cudagraph_mode NONE and runs every batch eagerly; mlaprof raised
    "every capture size of [...] is above max_num_batched_tokens" instead."""
    checked = 0
    for mns, k, explicit, mnt in ((64, 3, [600, 700], 512), (8, 1, [40], 16), (6, 0, [7, 9], 6),
                                  (256, 7, [4096, 9000, 4096], 2048)):  # fmt: skip
        cfg = vllm_sizes(ns, mns, k, explicit, mnt, "mtp")
        cc = cfg.compilation_config
        assert (cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size) == ([], 0)
        assert cc.cudagraph_mode.name == "NONE"
        plan = capture_plan("vllm-0.34", mns, k, explicit, mnt, "mtp")
        assert (plan.tokens, plan.decode, plan.piecewise, plan.draft) == ([], [], [], [])
        assert plan.mode == "NONE" and plan.note and "runs eagerly" in plan.note
        assert plan.log == [x for x in cfg.log if "are deprecated" not in x[1]]
        assert (
            plan.log[-1]
            == ("INFO", cfg.log[-1][1])
            == ("INFO", "No CUDA graph capture sizes are left; setting cudagraph_mode to NONE.")
        )
        mgr = vllm_manager(ns, cfg)
        for b in range(1, mns + 1):
            desc = mgr.dispatch(b, b * (1 + k), 1 + k, 0, 1 + k)
            assert desc.cg_mode.name == plan.dispatch(b).mode == "NONE", (mns, k, b)
            checked += 1
    assert checked == 64 + 8 + 6 + 256


def test_piecewise_capture_sizes_are_vllm_034s(ns: dict[str, Any]) -> None:
    """cudagraph_mode PIECEWISE captures a graph per shared token size, the uniform-decode sizes
    n * qlen included (``config/vllm.py`` L2500-2502, L2645): 3 tokens at 1 seq and 2 spec
    tokens; mlaprof had the bare token grid [1, 2, 4]. NONE captures nothing."""
    for mns, k, mnt in product([1, 2, 3, 5, 6, 8, 33, 100, 256, 300], range(8), [None, 7, 513]):
        if mnt is not None and mnt < mns:
            continue
        mgr = vllm_manager(ns, vllm_sizes(ns, mns, k, None, mnt, "mtp", "PIECEWISE"))
        want = sorted(d.num_tokens for d in mgr._capture_descs[ns["CUDAGraphMode"].PIECEWISE])
        assert capture_sizes(mns, k, "PIECEWISE", "vllm-0.34", mnt) == want, (mns, k, mnt)
        none = vllm_sizes(ns, mns, k, None, mnt, "mtp", "NONE").compilation_config
        assert capture_sizes(mns, k, "NONE", "vllm-0.34", mnt) == none.cudagraph_capture_sizes
    assert capture_sizes(1, 2, "PIECEWISE", "vllm-0.34") == [1, 2, 3, 4]


@pytest.mark.parametrize("chunk", range(3))
def test_piecewise_dispatch_over_the_kept_sizes_is_vllm_034s(
    ns: dict[str, Any], chunk: int
) -> None:
    """cudagraph_mode PIECEWISE: every batch size's graph, token count and rows as 0.34's own
    CudaGraphManager dispatches it, on the generated cases (explicit lists partly or wholly
    above max_num_batched_tokens among them): a batch above the largest kept size runs
    eagerly. mlaprof read every PIECEWISE cell PIECEWISE, whatever its size."""
    from mlaprof.capture_sizes import piecewise_plan

    eager = 0
    for mns, k, explicit, mnt, method in CASES[chunk::3]:
        q = 1 + k
        cfg = vllm_sizes(ns, mns, k, explicit, mnt, method, "PIECEWISE")
        mgr = vllm_manager(ns, cfg)
        plan = piecewise_plan("vllm-0.34", mns, k, explicit, mnt)
        want = sorted(
            d.num_tokens for d in mgr._capture_descs.get(ns["CUDAGraphMode"].PIECEWISE, [])
        )
        case = (mns, k, explicit, mnt)
        assert (plan.tokens, plan.mode) == (want, cfg.compilation_config.cudagraph_mode.name), case
        for b in range(1, mns + 1):
            desc = mgr.dispatch(b, b * q, q, 0, q)
            d = plan.dispatch(b)
            size = desc.num_tokens if desc.cg_mode.name != "NONE" else None
            assert (d.mode, d.size, d.rows) == (desc.cg_mode.name, size, desc.num_reqs or b), case
            eager += d.mode == "NONE"
    if eager < 100:
        raise AssertionError(f"only {eager} eager cells compared")


def test_plan_capture_proposals_are_kept_whole_by_vllm_034(ns: dict[str, Any]) -> None:
    """plan-capture's ``decode_cudagraph_capture_request_sizes`` for random batch mixes under a
    limiting max_num_batched_tokens: vLLM 0.34's own ``_split_cudagraph_capture_sizes`` and
    CudaGraphManager capture every proposed count as given (none dropped, none captured at the
    cap: ``decode_cudagraph_capture_shapes``, ``config/compilation.py`` L54-68), and the plan
    mlaprof evaluates the proposal with dispatches every batch as vLLM does. mlaprof proposed
    counts above ``max_num_batched_tokens // qlen``, which vLLM captures at that count or not at
    all."""
    from mlaprof.capture_sizes import proposal_plan
    from mlaprof.whatif.plan import make_plan

    rng = random.Random(3434)
    limited = 0
    for _ in range(150):
        mns, k = rng.choice([4, 8, 16, 64, 100, 256]), rng.choice([0, 1, 2, 3, 5, 7])
        q = 1 + k
        mnt = rng.choice([None, mns, rng.randint(mns, mns * q + 8)])
        counts = {rng.randint(1, mns): rng.randint(1, 40) for _ in range(rng.randint(1, 10))}
        default = capture_plan("vllm-0.34", mns, k, None, mnt)
        plan = make_plan(counts, q, mns, default.tokens, "d", "t", None,
                         max_graphs=rng.choice([None, 2, 4]), cover_all=rng.random() < 0.3,
                         default_plan=default, max_num_batched_tokens=mnt)  # fmt: skip
        reqs = [s // q for s in plan.proposed.sizes]
        limited += any(b * q > (mnt or BIG) for b in counts)
        cfg = vllm_sizes(ns, mns, k, None, mnt, "ngram", decode_reqs=reqs)
        mgr = vllm_manager(ns, cfg)
        case = (mns, k, mnt, counts, reqs)
        captured = sorted(d.num_reqs for d in mgr._capture_descs.get(ns["CUDAGraphMode"].FULL, []))
        assert captured == reqs and not cfg.log, case
        mine = proposal_plan("vllm-0.34", plan.proposed.sizes, mns, k, mnt)
        assert mine.tokens == cfg.compilation_config.cudagraph_capture_sizes, case
        for b in range(1, mns + 1):
            desc = mgr.dispatch(b, b * q, q, 0, q)
            d = mine.dispatch(b)
            size = desc.num_tokens if desc.cg_mode.name != "NONE" else None
            assert (d.mode, d.size, d.rows) == (desc.cg_mode.name, size, desc.num_reqs or b), case
    if limited < 30:
        raise AssertionError(f"only {limited} mixes with a batch above the limit")


@pytest.fixture(scope="module")
def splits() -> Any:
    ns: dict[str, Any] = {"Any": Any, "triton": types.SimpleNamespace(cdiv=cdiv)}
    load(TRITON_DECODE, ["_VERIFY_BASE_CONFIG", "_VERIFY_SMALL_CONFIG", "_VERIFY_LARGE_CONFIG",
                         "_VERIFY_SMALL_MAX_ROWS", "verify_row_blocks", "select_verify_config",
                         "verify_num_kv_splits"], ns)  # fmt: skip
    return ns["verify_num_kv_splits"]


def test_triton_verify_splits_are_vllm_034s(splits: Any) -> None:
    rng = random.Random(340)
    for _ in range(20000):
        b, q = rng.randint(1, 512), rng.randint(2, 16)
        h, units = rng.choice([1, 4, 8, 12, 16, 24, 32, 64, 128]), rng.choice([80, 132, 256, 304])
        ml = rng.choice(
            [1, 100, 128, 129, 1024, 4096, 32768, 131072, 1 << 20, rng.randint(1, 1 << 21)]
        )
        x = SplitInput(b, q, h, 1, ml, b * ml, units)
        assert vllm_triton_verify(x) == splits(ml, b, q, h, units), (b, q, h, units, ml)


def test_the_frozen_verify_split_count_of_the_case_read() -> None:
    """2 requests on an MI300X (304 CUs) at 8 heads, qlen 6, max_model_len 131072: 152."""
    assert vllm_triton_verify(SplitInput(2, 6, 8, 1, 131072, 2, 304)) == 152


def _built_verify_splits_call() -> Any:
    """``triton_verify_num_kv_splits = _triton_verify_num_kv_splits(...)`` of ``_build_decode``."""
    import ast

    tree = ast.parse(AITER_MLA.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef)
               and n.name == "AiterMLAMetadataBuilder")  # fmt: skip
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_build_decode")
    return next(n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                and ast.unparse(n.targets[0]) == "triton_verify_num_kv_splits"
                and isinstance(n.value, ast.Call))  # fmt: skip


def test_triton_verify_splits_as_built_are_vllm_034s(ns: dict[str, Any], splits: Any) -> None:
    """The S ``_build_decode`` hands the Triton verify (L1943-1950) on every step, as mlaprof's
    step_splits has it used: from max_model_len on a FULL-graph engine's FULL, PIECEWISE and
    eager steps alike, from the batch's longest row without FULL graphs. 100 requests of 100
    tokens at qlen 6 run eagerly at 256 seqs: 3 splits, mlaprof had 1 from the live length."""
    from mlaprof.capture_sizes import piecewise_plan
    from mlaprof.devices import DEVICES
    from mlaprof.metadata import batch_shape, build_metadata
    from mlaprof.step_splits import step_splits

    env_ns: dict[str, Any] = {"envs": types.SimpleNamespace(VLLM_BATCH_INVARIANT=False),
                              "verify_num_kv_splits": splits}  # fmt: skip
    load(AITER_MLA, ["_triton_verify_num_kv_splits"], env_ns)
    call, mode = _built_verify_splits_call(), ns["CUDAGraphMode"]
    dev, heads, q, mml, mns = DEVICES["mi300x"], 8, 6, 131072, 256
    seen = set()
    for sizes, b, kv, engine in product([None, [12, 601]], [1, 2, 5, 85, 86, 100, 256],
                                        [100, 5000], ["FULL_AND_PIECEWISE", "PIECEWISE"]):  # fmt: skip
        plan = capture_plan("vllm-0.34", mns, q - 1, sizes)  # [12, 601]: 5 requests PIECEWISE
        if engine == "PIECEWISE":  # its own graphs: no FULL decode graph
            plan = piecewise_plan("vllm-0.34", mns, q - 1, sizes)
        shape = batch_shape([kv] * b, q, "FULL" if engine != "PIECEWISE" else "PIECEWISE", plan)
        meta = build_metadata(shape, 1, "active-rows", shuffle_pages=False)
        builder = types.SimpleNamespace(
            _triton_verify_max_seq_len=mml, _decode_num_heads=heads, _sm_count=dev.units,
            compilation_config=types.SimpleNamespace(cudagraph_mode=mode[engine]),
        )  # fmt: skip
        want = evaluate(call, AITER_MLA, {**env_ns, "self": builder, "max_seq_len": meta.max_seq_len,
                                          "num_reqs": meta.num_reqs, "max_qo_len": q})  # fmt: skip
        (sp,) = step_splits(meta, heads, dev, shape.graph_mode, mml, ["vllm-triton-verify"],
                            full_graphs=engine != "PIECEWISE")  # fmt: skip
        assert sp.used == want, (sizes, b, kv, engine, shape.graph_mode)
        seen.add((engine, shape.graph_mode))
    assert {m for e, m in seen if e != "PIECEWISE"} == {"FULL", "NONE", "PIECEWISE"}
    eager = build_metadata(batch_shape([100] * 100, q, "FULL", capture_plan("vllm-0.34", mns, 5)))
    (sp,) = step_splits(eager, heads, dev, "NONE", mml, ["vllm-triton-verify"], full_graphs=True)
    assert (sp.used, sp.deserved) == (3, 1)


@pytest.fixture(scope="module")
def routing(request: pytest.FixtureRequest) -> dict[str, Any]:
    quantized = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla")
    state: dict[str, Any] = {"arch": "gfx950", "mode": "auto"}
    ns: dict[str, Any] = {
        "is_quantized_kv_cache": lambda d: d in quantized,
        "_aiter_mla_small_head_mode": lambda: state["mode"],
        "_gluon_mla_decode_supported": lambda: state["arch"] == "gfx950",
        "_aiter_mla_native_h24_supported": lambda: False,
        "logger": RecordingLogger(), "_state": state,
    }  # fmt: skip
    load(AITER_MLA, ["_GLUON_MAX_KV_CACHE_BYTES", "_gluon_kv_cache_in_bounds",
                     "_asm_causal_verify_unsupported",
                     "AiterMLAHelper._AITER_MIN_MLA_HEADS",
                     "AiterMLAHelper._ASM_PADDED_MAX_PS_QLEN",
                     "AiterMLAHelper.use_gluon_verify", "AiterMLAHelper.use_gluon_decode",
                     "AiterMLAHelper.get_actual_mla_num_heads"], ns)  # fmt: skip
    rocm = types.ModuleType("vllm.platforms.rocm")
    cdna = {"gfx940": 3, "gfx941": 3, "gfx942": 3, "gfx950": 4}
    rocm.get_cdna_version = lambda: cdna[state["arch"]]
    mp = pytest.MonkeyPatch()
    mp.setitem(sys.modules, "vllm.platforms.rocm", rocm)
    for name in ("vllm", "vllm.platforms"):
        if name not in sys.modules:
            mp.setitem(sys.modules, name, types.ModuleType(name))
    request.addfinalizer(mp.undo)
    ns["triton_expr"] = expression(AITER_MLA, "AiterMLAMetadataBuilder._build_decode",
                                   "use_triton_verify")  # fmt: skip
    ns["ps_expr"] = expression(AITER_MLA, "AiterMLAMetadataBuilder._build_decode",
                               "use_persistent_metadata")  # fmt: skip
    return ns


def vllm_route(ns: dict[str, Any], cfg: RouteConfig) -> str:
    """The path vLLM 0.34's builder and forward_mqa take (DCP 1): gluon decode, gluon verify,
    Triton verify, then the ASM decode with or without the persistent schedule."""
    ns["_state"].update(arch=cfg.arch, mode=cfg.small_head_mode)
    h = ns["AiterMLAHelper"]
    gd = h.use_gluon_decode(cfg.heads, cfg.qlen, cfg.kv_cache_dtype, cfg.kv_cache_bytes)
    gv = h.use_gluon_verify(cfg.heads, cfg.qlen, cfg.kv_cache_dtype, 1, cfg.causal,
                            cfg.kv_cache_bytes)  # fmt: skip
    mtp = cfg.mtp_decode_qlen or cfg.qlen
    builder = types.SimpleNamespace(
        _use_triton_verify=ns["_asm_causal_verify_unsupported"](cfg.heads, mtp, cfg.kv_cache_dtype, 1),
        _decode_num_heads=cfg.heads, _kv_cache_dtype_str=cfg.kv_cache_dtype, _mtp_decode_qlen=mtp,
    )  # fmt: skip
    env = {**ns, "self": builder, "causal": cfg.causal, "use_gluon_verify": gv,
           "use_gluon_decode": gd, "max_qo_len": cfg.qlen, "AiterMLAHelper": h,
           "_is_row_view_dcp_route": lambda r: False, "dcp_route": None}  # fmt: skip
    tv = evaluate(ns["triton_expr"], AITER_MLA, env)
    env["use_triton_verify"] = tv
    ps = evaluate(ns["ps_expr"], AITER_MLA, env)
    if gd:
        return "gluon-decode"
    if gv:
        return "gluon-verify"
    if tv:
        return "triton-verify"
    return "asm-persistent" if ps else "asm"


def test_routing_is_vllm_034s(routing: dict[str, Any]) -> None:
    rng = random.Random(3400)
    seen = set()
    for _ in range(6000):
        cfg = RouteConfig(
            heads=rng.choice([1, 2, 4, 5, 8, 12, 15, 16, 24, 32, 64, 96, 128]),
            qlen=rng.randint(1, 9),
            kv_cache_dtype=rng.choice(["auto", "auto", "fp8", "fp8_e4m3"]),
            arch=rng.choice(["gfx950", "gfx942"]),
            causal=rng.random() < 0.85,
            kv_cache_bytes=rng.choice([None, 1 << 30, 3 << 30]),
            small_head_mode=rng.choice(["auto", "auto", "gluon", "asm"]),
        )
        cfg = replace(cfg, mtp_decode_qlen=max(cfg.qlen, rng.choice([cfg.qlen, 4, 6])))
        want = vllm_route(routing, cfg)
        seen.add(want)
        assert verify_route(cfg, "0.34.0").path == want, cfg
    assert seen == {"gluon-decode", "gluon-verify", "triton-verify", "asm-persistent", "asm"}


def test_the_mi300x_spec5_route_is_the_triton_verify(routing: dict[str, Any]) -> None:
    """8 heads (Kimi-K2 at TP8), qlen 6, bf16, MI300X: 0.32 took the plain ASM decode."""
    cfg = RouteConfig(8, 6, "auto", "gfx942", mtp_decode_qlen=6)
    assert vllm_route(routing, cfg) == verify_route(cfg, "0.34.0").path == "triton-verify"
    assert verify_route(cfg, "0.32.0").path == "asm"
    fp8_128 = RouteConfig(128, 6, "fp8", "gfx942", mtp_decode_qlen=6)
    assert vllm_route(routing, fp8_128) == verify_route(fp8_128, "0.34.0").path == "asm-persistent"


def test_the_source_is_034s() -> None:
    assert "0.34.0" in (V / "_version.py").read_text()


def _build_decode_nodes(pkg: Path) -> dict[str, str]:
    """The statements of ``_build_decode`` mlaprof's metadata builder models: the kernel
    sequence lengths of padding rows and ``min_kv_seq_len`` over active rows."""
    import ast

    tree = ast.parse((pkg / "v1/attention/backends/mla/rocm_aiter_mla.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef)
               and n.name == "AiterMLAMetadataBuilder")  # fmt: skip
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_build_decode")
    out: dict[str, str] = {}
    for node in ast.walk(fn):
        text = ast.unparse(node)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "use_gluon_verify":
            if "min_kv_seq_len" in text:
                out["min_kv_seq_len"] = ast.dump(node)
        elif (
            isinstance(node, ast.Assign)
            and ast.unparse(node.targets[0]) == "seq_lens_for_kernel"
            and "torch.where" in text
        ):
            out["seq_lens_for_kernel"] = ast.dump(node)
    return out


def test_build_decode_metadata_mlaprof_models_is_033s() -> None:
    """vLLM 0.34's ``_build_decode`` keeps 0.33's (= 0.32's, checked by running it in
    ``tests/e2e/test_vllm_differential.py``) padding-row kernel lengths (max_qo_len) and
    ``min_kv_seq_len`` over active rows on the gluon verify path: the same syntax trees."""
    new, old = _build_decode_nodes(V), _build_decode_nodes(source("0.33.0"))
    assert set(new) == {"min_kv_seq_len", "seq_lens_for_kernel"}
    assert new == old


def test_piecewise_scenario_steps_are_vllm_034s(ns: dict[str, Any]) -> None:
    """``mlaprof run --graph-mode PIECEWISE``'s steps (``metadata.step_shape``) as vLLM 0.34's
    CudaGraphManager dispatches them in cudagraph_mode PIECEWISE: a batch above the largest kept
    size runs eagerly; mlaprof's runs marked every PIECEWISE batch PIECEWISE."""
    from mlaprof.metadata import step_shape
    from mlaprof.scenario import Scenario

    eager = 0
    for mns, k in ((4, 3), (8, 1), (33, 0), (16, 7)):
        q = 1 + k
        for mnt in (None, mns, max(mns, mns * q - 1)):
            mgr = vllm_manager(ns, vllm_sizes(ns, mns, k, None, mnt, "mtp", "PIECEWISE"))
            for b in range(1, mns + 1):
                sc = Scenario(graph_mode="PIECEWISE", kv_lens=[300] * b, max_num_seqs=mns,
                              num_speculative_tokens=k, max_num_batched_tokens=mnt or 0,
                              vllm_version="0.34.0", target="mi355x")  # fmt: skip
                s = step_shape(sc, 0)
                desc = mgr.dispatch(b, b * q, q, 0, q)
                size = desc.num_tokens if desc.cg_mode.name != "NONE" else None
                want = (desc.cg_mode.name, size, desc.num_reqs or b)
                assert (s.graph_mode, s.capture_size, s.num_reqs) == want, (mns, k, mnt, b)
                eager += s.graph_mode == "NONE"
    if eager < 20:
        raise AssertionError(f"only {eager} eager steps compared")
