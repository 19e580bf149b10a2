"""Which stage-1 kernel the triton backend runs: the Gluon kernel on sm_90 for native verify,
the Triton kernel everywhere else. No GPU here: the device capability is faked; the Gluon
kernel itself is checked on the H200 (bench/verify_gluon.py)."""

from __future__ import annotations

import inspect
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")
pytest.importorskip("numpy")

from mlaprof.backends import triton_backend as tb  # noqa: E402
from mlaprof.backends.base import make_inputs  # noqa: E402
from mlaprof.errors import MlaprofError  # noqa: E402
from mlaprof.metadata import BatchShape, build_metadata  # noqa: E402

C = tb.LaunchConfig


def _q(qlen=4, heads=16, dtype=torch.bfloat16):
    qn = torch.zeros(2, qlen, heads, 512, dtype=dtype)
    qp = torch.zeros(2, qlen, heads, 64, dtype=dtype)
    kv = torch.zeros(100, 576, dtype=dtype)
    return qn, qp, kv


def test_auto_takes_gluon_on_sm90_for_native_verify():
    assert tb.use_gluon(C(), True, 4, False, _q())
    assert tb.use_gluon(C(), True, 2, False, _q(qlen=2))
    assert tb.use_gluon(C(), True, 64, False, _q(qlen=64))  # 64 positions x 1 head: 64 rows
    assert tb.use_gluon(C(), True, 4, False, _q(dtype=torch.float16))


@pytest.mark.parametrize(
    "hopper,qlen,flatten,tensors,why",
    [
        (False, 4, False, _q(), "not an sm_90"),
        (True, 1, False, _q(qlen=1), "decode"),
        (True, 4, True, _q(), "flattened"),
        (True, 65, False, _q(qlen=65), "over 64"),
        (True, 4, False, _q(dtype=torch.float32), "16-bit"),
        (True, 4, False, (*_q()[:2], torch.zeros(100, 576)), "16-bit"),  # mixed dtypes
        # a pool whose rows are not 16-byte multiples apart (576 + 4 elements)
        (True, 4, False, (*_q()[:2], torch.zeros(100, 580, dtype=torch.bfloat16)[:, :576]), "16-byte"),
        # a row that starts 2 bytes into its allocation
        (True, 4, False, (*_q()[:2], torch.zeros(100 * 576 + 1, dtype=torch.bfloat16)[1:].view(100, 576)), "16-byte"),
    ],
)  # fmt: skip
def test_auto_falls_back_to_triton(hopper, qlen, flatten, tensors, why):
    assert why in (tb.gluon_unsupported(C(), hopper, qlen, flatten, tensors) or "")
    assert not tb.use_gluon(C(), hopper, qlen, flatten, tensors)
    with pytest.raises(MlaprofError, match="Gluon kernel cannot run here"):
        tb.use_gluon(C(kernel="gluon"), hopper, qlen, flatten, tensors)


def test_forced_choices_and_bad_settings():
    assert not tb.use_gluon(C(kernel="triton"), True, 4, False, _q())
    assert tb.use_gluon(C(kernel="gluon"), True, 4, False, _q())
    with pytest.raises(MlaprofError, match="kernel must be"):
        tb.use_gluon(C(kernel="cuda"), True, 4, False, _q())
    for bad in (C(gluon_block_n=48), C(gluon_buffers=1), C(gluon_phases=4),
                C(gluon_overlap=True, gluon_phases=1), C(gluon_overlap=True)):  # fmt: skip
        assert not tb.use_gluon(bad, True, 4, False, _q())


def test_no_gluon_in_this_triton_falls_back(monkeypatch):
    monkeypatch.setattr(tb, "_GLUON", [None])  # as if triton.experimental.gluon were missing
    assert not tb.use_gluon(C(), True, 4, False, _q())
    with pytest.raises(MlaprofError, match="no Gluon"):
        tb.use_gluon(C(kernel="gluon"), True, 4, False, _q())


@pytest.mark.parametrize(
    "cap,hip,want", [((9, 0), None, True), ((8, 0), None, False), ((10, 0), None, False),
                     ((9, 0), "6.4", False)],
)  # fmt: skip
def test_is_hopper_reads_the_capability(monkeypatch, cap, hip, want):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: cap)
    monkeypatch.setattr(torch.version, "hip", hip)
    assert tb.is_hopper(torch.device("cuda")) is want
    assert not tb.is_hopper(torch.device("cpu"))


def _case(qlen, heads=4):
    meta = build_metadata(BatchShape([40, 23], qlen, 2, None, "FULL"), page_size=1, seed=3)
    inp = make_inputs(meta, heads, seed=7, device="cpu")
    return meta, inp


class _Launched(Exception):
    pass


CPU_ONLY = pytest.mark.skipif(
    torch.cuda.is_available(), reason="runs the Triton kernel through the CPU interpreter"
)


@CPU_ONLY
def test_forward_on_a_fake_sm90_launches_gluon_for_verify_only(monkeypatch):
    """On sm_90 the backend sends native verify to the Gluon launcher, decode to Triton."""
    seen = []

    def fake_launch(self, inp, meta, part_o, part_lse, s, cfg):
        seen.append((inp.q_nope.shape[1], s, cfg.gluon_block_n, cfg.gluon_buffers))
        raise _Launched

    monkeypatch.setattr(tb.TritonBackend, "_launch_gluon", fake_launch)
    be = tb.TritonBackend(C(block_n=16, stage2_heads=128, block_s=4))
    be._is_hopper = True  # the capability probe's cached answer
    meta, inp = _case(4)
    out = torch.empty(2, 4, 4, 512)
    # fp32 q/KV is not for the Gluon kernel: the Triton kernel runs, right
    be.forward(inp, meta, out, None, num_splits=2)
    assert be.last_launch["stage1"]["kernel"] == "triton" and not seen
    half = type(inp)(inp.q_nope.bfloat16(), inp.q_pe.bfloat16(), inp.kv_c.bfloat16(), inp.sm_scale)
    with pytest.raises(_Launched):
        be.forward(half, meta, out.bfloat16(), None, num_splits=2)
    assert seen == [(4, 2, 64, 2)]
    # decode (qlen 1) on the same GPU, bf16 as well: Triton (the interpreter's bf16 numbers are
    # not meaningful; the Triton kernel's are checked in test_triton_kernel.py)
    meta1, inp1 = _case(1)
    inp1 = type(inp1)(inp1.q_nope.bfloat16(), inp1.q_pe.bfloat16(), inp1.kv_c.bfloat16(),
                      inp1.sm_scale)  # fmt: skip
    be.forward(inp1, meta1, torch.empty(2, 1, 4, 512, dtype=torch.bfloat16), None, num_splits=2)
    assert be.last_launch["stage1"]["kernel"] == "triton" and len(seen) == 1
    # the same verify batch with the Triton kernel asked for: no Gluon launch
    forced = tb.TritonBackend(C(block_n=16, stage2_heads=128, block_s=4, kernel="triton"))
    forced._is_hopper = True
    forced.forward(half, meta, out.bfloat16(), None, num_splits=2)
    assert forced.last_launch["stage1"]["kernel"] == "triton" and len(seen) == 1


@CPU_ONLY
def test_cpu_default_never_asks_for_gluon(monkeypatch):
    """On the CPU nothing changes: the Gluon module is not even imported."""
    monkeypatch.setattr(tb, "_GLUON", [])

    def boom():
        raise AssertionError("the Gluon module was imported on the CPU")

    monkeypatch.setattr(tb, "_gluon_kernels", boom)
    be = tb.TritonBackend(C(block_n=16, stage2_heads=128, block_s=4))
    meta, inp = _case(4)
    inp = type(inp)(inp.q_nope.bfloat16(), inp.q_pe.bfloat16(), inp.kv_c.bfloat16(), inp.sm_scale)
    out = torch.empty(2, 4, 4, 512, dtype=torch.bfloat16)
    be.forward(inp, meta, out, None, num_splits=2)
    assert be.last_launch["stage1"]["kernel"] == "triton"
    with pytest.raises(MlaprofError, match="not an sm_90 GPU"):
        tb.TritonBackend(C(kernel="gluon")).forward(inp, meta, out, None, num_splits=2)


@pytest.mark.parametrize(
    "cfg,page,want",
    [
        (C(), 64, True),  # vLLM's 64-token blocks: a tile is one page
        (C(), 128, True),
        (C(), 1, False),  # AITER's page 1: the cp.async row gather
        (C(), 16, False),  # pages smaller than a tile
        (C(gluon_block_n=16), 16, True),
        (C(gluon_tma=False), 64, False),
        (C(gluon_overlap=True, gluon_lazy_sum=False), 64, False),  # loops of the gather kernel
        (C(gluon_lazy_sum=False), 64, False),
        (C(gluon_phases=1), 64, False),
    ],
)
def test_tma_only_where_pages_hold_whole_tiles(cfg, page, want):
    assert tb.tma_pages(cfg, page) is want


def test_decode_on_gluon_only_when_asked():
    assert "decode" in tb.gluon_unsupported(C(), True, 1, False, _q(qlen=1))
    assert tb.gluon_unsupported(C(gluon_decode=True), True, 1, False, _q(qlen=1)) is None
    assert "prefetch" in tb.gluon_unsupported(C(gluon_l2_prefetch=-1), True, 4, False, _q())


class _Recorder:
    """Stands in for a Gluon kernel: records the launch, checks it against the signature."""

    def __init__(self, kernel, seen):
        self.kernel, self.seen = kernel, seen

    def __getitem__(self, grid):
        def launch(*args, num_warps=4, **kwargs):  # num_warps: a launch option, no parameter
            params = list(self.kernel.arg_names)
            named = dict(zip(params, args, strict=False))
            if len(args) + len(kwargs) > len(params) or set(named) & set(kwargs):
                raise AssertionError("launch arguments do not fit the kernel's signature")
            missing = [p for p in params if p not in named and p not in kwargs
                       and self.kernel.params[params.index(p)].default is inspect.Parameter.empty]  # fmt: skip
            if missing:
                raise AssertionError(f"launch misses {missing}")
            self.seen.append((self.kernel.fn.__name__, grid, {**named, **kwargs}))

        return launch


KERNELS = ("mla_verify_stage1_hopper", "mla_verify_stage1_hopper_tma",
           "mla_verify_stage1_hopper_ws", "mla_verify_stage1_hopper_roles")  # fmt: skip


def _launch_stage1(monkeypatch, page: int, config, g=None):
    """Stage 1 launched by the backend on a Hopper (the capability probe's answer set) with
    every Gluon kernel replaced by a :class:`_Recorder`: ``(seen, meta, inp)``. Stage 2 is the
    Triton merge, not under test here."""
    g = g or pytest.importorskip("mlaprof.kernels.mla_verify_gluon")
    seen: list = []
    for name in KERNELS:
        monkeypatch.setattr(g, name, _Recorder(getattr(g, name), seen))
    meta = build_metadata(BatchShape([130, 64], 4, 2, None, "FULL"), page_size=page, seed=3)
    inp = make_inputs(meta, 16, seed=7, device="cpu")
    inp = type(inp)(inp.q_nope.bfloat16(), inp.q_pe.bfloat16(), inp.kv_c.bfloat16(), inp.sm_scale)
    _forward(config, inp, meta)
    return seen, meta, inp


def _launch_both(monkeypatch, page: int, config, splits: int):
    """Stage 1 and stage 2 launched by the backend on a Hopper, every Gluon kernel and the
    Triton merge replaced by a :class:`_Recorder`: ``(seen, backend)``."""
    g = pytest.importorskip("mlaprof.kernels.mla_verify_gluon")
    k = tb._kernels()
    seen: list = []
    for name in KERNELS:
        monkeypatch.setattr(g, name, _Recorder(getattr(g, name), seen))
    monkeypatch.setattr(k, "mla_verify_stage2", _Recorder(k.mla_verify_stage2, seen))
    meta = build_metadata(BatchShape([130, 64], 4, 2, None, "FULL"), page_size=page, seed=3)
    inp = make_inputs(meta, 16, seed=7, device="cpu")
    inp = type(inp)(inp.q_nope.bfloat16(), inp.q_pe.bfloat16(), inp.kv_c.bfloat16(), inp.sm_scale)
    be = tb.TritonBackend(config)
    be._is_hopper = True
    out = torch.empty(2, 4, 16, 512, dtype=torch.bfloat16)
    be.forward(inp, meta, out, None, num_splits=splits)
    return seen, be


def _forward(config, inp, meta) -> None:
    be = tb.TritonBackend(config)
    be._is_hopper = True
    be.skip_stage2 = True
    be.forward(inp, meta, torch.empty(2, 4, 16, 512, dtype=torch.bfloat16), None, num_splits=3)


@pytest.mark.parametrize("page", [1, 64])
def test_gluon_launch_fits_the_kernel_signature(monkeypatch, page):
    """The backend's launch of either fused Gluon stage 1 passes every parameter by its name's
    slot: page 64 takes the TMA kernel with descriptors over the pool, page 1 the gather kernel
    (the warpgroup-roles kernel off)."""
    seen, meta, inp = _launch_stage1(monkeypatch, page, C(gluon_roles="off"))
    ((name, grid, args),) = seen
    assert grid == (1, 2, 3)
    assert args["PAGE"] == page and args["kv_indices"] is meta.kv_indices
    assert args["num_splits"] == 3 and args["qlen"] == 4 and args["H"] == 16
    if page == 1:
        assert name == "mla_verify_stage1_hopper" and args["kv"] is inp.kv_c
    else:
        assert name == "mla_verify_stage1_hopper_tma" and args["kv"] is inp.kv_c
        assert args["stride_kv"] == 576
        assert list(args["kn_desc"].block_shape) == [64, 512]
        assert list(args["kp_desc"].block_shape) == [64, 64]
        assert args["kn_desc"].base is inp.kv_c


@pytest.mark.parametrize("page,chunks", [(1, 1), (64, 1), (64, 3)])
def test_warp_specialized_launch_fits_its_signature(monkeypatch, page, chunks):
    """``gluon_ws`` sends both layouts to the warp-specialized kernel: TMA descriptors and a
    small loader at pages of whole tiles, the cp.async row gather (no descriptors, the gather
    loader's registers) at page 1; the grid and contract are the other kernels'."""
    g = pytest.importorskip("mlaprof.kernels.mla_verify_gluon")
    seen, meta, inp = _launch_stage1(monkeypatch, page, C(gluon_ws=True, gluon_chunks=chunks), g)
    ((name, grid, args),) = seen
    assert name == "mla_verify_stage1_hopper_ws" and grid == (1, 2, 3)
    assert args["PAGE"] == page and args["kv"] is inp.kv_c and args["LOADS"] is True
    if page == 1:
        assert args["GATHER"] is True and args["kn_desc"] is None and args["CHUNKS"] == 1
        assert args["LOADER_REGS"] == g.GATHER_LOADER_REGS
    else:
        assert args["GATHER"] is False and args["CHUNKS"] == chunks
        assert list(args["kn_desc"].block_shape) == [64, 512]
        assert args["LOADER_REGS"] == g.LOADER_REGS
    # the compute alone (benchmarks): no copies asked of the loader
    seen.clear()
    _forward(C(gluon_ws=True, gluon_phases=2), inp, meta)
    assert seen[0][2]["LOADS"] is False


def test_chunked_tma_launch_and_option_checks(monkeypatch):
    seen, _, _ = _launch_stage1(monkeypatch, 64, C(gluon_chunks=9, gluon_early_issue=True))
    args = seen[0][2]
    assert args["CHUNKS"] == 9 and args["EARLY_ISSUE"] is True and args["LOADS"] is True
    assert "chunks" in tb.gluon_unsupported(C(gluon_chunks=2), True, 4, False, _q())
    for bad in (C(gluon_ws=True, gluon_l2_prefetch=1), C(gluon_ws=True, gluon_phases=1),
                C(gluon_ws=True, gluon_lazy_sum=False)):  # fmt: skip
        assert "gluon_ws" in tb.gluon_unsupported(bad, True, 4, False, _q())
    # the compute alone runs on the TMA kernel too; the loads alone only in the gather kernel
    assert tb.tma_pages(C(gluon_phases=2), 64) and not tb.tma_pages(C(gluon_phases=1), 64)


@pytest.mark.parametrize("page,roles,want", [
    (64, "all", "roles-tma"),  # the default at vLLM's 64-token blocks
    (1, "all", "roles-gather"),  # the default at AITER's page 1
    (1, "tma", "gather"),  # roles at pages of whole tiles only: the fused gather kernel
    (64, "off", "tma"),
])  # fmt: skip
def test_warpgroup_roles_kernel_choice_and_launch(monkeypatch, page, roles, want):
    """The roles kernel (4 warps in the default partition: warpgroup 0) takes pages of whole
    tiles by default with TMA descriptors and its loader warp's registers; asked for everywhere
    it gathers rows (no descriptors, a loader warpgroup)."""
    g = pytest.importorskip("mlaprof.kernels.mla_verify_gluon")
    seen, meta, inp = _launch_stage1(monkeypatch, page, C(gluon_roles=roles), g)
    ((name, grid, args),) = seen
    assert grid == (1, 2, 3) and args["kv"] is inp.kv_c
    got = {"mla_verify_stage1_hopper": "gather", "mla_verify_stage1_hopper_tma": "tma"}.get(name)
    if name == "mla_verify_stage1_hopper_roles":
        got = "roles-gather" if args["GATHER"] else "roles-tma"
        assert args["LOADS"] is True and args["P_REG"] is True  # P V from P in registers
        if args["GATHER"]:
            assert args["kn_desc"] is None
            assert args["LOADER_REGS"] == g.ROLES_GATHER_LOADER_REGS
            assert args["PV_REGS"] == g.ROLES_GATHER_PV_REGS
        else:
            assert list(args["kn_desc"].block_shape) == [64, 512]
            assert args["LOADER_REGS"] == g.LOADER_REGS and args["PV_REGS"] == g.ROLES_PV_REGS
        # three warpgroups' registers within the SM's 64K (the default partition's the rest)
        assert 128 * (args["LOADER_REGS"] + args["PV_REGS"] + 232) <= 65536
    assert got == want


def test_roles_only_with_the_default_loop():
    """The other kernels' options keep their kernels: chunk mbarriers, early refill, more
    buffers, smaller tiles, the warp-specialized kernel; the compute alone stays on roles."""
    assert tb.roles_kernel(C(), 64) and tb.roles_kernel(C(), 1)
    assert not tb.roles_kernel(C(gluon_roles="tma"), 1)
    assert tb.roles_kernel(C(gluon_phases=2), 64)
    for other in (C(gluon_chunks=3), C(gluon_early_issue=True), C(gluon_buffers=3),
                  C(gluon_block_n=32), C(gluon_ws=True), C(gluon_roles="off"),
                  C(gluon_phases=1), C(gluon_l2_prefetch=1)):  # fmt: skip
        assert not tb.roles_kernel(other, 64)
    assert "gluon_roles" in tb.gluon_unsupported(C(gluon_roles="yes"), True, 4, False, _q())


@pytest.mark.parametrize("page,config,dynamic", [
    (64, C(gluon_dynamic=True), True),  # TMA tiles: the loader takes them from a counter
    (1, C(gluon_dynamic=True), False),  # the gather loader keeps fixed ranges
    (64, C(gluon_dynamic=True, gluon_phases=2), False),  # the compute-alone probe too
    (64, C(), False),
])  # fmt: skip
def test_dynamic_tiles_get_zeroed_counters_and_stage2_merges_every_split(
    monkeypatch, page, config, dynamic
):
    """Dynamic tiles: the roles kernel gets the workspace's zeroed int32 counters (a 128-byte
    line per (request, head block) row) and stage 2 is told to merge every split's partial
    (any split may hold any key); elsewhere no counters and the usual merge."""
    seen, be = _launch_both(monkeypatch, page, config, 3)
    (name1, grid1, args1), (name2, _, args2) = seen
    assert name1 == "mla_verify_stage1_hopper_roles" and name2 == "mla_verify_stage2"
    assert args2["DYNAMIC"] is dynamic and be.last_launch["dynamic_tiles"] is dynamic
    if dynamic:
        ctr = args1["counters"]
        assert ctr is be.workspace.ctr and ctr.dtype == torch.int32
        assert ctr.numel() >= grid1[0] * grid1[1] * 32 and int(ctr.count_nonzero()) == 0
    else:
        assert args1["counters"] is None


def test_counters_allocated_zeroed_once_and_never_in_a_capture(monkeypatch):
    """The counters are zeroed when allocated and then reused as they are (every launch leaves
    them zero: no fill per launch); allocating one inside a graph capture is refused, and
    ``reserve`` allocates them ahead (a head block holds at least one head)."""
    ws = tb.Workspace()
    cpu = torch.device("cpu")
    c = ws.counters(3, cpu)
    assert c.numel() == 96 and c.dtype == torch.int32 and int(c.count_nonzero()) == 0
    assert ws.counters(2, cpu) is c and ws.allocations == 1
    monkeypatch.setattr(tb, "_capturing", lambda device: True)
    assert ws.counters(3, cpu) is c  # enough already: fine inside a capture
    with pytest.raises(MlaprofError, match="reserved before graph capture"):
        ws.counters(4, cpu)
    monkeypatch.setattr(tb, "_capturing", lambda device: False)
    be = tb.TritonBackend()
    be.reserve(4, 2, 16, 8, "cpu")
    assert be.workspace.ctr is not None and be.workspace.ctr.numel() >= 4 * 16 * 32


@pytest.mark.parametrize("splits,dynamic", [(64, True), (65, False)])
def test_dynamic_tiles_only_up_to_64_splits_a_row(monkeypatch, splits, dynamic):
    """All of a row's programs share its counter: past ``gluon_dynamic_max_splits`` (64; B 1
    takes 128 at 128K) the fixed ranges stay, and stage 2 merges as usual."""
    seen, _ = _launch_both(monkeypatch, 64, tb.default_config(4, hopper=True), splits)
    (_, _, args1), (_, _, args2) = seen
    assert (args1["counters"] is not None) is dynamic and args2["DYNAMIC"] is dynamic
    # the sm_90 default's other parts: q awaited by warpgroup 0, one-pass merge within a block
    assert args1["EARLY_Q"] and args1["IDX_AHEAD"] and not args1["SPREAD_ROWS"]
    assert args2["ONE_PASS"] is (splits <= 32)
