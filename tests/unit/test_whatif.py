"""The what-if grid: the seed's collapse, and every vectorised number equal to the scalar path
(policy functions, metadata builder, step_splits) that ``mlaprof run`` records."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from mlaprof.capture_sizes import DEFAULT_RULE, capture_plan
from mlaprof.errors import MlaprofError
from mlaprof.metadata import batch_shape, build_metadata
from mlaprof.scenario import DEVICES, MODELS
from mlaprof.splits import policies as pol
from mlaprof.splits.policies import POLICIES, SplitInput
from mlaprof.step_splits import step_splits
from mlaprof.whatif import GridSpec, compute, vector
from mlaprof.whatif.costmodel import H200_FIT, cost_model, fit_h200, measured_inputs
from mlaprof.whatif.grid import Shapes


def seed_grid(policies):
    return GridSpec(
        batches=[8],
        contexts=[1088],
        specs=[3],
        models=["kimi-k2-tp8"],
        policies=policies,
        devices=["mi355x"],
        capture_sizes=[60],
    )


def test_seed_collapse_8_real_7_padding_v0119_s1_vs_4_and_v0120_holds():
    cells = compute(seed_grid(["aiter-gluon-v0.1.19", "aiter-gluon-v0.1.20"])).cells
    bug = cells[cells.policy == "aiter-gluon-v0.1.19"].iloc[0]
    assert (bug.rows, bug.padding_rows, bug.qlen, bug.min_kv_bug) == (15, 7, 4, 4)
    assert (bug.S_bug, bug.S_fix, bug.S_frozen) == (1, 4, 1)  # 256 // 60 = 4; ceil(4/64) = 1
    assert bug.collapsed and bug.frozen_collapsed
    assert bug.occupancy_bug == pytest.approx(8 * 4 * 1 / 256)
    assert bug.slowdown_bug > 1.5
    fixed = cells[cells.policy == "aiter-gluon-v0.1.20"].iloc[0]
    assert (fixed.S_bug, fixed.S_fix, fixed.S_frozen) == (4, 4, 4)
    assert not fixed.collapsed and fixed.slowdown_bug == pytest.approx(1.0)


def _random_input(rng: random.Random) -> SplitInput:
    b = rng.choice([1, 1, 2, 3, 7, 8, 15, 16, 64, 100, 256])
    qlen = rng.randint(1, 8)
    heads = rng.choice([8, 12, 16, 32, 64, 128])
    mn = rng.choice([qlen, rng.randint(qlen, 300_000)])
    mx = max(mn, rng.randint(qlen, 300_000))
    arch = rng.choice(["gfx950", "gfx942", "sm_90"])  # the persistent gate reads it
    return SplitInput(b, qlen, heads, mn, mx, b * rng.randint(mn, mx),
                      rng.choice([132, 256, 304]), arch=arch)  # fmt: skip


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_numpy_twin_equals_its_scalar_policy(name):
    rng = random.Random(name)
    p = POLICIES[name]
    for _ in range(300):
        x = _random_input(rng)
        try:
            want = p.splits(x)
        except MlaprofError:
            want = 0
        arr = dataclasses.replace(x, num_reqs=np.array([x.num_reqs]))
        assert vector.splits(p, arr)[0] == want, (name, x)


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_twin_equals_its_scalar_policy_on_10000_random_cells(name):
    """Heads 1-128, qlen 1-8, B 1-512, KV 1-1M, every device preset's unit count, the kv_indices
    buffer vLLM passes or none: the numpy twin the what-if grid uses gives exactly the scalar
    policy `mlaprof run` records (0 where the kernel asserts)."""
    rng = np.random.default_rng(abs(hash(name)) % (1 << 32))
    p = POLICIES[name]
    units = [d.units for d in DEVICES.values()]
    n = 10_000
    qlen = rng.integers(1, 9, n)
    heads = rng.choice([1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128], n)
    b = rng.integers(1, 513, n)
    mn = rng.integers(1, 1_000_001, n)
    mx = np.maximum(mn, rng.integers(1, 1_000_001, n))
    u = rng.choice(units, n)
    buf = np.where(rng.random(n) < 0.5, rng.integers(1, 1 << 31, n), -1)
    for q in range(1, 9):
        for h in np.unique(heads):
            for with_buf in (False, True):
                m = (qlen == q) & (heads == h) & ((buf >= 0) == with_buf)
                if not m.any():
                    continue
                bb, lo, hi, uu = b[m], mn[m], mx[m], u[m]
                kb = int(buf[m][0]) if with_buf else None
                # the persistent gate is gfx950's, mlaprof's 64-row decode sm_90's: every
                # arch meets qlen 1 x 16 heads
                arch = ("gfx950", "gfx942", "sm_90")[(int(h) + q + with_buf) % 3]
                x = SplitInput(bb, q, int(h), lo, hi, bb * lo, uu, kv_buffer_len=kb, arch=arch)
                got = vector.splits(p, x)
                for i in range(len(bb)):
                    xi = SplitInput(int(bb[i]), q, int(h), int(lo[i]), int(hi[i]),
                                    int(bb[i] * lo[i]), int(uu[i]), kv_buffer_len=kb,
                                    arch=arch)  # fmt: skip
                    try:
                        want = p.splits(xi)
                    except MlaprofError:
                        want = 0
                    assert got[i] == want, (name, xi)


def test_a_policy_without_twin_is_evaluated_by_its_scalar_function(monkeypatch):
    calls = []

    def new_version(x):
        calls.append(x)
        return max(1, 100 // x.num_reqs)

    p = pol.Policy("aiter-gluon-v9", new_version, False, 16, True, "future aiter")
    monkeypatch.setitem(POLICIES, p.name, p)
    x = SplitInput(np.array([1, 3, 3, 200]), 4, 16, 4, 4, 16, 256)
    assert vector.splits(p, x).tolist() == [100, 33, 33, 1]
    assert len(calls) == 3  # once per distinct input


def test_random_cells_equal_the_builder_and_step_splits():
    rng = random.Random(7)
    for _ in range(40):
        spec = rng.choice([1, 2, 3, 5])
        q = 1 + spec
        b = rng.randint(1, 40)
        ctx = rng.randint(q, 200_000)
        model = rng.choice(list(MODELS))
        dev = rng.choice([d for d in DEVICES if d != "cpu"])
        sizes = rng.choice([None, [q * rng.randint(1, 64) for _ in range(5)]])
        grid = GridSpec(
            batches=[b],
            contexts=[ctx],
            specs=[spec],
            models=[model],
            policies=list(POLICIES),
            devices=[dev],
            max_num_seqs=64,
            capture_sizes=sizes,
        )
        cells = compute(grid).cells
        shape = batch_shape([ctx] * b, q, "FULL", capture_plan(DEFAULT_RULE, 64, spec, sizes))
        for mode, s_col, occ_col in (
            ("all-rows", "S_bug", "occupancy_bug"),
            ("active-rows", "S_fix", "occupancy_fix"),
        ):
            meta = build_metadata(shape, page_size=4096, min_kv_mode=mode, shuffle_pages=False)
            # what `mlaprof run` records: the kv_indices buffer vLLM passes (recording.py)
            ref = step_splits(
                meta, MODELS[model].heads, DEVICES[dev], shape.graph_mode, grid.max_model_len,
                kv_buffer_len=grid.max_num_seqs * grid.max_model_len,
            )  # fmt: skip
            for r in ref:
                c = cells[cells.policy == r.policy].iloc[0]
                assert (c.rows, c.padding_rows) == (shape.num_reqs, shape.num_padding)
                assert c.capture_size == (shape.capture_size or 0)
                assert c[s_col] == (r.used or 0), (r.policy, mode, b, ctx, q)
                assert c.S_deserved == (r.deserved or 0), r.policy
                assert c.S_frozen == (r.frozen or 0), r.policy
                if r.used:
                    assert c[occ_col] == pytest.approx(r.occupancy_used), r.policy


def test_cost_model_is_the_fit_of_the_h200_measurements_within_15_percent():
    assert fit_h200() == pytest.approx(H200_FIT, rel=0.02)
    programs, nbytes, secs = measured_inputs()
    pred = cost_model("h200").seconds(programs, nbytes)
    assert np.all(np.abs(pred / secs - 1) < 0.15)
    # a collapsed split (1 program) is ~87x slower at c1 / 128K, as measured
    assert pred[0] / pred[1] == pytest.approx(secs[0] / secs[1], rel=0.2)
    assert cost_model("cpu") is None
    amd = cost_model("mi355x")
    assert "not measured" in amd.provenance and amd.bw_max > H200_FIT["bw_max"]


def test_every_cell_says_it_is_modelled_and_for_what():
    w = compute(seed_grid(["aiter-gluon-v0.1.19"]))
    doc = w.to_json()
    assert doc["provenance"]["kind"] == "modelled"
    source = doc["provenance"]["policies"]["aiter-gluon-v0.1.19"]
    assert source.startswith("aiter v0.1.19") and "bh16bn64" in source
    assert "not measured on mi355x" in doc["cells"][0]["time_model"]
    cpu = compute(dataclasses.replace(seed_grid(["aiter-gluon-v0.1.19"]), devices=["cpu"]))
    assert cpu.cells.t_fix_us.isna().all()  # no cost model: no time, never a default


def test_eager_batches_have_no_padding_and_no_frozen_split():
    g = GridSpec(
        batches=[1, 30], contexts=[4096], specs=[3], max_num_seqs=30, capture_sizes=[8, 16]
    )
    cells = compute(g).cells.set_index("batch")
    assert cells.loc[30, "graph"] == "NONE" and cells.loc[30, "padding_rows"] == 0
    assert cells.loc[30, "S_frozen"] == 0 and cells.loc[30, "S_bug"] == cells.loc[30, "S_fix"]
    assert cells.loc[1, "graph"] == "FULL" and cells.loc[1, "capture_size"] == 8


@pytest.mark.parametrize(
    "change, message",
    [
        ({"models": ["gpt-5"]}, "unknown model"),
        ({"batches": [0]}, "batch sizes"),
        ({"contexts": [2]}, "KV lengths"),
        ({"policies": []}, "no policies"),
        ({"size_rule": "vllm-9"}, "capture-size rule"),
    ],
)
def test_bad_grids_raise_one_clear_error(change, message):
    with pytest.raises(MlaprofError, match=message):
        compute(dataclasses.replace(GridSpec(), **change))


def test_drawn_batches_equal_the_builder_and_step_splits():
    rng = random.Random(3)
    mix = [rng.randint(4, 40_000) for _ in range(50)] + [4, 5, 64]
    grid = GridSpec(
        batches=[1, 3, 7, 13],
        kv_mix=mix,
        draws=6,
        specs=[3],
        models=["kimi-k2-tp8"],
        policies=list(POLICIES),
        devices=["mi300x"],
        max_num_seqs=64,
    )
    w = compute(grid)
    assert len(w) == 4 * 6 * len(POLICIES) and "drawn" in w.provenance["kv"]
    sizes = capture_plan(DEFAULT_RULE, 64, 3)
    shp = Shapes.drawn(grid)
    for k in range(len(shp.batch)):
        lens = [int(x) for x in shp.lens[k] if x > 0]
        assert len(lens) == shp.batch[k] and set(lens) <= set(mix)
        shape = batch_shape(lens, 4, "FULL", sizes)
        meta = build_metadata(shape, page_size=4096, min_kv_mode="all-rows", shuffle_pages=False)
        ref = step_splits(meta, 8, DEVICES["mi300x"], "FULL", grid.max_model_len,
                          kv_buffer_len=grid.max_num_seqs * grid.max_model_len)  # fmt: skip
        cells = w.cells[(w.cells.batch == shp.batch[k]) & (w.cells.draw == shp.draw[k])]
        for r in ref:
            c = cells[cells.policy == r.policy].iloc[0]
            assert (c.kv_min, c.kv_max) == (min(lens), max(lens))
            assert c.S_bug == (r.used or 0) and c.S_deserved == (r.deserved or 0), r.policy
            assert c.S_frozen == (r.frozen or 0) and c.S_fix == (r.active_rows or 0), r.policy
            if r.used:
                assert c.occupancy_bug == pytest.approx(r.occupancy_used), r.policy


def test_cells_say_which_path_vllm_routes_them_to():
    g = GridSpec(
        batches=[1, 4],
        contexts=[65536],
        models=["kimi-k2-tp8", "deepseek-v3-tp8"],
        policies=["aiter-gluon-v0.1.19", "aiter-asm-persistent"],
        devices=["mi355x", "h200"],
    )
    w = compute(g)
    c = w.cells.drop_duplicates(["model", "device", "policy"]).set_index(
        ["model", "device", "policy"]
    )
    assert c.loc[("kimi-k2-tp8", "mi355x", "aiter-gluon-v0.1.19"), "route"] == "gluon-verify"
    assert c.loc[("kimi-k2-tp8", "mi355x", "aiter-gluon-v0.1.19"), "route_fits"]
    assert c.loc[("deepseek-v3-tp8", "mi355x", "aiter-gluon-v0.1.19"), "route"] == "asm-persistent"
    assert not c.loc[("deepseek-v3-tp8", "mi355x", "aiter-gluon-v0.1.19"), "route_fits"]
    # vLLM on sm90 with bf16 KV tries FLASH_ATTN_MLA first (platforms/cuda.py L146-151)
    assert c.loc[("deepseek-v3-tp8", "h200", "aiter-asm-persistent"), "route"] == "flash-attn-mla"
    # the persistent schedule is decided on the device: never frozen into a graph
    assert (w.cells[w.cells.policy == "aiter-asm-persistent"].S_frozen == 0).all()
    # worst cells: those whose policy models the routed kernel come first
    fits = [r["route_fits"] for r in w.worst_rows(len(w))]
    assert fits == sorted(fits, reverse=True) and fits[0]


def _cell(**kw):
    g = GridSpec(**{"batches": [1], "contexts": [8192], **kw})
    return compute(g).cells.iloc[0]


def test_persistent_asm_is_dropped_at_batch_32_and_s_decided_on_the_host():
    """AITER mla.py v0.1.20 L401-422 / L585-597: gfx950, bf16, 16 heads, qlen 1, B >= 32 drops
    the persistent kernel; get_meta_param picks S on the host (batch 33 pads to 40 rows: S 6),
    frozen into the graph. B 31 (32 rows) is dropped too; B 15 (16 rows) stays on the device."""
    kw = dict(specs=[0], models=["deepseek-v3-tp8"], policies=["aiter-asm-persistent"])
    c33 = _cell(batches=[33], **kw)
    assert (c33.rows, c33.S_fix, c33.S_frozen) == (40, 6, 6)
    assert "persistent kernel dropped" in c33.note and "host" in c33.note
    c15 = _cell(batches=[15], **kw)
    assert (c15.rows, c15.S_fix, c15.S_frozen) == (16, 256, 0)
    assert "decided on the device" in c15.note
    # not the regression profile: qlen 4 and 32 heads keep the persistent kernel at any B
    for other in (dict(specs=[3]), dict(models=["deepseek-v3-tp4"])):
        c = _cell(batches=[40], **{**kw, **other})
        assert c.S_fix == 256 and c.S_frozen == 0, other
    # gfx942 (MI300X) is not gfx950: kept
    assert _cell(batches=[33], devices=["mi300x"], **kw).S_frozen == 0


def test_asm_fp8_with_8_heads_keys_on_16_heads():
    """vLLM pads q/o to 16 heads before the ASM call (0.32 rocm_aiter_mla.py L1732-1736,
    L2399-2409): 8 heads x qlen 4 key on 64 (block 64). 16 x 5 = 80 is AITER's KeyError."""
    c = _cell(models=["kimi-k2-tp8"], policies=["aiter-asm-fp8"], specs=[3])
    assert c.note == "" and c.S_fix > 0
    bad = _cell(models=["deepseek-v3-tp8"], policies=["aiter-asm-fp8"], specs=[4])
    assert bad.S_fix == 0 and "KeyError" in bad.note and "16*5 = 80" in bad.note
    pr = _cell(models=["deepseek-v3-tp8"], policies=["aiter-asm-fp8-pr4713"], specs=[4])
    assert pr.S_fix > 0 and pr.aiter_rule == "unreleased: an open AITER PR"


def test_gluon_cells_off_gfx950_and_gfx942_pr_heads_are_not_runnable():
    h200 = _cell(policies=["aiter-gluon-v0.1.20"], devices=["h200"])
    assert h200.S_fix == 0 and "asserts gfx950" in h200.note and "sm_90" in h200.note
    kw = dict(policies=["aiter-gluon-gfx942-pr4582"], devices=["mi300x"])
    assert "nhead == 12" in _cell(models=["kimi-k2-tp8"], **kw).note
    assert _cell(models=["kimi-k3-tp8"], **kw).S_fix > 0  # 12 heads: the PR's table
    # v0.1.19 with 64 heads: bh64 (needs B % 64 == 0), not "bh16 handles at most 16 heads"
    kw64 = dict(batches=[64], models=["deepseek-v3-tp2"], policies=["aiter-gluon-v0.1.19"])
    c64 = _cell(specs=[0], graph_mode="NONE", **kw64)
    assert c64.note == "" and c64.S_fix == 4  # next_pow2(ceil(256 / (8*1*1*8)))
    # a FULL capture's dummy run (KV = qlen) trips bh64's min_kv > S*(3*64+S) assert
    assert "refuses" in _cell(specs=[0], **kw64).note


def test_over_splitting_is_a_cell_flag_with_its_cost():
    c = _cell(batches=[4], policies=["vllm-triton"], devices=["h200"])
    assert (c.S_frozen, c.S_deserved) == (256, 16) and c.over_split
    assert c.over_split_programs_x == 16.0
    assert not _cell(
        batches=[4], policies=["vllm-triton"], devices=["h200"], graph_mode="NONE"
    ).over_split


def test_max_num_batched_tokens_caps_the_grids_sizes():
    """8 seqs x qlen 4 with max_num_batched_tokens 50: sizes stop at 48 (vLLM 0.32 vllm.py
    L2445-2495), so 13 real requests (52 tokens) run eagerly, where 56 would pad them."""
    assert _cell(batches=[8], max_num_seqs=16, max_num_batched_tokens=50).capture_size == 32
    assert _cell(batches=[13], max_num_seqs=16).capture_size == 56
    assert _cell(batches=[13], max_num_seqs=16, max_num_batched_tokens=50).graph == "NONE"


def test_aiter_release_label_on_every_aiter_cell():
    c = _cell(aiter="0.1.21.post2", policies=["aiter-gluon-v0.1.20.post1"])
    assert c.aiter_rule == "rule of v0.1.20.post1; v0.1.21.post2 not verified"
    with pytest.raises(MlaprofError, match="runs aiter-gluon-v0.1.20.post1"):
        compute(GridSpec(batches=[1], contexts=[8192], aiter="0.1.21.post2",
                         policies=["aiter-gluon-v0.1.19"]))  # fmt: skip
    w = compute(GridSpec(batches=[1], contexts=[8192], aiter="0.1.21.post2",
                         policies=["aiter-gluon-v0.1.20.post1"]))  # fmt: skip
    assert w.provenance["aiter"]["label"] == "rule of v0.1.20.post1; v0.1.21.post2 not verified"


def test_identical_draws_are_one_cell_in_the_worst_list():
    """One request length: every draw of a batch size is the same batch; the list shows it once
    and keeps going to other cells (the grid itself keeps every draw)."""
    grid = GridSpec(batches=[1, 2, 3], kv_mix=[8192], draws=4, specs=[3],
                    policies=["aiter-gluon-v0.1.19"], devices=["mi355x"])  # fmt: skip
    w = compute(grid)
    assert len(w) == 3 * 4  # every draw is a cell
    rows = w.worst_rows(15)
    assert len(rows) == 3 and sorted(r["batch"] for r in rows) == [1, 2, 3]
    assert len(w.worst(15)) == 3


# seq lengths: every one to 1100, and each edge of S and of S x BLOCK_N up to 200k
_SEQS = np.array(
    sorted(
        set(range(1, 1101))
        | {
            m * w * s + d
            for s in (1, 2, 3, 7, 16, 100, 255, 256)
            for w in (1, 64, 128)
            for m in (1, 2, 5)
            for d in (-1, 0, 1)
        }
        | {199_999, 200_000}
    )
)


@pytest.mark.parametrize("cut", [(c, w) for c in pol.PARTITIONS for w in (64, 128)])
def test_active_splits_twin_equals_the_scalar_on_a_grid(cut):
    for s in [*range(1, 18), 31, 32, 33, 64, 100, 127, 128, 255, 256]:
        want = [pol.gluon_active_splits(int(n), s, *cut) for n in _SEQS]
        assert vector.active_splits(_SEQS, s, *cut).tolist() == want, (cut, s)


@pytest.mark.parametrize("lens", [None, [100]])
def test_grid_occupancy_counts_every_split_of_fp8_v0119(lens):
    """B 1, KV 100, qlen 2, 8 heads: S = min(256 // 2, 100) = 100, and the v0.1.19 kernel
    (L = seq // S = 1) keeps all 100 splits busy: 2 x 100 programs of 256 CUs (was 2 x 2)."""
    g = GridSpec(batches=[1], contexts=[100], specs=[1], models=["kimi-k2-tp8"],
                 policies=["aiter-gluon-fp8-v0.1.19"], devices=["mi355x"], graph_mode="NONE",
                 kv_mix=lens, draws=1)  # fmt: skip
    (c,) = compute(g).records()
    assert (c["S_bug"], c["S_fix"], c["S_deserved"]) == (100, 100, 100)
    assert c["occupancy_fix"] == pytest.approx(200 / 256)
    assert c["occupancy_bug"] == pytest.approx(200 / 256)
